/* Datatype x operation matrix of colltune's reductions against the library.
 *
 *   typematrix [-s MAXSUB] [-c COUNTS] [-a FILTER] [-d] [-v]
 *
 * For every predefined datatype the library provides (C, multi-language and
 * Fortran-named types, pair types) x every predefined operation (and
 * MPI_REPLACE / MPI_NO_OP, which no reduction accepts), on communicators of
 * the first k ranks (k = 1..MAXSUB, then MPI_COMM_WORLD), every count (-c,
 * default 0,1,7,4099), in place or not, it runs every reduce and allreduce
 * algorithm of the catalogue (-a filter; defaults and each probe value of one
 * parameter at a time, -d: defaults only) through ct_call, and compares with
 * the library's own MPI_Allreduce / MPI_Reduce on the same inputs:
 *   - the library accepts the pair: colltune's result must be the library's
 *     (compared value by value, padding ignored; the inputs are small integers,
 *     so every reduction order gives the same values);
 *   - the library rejects it: colltune must return the same error class,
 *     having run the library (ct_check_args), on every rank.
 * The expectation is the library's answer, not the standard's (Open MPI's
 * op/avx saturates 8-bit MPI_SUM; colltune reduces with MPI_Reduce_local and
 * gives the same). Output: FAIL lines, one "pairs:" summary (accepted by the
 * library / run by colltune / declined to the library), "N passed, M failed". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "colltune/algorithms.h"
#include "colltune/hier.h"

#define MAXCOUNTS 8

typedef enum { L_BYTES, L_F32, L_F64, L_FLD, L_C32, L_C64, L_CLD, L_PAIR } layout;
typedef enum { V_BITS, V_SMALL, V_BOOL, V_PROD } values;

typedef struct { const char *name; MPI_Datatype t; layout lay; int vsize, isize; } dtype;
typedef struct { const char *name; MPI_Op op; values v; } dop;

static dtype types[96];
static int ntypes;
static int wrank, wsize, probes = 1, verbose;
static int counts[MAXCOUNTS] = {0, 1, 7, 4099}, ncounts = 4, maxcount = 4099;
static long passed, failed, pairs_lib, pairs_ours, pairs_declined;

static void add(const char *name, MPI_Datatype t, layout lay)
{
    int size = 0;
    if (t == MPI_DATATYPE_NULL || PMPI_Type_size(t, &size) != MPI_SUCCESS || size <= 0) return;
    types[ntypes++] = (dtype){name, t, lay, size, 0};
}

/* value kind: 0 int, 1 float, 2 double, 3 long double, 4 short, 5 long */
static void add_pair(const char *name, MPI_Datatype t, int vkind, int vsize)
{
    if (t == MPI_DATATYPE_NULL) return;
    int size = 0;
    if (PMPI_Type_size(t, &size) != MPI_SUCCESS || size <= 0) return;
    types[ntypes++] = (dtype){name, t, L_PAIR, vsize, vkind};
}

