/* The library's own algorithms as online arms (docs/online-native.md, "MPICH's
 * algorithms"): on MPICH, "mpich:<name>" runs the library's collective with
 * MPIR_CVAR_<COLL>_INTRA_ALGORITHM set to <name> through MPI_T. MPICH reads that
 * variable at every blocking call (MPIR_<Coll>_impl switches on it), so a value
 * written just before the call selects the algorithm of that call.
 *
 * The name -> value mapping is recovered at run time, never compiled in (the codes
 * change between MPICH versions): from the MPI_T enum when the variable has one,
 * else from the variable's description, which MPICH generates from the same list
 * as the C enum (maint/extractcvars: every description line "<word>  - ..." is one
 * enumerator, in order, the first being 0 = auto). A variable whose list does not
 * start with auto, whose type is not one int, or whose current value is outside the
 * list gives no arms (ct_online_libarms_note says why): never a guessed value.
 *
 * Every MPICH-arm call writes the value, calls the library and writes the initial
 * value back, so between calls the variable always holds the value the job started
 * with: the library arm, colltune's arms (which may call the library inside), calls
 * online mode does not decide (derived types, communicators it does not track) and
 * MPICH's own internal collectives all see it unchanged.
 *
 * SMPI (no MPI_T) and Open MPI (coll_tuned reads its forced-algorithm variables when a
 * communicator's module is selected, not per call): no library arms. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "online.h"

#if defined(MPICH_VERSION) && !defined(COLLTUNE_SMPI)
#define LIBARMS 1
#endif

#define MAX_LIBARMS 4

static struct {
    int done, n[CT_NCOLLS];
    char id[CT_NCOLLS][MAX_LIBARMS][64];     /* "mpich:ring" */
    int value[CT_NCOLLS][MAX_LIBARMS];
    char note[512];                          /* why a collective has none */
#ifdef LIBARMS
    int mpit, orig[CT_NCOLLS], have[CT_NCOLLS];
    MPI_T_cvar_handle h[CT_NCOLLS];
    int dev, dev_orig, dev_none;             /* dev: DEVICE_COLLECTIVES is switched to none */
    MPI_T_cvar_handle dev_h;
#endif
} L;

static void note(const char *fmt, ...)
{
    va_list ap;
    size_t k = strlen(L.note);
    if (k && k < sizeof L.note - 2) strcpy(L.note + k, "; "), k += 2;
    va_start(ap, fmt);
    vsnprintf(L.note + k, sizeof L.note - k, fmt, ap);
    va_end(ap);
}

#ifdef LIBARMS
/* the arms offered per collective, where the MPICH at hand has the algorithm */
static const char *const wanted[CT_NCOLLS][MAX_LIBARMS] = {
    [CT_BCAST] = {"binomial", "scatter_recursive_doubling_allgather", "scatter_ring_allgather"},
    [CT_REDUCE] = {"binomial", "reduce_scatter_gather"},
    [CT_ALLREDUCE] = {"recursive_doubling", "reduce_scatter_allgather", "ring"},
    [CT_ALLGATHER] = {"recursive_doubling", "brucks", "ring"},
};

static const char *const cvar[CT_NCOLLS] = {
    [CT_BCAST] = "MPIR_CVAR_BCAST_INTRA_ALGORITHM",
    [CT_REDUCE] = "MPIR_CVAR_REDUCE_INTRA_ALGORITHM",
    [CT_ALLREDUCE] = "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM",
    [CT_ALLGATHER] = "MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM",
};

#define MAX_ITEMS 64
typedef struct {
    int n;
    char name[MAX_ITEMS][48];
    int value[MAX_ITEMS];
} items_t;

/* The enumerators of MPICH's description: lines "<word> <spaces>- ...", numbered from 0 */
static void items_from_description(const char *d, items_t *it)
{
    it->n = 0;
    for (const char *line = d, *nl; line && it->n < MAX_ITEMS; line = nl ? nl + 1 : NULL) {
        const char *p = line, *w;
        nl = strchr(line, '\n');
        while (*p == ' ' || *p == '\t') p++;
        w = p;
        while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_') p++;
        size_t len = (size_t)(p - w);
        if (!len || (*p != ' ' && *p != '\t')) continue;
        while (*p == ' ' || *p == '\t') p++;
        if (p[0] != '-' || (p[1] != ' ' && p[1] != '\t')) continue;
        if (len >= sizeof it->name[0]) len = sizeof it->name[0] - 1;
        memcpy(it->name[it->n], w, len);
        it->name[it->n][len] = '\0';
        it->value[it->n] = it->n;
        it->n++;
    }
}

