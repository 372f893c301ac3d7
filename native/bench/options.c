/* Argument parsing. Accepts "--opt value" and "--opt=value". Every error names
 * the option and the offending value; the caller exits with code 2. */
#include "options.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char options_usage[] =
    "usage: colltune-bench --coll NAME [options]\n"
    "  --coll NAME             bcast reduce allreduce allgather gather scatter alltoall\n"
    "                          reduce_scatter_block barrier\n"
    "  --scenario S            plain (default) | delayed | overlap\n"
    "  --sizes LIST            bytes per rank, comma-separated integers >= 0 (barrier: default 0)\n"
    "  --procs LIST            participant counts (first P ranks); default: world size\n"
    "  --dtype T               char | int | float | double (default: float for reductions, else char)\n"
    "  --op OP                 reductions: sum (MPI_SUM, default) | charged-sum (a user-defined sum\n"
    "                          charging its arithmetic on SMPI, as colltune's algorithms are)\n"
    "  --root N                root of rooted collectives (default 0)\n"
    "  --delays-us LIST        delayed scenario: delays of the late rank, one point each\n"
    "  --delayed-rank R        delayed scenario: first | last (default last)\n"
    "  --tcalc-us LIST         overlap scenario: computation time per point\n"
    "  --warmup N              discarded calls per point (default 1, minimum 1)\n"
    "  --min-reps N            (default 5)   --max-reps N (default 200)\n"
    "  --rse X                 stop once the median's ~95 % confidence interval (order statistics)\n"
    "                          is within +-X of it (default 0.02)\n"
    "  --max-seconds-per-point X   time budget of one point (default 10)\n"
    "  --check MODE            none (default) | first | only\n"
    "  --shared-buffers        timing buffers from SMPI_SHARED_MALLOC (SMPI builds only)\n"
    "  --json FILE             JSON lines (default stdout)\n"
    "  --table FILE|-          also write the classic table ('-' = stdout; then --json is required)\n"
    "  --sync-window-us X      initial synchronised-start window (default 50)\n"
    "  --late-tolerance-us X   a repetition whose start is later than this is discarded\n"
    "                          (default: 0.01 under SMPI, 1 on real clocks; raise it when\n"
    "                          ranks oversubscribe the cores, or no repetition is ever valid)\n"
    "  --label KEY=VALUE       copied into every record (repeatable)\n"
    "  --hang-at-size LIST     test hook: at the first point of each of these sizes rank 0\n"
    "                          blocks forever (a real hang, for timeout handling tests)\n";

#define FAIL(...) do { snprintf(err, errlen, "colltune-bench: " __VA_ARGS__); return 2; } while (0)

/* Splits a comma-separated list; each item parsed by `one` into out[i]. */
static int parse_list(const char *s, void **out, size_t elsize, int *n, int (*one)(const char *, void *))
{
    int cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    char *copy = strdup(s);
    char *buf = malloc((size_t)cap * elsize);
    if (!copy || !buf) { free(copy); free(buf); return -1; }
    int k = 0;
    char *item = copy;
    for (;;) {
        char *comma = strchr(item, ',');
        if (comma) *comma = '\0';
        if (one(item, buf + (size_t)k * elsize) != 0) { free(copy); free(buf); return -1; }
        k++;
        if (!comma) break;
        item = comma + 1;
    }
    free(copy);
    *out = buf;
    *n = k;
    return 0;
}

static int one_size(const char *s, void *out)
{
    char *end;
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < 0) return -1;
    *(long long *)out = v;
    return 0;
}

static int one_int(const char *s, void *out)
{
    long long v;
    if (one_size(s, &v) || v > INT_MAX) return -1;
    *(int *)out = (int)v;
    return 0;
}

static int one_double(const char *s, void *out)
{
    char *end;
    if (!*s) return -1;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < 0) return -1;
    *(double *)out = v;
    return 0;
}

/* option names that take no value */
static int is_flag(const char *name) { return strcmp(name, "shared-buffers") == 0 || strcmp(name, "help") == 0; }

static char *join_argv(int argc, char **argv)
{
    size_t len = 1;
    for (int i = 0; i < argc; i++) len += strlen(argv[i]) + 1;
    char *s = malloc(len), *p = s;
    if (!s) return NULL;
    for (int i = 0; i < argc; i++) p += sprintf(p, i ? " %s" : "%s", argv[i]);
    *p = '\0';
    return s;
}