#define T(x, l) add(#x, x, l)
static void init_types(void)
{
    T(MPI_CHAR, L_BYTES); T(MPI_SIGNED_CHAR, L_BYTES); T(MPI_UNSIGNED_CHAR, L_BYTES);
    T(MPI_BYTE, L_BYTES); T(MPI_WCHAR, L_BYTES); T(MPI_SHORT, L_BYTES); T(MPI_UNSIGNED_SHORT, L_BYTES);
    T(MPI_INT, L_BYTES); T(MPI_UNSIGNED, L_BYTES); T(MPI_LONG, L_BYTES); T(MPI_UNSIGNED_LONG, L_BYTES);
    T(MPI_LONG_LONG, L_BYTES); T(MPI_UNSIGNED_LONG_LONG, L_BYTES);
    T(MPI_INT8_T, L_BYTES); T(MPI_INT16_T, L_BYTES); T(MPI_INT32_T, L_BYTES); T(MPI_INT64_T, L_BYTES);
    T(MPI_UINT8_T, L_BYTES); T(MPI_UINT16_T, L_BYTES); T(MPI_UINT32_T, L_BYTES); T(MPI_UINT64_T, L_BYTES);
    T(MPI_AINT, L_BYTES); T(MPI_OFFSET, L_BYTES);
#ifdef MPI_COUNT
    T(MPI_COUNT, L_BYTES);
#endif
    T(MPI_C_BOOL, L_BYTES);
    T(MPI_FLOAT, L_F32); T(MPI_DOUBLE, L_F64); T(MPI_LONG_DOUBLE, L_FLD);
    T(MPI_C_FLOAT_COMPLEX, L_C32); T(MPI_C_DOUBLE_COMPLEX, L_C64); T(MPI_C_LONG_DOUBLE_COMPLEX, L_CLD);
#ifdef MPI_CXX_BOOL
    T(MPI_CXX_BOOL, L_BYTES);
#endif
#ifdef MPI_CXX_FLOAT_COMPLEX
    T(MPI_CXX_FLOAT_COMPLEX, L_C32); T(MPI_CXX_DOUBLE_COMPLEX, L_C64);
    T(MPI_CXX_LONG_DOUBLE_COMPLEX, L_CLD);
#endif
#ifdef MPI_INTEGER
    T(MPI_INTEGER, L_BYTES); T(MPI_LOGICAL, L_BYTES); T(MPI_REAL, L_F32);
    T(MPI_DOUBLE_PRECISION, L_F64); T(MPI_COMPLEX, L_C32); T(MPI_DOUBLE_COMPLEX, L_C64);
#endif
#ifdef MPI_INTEGER1
    T(MPI_INTEGER1, L_BYTES); T(MPI_INTEGER2, L_BYTES); T(MPI_INTEGER4, L_BYTES); T(MPI_INTEGER8, L_BYTES);
#endif
#ifdef MPI_REAL4
    T(MPI_REAL4, L_F32); T(MPI_REAL8, L_F64);
#endif
    add_pair("MPI_FLOAT_INT", MPI_FLOAT_INT, 1, sizeof(float));
    add_pair("MPI_DOUBLE_INT", MPI_DOUBLE_INT, 2, sizeof(double));
    add_pair("MPI_LONG_INT", MPI_LONG_INT, 5, sizeof(long));
    add_pair("MPI_2INT", MPI_2INT, 0, sizeof(int));
    add_pair("MPI_SHORT_INT", MPI_SHORT_INT, 4, sizeof(short));
    add_pair("MPI_LONG_DOUBLE_INT", MPI_LONG_DOUBLE_INT, 3, sizeof(long double));
#ifdef MPI_INTEGER
    add_pair("MPI_2INTEGER", MPI_2INTEGER, 0, sizeof(int));
    add_pair("MPI_2REAL", MPI_2REAL, 1, sizeof(float));
    add_pair("MPI_2DOUBLE_PRECISION", MPI_2DOUBLE_PRECISION, 2, sizeof(double));
#endif
}
#undef T

static const dop ops[] = {
    {"MPI_SUM", MPI_SUM, V_SMALL}, {"MPI_PROD", MPI_PROD, V_PROD}, {"MPI_MAX", MPI_MAX, V_SMALL},
    {"MPI_MIN", MPI_MIN, V_SMALL}, {"MPI_LAND", MPI_LAND, V_BOOL}, {"MPI_LOR", MPI_LOR, V_BOOL},
    {"MPI_LXOR", MPI_LXOR, V_BOOL}, {"MPI_BAND", MPI_BAND, V_BITS}, {"MPI_BOR", MPI_BOR, V_BITS},
    {"MPI_BXOR", MPI_BXOR, V_BITS}, {"MPI_MINLOC", MPI_MINLOC, V_SMALL},
    {"MPI_MAXLOC", MPI_MAXLOC, V_SMALL}, {"MPI_REPLACE", MPI_REPLACE, V_SMALL},
#ifdef MPI_NO_OP
    {"MPI_NO_OP", MPI_NO_OP, V_SMALL},
#endif
};
enum { NOPS = sizeof ops / sizeof ops[0] };

static unsigned hash(int r, int i, int salt)
{
    unsigned h = (unsigned)r * 2654435761u ^ (unsigned)i * 2246822519u ^ (unsigned)salt * 3266489917u;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    return h;
}

/* A small value v for element i of rank r: sums of 17 ranks stay below 128,
 * a product has at most one factor 2 per element over ranks 0..16. */
static int small_value(values v, int r, int i, int salt)
{
    unsigned h = hash(r, i, salt);
    if (v == V_BOOL) return (int)(h % 4 != 0);
    if (v == V_PROD) return (i + r) % 17 == 0 ? 2 : 1;
    return (int)(h % 7);
}

static MPI_Aint extent_of(MPI_Datatype t)
{
    MPI_Aint lb, ext;
    MPI_Type_get_extent(t, &lb, &ext);
    return ext;
}

