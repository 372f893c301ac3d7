/* colltune-taskbench: times HAN tasks (or whole collectives) per process and
 * prints JSON records, one line each, on rank 0 (interface: docs/hier.md).
 *
 *   colltune-taskbench --coll bcast|reduce|allreduce --bytes N [--params k=v,...] (HAN's; flat:NAME's)
 *       [--root R] [--reps N] [--warmup N] [--vnode V] [--check [--tamper]] [--max] [--shared]
 *       (--tasks "ib(0);sbib(1);sb(0)" | --whole han|library|flat:NAME)
 *
 * --tasks: a sequence of tasks run back to back after a dissemination barrier, each timed
 * on every process (seconds from its start to its end on that process); the
 * collective call is opened before and closed (ct_han_end) after the
 * sequence, untimed. --whole: one call of the whole collective per repetition
 * (HAN, the library's MPI_ collective, or a flat colltune algorithm), timed
 * from a dissemination barrier; "completion" = max(end) - min(start) (exact on SMPI's
 * global clock), "max_rank" = the slowest rank's own duration. Data are MPI_INT
 * (bytes / 4 elements), MPI_SUM (--max: MPI_MAX); --check verifies the result of every whole call
 * (reduce: at the root; the other ranks pass recvbuf = NULL, it is not significant there);
 * --tamper changes one result element on one checked rank after each call: the
 * self-test that --check reports wrong_result (tests/test_taskmodel_smpi.py);
 * --shared (SMPI only) allocates the user buffers with SMPI_SHARED_MALLOC (garbage
 * data, little memory: for timing large messages on many ranks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "colltune/hier.h"

#define MAXTASKS 256
#define MAXSTEPS 8

static int rank, size, use_max, shared;

static void die(const char *msg, const char *arg)
{
    if (rank == 0) fprintf(stderr, "colltune-taskbench: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* --params fs=..,imod=.. onto the descriptor's defaults (names from the catalogue) */
