/* Timing of one point, ReproMPI style: before every repetition rank 0 broadcasts
 * a start time t_start = now + window (with the continue/stop decision, outside
 * the timed region); every rank waits for t_start on the synchronised clock,
 * records start, calls the collective, records end. Rank 0 gathers all (start,
 * end) pairs: ttc = max(end) - min(start). A rank that began after its target
 * start makes the repetition invalid: it is discarded (see account()).
 * Control messages use ctl.c, never the collective under test. */
#include "measure.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "colls.h"
#include "ctl.h"
#include "stats.h"

#define MAX_WINDOW_S 1.0
#define SHRINK_AFTER 8

enum { K_MAIN, K_PURE }; /* K_PURE: overlap scenario's post + immediate wait */

static void *xalloc(size_t bytes, int shared, MPI_Comm comm)
{
    size_t n = bytes ? bytes : 1; /* MPI may touch a buffer pointer even for count 0 */
#ifdef COLLTUNE_SMPI
    if (shared) return SMPI_SHARED_MALLOC(n);
#else
    (void)shared;
#endif
    void *p = calloc(1, n); /* zeros: no NaN or denormal slows real reductions */
    if (!p) MPI_Abort(comm, 1);
    /* written once: a calloc'd page that is only read stays Linux's one shared zero
     * page, so a large send buffer would be read from one cache-resident page and
     * real-MPI times of large messages come out too fast (bcast 4 MiB: 233 us against
     * 338 us with the pages written; a methodology review) */
    for (size_t i = 0; i < n; i += 4096) ((volatile char *)p)[i] = 0;
    return p;
}

static void xfree(void *p, int shared)
{
#ifdef COLLTUNE_SMPI
    if (shared) { SMPI_SHARED_FREE(p); return; }
#else
    (void)shared;
#endif
    free(p);
}

static void setup_args(const point_t *pt, coll_args_t *a, int shared)
{
    const coll_desc_t *c = pt->o->coll;
    size_t ns, nr, es = dtype_size(pt->o->dtype);
    memset(a, 0, sizeof *a);
    a->count = pt->count;
    a->kind = pt->o->dtype;
    a->dtype = dtype_mpi(pt->o->dtype, c->reduces);
    a->op = reduction_op(pt->o->op);
    a->root = c->rooted ? pt->o->root : 0;
    a->rank = pt->rank;
    a->size = pt->size;
    a->comm = pt->comm;
    c->buf_elems((size_t)pt->count, pt->size, pt->rank, a->root, &ns, &nr);
    a->sbuf = xalloc(ns * es, shared, pt->comm);
    a->rbuf = xalloc(nr * es, shared, pt->comm);
}

