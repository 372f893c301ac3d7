/* The arms online mode draws from when the state has no list for a block (the
 * one copy: Python reads it through `colltune-rules online-arms`), the size
 * classes, and the fingerprint that ties a state to its library, platform and
 * catalogue. Parameters are in COLLTUNE_FORCE's syntax minus the collective. */
#include <stdlib.h>
#include <string.h>
#include "online.h"

#define MAX_PRESETS 8
/* flat algorithms the libraries also choose between, and HAN with colltune's
 * intra-node trees (default) or the library's intra-node collectives (smod=0) */
static const char *const presets[CT_NCOLLS][MAX_PRESETS] = {
    [CT_BCAST] = {"library", "binomial", "pipeline:segsize=16384", "scatter_ring_allgather",
                  "han", "han:smod=0"},
    [CT_REDUCE] = {"library", "binomial", "binary_pipelined", "rabenseifner", "han", "han:smod=0"},
    [CT_ALLREDUCE] = {"library", "recursive_doubling", "ring", "rabenseifner", "han",
                      "han:imod=2"},
    [CT_ALLGATHER] = {"library", "ring", "recursive_doubling", "bruck", "han", "han:smod=0"},
};

const long long ct_online_edges[CT_ONLINE_NCLASS - 1] = {16, 256, 4096, 65536, 1048576};

int ct_online_class(long long bytes)
{
    int c = 0;
    while (c < CT_ONLINE_NCLASS - 1 && bytes > ct_online_edges[c]) c++;
    return c;
}

void ct_online_class_range(int cls, long long *lo, long long *hi)
{
    *lo = cls ? ct_online_edges[cls - 1] + 1 : 0;
    *hi = cls < CT_ONLINE_NCLASS - 1 ? ct_online_edges[cls] : -1;
}

static int ncompiled(int coll)
{
    int n = 0;
    while (n < MAX_PRESETS && presets[coll][n]) n++;
    return n;
}

/* the compiled presets, then the library's own algorithms found at run time (MPICH) */
int ct_online_npresets(int coll) { return ncompiled(coll) + ct_online_nlibarms(coll); }

const char *ct_online_preset(int coll, int i)
{
    int n = ncompiled(coll);
    return i < n ? presets[coll][i] : ct_online_libarm(coll, i - n);
}

int ct_online_parse_arm(int coll, const char *id, ct_online_arm *arm, char *err, size_t errlen)
{
    char spec[CT_ONLINE_ARM_LEN + 32];
    ct_rules r;
    memset(arm, 0, sizeof *arm);
    if (strlen(id) >= CT_ONLINE_ARM_LEN) {
        snprintf(err, errlen, "arm '%.40s...' longer than %d characters", id, CT_ONLINE_ARM_LEN - 1);
        return -1;
    }
    strcpy(arm->id, id);
    if (!strcmp(id, "library")) return 0;
    if (!strncmp(id, "mpich:", 6)) {
        if ((arm->lib = ct_online_libarm_parse(coll, id)) > 0) return 0;
        snprintf(err, errlen, "arm '%s' is not an algorithm arm of this library's %s (%s)", id,
                 ct_coll_name((ct_coll)coll), *ct_online_libarms_note() ? ct_online_libarms_note() : "not offered");
        return -1;
    }
    snprintf(spec, sizeof spec, "%s:%s", ct_coll_name((ct_coll)coll), id);
    if (ct_force_parse(spec, &r, err, errlen) != 0) return -1;
    if (r.n != 1 || !r.rules[0].alg) {
        snprintf(err, errlen, "arm '%s' is not one algorithm of %s", id, ct_coll_name((ct_coll)coll));
        ct_rules_free(&r);
        return -1;
    }
    arm->alg = r.rules[0].alg;
    memcpy(arm->params, r.rules[0].params, sizeof arm->params);
    ct_rules_free(&r);
    return 0;
}

void ct_online_default_block(int coll, int nodes, int ppn, int cls, ct_online_block *b)
{
    char err[256];
    memset(b, 0, sizeof *b);
    b->coll = coll, b->nodes = nodes, b->ppn = ppn, b->cls = cls;
    int n = ct_online_npresets(coll);
    for (int i = 0; i < n; i++)           /* the presets are checked by the tests: never fail */
        if (ct_online_parse_arm(coll, ct_online_preset(coll, i), &b->arm[b->narms], err, sizeof err) == 0)
            b->arm[b->narms++].p = 1.0 / n;
}

static uint64_t fnv(uint64_t h, const char *s)
{
    for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (h ^ '\n') * 1099511628211ull;
}

/* library identity, platform (SMPI: COLLTUNE_PLATFORM), the catalogue with
 * every parameter's range, and the presets: a change to any makes old
 * measurements another experiment's */
void ct_online_fingerprint(char out[17])
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "", buf[512], sig[2048];
    int len = 0;
    uint64_t h = 14695981039346656037ull;
    MPI_Get_library_version(lib, &len);
    h = fnv(h, lib);
#ifdef COLLTUNE_SMPI
    h = fnv(h, getenv("COLLTUNE_PLATFORM"));
#endif
    for (int i = 0; i < ct_count(); i++) {
        const ct_algorithm *a = ct_get(i);
        h = fnv(fnv(h, ct_coll_name(a->coll)), a->name);
        for (int j = 0; j < a->nparams; j++) {
            snprintf(buf, sizeof buf, "%s %d %d %d", a->params[j].name, a->params[j].def,
                     a->params[j].min, a->params[j].max);
            h = fnv(h, buf);
        }
    }
    for (int c = 0; c < CT_NCOLLS; c++)
        for (int i = 0; i < ct_online_npresets(c); i++) h = fnv(h, ct_online_preset(c, i));
    ct_online_libarms_signature(sig, sizeof sig);       /* the MPICH arms' values */
    if (*sig) h = fnv(h, sig);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

void ct_online_print_arms(FILE *f)
{
    char fp[17];
    ct_online_fingerprint(fp);
    fprintf(f, "{\"format\":\"colltune.online-arms\",\"version\":1,\"fingerprint\":\"%s\",", fp);
    fprintf(f, "\"size_class_upper_edges\":[");
    for (int i = 0; i < CT_ONLINE_NCLASS - 1; i++) fprintf(f, "%s%lld", i ? "," : "", ct_online_edges[i]);
    fprintf(f, "],\"arms\":{");
    for (int c = 0; c < CT_NCOLLS; c++) {
        fprintf(f, "%s\"%s\":[", c ? "," : "", ct_coll_name((ct_coll)c));
        for (int i = 0; i < ct_online_npresets(c); i++) fprintf(f, "%s\"%s\"", i ? "," : "", ct_online_preset(c, i));
        fprintf(f, "]");
    }
    fprintf(f, "},");
    ct_online_libarms_print(f);
    fprintf(f, "}\n");
}