static void parse_params(const ct_algorithm *alg, const char *s, int *p)
{
    ct_params_default(alg, p);
    char *dup = strdup(s ? s : ""), *save = NULL;
    for (char *kv = strtok_r(dup, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        int found = 0;
        if (!eq) die("--params entry is not name=value", kv);
        *eq = '\0';
        for (int i = 0; i < alg->nparams; i++)
            if (!strcmp(alg->params[i].name, kv)) {
                char *end;
                p[i] = (int)strtol(eq + 1, &end, 10);
                if (*end || p[i] < alg->params[i].min || p[i] > alg->params[i].max)
                    die("parameter value out of range", eq + 1);
                found = 1;
            }
        if (!found) die("unknown parameter", kv);
    }
    free(dup);
}

/* Dissemination barrier on point-to-point messages: every rank leaves it
 * within about one message latency of the others, whatever barrier algorithm
 * the library (or an SMPI selector) would use, so max(end) - min(start) does
 * not include a barrier's exit skew (SMPI's default barrier lets rank 0 out
 * tens of microseconds before the last rank on 192 ranks). */
static void sync_ranks(void)
{
    for (int d = 1; d < size; d *= 2)
        MPI_Sendrecv(NULL, 0, MPI_BYTE, (rank + d) % size, 32700, NULL, 0, MPI_BYTE,
                     (rank - d + size) % size, 32700, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void print_params(const ct_algorithm *alg, const int *p)
{
    printf("\"params\":{");
    for (int i = 0; i < alg->nparams; i++) printf("%s\"%s\":%d", i ? "," : "", alg->params[i].name, p[i]);
    printf("}");
}

static void fill(int *buf, int count, int who)
{
    for (int i = 0; i < count; i++) buf[i] = (who * 7 + i * 3) % 61;
}

/* fill() is periodic in i with period 61, so the expected reduction is
 * tabulated once per residue: O(61 size + count) instead of O(count size),
 * which at 768 ranks and 4 MiB was hours of real time per checked call. */
static int check(ct_coll coll, const int *buf, int count, int root)
{
    int want[61];
    for (int c = 0; c < 61; c++) {
        want[c] = 0;
        if (coll == CT_BCAST) want[c] = (root * 7 + c * 3) % 61;
        else for (int r = 0; r < size; r++) {
            int x = (r * 7 + c * 3) % 61;
            want[c] = use_max ? (x > want[c] ? x : want[c]) : want[c] + x;
        }
    }
    for (int i = 0; i < count; i++)
        if (buf[i] != want[i % 61]) return 1;
    return 0;
}

int main(int argc, char **argv)
{
    const char *collname = NULL, *params = NULL, *tasks = NULL, *whole = NULL;
    long bytes = -1;
    int root = 0, reps = 3, warmup = 1, vnode = 0, do_check = 0, tamper = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--check")) { do_check = 1; continue; }
        if (!strcmp(argv[i], "--tamper")) { tamper = 1; continue; }
        if (!strcmp(argv[i], "--max")) { use_max = 1; continue; }
        if (!strcmp(argv[i], "--shared")) { shared = 1; continue; }
        if (!v) die("missing value after", argv[i]);
        if (!strcmp(argv[i], "--coll")) collname = v;
        else if (!strcmp(argv[i], "--bytes")) bytes = atol(v);
        else if (!strcmp(argv[i], "--params")) params = v;
        else if (!strcmp(argv[i], "--tasks")) tasks = v;
        else if (!strcmp(argv[i], "--whole")) whole = v;
        else if (!strcmp(argv[i], "--root")) root = atoi(v);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(v);
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(v);
        else if (!strcmp(argv[i], "--vnode")) vnode = atoi(v);
        else die("unknown option", argv[i]);
        i++;
    }
    int c = collname ? ct_coll_from_name(collname) : -1;
    if (c != CT_BCAST && c != CT_REDUCE && c != CT_ALLREDUCE)
        die("--coll must be bcast, reduce or allreduce", collname);
    if (bytes < 0 || !tasks == !whole) die("need --bytes and one of --tasks / --whole", NULL);
    if (root < 0 || root >= size) die("--root out of range", NULL);
    if (tamper && !do_check) die("--tamper needs --check", NULL);
    ct_coll coll = (ct_coll)c;
    /* --params are HAN's, or with --whole flat:NAME that algorithm's */
    const char *flat = whole && !strncmp(whole, "flat:", 5) ? whole + 5 : NULL;
    const ct_algorithm *han = ct_find(coll, "han"), *desc = flat ? ct_find(coll, flat) : han;
    if (!desc) die("unknown flat algorithm", flat);
    int p[CT_MAX_PARAMS];
    parse_params(desc, params, p);
    ct_han_params hp = flat ? (ct_han_params){0} : ct_han_params_from(coll, p);
    ct_hier_set_vnode_size(vnode);
    int count = (int)(bytes / (long)sizeof(int));
    size_t nb = sizeof(int) * (size_t)(count + 1);
    int *sbuf, *rbuf;
#ifdef COLLTUNE_SMPI
    if (shared && do_check) die("--shared buffers hold garbage: no --check", NULL);
    sbuf = shared ? SMPI_SHARED_MALLOC(nb) : malloc(nb);
    rbuf = shared ? SMPI_SHARED_MALLOC(nb) : malloc(nb);
#else
    if (shared) die("--shared needs an SMPI build", NULL);
    sbuf = malloc(nb);
    rbuf = malloc(nb);
#endif
    fill(sbuf, count, rank);
    fill(rbuf, count, rank);
    ct_args a = {sbuf, rbuf, count, MPI_INT, use_max ? MPI_MAX : MPI_SUM, root, MPI_COMM_WORLD};
    if (coll == CT_REDUCE && rank != root) a.recvbuf = NULL;   /* must not be touched */
    ct_hier_info info;
    ct_hier_info_get(MPI_COMM_WORLD, &info);
    double *all = malloc(sizeof(double) * 2 * (size_t)size);

    if (whole) {
        if (!flat && strcmp(whole, "han") && strcmp(whole, "library")) die("bad --whole", whole);
        for (int rep = -warmup; rep < reps; rep++) {
            const char *ran = "library";
            if (do_check) fill(rbuf, count, rank);
            sync_ranks();
            double t[2] = {MPI_Wtime(), 0};
            int rc = !strcmp(whole, "library") ? ct_library_call(coll, &a)
                     : ct_call(coll, desc->name, p, &a, &ran);
            t[1] = MPI_Wtime();
            if (tamper && count > 0 && rank == (coll == CT_REDUCE ? root : size - 1))
                rbuf[count - 1] += 1;
            int bad = rc != MPI_SUCCESS || (do_check && (coll != CT_REDUCE || rank == root) &&
                                            check(coll, rbuf, count, root)), anybad;
            MPI_Gather(t, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            MPI_Reduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
            if (rank == 0 && rep >= 0) {
                double lo = all[0], hi = all[1], mx = 0;
                for (int r = 0; r < size; r++) {
                    if (all[2 * r] < lo) lo = all[2 * r];
                    if (all[2 * r + 1] > hi) hi = all[2 * r + 1];
                    if (all[2 * r + 1] - all[2 * r] > mx) mx = all[2 * r + 1] - all[2 * r];
                }
                printf("{\"kind\":\"whole\",\"coll\":\"%s\",\"impl\":\"%s\",\"ran\":\"%s\",\"bytes\":%ld,"
                       "\"ranks\":%d,\"nodes\":%d,\"root\":%d,\"rep\":%d,", collname, whole, ran, bytes,
                       size, info.nnodes, root, rep);
                print_params(desc, p);
                printf(",\"completion\":%.9e,\"max_rank\":%.9e,\"check\":\"%s\"}\n", hi - lo, mx,
                       !do_check ? "off" : anybad ? "wrong_result" : "ok");
                fflush(stdout);
            }
        }
    } else {
        char *seq[MAXTASKS], *dup = strdup(tasks), *save = NULL;
        int ntask = 0;
        ct_han_step steps[MAXTASKS][MAXSTEPS];
        int nsteps[MAXTASKS];
        for (char *t = strtok_r(dup, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
            if (ntask == MAXTASKS) die("too many tasks", NULL);
            seq[ntask] = t;
            nsteps[ntask] = ct_han_parse_task(t, steps[ntask], MAXSTEPS);
            if (nsteps[ntask] < 0) die("malformed task", t);
            ntask++;
        }
        /* One gather per repetition of [leader?, node, task times...]: SMPI's
         * default gather costs O(size^2) host time per call (waitany over
         * size requests), which at 768 ranks made a pipeline's per-task
         * gathers take minutes. Outside the timed region either way. */
        int w = ntask + 2;
        double *mine = malloc(sizeof(double) * (size_t)w), *gat = NULL;
        if (rank == 0) gat = malloc(sizeof(double) * (size_t)w * (size_t)size);
        for (int rep = -warmup; rep < reps; rep++) {
            ct_han *h;
            ct_han_begin(&h, coll, &a, &hp);
            mine[0] = ct_han_is_leader(h);
            mine[1] = info.node;
            sync_ranks();
            for (int k = 0; k < ntask; k++) {
                double t0 = MPI_Wtime();
                ct_han_task(h, steps[k], nsteps[k]);
                mine[2 + k] = MPI_Wtime() - t0;
            }
            int segs = ct_han_segments(h);
            ct_han_end(h);
            MPI_Gather(mine, w, MPI_DOUBLE, gat, w, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            if (rank != 0 || rep < 0) continue;
            for (int k = 0; k < ntask; k++) {
                double ml = 0, ma = 0;
                for (int r = 0; r < size; r++) {
                    double x = gat[(size_t)r * w + 2 + k];
                    if (x > ma) ma = x;
                    if (gat[(size_t)r * w] != 0 && x > ml) ml = x;
                }
                printf("{\"kind\":\"task\",\"coll\":\"%s\",\"task\":\"%s\",\"seq\":%d,\"rep\":%d,"
                       "\"bytes\":%ld,\"segments\":%d,\"ranks\":%d,\"nodes\":%d,\"root\":%d,", collname,
                       seq[k], k, rep, bytes, segs, size, info.nnodes, root);
                print_params(desc, p);
                printf(",\"max_leader\":%.9e,\"max_all\":%.9e", ml, ma);
                printf(",\"times\":[");
                for (int r = 0; r < size; r++) printf("%s%.9e", r ? "," : "", gat[(size_t)r * w + 2 + k]);
                printf("],\"leader\":[");
                for (int r = 0; r < size; r++) printf("%s%d", r ? "," : "", gat[(size_t)r * w] != 0);
                printf("],\"node\":[");
                for (int r = 0; r < size; r++) printf("%s%d", r ? "," : "", (int)gat[(size_t)r * w + 1]);
                printf("]}\n");
            }
            fflush(stdout);
        }
        free(mine); free(gat); free(dup);
    }
#ifdef COLLTUNE_SMPI
    if (shared) { SMPI_SHARED_FREE(sbuf); SMPI_SHARED_FREE(rbuf); sbuf = rbuf = NULL; }
#endif
    free(sbuf); free(rbuf); free(all);
    ct_hier_release(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
