/* Online mode: per call, the arm of the call's block drawn from the block's
 * probabilities by colltune's own counter-based generator, timed on every rank
 * of the communicator (at most COLLTUNE_ONLINE_SAMPLERS: then the node leaders)
 * for the first BUDGET calls of each (communicator, block), then the best arm
 * (docs/online-native.md: why every rank of a communicator draws the same arm
 * without any per-call message).
 *
 * Memory per rank: per tracked communicator (at most MAX_COMMS) ~250 bytes,
 * per used (communicator, block) 88 + budget bytes, on timing ranks another
 * 16 x budget bytes (start, end) and on the communicator's rank 0 8 x budget
 * more (bytes): 3.4 KiB, 5 KiB on rank 0, at budget 200; at most 64 x 24 cells:
 * ~5 MiB (7.5 MiB on rank 0) at the default budget. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE                 /* syscall, gmtime_r, flock */
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "clock.h"
#include "online.h"
#ifdef COLLTUNE_SMPI
#include <simgrid/engine.h>
#endif

#define MAX_COMMS 64                  /* live communicators tracked per rank; later ones: library */
#define PINGS 10

int ct_online_on;
ct_online_job ct_online;
/* tracked communicators: the live ones (at most MAX_COMMS) and, on their sampler 0, the
 * freed ones whose reduced samples wait for MPI_Finalize (ct_online_comm_retire) */
static ct_online_comm **comms;
static int ncomms, cap_comms, nlive, key_counter;
static ct_online_block defaults[CT_NCOLLS][CT_ONLINE_NCLASS];   /* compiled presets */
static ct_rule marker[CT_NCOLLS];          /* what choose_bytes returns: "online decides" */
static double clock_offset;                /* this rank's clock minus world rank 0's (SMPI: 0) */

int ct_online_ncomms(void) { return ncomms; }
ct_online_comm *ct_online_get_comm(int i) { return comms[i]; }

/* Seconds on world rank 0's clock (clock_sync; SMPI's clock is global, offset 0) */
static double now(void)
{
    return ct_clock() - clock_offset;
}

/* What a sampled call stores: the TSC on x86-64 (half a clock_gettime here), mapped to
 * now()'s seconds later by the line through two (stamp, now) pairs: one at MPI_Init,
 * one when converting. Elsewhere now() itself. */
#if defined(__x86_64__) && !defined(COLLTUNE_SMPI)
#include <x86intrin.h>
static uint64_t anchor_raw;
static double anchor_t;
static inline double stamp(void) { return (double)(__rdtsc() - anchor_raw); }
static void anchor(void) { anchor_t = now(), anchor_raw = __rdtsc(); }
void ct_online_seconds(ct_online_cell *x)
{
    if (!x->t || x->in_seconds) return;
    double t = now(), raw = stamp(), scale = raw > 0 ? (t - anchor_t) / raw : 0;
    for (uint32_t i = 0; i < 2 * x->sampled; i++) x->t[i] = anchor_t + x->t[i] * scale;
    x->in_seconds = 1;
}
#else
static inline double stamp(void) { return now(); }
static void anchor(void) {}
void ct_online_seconds(ct_online_cell *x) { x->in_seconds = 1; }
#endif

/* splitmix64's finaliser: a counter-based generator needs only a good mix */
static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [0, 1) from (seed, the state's run count, communicator key, collective,
 * class, call index) only: all agreed; the run count makes each run's draws new (with
 * it left out, every run drew its i-th call of a block at the same u) */
static double uniform(uint64_t key, int coll, int cls, uint32_t idx)
{
    uint64_t h = mix(ct_online.seed ^ mix((uint64_t)ct_online.state.runs ^
                     mix(key ^ mix(((uint64_t)coll << 40 | (uint64_t)cls << 32 | idx)))));
    return (double)(h >> 11) * 0x1.0p-53;
}

const ct_online_block *ct_online_block_of(int coll, int nodes, int ppn, int cls)
{
    const ct_online_block *b = ct_online_state_find(&ct_online.state, coll, nodes, ppn, cls);
    if (b) return b;
    ct_online_block *d = &defaults[coll][cls];
    d->nodes = nodes, d->ppn = ppn;        /* only read for this communicator's block */
    return d;
}

