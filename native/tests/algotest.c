/* Correctness matrix for colltune's flat algorithms (native/algorithms).
 *
 *   algotest [-l] [-s MAXSUB] [-r all|few] [-c COUNTS] [-a FILTER] [-d]
 *            [-m blocking|nb|both] [-t BYTES] [-b NAME=V,..]
 *
 * -l lists the catalogue with parameters (like ucc_info -A) and exits; -t
 * times one call of each algorithm instead (timing.c).
 * Otherwise, for every communicator (MPI_Comm_split of the first k ranks for
 * k = 1..MAXSUB, then MPI_COMM_WORLD), every algorithm of the catalogue
 * (filtered by "coll" or "coll/name"), every parameter set (defaults, then each
 * probe value of one parameter at a time; -d: defaults only; -b: these values
 * instead of the defaults, for parameters of that name), it runs every root (-r few: 0, k/2,
 * k-1) x count x type x op x in-place case and checks the result against an
 * analytically computed expectation (testdata.c), in two modes (-m):
 *   blocking  ct_call, one case at a time;
 *   nb        ct_icall, BATCH cases in flight at once on the communicator,
 *             every third one persistent (ct_call_init + ct_start, run twice),
 *             overlapped with the caller's own traffic on the same
 *             communicator (an MPI_ANY_SOURCE/MPI_ANY_TAG receive posted
 *             before, a send after the calls): one ct_test, then ct_wait
 *             in reverse order.
 * Declined cases run the library fallback and are checked the same way.
 * -F (fault injection, blocking mode): before each case, the same call runs
 * once with every local reduction of the communicator's last rank failing
 * (ct_test_fault_reduce); every rank must return, and the case that follows
 * must still be right: nothing of the failed call may be left in flight.
 * Output: one FAIL line per failed case, then "N passed, M failed". */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "colltune/algorithms.h"
#include "colltune/hier.h"
#include "testdata.h"
#include "timing.h"

#define GUARD 16
#define MAXCOUNTS 16
#define MAXROOTS 4096
#define BATCH 3
#define USER_TAG 7

enum { M_BLOCKING, M_NB, NMODES };
static const char *const mode_name[NMODES] = {"blocking", "nb"};
static int modes[NMODES] = {1, 1};

static int counts[MAXCOUNTS] = {0, 1, 2, 7, 100, 1031}, ncounts = 6, maxcount = 1031;
static int all_roots = 1, probes = 1, wrank, wsize, fault_mode;
static long faults_run, faults_reported;   /* failing rank: calls, error codes returned */
static const char *base_values;   /* -b name=v,...: replaces the defaults */

/* The value -b gives parameter `name`, else def. */
static int base_value(const char *name, int def)
{
    size_t n = strlen(name);
    for (const char *s = base_values; s && *s;) {
        if (!strncmp(s, name, n) && s[n] == '=') return atoi(s + n + 1);
        s = strchr(s, ',');
        s = s ? s + 1 : NULL;
    }
    return def;
}

/* Every -b name must be a parameter of an algorithm the filter selects: a
 * misspelt name would otherwise run the defaults and test nothing new. */
static const char *unknown_base_name(const char *filter)
{
    static char name[64];
    for (const char *s = base_values; s && *s;) {
        size_t n = strcspn(s, "=,");
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), s);
        int found = 0;
        for (int ai = 0; ai < ct_count() && !found; ai++) {
            const ct_algorithm *alg = ct_get(ai);
            char full[128];
            snprintf(full, sizeof full, "%s/%s", ct_coll_name(alg->coll), alg->name);
            if (filter && strcmp(filter, full) && strcmp(filter, ct_coll_name(alg->coll))) continue;
            for (int j = 0; j < alg->nparams && !found; j++) found = !strcmp(alg->params[j].name, name);
        }
        if (!found || s[n] != '=') return name;
        s = strchr(s, ',');
        s = s ? s + 1 : NULL;
    }
    return NULL;
}