/* An int control variable with a list of names (MPI_T enum, else MPICH's description,
 * whose list must start with `first`): its handle, initial value and names; 0 when usable */
static int open_enum(const char *var, const char *first, const char *what, items_t *it,
                     MPI_T_cvar_handle *h, int *orig)
{
    int idx, verb, bind, scope, nlen = 256, dlen = 16384, count = 0, rc = -1, known = 0;
    char name[256], *desc = calloc(16384, 1);
    MPI_Datatype dt;
    MPI_T_enum en;
    it->n = 0;
    if (!desc) return -1;
    if (MPI_T_cvar_get_index(var, &idx) != MPI_SUCCESS) {
        note("%s: %s not found", what, var);
        goto out;
    }
    if (MPI_T_cvar_get_info(idx, name, &nlen, &verb, &dt, &en, desc, &dlen, &bind, &scope) != MPI_SUCCESS ||
        dt != MPI_INT || bind != MPI_T_BIND_NO_OBJECT) {
        note("%s: %s is not one int", what, var);
        goto out;
    }
    if (en != MPI_T_ENUM_NULL) {             /* an MPI_T enum: its own names and values */
        int n = 0, l = 256;
        char ename[256];
        MPI_T_enum_get_info(en, &n, ename, &l);
        for (int i = 0; i < n && it->n < MAX_ITEMS; i++) {
            l = (int)sizeof it->name[0];
            if (MPI_T_enum_get_item(en, i, &it->value[it->n], it->name[it->n], &l) == MPI_SUCCESS) it->n++;
        }
    } else {
        items_from_description(desc, it);
        if (!it->n || strcmp(it->name[0], first)) {
            note("%s: %s's description lists no values starting with %s: no mapping", what, var, first);
            goto out;
        }
    }
    if (MPI_T_cvar_handle_alloc(idx, NULL, h, &count) != MPI_SUCCESS || count != 1) {
        note("%s: %s: no MPI_T handle", what, var);
        goto out;
    }
    if (MPI_T_cvar_read(*h, orig) == MPI_SUCCESS)
        for (int i = 0; i < it->n; i++) known |= it->value[i] == *orig;
    /* the variable must take a write now (not read-only, not past a point of no return) */
    if (!known || MPI_T_cvar_write(*h, orig) != MPI_SUCCESS) {
        note("%s: %s: current value outside its list or not writable", what, var);
        MPI_T_cvar_handle_free(h);
        goto out;
    }
    rc = 0;
out:
    free(desc);
    return rc;
}

static void find(int c)
{
    items_t it;
    if (open_enum(cvar[c], "auto", ct_coll_name((ct_coll)c), &it, &L.h[c], &L.orig[c])) return;
    L.have[c] = 1;
    for (int k = 0; k < MAX_LIBARMS && wanted[c][k]; k++)
        for (int i = 0; i < it.n; i++)
            if (!strcmp(it.name[i], wanted[c][k])) {
                snprintf(L.id[c][L.n[c]], sizeof L.id[c][0], "mpich:%s", it.name[i]);
                L.value[c][L.n[c]++] = it.value[i];
                break;
            }
}

/* MPIR_CVAR_DEVICE_COLLECTIVES=none for the duration of an MPICH arm: otherwise ch4's
 * composition may split a call on several nodes into intra-node and inter-node parts, the
 * forced algorithm then running on the parts; with none it runs on the whole communicator
 * (as a CSEL file exported for MPICH assumes). Without it the arms still run, as parts. */
static void find_device(void)
{
    items_t it;
    const char *var = "MPIR_CVAR_DEVICE_COLLECTIVES";
    L.dev_none = -1;
    if (open_enum(var, "all", "all", &it, &L.dev_h, &L.dev_orig)) return;
    for (int i = 0; i < it.n; i++)
        if (!strcmp(it.name[i], "none")) L.dev_none = it.value[i], L.dev = L.dev_orig != L.dev_none;
    if (!L.dev) {
        if (L.dev_none < 0) note("%s has no value none: on several nodes the arms run inside ch4's composition", var);
        MPI_T_cvar_handle_free(&L.dev_h);
    }
}
#endif