static void put_int(void *p, int size, long long x) { memset(p, 0, (size_t)size); memcpy(p, &x, size < 8 ? (size_t)size : 8); }

/* element i of rank r's input for (type, op), written at p (extent bytes) */
static void gen(const dtype *d, const dop *o, int r, int i, char *p, MPI_Aint ext)
{
    int salt = (int)(d - types) * 32 + (int)(o - ops);
    int v = small_value(o->v, r, i, salt);
    memset(p, 0, (size_t)ext);
    switch (d->lay) {
    case L_BYTES:
        if (o->v == V_BITS) {
            for (int b = 0; b < d->vsize; b++) p[b] = (char)(hash(r, i * 16 + b, salt) >> 7);
        } else {
            put_int(p, d->vsize, v);
        }
        break;
    case L_F32: *(float *)p = (float)v; break;
    case L_F64: *(double *)p = v; break;
    case L_FLD: *(long double *)p = v; break;
    case L_C32: ((float *)p)[0] = (float)v; ((float *)p)[1] = o->v == V_PROD ? 0 : (float)small_value(o->v, r, i, salt + 1); break;
    case L_C64: ((double *)p)[0] = v; ((double *)p)[1] = o->v == V_PROD ? 0 : small_value(o->v, r, i, salt + 1); break;
    case L_CLD: ((long double *)p)[0] = v; ((long double *)p)[1] = o->v == V_PROD ? 0 : small_value(o->v, r, i, salt + 1); break;
    case L_PAIR:
        switch (d->isize) {   /* the value; the index (rank) follows at the struct's offset */
        case 0: ((int *)p)[0] = v; ((int *)p)[1] = r; break;
        case 1: { struct { float v; int i; } *s = (void *)p; s->v = (float)v; s->i = r; break; }
        case 2: { struct { double v; int i; } *s = (void *)p; s->v = v; s->i = r; break; }
        case 3: { struct { long double v; int i; } *s = (void *)p; s->v = v; s->i = r; break; }
        case 4: { struct { short v; int i; } *s = (void *)p; s->v = (short)v; s->i = r; break; }
        case 5: { struct { long v; int i; } *s = (void *)p; s->v = v; s->i = r; break; }
        }
        if (d->t != MPI_FLOAT_INT && d->isize == 1) { ((float *)p)[1] = (float)r; }  /* MPI_2REAL */
        if (d->isize == 2 && extent_of(d->t) == 2 * (MPI_Aint)sizeof(double) && d->t != MPI_DOUBLE_INT)
            ((double *)p)[1] = r;                                                 /* MPI_2DOUBLE_PRECISION */
        break;
    }
}

/* value-wise equality of one element (padding ignored) */
static int same(const dtype *d, const char *a, const char *b)
{
    switch (d->lay) {
    case L_BYTES: return !memcmp(a, b, (size_t)d->vsize);
    case L_F32: return *(const float *)a == *(const float *)b;
    case L_F64: return *(const double *)a == *(const double *)b;
    case L_FLD: return *(const long double *)a == *(const long double *)b;
    case L_C32: return !memcmp(a, b, 2 * sizeof(float));
    case L_C64: return !memcmp(a, b, 2 * sizeof(double));
    case L_CLD: return ((const long double *)a)[0] == ((const long double *)b)[0] &&
                       ((const long double *)a)[1] == ((const long double *)b)[1];
    case L_PAIR: {
        int sz = 0;
        PMPI_Type_size(d->t, &sz);
        switch (d->isize) {
        case 3: {
            const struct { long double v; int i; } *x = (const void *)a, *y = (const void *)b;
            return x->v == y->v && x->i == y->i;
        }
        case 2: if (extent_of(d->t) == 2 * (MPI_Aint)sizeof(double) && d->t != MPI_DOUBLE_INT)
                    return !memcmp(a, b, 2 * sizeof(double));
                { const struct { double v; int i; } *x = (const void *)a, *y = (const void *)b;
                  return x->v == y->v && x->i == y->i; }
        case 4: { const struct { short v; int i; } *x = (const void *)a, *y = (const void *)b;
                  return x->v == y->v && x->i == y->i; }
        case 5: { const struct { long v; int i; } *x = (const void *)a, *y = (const void *)b;
                  return x->v == y->v && x->i == y->i; }
        default: return !memcmp(a, b, (size_t)sz);   /* int/float + int: no padding */
        }
    }
    }
    return 0;
}

static int err_class(int rc)
{
    int c = rc;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &c);
    return c;
}

static char *in, *out, *want, *lib_out[2];