/* (type, op) pairs tried per collective */
static const int red_combos[][2] = {{T_INT, O_SUM}, {T_INT, O_MAX}, {T_INT, O_NC},
    {T_DOUBLE, O_SUM}, {T_DOUBLE, O_MAX}, {T_DOUBLE, O_NC}, {T_B3, O_NC}, {T_B3, O_BSUM}};
static const int move_combos[][2] = {{T_INT, O_NONE}, {T_DOUBLE, O_NONE}, {T_B3, O_NONE}};

typedef struct { int root, count, type, op, inplace; } tcase;

/* Inputs, generated once per (type, op, rank) for maxcount elements: the
 * generator is too slow to call per element in every case. */
static char **input_cache;

static const char *input(int t, int o, int r)
{
    char **slot = &input_cache[((size_t)t * NOPS + (size_t)o) * (size_t)wsize + (size_t)r];
    if (!*slot) {
        *slot = malloc((size_t)td_size(t) * (size_t)(maxcount > 0 ? maxcount : 1));
        td_fill(t, o, r, maxcount, *slot);
    }
    return *slot;
}

static int is_rooted(ct_coll c) { return c == CT_BCAST || c == CT_REDUCE; }
static int has_inplace(ct_coll c) { return c != CT_BCAST; }

static int list_cases(ct_coll c, int k, tcase *out)
{
    int roots[MAXROOTS], nroots = 0, n = 0;
    if (!is_rooted(c)) roots[nroots++] = 0;
    else if (all_roots) for (int r = 0; r < k && r < MAXROOTS; r++) roots[nroots++] = r;
    else {
        int few[3] = {0, k / 2, k - 1};
        for (int i = 0; i < 3; i++)
            if (i == 0 || few[i] != roots[nroots - 1]) roots[nroots++] = few[i];
    }
    int red = c == CT_REDUCE || c == CT_ALLREDUCE;
    int ncomb = red ? 8 : 3;
    for (int ri = 0; ri < nroots; ri++)
        for (int ci = 0; ci < ncounts; ci++)
            for (int m = 0; m < ncomb; m++)
                for (int ip = 0; ip <= has_inplace(c); ip++) {
                    const int *tc = red ? red_combos[m] : move_combos[m];
                    out[n++] = (tcase){roots[ri], counts[ci], tc[0], tc[1], ip};
                }
    return n;
}

/* Expected reduction results over the current communicator (ranks 0..k-1),
 * per combo, extended rank by rank as communicators grow. */
static char *expect[8];
static int expect_k;

static void extend_expect(int k)
{
    if (k < expect_k || expect_k == 0) {
        for (int m = 0; m < 8; m++) td_expect(red_combos[m][0], red_combos[m][1], 1, maxcount, expect[m]);
        expect_k = 1;
    }
    for (; expect_k < k; expect_k++)
        for (int m = 0; m < 8; m++)
            td_fold(red_combos[m][0], red_combos[m][1], expect_k, maxcount, expect[m]);
}

static int check_bytes(const char *got, const char *want, size_t n) { return memcmp(got, want, n) != 0; }

static int guard_ok(const char *p)
{
    for (int i = 0; i < GUARD; i++) if ((unsigned char)p[i] != 0xA5) return 0;
    return 1;
}

/* Sub-communicators are the first k ranks of WORLD, in order. */
static int world_rank(MPI_Comm comm, int r) { (void)comm; return r; }

/* Buffers and call state of one case in flight. */
typedef struct {
    char *sbuf, *rbuf;
    ct_args a;
    ct_request req;
    const char *ran;
    int rc, persistent;
} slot;