static void init(void)
{
    if (L.done) return;
    L.done = 1;
#ifdef LIBARMS
    int provided;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
        note("MPI_T_init_thread failed");
        return;
    }
    L.mpit = 1;
    for (int c = 0; c < CT_NCOLLS; c++) find(c);
    find_device();
#else
    note("not MPICH: the library's algorithms are not arms");
#endif
}

int ct_online_nlibarms(int coll) { return init(), L.n[coll]; }
const char *ct_online_libarm(int coll, int i) { return init(), L.id[coll][i]; }
const char *ct_online_libarms_note(void) { return init(), L.note; }
#ifdef LIBARMS
const char *ct_online_libarms_problem(void) { return init(), L.note; }
#else
const char *ct_online_libarms_problem(void) { return ""; }
#endif

int ct_online_libarm_parse(int coll, const char *id)
{
    init();
    for (int i = 0; i < L.n[coll]; i++)
        if (!strcmp(id, L.id[coll][i])) return L.value[coll][i] + 1;
    return 0;
}

int ct_online_libarm_run(ct_coll coll, int lib, const ct_args *a)
{
#ifdef LIBARMS
    int v = lib - 1, rc;
    if (L.dev) MPI_T_cvar_write(L.dev_h, &L.dev_none);
    MPI_T_cvar_write(L.h[coll], &v);
    rc = ct_library_call(coll, a);
    MPI_T_cvar_write(L.h[coll], &L.orig[coll]);
    if (L.dev) MPI_T_cvar_write(L.dev_h, &L.dev_orig);
    return rc;
#else
    (void)lib;
    return ct_library_call(coll, a);
#endif
}

/* "allreduce ring=8 ..." per collective: values as well as names enter the fingerprint */
void ct_online_libarms_signature(char *out, size_t len)
{
    size_t k = 0;
    init();
    out[0] = '\0';
    for (int c = 0; c < CT_NCOLLS; c++)
        for (int i = 0; i < L.n[c] && k < len; i++)
            k += (size_t)snprintf(out + k, len - k, "%s %s=%d\n", ct_coll_name((ct_coll)c), L.id[c][i],
                                  L.value[c][i]);
}

void ct_online_libarms_print(FILE *f)
{
    init();
#ifdef LIBARMS
    fprintf(f, "\"library_arms\":{\"library\":\"mpich\",\"collectives\":{");
    int first = 1;
    for (int c = 0; c < CT_NCOLLS; c++) {
        if (!L.have[c]) continue;
        fprintf(f, "%s\"%s\":{\"cvar\":\"%s\",\"initial\":%d,\"values\":{", first ? "" : ",",
                ct_coll_name((ct_coll)c), cvar[c], L.orig[c]);
        for (int i = 0; i < L.n[c]; i++) fprintf(f, "%s\"%s\":%d", i ? "," : "", L.id[c][i], L.value[c][i]);
        fprintf(f, "}}");
        first = 0;
    }
    fprintf(f, "},\"device_collectives_none\":%s,", L.dev || (L.dev_none >= 0 && L.dev_orig == L.dev_none) ? "true" : "false");
#else
    fprintf(f, "\"library_arms\":{\"library\":null,\"collectives\":{},");
#endif
    fprintf(f, "\"note\":\"");
    for (const char *p = L.note; *p; p++)
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if ((unsigned char)*p >= 0x20) fputc(*p, f);
    fprintf(f, "\"}");
}

void ct_online_libarms_finalize(void)
{
#ifdef LIBARMS
    if (!L.mpit) return;
    for (int c = 0; c < CT_NCOLLS; c++)
        if (L.have[c]) MPI_T_cvar_write(L.h[c], &L.orig[c]), MPI_T_cvar_handle_free(&L.h[c]);
    if (L.dev) MPI_T_cvar_write(L.dev_h, &L.dev_orig), MPI_T_cvar_handle_free(&L.dev_h);
    MPI_T_finalize();
    memset(&L, 0, sizeof L);
    L.done = 1;                              /* after MPI_Finalize: none */
#endif
}