int point_check(const point_t *pt, char *msg, size_t len)
{
    const coll_desc_t *c = pt->o->coll;
    coll_args_t a;
    char mine[256] = "";
    setup_args(pt, &a, 0); /* always real memory: shared buffers hold garbage */
    c->fill(&a);
    if (pt->o->scenario == SCEN_OVERLAP) { /* check the call that is timed */
        MPI_Request q;
        c->start(&a, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
    } else {
        c->run(&a);
    }
    int bad = c->check(&a, mine, sizeof mine);
    xfree(a.sbuf, 0);
    xfree(a.rbuf, 0);

    /* rank 0 learns which ranks failed, then fetches the first one's message */
    int *all = pt->rank == 0 ? malloc((size_t)pt->size * sizeof *all) : NULL;
    ctl_gather(&bad, all, 1, MPI_INT, pt->comm);
    int first = -1;
    if (pt->rank == 0) {
        for (int r = 0; r < pt->size && first < 0; r++)
            if (all[r]) first = r;
        free(all);
    }
    ctl_bcast(&first, 1, MPI_INT, pt->comm);
    if (first > 0 && pt->rank == first) MPI_Send(mine, sizeof mine, MPI_CHAR, 0, CTL_TAG_MSG, pt->comm);
    if (first > 0 && pt->rank == 0) MPI_Recv(mine, sizeof mine, MPI_CHAR, first, CTL_TAG_MSG, pt->comm, MPI_STATUS_IGNORE);
    if (pt->rank == 0) snprintf(msg, len, "%s", first >= 0 ? mine : "");
    return first < 0;
}

/* One repetition on this rank: returns (arrival at the wait, start, end) on the
 * synchronised clock. */
static void one_rep(const point_t *pt, const coll_args_t *a, int kind, double t_start, double se[3])
{
    const coll_desc_t *c = pt->o->coll;
    double target = t_start + (pt->rank == pt->delayed_rank ? pt->delay_s : 0.0);
    se[0] = clock_now();
    clock_wait_until(target);
    se[1] = clock_now();
    if (pt->o->scenario != SCEN_OVERLAP) {
        c->run(a);
    } else {
        MPI_Request q;
        c->start(a, &q);
        if (kind == K_MAIN) clock_compute(pt->tcalc_s);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
    }
    se[2] = clock_now();
}

/* Rank 0's bookkeeping of the repetitions of one point. */
typedef struct {
    double *ttc[2], *rmax, *rmean;
    int cap, full;      /* repetitions the arrays hold; 1: they could not grow, stop */
    int n[2], warm_left, late, attempts;
    int on_time;        /* repetitions in a row whose ranks all arrived before the start */
} series_t;

/* Rank 0: evaluates one gathered repetition; returns 1 if it was valid. A rank
 * that arrived at its wait after the target start shows the window is too short:
 * double it. A rank that arrived in time but started late was descheduled (noise
 * on a busy machine): discard the repetition, keep the window. */
/* Rank 0: room for twice the repetitions (the arrays grow as the point runs, so a
 * huge --max-reps costs no memory it does not use); 0 when out of memory. */
static int grow(series_t *s)
{
    int cap = s->cap ? 2 * s->cap : 256;
    double **arr[4] = {&s->ttc[0], &s->ttc[1], &s->rmax, &s->rmean};
    for (int k = 0; k < 4; k++) {
        double *q = realloc(*arr[k], (size_t)cap * sizeof(double));
        if (!q) return 0;
        *arr[k] = q;
    }
    s->cap = cap;
    return 1;
}

static int account(const point_t *pt, const double *ase, double t_start, int kind, series_t *s, double *window)
{
    double lo = ase[1], hi = ase[2], dmax = 0, dsum = 0;
    double tol = pt->o->late_tolerance_us > 0 ? pt->o->late_tolerance_us * 1e-6 : clock_late_tolerance();
    int late = 0, short_window = 0;
    for (int r = 0; r < pt->size; r++) {
        double ar = ase[3 * r], st = ase[3 * r + 1], en = ase[3 * r + 2];
        double target = t_start + (r == pt->delayed_rank ? pt->delay_s : 0.0);
        if (st > target + tol) late = 1;
        if (ar > target) short_window = 1;
        if (st < lo) lo = st;
        if (en > hi) hi = en;
        if (en - st > dmax) dmax = en - st;
        dsum += en - st;
    }
    if (short_window && *window < MAX_WINDOW_S) *window *= 2;
    /* and shrinks again (never below --sync-window-us) once SHRINK_AFTER repetitions in
     * a row were in time: one descheduled rank no longer makes every later repetition
     * busy-wait longer, and more of them be discarded as late */
    s->on_time = short_window ? 0 : s->on_time + 1;
    if (s->on_time >= SHRINK_AFTER && *window > pt->o->sync_window_us * 1e-6 * 1.5) {
        *window /= 2;
        s->on_time = 0;
    }
    if (s->warm_left > 0) { s->warm_left--; return 0; }
    if (late) { s->late++; return 0; }
    if (s->n[kind] >= s->cap && !grow(s)) { s->full = 1; return 0; }
    int i = s->n[kind]++;
    s->ttc[kind][i] = hi - lo;
    if (kind == K_MAIN) {
        s->rmax[i] = dmax;
        s->rmean[i] = dsum / pt->size;
    }
    return 1;
}

/* Rank 0: the stopping rule. After warm-up, stop once (reps >= min_reps and the
 * median's confidence interval is within +-rse of it, stats.c, for both series in the
 * overlap scenario), or reps >= max_reps, or the point has used its time budget.
 * Overlap series grow in pairs. */
static int keep_going(const point_t *pt, const series_t *s, double t0)
{
    const options_t *o = pt->o;
    int overlap = o->scenario == SCEN_OVERLAP, n = s->n[K_MAIN];
    if (s->attempts >= 10LL * o->max_reps + 100) return 0; /* persistent late starts */
    if (s->full) return 0;                              /* no memory for more */
    if (clock_now() - t0 >= o->max_seconds) return 0;
    if (s->warm_left > 0) return 1;
    if (overlap && s->n[K_PURE] != n) return 1;
    if (n >= o->max_reps) return 0;
    if (n < o->min_reps) return 1;
    stats_t st;
    stats_compute(s->ttc[K_MAIN], n, &st);
    if (st.ci_rel > o->rse) return 1;
    if (overlap) {
        stats_compute(s->ttc[K_PURE], n, &st);
        if (st.ci_rel > o->rse) return 1;
    }
    return 0;
}

/* Rank 0: overlap points alternate a pure repetition and an overlapped one */
static int next_kind(const options_t *o, const series_t *s)
{
    if (o->scenario != SCEN_OVERLAP) return K_MAIN;
    if (s->warm_left > 0) return s->warm_left % 2 ? K_MAIN : K_PURE;
    return s->n[K_PURE] > s->n[K_MAIN] ? K_MAIN : K_PURE;
}

static double mean(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    return n ? s / n : 0;
}

/* Linked with colltune's algorithms (colltune-bench-interposed): their scratch is
 * shared too while timing on shared buffers (colltune/sched.h). Weak: the plain
 * bench has no such function. */
extern void ct_sched_shared_scratch(int on) __attribute__((weak));

void point_time(const point_t *pt, record_t *rec)
{
    const options_t *o = pt->o;
    int overlap = o->scenario == SCEN_OVERLAP, root = pt->rank == 0;
    coll_args_t a;
    setup_args(pt, &a, o->shared_buffers);
    if (ct_sched_shared_scratch) ct_sched_shared_scratch(o->shared_buffers);

    series_t s;
    memset(&s, 0, sizeof s);
    double *se_all = NULL, window = o->sync_window_us * 1e-6, t0 = clock_now();
    if (root) {
        if (!grow(&s)) s.full = 1;
        se_all = malloc(3 * (size_t)pt->size * sizeof(double));
        s.warm_left = o->warmup * (overlap ? 2 : 1);
    }
    for (;;) {
        /* {continue?, t_start, kind}: decided by rank 0, outside the timed region */
        double msg[3] = { 0, 0, K_MAIN };
        if (root) {
            msg[0] = keep_going(pt, &s, t0);
            msg[2] = next_kind(o, &s);
            msg[1] = clock_now() + window;
        }
        ctl_bcast(msg, 3, MPI_DOUBLE, pt->comm);
        if (msg[0] == 0) break;
        double se[3];
        one_rep(pt, &a, (int)msg[2], msg[1], se);
        ctl_gather(se, se_all, 3, MPI_DOUBLE, pt->comm);
        if (root) {
            s.attempts++;
            account(pt, se_all, msg[1], (int)msg[2], &s, &window);
        }
    }
    xfree(a.sbuf, o->shared_buffers);
    xfree(a.rbuf, o->shared_buffers);
    if (ct_sched_shared_scratch) ct_sched_shared_scratch(0);
    if (!root) return;

    int n = s.n[K_MAIN];
    rec->reps = n;
    rec->late_starts = s.late;
    rec->timed = n > 0;
    stats_compute(s.ttc[K_MAIN], n, &rec->ttc);
    rec->rank_max_mean_s = mean(s.rmax, n);
    rec->rank_mean_mean_s = mean(s.rmean, n);
    if (overlap) {
        stats_t pure;
        stats_compute(s.ttc[K_PURE], s.n[K_PURE], &pure);
        rec->has_pure = s.n[K_PURE] > 0;
        rec->pure_median_s = pure.median;
        /* OSU's definition; undefined (null) when the pure time is 0 */
        double pct = 100.0 * (1.0 - (rec->ttc.median - pt->tcalc_s) / pure.median);
        rec->overlap_pct = !(pure.median > 0) ? NAN : pct < 0 ? 0 : pct > 100 ? 100 : pct;
    }
    free(s.ttc[K_MAIN]);
    free(s.ttc[K_PURE]);
    free(s.rmax);
    free(s.rmean);
    free(se_all);
}