int options_parse(int argc, char **argv, options_t *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->dtype = DT_DEFAULT;
    o->delayed_last = 1;
    o->warmup = 1;
    o->min_reps = 5;
    o->max_reps = 200;
    o->rse = 0.02;
    o->max_seconds = 10;
    o->sync_window_us = 50;
    o->late_tolerance_us = -1;  /* the clock's own, see clock_late_tolerance() */
    o->argv_joined = join_argv(argc, argv);
    o->label_keys = calloc((size_t)argc + 1, sizeof *o->label_keys);
    o->label_vals = calloc((size_t)argc + 1, sizeof *o->label_vals);
    int seen_delayed_rank = 0;

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0) FAIL("unexpected argument '%s' (options start with --)", arg);
        char name[64];
        const char *eq = strchr(arg + 2, '='), *val = NULL;
        size_t nlen = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        if (nlen >= sizeof name) FAIL("unknown option '%s'", arg);
        memcpy(name, arg + 2, nlen);
        name[nlen] = '\0';
        if (is_flag(name)) {
            if (eq) FAIL("option --%s takes no value (got '%s')", name, eq + 1);
        } else if (eq) {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            FAIL("option --%s needs a value", name);
        }
        double d;

        if (!strcmp(name, "help")) { snprintf(err, errlen, "%s", options_usage); return 1; }
        else if (!strcmp(name, "shared-buffers")) o->shared_buffers = 1;
        else if (!strcmp(name, "coll")) {
            if (!(o->coll = coll_find(val))) {
                char names[256] = "";
                for (int k = 0; coll_table[k]; k++)
                    snprintf(names + strlen(names), sizeof names - strlen(names), " %s", coll_table[k]->name);
                FAIL("--coll: unknown collective '%s' (known:%s)", val, names);
            }
        } else if (!strcmp(name, "scenario")) {
            if (!strcmp(val, "plain")) o->scenario = SCEN_PLAIN;
            else if (!strcmp(val, "delayed")) o->scenario = SCEN_DELAYED;
            else if (!strcmp(val, "overlap")) o->scenario = SCEN_OVERLAP;
            else FAIL("--scenario: unknown scenario '%s' (plain, delayed, overlap)", val);
        } else if (!strcmp(name, "sizes")) {
            free(o->sizes);
            if (parse_list(val, (void **)&o->sizes, sizeof *o->sizes, &o->nsizes, one_size))
                FAIL("--sizes: invalid value '%s' (comma-separated integers >= 0)", val);
        } else if (!strcmp(name, "procs")) {
            free(o->procs);
            if (parse_list(val, (void **)&o->procs, sizeof *o->procs, &o->nprocs, one_int))
                FAIL("--procs: invalid value '%s' (comma-separated integers >= 1)", val);
            for (int k = 0; k < o->nprocs; k++)
                if (o->procs[k] < 1) FAIL("--procs: invalid value '%s' (comma-separated integers >= 1)", val);
        } else if (!strcmp(name, "delays-us")) {
            free(o->delays_us);
            if (parse_list(val, (void **)&o->delays_us, sizeof *o->delays_us, &o->ndelays, one_double))
                FAIL("--delays-us: invalid value '%s' (comma-separated numbers >= 0)", val);
        } else if (!strcmp(name, "tcalc-us")) {
            free(o->tcalc_us);
            if (parse_list(val, (void **)&o->tcalc_us, sizeof *o->tcalc_us, &o->ntcalc, one_double))
                FAIL("--tcalc-us: invalid value '%s' (comma-separated numbers >= 0)", val);
        } else if (!strcmp(name, "delayed-rank")) {
            seen_delayed_rank = 1;
            if (!strcmp(val, "first")) o->delayed_last = 0;
            else if (!strcmp(val, "last")) o->delayed_last = 1;
            else FAIL("--delayed-rank: invalid value '%s' (first, last)", val);
        } else if (!strcmp(name, "dtype")) {
            if (dtype_parse(val, &o->dtype)) FAIL("--dtype: unknown datatype '%s' (char, int, float, double)", val);
        } else if (!strcmp(name, "op")) {
            if (op_parse(val, &o->op)) FAIL("--op: unknown operator '%s' (sum, charged-sum)", val);
        } else if (!strcmp(name, "root")) {
            if (one_int(val, &o->root)) FAIL("--root: invalid value '%s' (an integer >= 0)", val);
        } else if (!strcmp(name, "warmup")) {
            if (one_int(val, &o->warmup) || o->warmup < 1) FAIL("--warmup: invalid value '%s' (an integer >= 1)", val);
        } else if (!strcmp(name, "min-reps")) {
            if (one_int(val, &o->min_reps) || o->min_reps < 1)
                FAIL("--min-reps: invalid value '%s' (an integer >= 1)", val);
        } else if (!strcmp(name, "max-reps")) {
            if (one_int(val, &o->max_reps) || o->max_reps < 1)
                FAIL("--max-reps: invalid value '%s' (an integer >= 1)", val);
        } else if (!strcmp(name, "rse")) {
            if (one_double(val, &o->rse)) FAIL("--rse: invalid value '%s' (a number >= 0)", val);
        } else if (!strcmp(name, "max-seconds-per-point")) {
            if (one_double(val, &d) || d <= 0)
                FAIL("--max-seconds-per-point: invalid value '%s' (a number > 0)", val);
            o->max_seconds = d;
        } else if (!strcmp(name, "sync-window-us")) {
            if (one_double(val, &d) || d <= 0) FAIL("--sync-window-us: invalid value '%s' (a number > 0)", val);
            o->sync_window_us = d;
        } else if (!strcmp(name, "late-tolerance-us")) {
            if (one_double(val, &d) || d <= 0)
                FAIL("--late-tolerance-us: invalid value '%s' (a number > 0)", val);
            o->late_tolerance_us = d;
        } else if (!strcmp(name, "check")) {
            if (!strcmp(val, "none")) o->check = CHECK_NONE;
            else if (!strcmp(val, "first")) o->check = CHECK_FIRST;
            else if (!strcmp(val, "only")) o->check = CHECK_ONLY;
            else FAIL("--check: invalid value '%s' (none, first, only)", val);
        } else if (!strcmp(name, "json")) {
            o->json_path = val;
        } else if (!strcmp(name, "table")) {
            o->table_path = val;
        } else if (!strcmp(name, "hang-at-size")) {
            free(o->hang_sizes);
            if (parse_list(val, (void **)&o->hang_sizes, sizeof *o->hang_sizes, &o->nhang, one_size))
                FAIL("--hang-at-size: invalid value '%s' (comma-separated integers >= 0)", val);
        } else if (!strcmp(name, "label")) {
            const char *sep = strchr(val, '=');
            if (!sep || sep == val) FAIL("--label: invalid value '%s' (KEY=VALUE)", val);
            char *key = strndup(val, (size_t)(sep - val));
            for (int k = 0; k < o->nlabels; k++)
                if (!strcmp(o->label_keys[k], key)) { free(key); FAIL("--label: duplicate key in '%s'", val); }
            o->label_keys[o->nlabels] = key;
            o->label_vals[o->nlabels++] = sep + 1;
        } else {
            FAIL("unknown option '--%s'", name);
        }
    }

    /* cross-option rules */
    if (!o->coll) FAIL("--coll is required (try --help)");
    if (o->scenario == SCEN_DELAYED && !o->ndelays) FAIL("--scenario delayed needs --delays-us");
    if (o->scenario != SCEN_DELAYED && (o->ndelays || seen_delayed_rank))
        FAIL("--delays-us and --delayed-rank need --scenario delayed (got '%s')", scenario_name(o->scenario));
    if (o->scenario == SCEN_OVERLAP && !o->ntcalc) FAIL("--scenario overlap needs --tcalc-us");
    if (o->scenario != SCEN_OVERLAP && o->ntcalc)
        FAIL("--tcalc-us needs --scenario overlap (got '%s')", scenario_name(o->scenario));
    if (!o->nsizes) {
        if (o->coll->has_data) FAIL("--sizes is required for --coll %s", o->coll->name);
        o->sizes = calloc(1, sizeof *o->sizes);
        o->nsizes = 1;
    }
    if (o->dtype == DT_DEFAULT) o->dtype = o->coll->reduces ? DT_FLOAT : DT_CHAR;
    for (int k = 0; k < o->nsizes; k++)
        if (o->sizes[k] / (long long)dtype_size(o->dtype) > INT_MAX)
            FAIL("--sizes: %lld bytes of %s exceed the largest MPI count", o->sizes[k], dtype_name(o->dtype));
    if (o->max_reps < o->min_reps) FAIL("--max-reps: %d is below --min-reps %d", o->max_reps, o->min_reps);
    if (o->op != OP_SUM && !o->coll->reduces) FAIL("--op: %s does not reduce (got '%s')", o->coll->name, op_name(o->op));
    if (o->root != 0 && !o->coll->rooted) FAIL("--root: %s has no root (got %d)", o->coll->name, o->root);
    if (o->table_path && !strcmp(o->table_path, "-") && !o->json_path)
        FAIL("--table -: the table takes stdout, so give --json FILE for the JSON lines");
    return 0;
}

int options_validate_world(options_t *o, int world_size, char *err, size_t errlen)
{
    if (!o->nprocs) {
        o->procs = malloc(sizeof *o->procs);
        o->procs[0] = world_size;
        o->nprocs = 1;
    }
    for (int k = 0; k < o->nprocs; k++) {
        if (o->procs[k] > world_size)
            FAIL("--procs: %d exceeds the world size %d", o->procs[k], world_size);
        if (o->coll->rooted && o->root >= o->procs[k])
            FAIL("--root: %d is not a rank of a %d-process communicator (--procs)", o->root, o->procs[k]);
    }
    return 0;
}

void options_free(options_t *o)
{
    free(o->sizes);
    free(o->procs);
    free(o->delays_us);
    free(o->tcalc_us);
    free(o->hang_sizes);
    for (int k = 0; k < o->nlabels; k++) free((void *)o->label_keys[k]);
    free(o->label_keys);
    free(o->label_vals);
    free(o->argv_joined);
}