/* Fills the slot's buffers and arguments for the case (on this rank). */
static void prepare(ct_coll c, const tcase *tc, MPI_Comm comm, slot *sl)
{
    int k, r, s = td_size(tc->type), n = tc->count;
    MPI_Comm_size(comm, &k);
    MPI_Comm_rank(comm, &r);
    size_t rbytes = (size_t)s * n * (c == CT_ALLGATHER ? k : 1);
    memset(sl->rbuf, 0xA5, rbytes + GUARD);
    memcpy(sl->sbuf, input(tc->type, tc->op, wrank), (size_t)s * n);
    sl->a = (ct_args){sl->sbuf, sl->rbuf, n, td_type(tc->type), td_op(tc->op), tc->root, comm};
    if (c == CT_BCAST && r == tc->root) memcpy(sl->rbuf, sl->sbuf, (size_t)s * n);
    if (tc->inplace && (c != CT_REDUCE || r == tc->root)) {
        memcpy(sl->rbuf + (c == CT_ALLGATHER ? (size_t)s * n * r : 0), sl->sbuf, (size_t)s * n);
        sl->a.sendbuf = MPI_IN_PLACE;
    }
}

/* Returns 1 when this rank sees a wrong result (or an error code). */
static int check(ct_coll c, const tcase *tc, MPI_Comm comm, const slot *sl)
{
    int k, r, s = td_size(tc->type), n = tc->count;
    MPI_Comm_size(comm, &k);
    MPI_Comm_rank(comm, &r);
    size_t rbytes = (size_t)s * n * (c == CT_ALLGATHER ? k : 1);
    const char *sbuf = sl->sbuf, *rbuf = sl->rbuf;
    if (sl->rc != MPI_SUCCESS || !guard_ok(rbuf + rbytes)) return 1;
    if (c == CT_BCAST || c == CT_ALLGATHER) {
        int nb = c == CT_BCAST ? 1 : k;
        for (int b = 0; b < nb; b++) {
            const char *w = input(tc->type, O_NONE, world_rank(comm, c == CT_BCAST ? tc->root : b));
            if (check_bytes(rbuf + (size_t)s * n * b, w, (size_t)s * n)) return 1;
        }
        return 0;
    }
    /* MPI forbids touching the send buffer: check it too */
    if (!tc->inplace || (c == CT_REDUCE && r != tc->root)) {
        if (check_bytes(sbuf, input(tc->type, tc->op, wrank), (size_t)s * n)) return 1;
    }
    if (c == CT_REDUCE && r != tc->root) return 0;
    int m = 0;
    while (red_combos[m][0] != tc->type || red_combos[m][1] != tc->op) m++;
    return check_bytes(rbuf, expect[m], (size_t)s * n);
}

static slot slots[BATCH];

/* Mode nb: cases [first, first+n) in flight together, see the header. */
static void run_batch(const ct_algorithm *alg, const int *params, const tcase *tc, int n,
                      int first, MPI_Comm comm, int *bad, char *lib)
{
    int k, r, got = -1, mine;
    MPI_Request user[2];
    MPI_Comm_size(comm, &k);
    MPI_Comm_rank(comm, &r);
    mine = r;
    MPI_Irecv(&got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &user[0]);
    for (int j = 0; j < n; j++) {
        slot *sl = &slots[j];
        prepare(alg->coll, &tc[j], comm, sl);
        sl->persistent = (first + j) % 3 == 2;
        if (sl->persistent) {
            sl->rc = ct_call_init(alg->coll, alg->name, params, &sl->a, &sl->req, &sl->ran);
            if (sl->rc == MPI_SUCCESS) sl->rc = ct_start(&sl->req);
        } else {
            sl->rc = ct_icall(alg->coll, alg->name, params, &sl->a, &sl->req, &sl->ran);
        }
    }
    MPI_Isend(&mine, 1, MPI_INT, (r + 1) % k, USER_TAG, comm, &user[1]);
    /* one test per batch: every failed test slows SMPI down for the rest of
     * the run (sched.c) */
    int done, t = (first / BATCH) % n;
    if (slots[t].rc == MPI_SUCCESS) slots[t].rc = ct_test(&slots[t].req, &done);
    for (int j = n - 1; j >= 0; j--)
        if (slots[j].rc == MPI_SUCCESS) slots[j].rc = ct_wait(&slots[j].req);
    MPI_Waitall(2, user, MPI_STATUSES_IGNORE);
    int user_ok = got == (r - 1 + k) % k;
    for (int j = 0; j < n; j++) {   /* persistent: run again on fresh buffers */
        slot *sl = &slots[j];
        if (!sl->persistent) continue;
        if (sl->rc == MPI_SUCCESS) {
            prepare(alg->coll, &tc[j], comm, sl);
            sl->rc = ct_start(&sl->req);
            if (sl->rc == MPI_SUCCESS) sl->rc = ct_wait(&sl->req);
        }
        ct_request_free(&sl->req);
    }
    for (int j = 0; j < n; j++) {
        if (check(alg->coll, &tc[j], comm, &slots[j]) || !user_ok) bad[j] = wrank;
        lib[j] = slots[j].ran && strcmp(slots[j].ran, "library") == 0;
    }
}