/* ---- communicators --------------------------------------------------------------- */
/* Collective on comm (info_of): the key is (world rank, counter) of comm's rank
 * 0, sent to all members; "tracked" needs room on every member. */
void *ct_online_comm_init(MPI_Comm comm, int lrank, int before, int size, int nodes, int ppn)
{
    int rank, in[3], out[3], leader = lrank == 0;
    PMPI_Comm_rank(comm, &rank);
    in[0] = rank == 0 ? ct_online.rank : -1;
    in[1] = rank == 0 ? key_counter : -1;
    in[2] = nlive == MAX_COMMS;
    key_counter++;
    PMPI_Allreduce(in, out, 3, MPI_INT, MPI_MAX, comm);
    if (before < 0 && size > ct_online.max_samplers) {   /* agreed: only a capped one needs it */
        PMPI_Exscan(&leader, &before, 1, MPI_INT, MPI_SUM, comm);
        if (rank == 0) before = 0;         /* Exscan leaves rank 0's output undefined */
    }
    if (out[2]) {                          /* someone is full: the library, on every rank */
        static int warned;
        if (rank == 0 && !warned++)
            fprintf(stderr, "colltune: warning: online mode tracks at most %d communicators "
                    "in use at once per rank (a freed one makes room); this one runs the library's "
                    "collectives, untuned and unsampled\n", MAX_COMMS);
        return NULL;
    }
    if (ncomms == cap_comms) {            /* room for the freed ones kept (ct_online_comm_retire) */
        ct_online_comm **p = realloc(comms, (size_t)(2 * cap_comms + MAX_COMMS) * sizeof *p);
        if (!p) PMPI_Abort(MPI_COMM_WORLD, MPI_ERR_NO_MEM);   /* a silent skip would split the ranks */
        comms = p, cap_comms = 2 * cap_comms + MAX_COMMS;
    }
    ct_online_comm *c = calloc(1, sizeof *c);
    if (!c) PMPI_Abort(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
    c->key = (uint64_t)out[0] << 32 | (uint32_t)out[1];
    c->size = size, c->nodes = nodes, c->ppn = ppn;
    if (size <= ct_online.max_samplers) c->sampler = rank;            /* every rank (default) */
    else c->sampler = leader && before < ct_online.max_samplers ? before : -1;   /* capped */
    comms[ncomms++] = c, nlive++;
    return c;
}

const ct_rule *ct_online_rule(ct_coll coll, void *slot, long long bytes)
{
    ct_online_comm *c = slot;
    if (!c) return NULL;                   /* not tracked: the library, on every rank */
    ct_online_cell *x = c->cell[coll][ct_online_class(bytes)];
    if (x && x->best >= 0 && CT_ONLINE_IS_LIBRARY(&x->blk->arm[x->best]) && !ct_online.log) {
        x->calls++;                        /* the library won: straight to it */
        return NULL;
    }
    return &marker[coll];
}

static ct_online_cell *cell_new(ct_online_comm *c, int coll, int cls)
{
    ct_online_cell *x = calloc(1, sizeof *x);
    size_t b = (size_t)ct_online.budget;
    if (!x || !(x->arm_of = malloc(b + 1)) ||
        (c->sampler >= 0 && !(x->t = malloc((2 * b + 1) * sizeof *x->t))) ||
        (c->sampler == 0 && !(x->bytes = malloc((b + 1) * sizeof *x->bytes))))
        PMPI_Abort(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
    memset(x->arm_of, 0, b + 1);           /* touched now: no page faults in sampled calls */
    if (x->t) memset(x->t, 0, (2 * b + 1) * sizeof *x->t);
    if (x->bytes) memset(x->bytes, 0, (b + 1) * sizeof *x->bytes);
    x->coll = coll, x->cls = cls, x->best = -1, x->lib_first = -1;
    x->blk = ct_online_block_of(coll, c->nodes, c->ppn, cls);
    if (!ct_online.budget) {               /* nothing to sample: the state's choice, or draws */
        int best = ct_online_choice(x->blk);
        x->best = best >= 0 ? best : -2;
    }
    /* The library's own arm is timed first, on a cell's first call (the same call on
     * every member), while the state never timed it: the library costs no exploration,
     * and every later choice is a measured comparison with the library's default (a
     * block whose draws missed it had locked onto colltune's arms; a measured block in
     * that case is held on the library for a run: ct_online_conservative). */
    for (int i = 0; ct_online.budget && !x->blk->hold && i < x->blk->narms; i++)
        if (CT_ONLINE_IS_LIBRARY(&x->blk->arm[i]) && x->blk->arm[i].n < 1) x->lib_first = i;
    return c->cell[coll][cls] = x;
}

/* ---- the draw ---------------------------------------------------------------------- */
static int arm_ok(const ct_online_arm *arm, const ct_args *a)
{
    return !arm->alg || (arm->alg->supports(a) == NULL && (arm->alg->run || arm->alg->schedule));
}

/* the draw's weight of arm i: lambda of p, the rest on the block's safe arm, which
 * also takes the gated arms' share; a held block only its safe arm (the library) */
static inline double weight(const ct_online_block *b, int i, double sum)
{
    if (!b->safe) return b->arm[i].p;
    if (b->hold) return b->safe == i + 1 ? sum : 0;
    if (b->gated > 0 && b->arm[i].alg) return 0;
    double w = ct_online.lambda * b->arm[i].p;
    return b->safe == i + 1 ? w + (1.0 - ct_online.lambda) * sum + ct_online.lambda * b->gated : w;
}

/* Inverse CDF at u over the arms with weight > 0; an arm that declines these
 * arguments is dropped and the same u is used over the others: supports()
 * reads only agreed values, so every rank drops the same arms. */
static int draw(const ct_online_block *b, double u, const ct_args *a)
{
    double sum = 0, acc = 0, total = 0;
    int pick = -1;
    for (int i = 0; i < b->narms; i++) sum += b->arm[i].p;
    for (int i = 0; i < b->narms && pick < 0; i++)
        if ((acc += weight(b, i, sum)) > u * sum) pick = i;
    if (pick < 0) pick = b->narms - 1;
    if (arm_ok(&b->arm[pick], a)) return pick;
    acc = 0;
    for (int i = 0; i < b->narms; i++) total += arm_ok(&b->arm[i], a) ? weight(b, i, sum) : 0;
    if (!(total > 0)) return -1;           /* nothing runs these arguments: library */
    pick = -1;
    for (int i = 0; i < b->narms; i++)
        if (arm_ok(&b->arm[i], a) && weight(b, i, sum) > 0) {
            pick = i;
            if ((acc += weight(b, i, sum)) > u * total) break;
        }
    return pick;
}

/* The budget is spent: one allreduce over the communicator gives every rank
 * each sampled call's latest start and end over all timed ranks; with the
 * agreed state they all compute the same means, hence the same choice. The
 * reduced times are kept: at MPI_Finalize only the communicator's sampler 0
 * sends them. Several cells (a freed communicator's) go in the same allreduce:
 * per cell 2n times then n setup flags; the caller frees the result. */
static double *reduce_times(ct_online_cell **xs, int k, MPI_Comm comm)
{
    size_t total = 0;
    for (int j = 0; j < k; j++) total += 3 * (size_t)xs[j]->sampled;
    double *t = malloc((total + 1) * sizeof *t), *p = t;
    if (!t) PMPI_Abort(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
    for (int j = 0; j < k; j++) {
        ct_online_cell *x = xs[j];
        int n = (int)x->sampled;
        ct_online_seconds(x);
        for (int i = 0; i < 2 * n; i++) p[i] = x->t ? x->t[i] : -1e300;
        for (int i = 0; i < n; i++) p[2 * n + i] = x->arm_of[i] & CT_ONLINE_SETUP ? 1 : 0;
        p += 3 * n;
    }
    PMPI_Allreduce(MPI_IN_PLACE, t, (int)total, MPI_DOUBLE, MPI_MAX, comm);
    p = t;
    for (int j = 0; j < k; j++) {
        ct_online_cell *x = xs[j];
        int n = (int)x->sampled;
        for (int i = 0; i < n; i++)
            if (p[2 * n + i] > 0) x->arm_of[i] |= CT_ONLINE_SETUP;   /* some rank built state */
        if (x->t) memcpy(x->t, p, 2 * (size_t)n * sizeof *t), x->reduced = 1;
        p += 3 * n;
    }
    return t;
}

static void decide(ct_online_cell *x, MPI_Comm comm)
{
    int n = (int)x->sampled;
    double *t = reduce_times(&x, 1, comm), *setup = t + 2 * n;
    ct_online_block merged = *x->blk;
    double sum[CT_ONLINE_MAX_ARMS] = {0}, clean[CT_ONLINE_MAX_ARMS] = {0}, all[CT_ONLINE_MAX_ARMS] = {0};
    for (int i = 0; i < n; i++) {
        int arm = x->arm_of[i] & ~CT_ONLINE_SETUP;
        all[arm]++;
        if (!(setup[i] > 0)) sum[arm] += t[2 * i + 1] - t[2 * i], clean[arm]++;
    }
    for (int i = 0; i < n; i++) {          /* a setup call amortised as at MPI_Finalize */
        int arm = x->arm_of[i] & ~CT_ONLINE_SETUP;
        double cost = t[2 * i + 1] - t[2 * i], m = clean[arm] > 0 ? sum[arm] / clean[arm]
                                                  : x->blk->arm[arm].n > 0 ? x->blk->arm[arm].mean : 0;
        if (setup[i] > 0) cost = ct_online_amortised(cost, m, all[arm], x->calls);
        ct_online_arm *a = &merged.arm[arm];
        ct_online_welford(&a->n, &a->mean, &a->m2, 1, cost, 0);
    }
    free(t);
    int best = ct_online_choice(&merged);
    /* nothing measured 3 times: the rest of the run's calls are not timed, so drawing
     * them would cost without teaching anything: the library, when the block lists it */
    for (int i = 0; best < 0 && i < merged.narms; i++)
        if (CT_ONLINE_IS_LIBRARY(&merged.arm[i])) best = i;
    x->best = best >= 0 ? best : -2;
}

static void cell_free(ct_online_cell *x)
{
    free(x->arm_of), free(x->t), free(x->bytes), free(x);
}

/* a freed communicator whose cells hold at most this many samples still within budget
 * keeps them raw on its timing ranks (an allreduce would cost more than they weigh);
 * more are reduced over its members in one allreduce */
#define RETIRE_RAW_MAX 32

static void cell_shrink(ct_online_cell *x)      /* to its samples: nothing more is sampled */
{
    size_t n = x->sampled ? x->sampled : 1;
    void *p;
    if (x->t && (p = realloc(x->t, 2 * n * sizeof *x->t))) x->t = p;
    if ((p = realloc(x->arm_of, n))) x->arm_of = p;
    if (x->bytes && (p = realloc(x->bytes, n * sizeof *x->bytes))) x->bytes = p;
}

/* MPI_Comm_free (collective: every member is here, with the same cells): the slot is
 * free for a new communicator. Each rank keeps what MPI_Finalize will gather from it,
 * as for a live communicator: its sampler 0 every cell (summaries, reduced times), the
 * other timing ranks their cells still within budget. Past RETIRE_RAW_MAX samples those
 * are reduced now (the decision is agreed: the same samples on every member), so only
 * sampler 0 keeps anything. */
void ct_online_comm_retire(void *slot, MPI_Comm comm)
{
    ct_online_comm *c = slot;
    ct_online_cell *open[CT_NCOLLS * CT_ONLINE_NCLASS];
    int k = 0, kept = 0;
    long long n = 0;
    if (!c) return;
    for (int coll = 0; coll < CT_NCOLLS; coll++)       /* the same cells, in order, on every member */
        for (int cls = 0; cls < CT_ONLINE_NCLASS; cls++) {
            ct_online_cell *x = c->cell[coll][cls];
            if (x && x->best == -1 && x->sampled > 0) open[k++] = x, n += x->sampled;
        }
    if (k && n > RETIRE_RAW_MAX) free(reduce_times(open, k, comm));   /* one allreduce */
    for (int coll = 0; coll < CT_NCOLLS; coll++)
        for (int cls = 0; cls < CT_ONLINE_NCLASS; cls++) {
            ct_online_cell *x = c->cell[coll][cls];
            if (!x) continue;
            if (ct_online_cell_gathered(c, x)) cell_shrink(x), kept++;
            else cell_free(x), c->cell[coll][cls] = NULL;
        }
    nlive--;
    if (kept) return;                     /* gathered at MPI_Finalize */
    for (int i = 0; i < ncomms; i++)
        if (comms[i] == c) comms[i] = comms[--ncomms];
    free(c);
}

static int run_arm(ct_coll coll, const ct_online_arm *arm, const ct_args *a, const char **ran)
{
    if (!arm || !arm->alg) {
        *ran = "library";                  /* also "mpich:<name>": the library's traffic */
        return arm && arm->lib ? ct_online_libarm_run(coll, arm->lib, a) : ct_library_call(coll, a);
    }
    return ct_call(coll, arm->alg->name, arm->params, a, ran);
}

int ct_online_call(ct_coll coll, const ct_args *a, void *slot, long long bytes, const char **ran)
{
    ct_online_comm *c = slot;
    int rc, pick;
    int cls = ct_online_class(bytes);
    ct_online_cell *x = c->cell[coll][cls];
    if (__builtin_expect(!x, 0)) x = cell_new(c, coll, cls);
    uint32_t idx = x->calls++;
    if (x->best >= 0) {                    /* after the budget: two loads and a branch more */
        pick = x->best;
        rc = run_arm(coll, &x->blk->arm[pick], a, ran);
    } else {
        if (__builtin_expect(x->lib_first >= 0, 0))   /* the library's arm, timed first */
            pick = x->lib_first, x->lib_first = -1;
        else
            pick = draw(x->blk, uniform(c->key, coll, cls, idx), a);
        const ct_online_arm *arm = pick >= 0 ? &x->blk->arm[pick] : NULL;
        if (x->best == -1 && pick >= 0) {
            uint32_t s = x->sampled;
            unsigned long setups = ct_setup_events;
            if (x->t) x->t[2 * s] = stamp();
            rc = run_arm(coll, arm, a, ran);
            if (x->t) x->t[2 * s + 1] = stamp();
            if (x->bytes) x->bytes[s] = bytes;
            x->arm_of[s] = (uint8_t)(pick | (ct_setup_events != setups ? CT_ONLINE_SETUP : 0));
            if (++x->sampled == (uint32_t)ct_online.budget) decide(x, a->comm);
        } else {
            rc = run_arm(coll, arm, a, ran);
        }
    }
    if (ct_online.log)
        fprintf(ct_online.log, "%016llx %s %d %u %s\n", (unsigned long long)c->key,
                ct_coll_name(coll), cls, idx,
                pick >= 0 && ((*ran && strcmp(*ran, "library")) || x->blk->arm[pick].lib)
                    ? x->blk->arm[pick].id : "library");
    return rc;
}

/* ---- set-up ------------------------------------------------------------------------ */
static uint64_t fnv_text(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static long env_long(const char *var, long def, long lo, long hi)
{
    const char *s = getenv(var);
    char *end;
    if (!s || !*s) return def;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) {
        if (ct_online.rank == 0)
            fprintf(stderr, "colltune: warning: %s=%s is not an integer in %ld..%ld; using %ld\n",
                    var, s, lo, hi, def);
        return def;
    }
    return v;
}

/* Offsets to world rank 0's clock: node leaders ping-pong with rank 0 (best
 * of PINGS round trips); every other rank of a node (same CLOCK_MONOTONIC)
 * receives its leader's offset, so every rank's stamps are on one clock. */
static void clock_sync(void)
{
#ifndef COLLTUNE_SMPI
    MPI_Comm node, leaders;
    int lrank = 0, lr = 0, nl = 1;
    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    PMPI_Comm_rank(node, &lrank);
    PMPI_Comm_split(MPI_COMM_WORLD, lrank == 0 ? 0 : MPI_UNDEFINED, 0, &leaders);
    if (leaders != MPI_COMM_NULL) {
        PMPI_Comm_rank(leaders, &lr);
        PMPI_Comm_size(leaders, &nl);
        for (int r = 1; r < nl; r++) {
            if (lr == 0) {
                double best = 1e300, off = 0, tr;
                for (int k = 0; k < PINGS; k++) {
                    double t0 = now();
                    PMPI_Sendrecv(&t0, 1, MPI_DOUBLE, r, 71, &tr, 1, MPI_DOUBLE, r, 72, leaders, MPI_STATUS_IGNORE);
                    double t1 = now();
                    if (t1 - t0 < best) best = t1 - t0, off = tr - (t0 + t1) / 2;
                }
                PMPI_Send(&off, 1, MPI_DOUBLE, r, 73, leaders);
            } else if (lr == r) {
                for (int k = 0; k < PINGS; k++) {
                    double t0;
                    PMPI_Recv(&t0, 1, MPI_DOUBLE, 0, 71, leaders, MPI_STATUS_IGNORE);
                    double tr = now();
                    PMPI_Send(&tr, 1, MPI_DOUBLE, 0, 72, leaders);
                }
                PMPI_Recv(&clock_offset, 1, MPI_DOUBLE, 0, 73, leaders, MPI_STATUS_IGNORE);
            }
        }
        PMPI_Comm_free(&leaders);
    }
    PMPI_Bcast(&clock_offset, 1, MPI_DOUBLE, 0, node);
    PMPI_Comm_free(&node);
#endif
}

/* World rank 0 reads state.txt and checks it; every rank parses the text rank
 * 0 sends (empty when unusable), so all hold the same state. */
static void load_state(void)
{
    char path[4200], err[8192] = "";
    char *text = NULL;
    int len = 0;
    snprintf(path, sizeof path, "%s/state.txt", ct_online.dir);
    if (ct_online.rank == 0) {
        FILE *f = fopen(path, "rb");
        int open_errno = errno;
        if (f) {
            fseek(f, 0, SEEK_END);
            long n = ftell(f);
            fseek(f, 0, SEEK_SET);
            text = calloc((size_t)(n > 0 ? n : 0) + 1, 1);
            if (text && fread(text, 1, (size_t)n, f) == (size_t)n && strlen(text) == (size_t)n) {
                ct_online_state st;
                if (ct_online_state_parse(text, path, &st, err, sizeof err) != 0) {
                    ct_online.state_problem = 1;
                } else if (strcmp(st.fingerprint, ct_online.fingerprint)) {
                    ct_online.state_problem = 2;
                    snprintf(err, sizeof err, "%s:2: fingerprint %s is another library, platform or "
                             "catalogue's (this job: %s; give each library its own state folder)",
                             path, st.fingerprint, ct_online.fingerprint);
                }
                if (!ct_online.state_problem) ct_online_state_free(&st);
            } else {
                ct_online.state_problem = 1;
                snprintf(err, sizeof err, "%s:0: cannot read it as text", path);
            }
            fclose(f);
            if (ct_online.state_problem) {
                fprintf(stderr, "colltune: warning: COLLTUNE_ONLINE: %s; state ignored, this run "
                        "draws from the default arms, and at MPI_Finalize the file is kept as "
                        "%s.%s-<time> and a new state started\n", err, path,
                        ct_online.state_problem == 1 ? "bad" : "foreign");
                text[0] = '\0';
            }
            len = text ? (int)strlen(text) : 0;
        } else if (open_errno != ENOENT && lstat(path, &(struct stat){0}) == 0) {
            /* there but unreadable (another user's 0600 file) */
            fprintf(stderr, "colltune: warning: COLLTUNE_ONLINE: %s: cannot read: %s; this run "
                    "draws from the default arms\n", path, strerror(open_errno));
        }
    }
    PMPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (ct_online.rank != 0 && !(text = calloc((size_t)len + 1, 1))) PMPI_Abort(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
    if (len) PMPI_Bcast(text, len, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (len) ct_online_state_parse(text, path, &ct_online.state, err, sizeof err);
    free(text);
}

int ct_online_init(int world_rank, int thread_multiple, int other_sources)
{
    const char *dir = getenv("COLLTUNE_ONLINE"), *logdir = getenv("COLLTUNE_ONLINE_LOG");
    char agreed[4400];
    int in[3], out[3];
    ct_online.rank = world_rank;
    /* one switch for the whole job: a variable set on some ranks only turns it off; the
     * thread level is each rank's own (MPI_Init_thread may give ranks different ones),
     * so it is agreed by the same reduction (MIN of -level: any rank's MULTIPLE turns
     * online mode off everywhere; a rank returning alone had left the others in the
     * fingerprint's allreduce below) */
    snprintf(agreed, sizeof agreed, "%s|%s|%s|%s|%s|%s", dir ? dir : "", getenv("COLLTUNE_ONLINE_BUDGET"),
             getenv("COLLTUNE_ONLINE_SAMPLERS"), getenv("COLLTUNE_ONLINE_SEED"), logdir ? "log" : "",
             getenv("COLLTUNE_ONLINE_RISK"));
    in[0] = (int)(mix(fnv_text(agreed)) & 0x7fffffff), in[1] = -in[0], in[2] = -(thread_multiple != 0);
    PMPI_Allreduce(in, out, 3, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (out[0] != -out[1]) {
        if (world_rank == 0)
            fprintf(stderr, "colltune: warning: COLLTUNE_ONLINE* differ between ranks; online mode off\n");
        return 0;
    }
    if (!dir || !*dir) return 0;
    if (out[2] < 0) {
        if (world_rank == 0)
            fprintf(stderr, "colltune: warning: COLLTUNE_ONLINE: not under MPI_THREAD_MULTIPLE "
                    "(on some rank; one generator state per communicator is not thread-safe); "
                    "online mode off on every rank\n");
        return 0;
    }
    if (other_sources && world_rank == 0)
        fprintf(stderr, "colltune: warning: COLLTUNE_ONLINE is set: COLLTUNE_RULES and "
                "COLLTUNE_FORCE are ignored\n");
    PMPI_Comm_size(MPI_COMM_WORLD, &ct_online.size);
    snprintf(ct_online.dir, sizeof ct_online.dir, "%s", dir);
    ct_online.budget = (int)env_long("COLLTUNE_ONLINE_BUDGET", 200, 0, 100000);
    ct_online.max_samplers = (int)env_long("COLLTUNE_ONLINE_SAMPLERS", 1 << 30, 1, 1 << 30);
    ct_online.seed = (uint64_t)env_long("COLLTUNE_ONLINE_SEED", 0, 0, 0x7fffffffL);
    ct_online.risk = env_long("COLLTUNE_ONLINE_RISK", 5, 0, 1000000) / 100.0;   /* percent */
    struct timespec ts;
    struct tm tm;
    syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);   /* the wall clock, also under SMPI */
    strftime(ct_online.started, sizeof ct_online.started, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&ts.tv_sec, &tm));
    int len = 0;
    MPI_Get_library_version(ct_online.library, &len);
    ct_online.library[strcspn(ct_online.library, "\n")] = '\0';
#ifdef COLLTUNE_SMPI
    const char *plat = getenv("COLLTUNE_PLATFORM");
    snprintf(ct_online.platform, sizeof ct_online.platform, "%s", plat ? plat : "");
#endif
    ct_online_fingerprint(ct_online.fingerprint);
    /* the arms (MPICH's found through MPI_T on each rank) must be the same everywhere */
    in[0] = (int)(mix(fnv_text(ct_online.fingerprint)) & 0x7fffffff), in[1] = -in[0];
    PMPI_Allreduce(in, out, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (out[0] != -out[1]) {
        if (world_rank == 0)
            fprintf(stderr, "colltune: warning: COLLTUNE_ONLINE: the ranks' libraries or arms "
                    "differ (fingerprints); online mode off\n");
        ct_online_libarms_finalize();
        return 0;
    }
    if (world_rank == 0 && *ct_online_libarms_problem())
        fprintf(stderr, "colltune: warning: COLLTUNE_ONLINE: some of MPICH's algorithms are not "
                "arms: %s\n", ct_online_libarms_problem());
    for (int c = 0; c < CT_NCOLLS; c++) {
        marker[c].coll = (ct_coll)c;
        marker[c].alg = ct_find((ct_coll)c, ct_online_preset(c, 1));
        for (int k = 0; k < CT_ONLINE_NCLASS; k++) ct_online_default_block(c, 0, 0, k, &defaults[c][k]);
    }
    load_state();
    ct_online.lambda = ct_online_conservative(&ct_online.state, ct_online.budget, ct_online.risk);
    clock_sync();
    anchor();
    if (logdir && *logdir) {
        char path[4200];
        snprintf(path, sizeof path, "%s/choices-%d.txt", logdir, world_rank);
        mkdir(logdir, 0777);
        if (!(ct_online.log = fopen(path, "a")))
            fprintf(stderr, "colltune: warning: COLLTUNE_ONLINE_LOG: %s: %s\n", path, strerror(errno));
        else                      /* line by line: a job that crashes keeps what it chose */
            setvbuf(ct_online.log, NULL, _IOLBF, 0);
    }
    return ct_online_on = 1;
}