/* An algorithm with one parameter set. */
typedef struct { const ct_algorithm *alg; int params[CT_MAX_PARAMS]; char name[256]; } config;
static config *configs;
static int nconfigs;

static void add_config(const ct_algorithm *alg, const int *params)
{
    config *c = &configs[nconfigs++];
    c->alg = alg;
    memcpy(c->params, params, sizeof c->params);
    int o = snprintf(c->name, sizeof c->name, "%s/%s", ct_coll_name(alg->coll), alg->name);
    for (int j = 0; j < alg->nparams && o < (int)sizeof c->name; j++)
        o += snprintf(c->name + o, sizeof c->name - (size_t)o, " %s=%d", alg->params[j].name, params[j]);
}

/* One configuration on one case, against the library's answer (lrc, lib);
 * returns 1 when wrong on this rank; *ours: colltune's algorithm ran. */
static int run_case(const config *cf, const dtype *d, const dop *o, int count, int inplace,
                    MPI_Comm comm, int lrc, const char *lib, int *ours)
{
    int k, r, root;
    MPI_Comm_size(comm, &k);
    MPI_Comm_rank(comm, &r);
    root = k - 1;
    MPI_Aint ext = extent_of(d->t);
    int significant = cf->alg->coll == CT_ALLREDUCE || r == root;
    memset(out, 0x5A, (size_t)(ext * (count ? count : 1)));
    ct_args a = {in, out, count, d->t, o->op, root, comm};
    if (inplace && significant) {
        memcpy(out, in, (size_t)(ext * count));
        a.sendbuf = MPI_IN_PLACE;
    }
    const char *ran = NULL;
    int rc = ct_call(cf->alg->coll, cf->alg->name, cf->params, &a, &ran);
    *ours = ran && strcmp(ran, "library") != 0;
    if (err_class(rc) != err_class(lrc)) return 1;
    if (lrc != MPI_SUCCESS) return *ours;          /* an invalid pair must go to the library */
    for (int i = 0; i < count; i++) {              /* the send buffer is untouched */
        gen(d, o, wrank, i, want, ext);
        if (!same(d, in + ext * i, want)) return 1;
    }
    if (!significant) return 0;
    for (int i = 0; i < count; i++)
        if (!same(d, out + ext * i, lib + ext * i)) return 1;
    return 0;
}