static void describe(char *out, size_t len, const ct_algorithm *alg, const int *params)
{
    int o = snprintf(out, len, "%s/%s", ct_coll_name(alg->coll), alg->name);
    for (int i = 0; i < alg->nparams && o < (int)len; i++)
        o += snprintf(out + o, len - (size_t)o, " %s=%d", alg->params[i].name, params[i]);
}

static void list_catalogue(void)
{
    for (int i = 0; i < ct_count(); i++) {
        const ct_algorithm *a = ct_get(i);
        printf("%s/%s id=%d: %s\n", ct_coll_name(a->coll), a->name, a->id, a->description);
        for (int j = 0; j < a->nparams; j++) {
            const ct_param *p = &a->params[j];
            printf("    param %s default=%d min=%d max=%d unit=%s probe=", p->name, p->def,
                   p->min, p->max, *p->unit ? p->unit : "-");
            for (int q = 0; q < p->nprobe; q++) printf(q ? ",%d" : "%d", p->probe[q]);
            printf(" : %s\n", p->help);
        }
        for (int t = 0; t < CT_MAX_TUNE && a->tune[t]; t++) printf("    tune %s\n", a->tune[t]);
    }
}

static long passed, failed, declined;

/* One (communicator, algorithm, parameter set) block: all ranks enumerate the
 * same cases, members run them in each mode, WORLD rank 0 (always a member)
 * reports. bad[] and lib[] hold mode m's results at [m * n, (m + 1) * n). */
static void run_block(const ct_algorithm *alg, const int *params, MPI_Comm comm, int k,
                      tcase *cases, int *bad, char *sbuf, char *rbuf)
{
    int n = list_cases(alg->coll, k, cases);
    char *lib = calloc((size_t)n * NMODES + 1, 1);
    for (int i = 0; i < n * NMODES; i++) bad[i] = INT_MAX;
    for (int i = 0; i < n && comm != MPI_COMM_NULL && modes[M_BLOCKING]; i++) {
        slot sl = {.sbuf = sbuf, .rbuf = rbuf};
        if (fault_mode) {
            int r;
            MPI_Comm_rank(comm, &r);
            prepare(alg->coll, &cases[i], comm, &sl);
            ct_test_fault_reduce = r == k - 1;
            sl.rc = ct_call(alg->coll, alg->name, params, &sl.a, &sl.ran);
            ct_test_fault_reduce = 0;
            faults_run += r == k - 1;
            faults_reported += r == k - 1 && sl.rc != MPI_SUCCESS;
        }
        prepare(alg->coll, &cases[i], comm, &sl);
        sl.rc = ct_call(alg->coll, alg->name, params, &sl.a, &sl.ran);
        if (check(alg->coll, &cases[i], comm, &sl)) bad[i] = wrank;
        lib[i] = sl.ran && strcmp(sl.ran, "library") == 0;
    }
    for (int i = 0; i < n && comm != MPI_COMM_NULL && modes[M_NB]; i += BATCH)
        run_batch(alg, params, cases + i, n - i < BATCH ? n - i : BATCH, i, comm,
                  bad + M_NB * n + i, lib + M_NB * n + i);
    if (wrank == 0) MPI_Reduce(MPI_IN_PLACE, bad, n * NMODES, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
    else MPI_Reduce(bad, NULL, n * NMODES, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
    if (wrank == 0) {
        char name[256];
        describe(name, sizeof name, alg, params);
        for (int m = 0; m < NMODES; m++)
            for (int i = 0; i < n && modes[m]; i++) {
                const tcase *tc = &cases[i];
                declined += lib[m * n + i];
                if (bad[m * n + i] == INT_MAX) { passed++; continue; }
                failed++;
                printf("FAIL %s mode=%s comm=%d root=%d count=%d type=%s op=%s inplace=%d ran=%s "
                       "first_bad_world_rank=%d\n", name, mode_name[m], k, tc->root, tc->count,
                       td_type_name[tc->type], td_op_name[tc->op], tc->inplace,
                       lib[m * n + i] ? "library" : alg->name, bad[m * n + i]);
            }
        fflush(stdout);
    }
    free(lib);
}

/* API checks on MPI_COMM_SELF (each rank alone): lookups, errors, decline
 * labels. A failure prints a FAIL line and counts as a failed case. */
static void api_fail(const char *what)
{
    if (wrank == 0) printf("FAIL api: %s\n", what);
    failed++;
}

/* user op for the strided 2-int type (predefined ops take predefined types only) */
static void vsum(void *in, void *io, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++) {
        ((int *)io)[4 * i] += ((int *)in)[4 * i];
        ((int *)io)[4 * i + 2] += ((int *)in)[4 * i + 2];
    }
}

static void api_checks(void)
{
    int x[4] = {1, 2, 3, 4}, y[8] = {0}, big[CT_MAX_PARAMS];
    const char *ran = "unset";
    MPI_Datatype vec;
    MPI_Op vop;
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    MPI_Op_create(vsum, 1, &vop);
    ct_args a = {x, y, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_SELF};
    for (int c = 0; c < CT_NCOLLS; c++)
        if (ct_coll_from_name(ct_coll_name((ct_coll)c)) != c) api_fail("collective names");
    if (ct_call(CT_BCAST, "no_such_algorithm", NULL, &a, &ran) != MPI_ERR_ARG || ran)
        api_fail("unknown name must return MPI_ERR_ARG and run nothing");
    for (int i = 0; i < ct_count(); i++) {
        const ct_algorithm *alg = ct_get(i);
        if (ct_find(alg->coll, alg->name) != alg) api_fail(alg->name);
        for (int j = 0; j < alg->nparams; j++) {
            for (int q = 0; q < alg->nparams; q++) big[q] = alg->params[q].def;
            big[j] = alg->params[j].max + 1;
            if (ct_call(alg->coll, alg->name, big, &a, &ran) != MPI_ERR_ARG)
                api_fail("parameter above max must return MPI_ERR_ARG");
        }
        ct_args v = {x, y, 1, vec, MPI_SUM, 0, MPI_COMM_SELF};
        if (alg->supports(&v) == NULL) api_fail("non-contiguous datatype must be declined");
        /* a declined call runs the library and says so, with the right result */
        v.op = vop;
        memset(y, 0, sizeof y);
        if (ct_call(alg->coll, alg->name, NULL, &v, &ran) != MPI_SUCCESS || !ran ||
            strcmp(ran, "library") || (alg->coll != CT_BCAST && (y[0] != 1 || y[2] != 3)))
            api_fail("declined call must run the library and be labelled 'library'");
        ct_request req;   /* the same through the non-blocking entry */
        memset(y, 0, sizeof y);
        if (ct_icall(alg->coll, alg->name, NULL, &v, &req, &ran) != MPI_SUCCESS || !ran ||
            strcmp(ran, "library") || ct_wait(&req) != MPI_SUCCESS ||
            (alg->coll != CT_BCAST && (y[0] != 1 || y[2] != 3)))
            api_fail("declined ct_icall must run the library and be labelled 'library'");
        if (ct_icall(alg->coll, "no_such_algorithm", NULL, &a, &req, &ran) != MPI_ERR_ARG || ran ||
            ct_wait(&req) != MPI_SUCCESS)
            api_fail("ct_icall of an unknown name must return MPI_ERR_ARG and start nothing");
    }
    MPI_Type_free(&vec);
    MPI_Op_free(&vop);
    /* engine: a persistent parent whose first round runs a child schedule;
     * the second round folds what the child received, twice */
    int in[4] = {1, 2, 3, 4}, mid[4], out[4];
    ct_sched *parent, *child;
    ct_sched_create(MPI_COMM_SELF, &parent);
    ct_sched_create(MPI_COMM_SELF, &child);
    ct_sched_recv(child, mid, 4, MPI_INT, 0);
    ct_sched_send(child, in, 4, MPI_INT, 0);
    ct_sched_child(parent, child);
    ct_sched_copy(parent, out, in, sizeof in);
    ct_sched_round(parent);
    ct_sched_reduce(parent, mid, out, 4, MPI_INT, MPI_SUM);
    ct_sched_reduce(parent, mid, out, 4, MPI_INT, MPI_SUM);
    for (int rep = 0; rep < 2; rep++) {
        memset(mid, 0, sizeof mid);
        memset(out, 0, sizeof out);
        if (ct_sched_start(parent) != MPI_SUCCESS || ct_sched_wait(parent) != MPI_SUCCESS ||
            out[0] != 3 || out[3] != 12)
            api_fail("schedule with a child, started twice, must fold the child's data");
    }
    ct_sched_free(&parent);
}

static void parse_counts(const char *s)
{
    ncounts = 0; maxcount = 0;
    for (char *e; *s && ncounts < MAXCOUNTS; s = *e ? e + 1 : e) {
        counts[ncounts] = (int)strtol(s, &e, 10);
        if (counts[ncounts] > maxcount) maxcount = counts[ncounts];
        ncounts++;
    }
}

int main(int argc, char **argv)
{
    int maxsub = INT_MAX, list = 0;
    long timing = -1;
    const char *filter = NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-l")) list = 1;
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) maxsub = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) all_roots = !strcmp(argv[++i], "all");
        else if (!strcmp(argv[i], "-c") && i + 1 < argc) parse_counts(argv[++i]);
        else if (!strcmp(argv[i], "-a") && i + 1 < argc) filter = argv[++i];
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) timing = atol(argv[++i]);
        else if (!strcmp(argv[i], "-d")) probes = 0;
        else if (!strcmp(argv[i], "-F")) fault_mode = 1;
        else if (!strcmp(argv[i], "-b") && i + 1 < argc) base_values = argv[++i];
        else if (!strcmp(argv[i], "-m") && i + 1 < argc) {
            const char *m = argv[++i];
            modes[M_BLOCKING] = !strcmp(m, "blocking") || !strcmp(m, "both");
            modes[M_NB] = !strcmp(m, "nb") || !strcmp(m, "both");
        }
        else {
            if (wrank == 0) fprintf(stderr, "usage: algotest [-l] [-s MAXSUB] [-r all|few] "
                                            "[-c C1,C2,..] [-a coll[/name]] [-d] [-m blocking|nb|both] "
                                            "[-t BYTES] [-b NAME=V,..] [-F]\n");
            MPI_Finalize();   /* every rank parses the same arguments */
            return 2;
        }
    }
    const char *bad_name = unknown_base_name(filter);
    if (bad_name) {
        if (wrank == 0) fprintf(stderr, "algotest: -b %s: '%s' is not NAME=VALUE for a parameter of "
                                        "the algorithms selected by -a %s\n", base_values, bad_name,
                                filter ? filter : "(all)");
        MPI_Finalize();   /* every rank gets here (same arguments): exit 2 (SMPI's MPI_Abort exits 0) */
        return 2;
    }
    if (list && ct_catalog_problem()) {
        if (wrank == 0) fprintf(stderr, "algotest: %s\n", ct_catalog_problem());
        MPI_Finalize();
        return 1;
    }
    if (list || timing >= 0) {
        if (list && wrank == 0) list_catalogue();
        if (timing >= 0) timing_run(timing, filter);
        MPI_Finalize();
        return 0;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    td_init();
    api_checks();
    input_cache = calloc((size_t)NTYPES * NOPS * (size_t)wsize, sizeof(char *));
    size_t cap = (size_t)(maxcount > 0 ? maxcount : 1) * 8;
    char *sbuf = malloc(cap), *rbuf = malloc(cap * (size_t)wsize + GUARD);
    for (int j = 0; j < BATCH; j++) {
        slots[j].sbuf = malloc(cap);
        slots[j].rbuf = malloc(cap * (size_t)wsize + GUARD);
    }
    for (int m = 0; m < 8; m++) expect[m] = malloc(cap);
    tcase *cases = malloc(sizeof(tcase) * (size_t)(MAXROOTS > wsize ? wsize : MAXROOTS) * MAXCOUNTS * 16);
    int *bad = malloc(sizeof(int) * (size_t)(wsize > 3 ? wsize : 3) * MAXCOUNTS * 16 * NMODES);
    int nsub = maxsub < wsize ? maxsub : wsize;
    for (int ci = 1; ci <= nsub + 1; ci++) {
        MPI_Comm comm = MPI_COMM_WORLD;
        int k = ci <= nsub ? ci : wsize;
        if (ci <= nsub) MPI_Comm_split(MPI_COMM_WORLD, wrank < k ? 0 : MPI_UNDEFINED, wrank, &comm);
        if (comm != MPI_COMM_NULL) extend_expect(k);
        if (comm != MPI_COMM_NULL) MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);   /* -F */
        for (int ai = 0; ai < ct_count(); ai++) {
            const ct_algorithm *alg = ct_get(ai);
            char full[128];
            snprintf(full, sizeof full, "%s/%s", ct_coll_name(alg->coll), alg->name);
            if (filter && strcmp(filter, full) && strcmp(filter, ct_coll_name(alg->coll))) continue;
            int params[CT_MAX_PARAMS];
            int base[CT_MAX_PARAMS];
            for (int j = 0; j < alg->nparams; j++)
                params[j] = base[j] = base_value(alg->params[j].name, alg->params[j].def);
            run_block(alg, params, comm, k, cases, bad, sbuf, rbuf);
            for (int t = 0; t < CT_MAX_TUNE && alg->tune[t] && probes; t++) {
                int tuned[CT_MAX_PARAMS];
                if (ct_params_parse(alg, alg->tune[t], tuned) != 0) {
                    if (wrank == 0) printf("FAIL %s: bad tune preset '%s'\n", full, alg->tune[t]);
                    failed++;
                    continue;
                }
                run_block(alg, tuned, comm, k, cases, bad, sbuf, rbuf);
            }
            for (int j = 0; j < alg->nparams && probes; j++)
                for (int q = 0; q < alg->params[j].nprobe; q++) {
                    params[j] = alg->params[j].probe[q];
                    run_block(alg, params, comm, k, cases, bad, sbuf, rbuf);
                    params[j] = base[j];
                }
        }
        if (comm != MPI_COMM_NULL && comm != MPI_COMM_WORLD) MPI_Comm_free(&comm);
    }
    long f[2] = {faults_run, faults_reported}, fsum[2];
    MPI_Reduce(f, fsum, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    faults_run = fsum[0], faults_reported = fsum[1];
    if (wrank == 0) {
        printf("library fallback ran in %ld cases (declined by the algorithm)\n", declined);
        if (fault_mode) printf("injected faults: %ld calls, error returned on the failing rank in %ld\n",
                               faults_run, faults_reported);
        printf("%ld passed, %ld failed\n", passed, failed);
    }
    free(sbuf); free(rbuf); free(cases); free(bad);
    for (int j = 0; j < BATCH; j++) { free(slots[j].sbuf); free(slots[j].rbuf); }
    for (int m = 0; m < 8; m++) free(expect[m]);
    for (size_t i = 0; i < (size_t)NTYPES * NOPS * (size_t)wsize; i++) free(input_cache[i]);
    free(input_cache);
    td_free();
    ct_hier_release(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