/* Every configuration on one (type, op) pair; one reduction of the verdicts. */
static void pair(const dtype *d, const dop *o, MPI_Comm comm, int k, int *bad, int *ours)
{
    int n = nconfigs * ncounts * 2, k_ = 0, lrc[2] = {0, 0};
    MPI_Aint ext = extent_of(d->t);
    for (int ci = 0; ci < ncounts; ci++) {
        int count = counts[ci];
        for (int i = 0; i < count; i++) gen(d, o, wrank, i, in + ext * i, ext);
        /* the library's answers: allreduce, reduce to the last rank */
        lrc[0] = MPI_Allreduce(in, lib_out[0], count, d->t, o->op, comm);
        lrc[1] = MPI_Reduce(in, lib_out[1], count, d->t, o->op, k - 1, comm);
        for (int c = 0; c < nconfigs; c++)
            for (int ip = 0; ip < 2; ip++, k_++) {
                int red = configs[c].alg->coll == CT_REDUCE;
                bad[k_] = run_case(&configs[c], d, o, count, ip, comm, lrc[red], lib_out[red], &ours[k_]);
            }
    }
    MPI_Allreduce(MPI_IN_PLACE, bad, n, MPI_INT, MPI_MAX, comm);
    MPI_Allreduce(MPI_IN_PLACE, ours, n, MPI_INT, MPI_MAX, comm);
    /* the library's verdict on the pair, with one element */
    char x[64], y[64];
    memset(x, 0, sizeof x);
    int lib_ok = MPI_Allreduce(x, y, 1, d->t, o->op, comm) == MPI_SUCCESS;
    for (int c = 0; c < nconfigs; c++) {
        int any_bad = 0, any_ours = 0;
        for (int ci = 0; ci < ncounts; ci++)
            for (int ip = 0; ip < 2; ip++) {
                int i = (ci * nconfigs + c) * 2 + ip;
                any_ours |= ours[i];
                if (!bad[i]) { passed++; continue; }
                failed++;
                any_bad = 1;
                if (wrank == 0)
                    printf("FAIL %s comm=%d type=%s op=%s count=%d inplace=%d ran=%s\n", configs[c].name, k,
                           d->name, o->name, counts[ci], ip, ours[i] ? "colltune" : "library");
            }
        if (wrank == 0 && k == wsize) {
            pairs_lib += lib_ok;
            pairs_ours += any_ours;
            pairs_declined += lib_ok && !any_ours;
            if (verbose) printf("pair %s %s %s: library %s, %s%s\n", configs[c].name, d->name, o->name,
                                lib_ok ? "accepts" : "rejects", any_ours ? "colltune ran" : "library ran",
                                any_bad ? " FAILED" : "");
        }
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int maxsub = 3;
    const char *filter = NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-s") && i + 1 < argc) maxsub = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-a") && i + 1 < argc) filter = argv[++i];
        else if (!strcmp(argv[i], "-d")) probes = 0;
        else if (!strcmp(argv[i], "-v")) verbose = 1;
        else if (!strcmp(argv[i], "-c") && i + 1 < argc) {
            char *e, *s = argv[++i];
            ncounts = 0, maxcount = 0;
            for (; *s && ncounts < MAXCOUNTS; s = *e ? e + 1 : e) {
                counts[ncounts] = (int)strtol(s, &e, 10);
                if (counts[ncounts] > maxcount) maxcount = counts[ncounts];
                ncounts++;
            }
        } else {
            if (wrank == 0) fprintf(stderr, "usage: typematrix [-s MAXSUB] [-c C1,..] [-a coll[/name]] [-d] [-v]\n");
            MPI_Finalize();
            return 2;
        }
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    init_types();
    size_t cap = (size_t)(maxcount > 0 ? maxcount : 1) * 64;
    in = malloc(cap), out = malloc(cap), want = malloc(64), lib_out[0] = malloc(cap), lib_out[1] = malloc(cap);
    configs = malloc(sizeof(config) * 512);
    for (int ai = 0; ai < ct_count(); ai++) {
        const ct_algorithm *alg = ct_get(ai);
        char full[128];
        if (alg->coll != CT_REDUCE && alg->coll != CT_ALLREDUCE) continue;
        snprintf(full, sizeof full, "%s/%s", ct_coll_name(alg->coll), alg->name);
        if (filter && strcmp(filter, full) && strcmp(filter, ct_coll_name(alg->coll))) continue;
        int params[CT_MAX_PARAMS] = {0};
        for (int j = 0; j < alg->nparams; j++) params[j] = alg->params[j].def;
        add_config(alg, params);
        for (int t = 0; t < CT_MAX_TUNE && alg->tune[t] && probes; t++) {
            int tuned[CT_MAX_PARAMS];
            if (ct_params_parse(alg, alg->tune[t], tuned) == 0) add_config(alg, tuned);
        }
        for (int j = 0; j < alg->nparams && probes; j++)
            for (int q = 0; q < alg->params[j].nprobe && nconfigs < 512; q++) {
                params[j] = alg->params[j].probe[q];
                add_config(alg, params);
                params[j] = alg->params[j].def;
            }
    }
    int *bad = malloc(sizeof(int) * (size_t)nconfigs * MAXCOUNTS * 2);
    int *ours = malloc(sizeof(int) * (size_t)nconfigs * MAXCOUNTS * 2);
    int sizes[64], nsizes = 0;   /* 1..MAXSUB, then the whole world */
    for (int k = 1; k <= maxsub && k < wsize && nsizes < 63; k++) sizes[nsizes++] = k;
    sizes[nsizes++] = wsize;
    for (int si = 0; si < nsizes; si++) {
        int k = sizes[si];
        MPI_Comm comm;
        MPI_Comm_split(MPI_COMM_WORLD, wrank < k ? 0 : MPI_UNDEFINED, wrank, &comm);
        if (comm != MPI_COMM_NULL) {
            MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
            for (int ti = 0; ti < ntypes; ti++)
                for (int oi = 0; oi < (int)NOPS; oi++) pair(&types[ti], &ops[oi], comm, k, bad, ours);
            MPI_Comm_free(&comm);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (wrank == 0) {
        printf("types: %d, ops: %d\n", ntypes, (int)NOPS);
        printf("pairs (x algorithm configurations, world): accepted by the library %ld, run by colltune %ld, "
               "declined to the library %ld\n", pairs_lib, pairs_ours, pairs_declined);
        printf("%ld passed, %ld failed\n", passed, failed);
    }
    free(in); free(out); free(want); free(lib_out[0]); free(lib_out[1]); free(configs); free(bad); free(ours);
    ct_hier_release(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
