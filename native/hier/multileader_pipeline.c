/* allreduce/multileader with segments in flight (fs > 0): the vector is cut into
 * segments of about fs bytes, and each segment goes through the three steps of
 * multileader (reduce-scatter inside the node, the lanes' allreduce across the nodes,
 * allgather inside the node) as soon as the step is free for it, so segment k's
 * lanes cross the network while segment k+1 is reduced inside the node and segment
 * k-1 is gathered: the network's time and the node's (its copies and reductions)
 * overlap instead of adding up.
 *
 * Each step of each segment is a schedule of colltune's engine (sched.h): the node
 * steps are colltune's own over the node's communicator (a pairwise reduce-scatter,
 * a ring allgather; every reduction charged, as colltune's always are), the lanes'
 * step is the lanes' catalogue algorithm, so nothing depends on the library's
 * reduce-scatter (SMPI's `ompi` one is slow on the dragonfly and its temporaries
 * exhaust memory at 64 MiB x 256 ranks). The node steps work on a few segments at
 * once, the lanes' step on as many as are ready (DEPTH), and the driver waits on all
 * open requests at once (ct_sched_wait_with), so no step waits for another's
 * progress call. */
#include <stdlib.h>
#include "hier_internal.h"

enum { RS, AR, AG, NSTEP };
/* Segments one step works on at once. Inside the node two let a rank's reductions of
 * one segment overlap the transfers of the next (a simulated rank that reduces sends
 * nothing) and more only compete for the rank's time. The lanes' allreduce is a chain
 * of latency-bound steps across the nodes, each waiting for the slowest peer (busy
 * reducing another segment): any limit there leaves the node's steps waiting for it.
 * colltune bench, reductions charged, fs 1 MiB, 8 MiB per rank (node, lanes, node):
 * fattree64x12 64x12 3085 us (2, 2, 2), 2677 (2, 4, 2), 2677 (2, 9, 2), 2847 (3, all, 2);
 * dragonfly 128x2 5822 (2, 2, 2), 4418 (2, 4, 2), 3821 (2, all, 2). */
enum { NODE_DEPTH = 2, ALL_READY = 1 << 30 };
static const int DEPTH[NSTEP] = {[RS] = NODE_DEPTH, [AR] = ALL_READY, [AG] = NODE_DEPTH};

typedef struct {
    const ct_args *a;
    const ct_hier *h;
    MPI_Aint ext;
    const char *in;          /* the contributions: sendbuf, or recvbuf in place */
    int nseg;
    /* the reduce-scatter's two temporaries per segment in flight: segment k uses
     * those of k mod DEPTH[RS], allocated by (and freed with) that one's schedule,
     * so the count of allocations does not grow with the segments (SMPI maps each
     * shared one: past vm.max_map_count, 768 ranks x 32 segments failed) */
    char *rstmp[NODE_DEPTH][2];
} pipe_t;

/* Element offset and count of block j of segment k: the vector cut into nseg nearly
 * equal segments, each into nlocal nearly equal blocks (ct_block_start both times). */
static void block_of(const pipe_t *p, int k, int j, MPI_Aint *off, int *cnt)
{
    int n = p->h->nlocal, start = ct_block_start(p->a->count, p->nseg, k);
    int c = ct_block_start(p->a->count, p->nseg, k + 1) - start;
    int b = ct_block_start(c, n, j);
    *cnt = ct_block_start(c, n, j + 1) - b;
    *off = (MPI_Aint)start + b;
}

/* Reduce-scatter of segment k inside the node by pairwise exchange (MPICH's
 * reduce_scatter for long messages with a commutative op): at step t, rank r sends
 * its own contribution to block r+t+1 to that rank and receives block r's
 * contribution of rank r-t-1, while it adds the one received at step t-1. A ring
 * forwards partial sums, so each of its n-1 steps waits for the reduction before it
 * (transfer and reduction in series: fattree64x12 64x12, 8 MiB, fs 2 MiB: 3120 us);
 * here only raw contributions travel, the next transfer runs during the reduction,
 * and a step takes the longer of the two instead of their sum. Same bytes on the
 * node's links, same arithmetic, one message in and one out per rank at a time. */
static int build_rs(pipe_t *p, int k, ct_sched *s)
{
    const ct_args *a = p->a;
    int n = p->h->nlocal, r = p->h->lrank;
    MPI_Aint ext = p->ext, off, roff;
    int cnt, rcnt, maxc;
    block_of(p, 0, 0, &off, &maxc);                /* a largest block of all segments */
    block_of(p, k, r, &roff, &rcnt);
    int inplace = a->sendbuf == MPI_IN_PLACE;
    char *out = ct_at(a->recvbuf, ext, roff);
    if (n == 1) {
        if (!inplace) ct_sched_copy(s, out, ct_at(p->in, ext, roff), (MPI_Aint)rcnt * ext);
        return MPI_SUCCESS;
    }
    char **tmp = p->rstmp[k % DEPTH[RS]];
    if (k < DEPTH[RS]) {
        tmp[0] = ct_sched_alloc(s, (size_t)maxc * (size_t)ext);
        tmp[1] = ct_sched_alloc(s, (size_t)maxc * (size_t)ext);
    }
    if (!tmp[0] || !tmp[1]) return MPI_ERR_NO_MEM;
    /* not in place, the first contribution lands in recvbuf and ours is added to it;
     * in place, recvbuf's block r holds ours: every received one is added to it */
    char *got = NULL;                              /* received last step, to add now */
    for (int t = 0; t < n; t++) {
        char *into = NULL;                         /* received this step (none at the last) */
        if (t < n - 1) {
            int to = (r + t + 1) % n, from = (r - t - 1 + n) % n;
            block_of(p, k, to, &off, &cnt);
            ct_sched_send(s, ct_at(p->in, ext, off), cnt, a->dtype, to);
            into = t == 0 && !inplace ? out : tmp[t % 2];
            ct_sched_recv(s, into, rcnt, a->dtype, from);
        }
        /* MPI_Reduce_local(in, inout): inout = in op inout; the op is commutative */
        if (got == out) ct_sched_reduce(s, ct_at(p->in, ext, roff), out, rcnt, a->dtype, a->op);
        else if (got) ct_sched_reduce(s, got, out, rcnt, a->dtype, a->op);
        got = into;
        ct_sched_round(s);
    }
    return MPI_SUCCESS;
}

/* Allgather of segment k's blocks on the node's ring, each straight into its place. */
static int build_ag(const pipe_t *p, int k, ct_sched *s)
{
    int n = p->h->nlocal, r = p->h->lrank, right = (r + 1) % n, left = (r + n - 1) % n;
    for (int t = 0; t < n - 1; t++) {
        MPI_Aint so, ro;
        int sc, rc;
        block_of(p, k, (r - t + n) % n, &so, &sc);
        block_of(p, k, (r - t - 1 + n) % n, &ro, &rc);
        ct_sched_send(s, ct_at(p->a->recvbuf, p->ext, so), sc, p->a->dtype, right);
        ct_sched_recv(s, ct_at(p->a->recvbuf, p->ext, ro), rc, p->a->dtype, left);
        ct_sched_round(s);
    }
    return MPI_SUCCESS;
}

/* The lanes' allreduce of this rank's block of segment k, in place in recvbuf. */
static int build_ar(const pipe_t *p, int k, MPI_Comm lane, const ct_algorithm *alg, ct_sched *s)
{
    MPI_Aint off;
    int cnt, prm[CT_MAX_PARAMS];
    block_of(p, k, p->h->lrank, &off, &cnt);
    ct_params_default(alg, prm);
    ct_args across = {.sendbuf = MPI_IN_PLACE, .recvbuf = ct_at(p->a->recvbuf, p->ext, off),
                      .count = cnt, .dtype = p->a->dtype, .op = p->a->op, .root = 0, .comm = lane};
    return alg->schedule(&across, prm, s);
}

int ct_multileader_segments(const ct_hier *h, int count, MPI_Aint ext, int fs)
{
    if (fs <= 0 || count <= 0) return 0;
    long long bytes = (long long)count * ext, nseg = (bytes + fs - 1) / fs;
    long long most = count / h->nlocal;            /* every block at least one element */
    if (nseg > most) nseg = most;
    return nseg < 1 ? 1 : (int)nseg;
}

int ct_multileader_pipeline(const ct_args *a, ct_hier *h, MPI_Comm lane, const ct_algorithm *lane_alg,
                            int nseg)
{
    pipe_t p = {.a = a, .h = h, .ext = ct_extent(a->dtype), .nseg = nseg,
                .in = a->sendbuf == MPI_IN_PLACE ? a->recvbuf : a->sendbuf};
    ct_sched **s = calloc((size_t)nseg * NSTEP, sizeof *s);
    if (!s) return MPI_ERR_NO_MEM;
    int rc = ct_sched_comm_prepare(h->node);
    if (rc == MPI_SUCCESS && h->nnodes > 1) rc = ct_sched_comm_prepare(lane);
    /* every schedule is built before any starts: ranks create them on each
     * communicator in the same order (their tags), whatever the timing */
    for (int k = 0; k < nseg && rc == MPI_SUCCESS; k++) {
        if ((rc = ct_sched_create(h->node, &s[k * NSTEP + RS])) == MPI_SUCCESS)
            rc = build_rs(&p, k, s[k * NSTEP + RS]);
        if (rc == MPI_SUCCESS && h->nnodes > 1 && (rc = ct_sched_create(lane, &s[k * NSTEP + AR])) == MPI_SUCCESS)
            rc = build_ar(&p, k, lane, lane_alg, s[k * NSTEP + AR]);
        if (rc == MPI_SUCCESS && h->nlocal > 1 && (rc = ct_sched_create(h->node, &s[k * NSTEP + AG])) == MPI_SUCCESS)
            rc = build_ag(&p, k, s[k * NSTEP + AG]);
    }
    /* next[st]: the segment step st takes next; a step takes segment k once the
     * step before has finished k and this step has finished k - DEPTH[step]. A schedule that
     * fails still completes (its error kept), so the peers are never left waiting. */
    int next[NSTEP] = {0, 0, 0}, err = MPI_SUCCESS;
    while (rc == MPI_SUCCESS && next[AG] < nseg) {
        int moved = 0;
        for (int st = 0; st < NSTEP; st++) {
            int k = next[st];
            if (k >= nseg) continue;
            ct_sched *cur = s[k * NSTEP + st], *prev = k >= DEPTH[st] ? s[(k - DEPTH[st]) * NSTEP + st] : NULL;
            ct_sched *before = st > 0 ? s[k * NSTEP + st - 1] : NULL;
            int before_done = st == 0 || next[st - 1] > k;
            if (!before_done || (before && ct_sched_active(before)) || (prev && ct_sched_active(prev)))
                continue;
            if (cur) {
                int e = ct_sched_start(cur);
                if (e != MPI_SUCCESS && err == MPI_SUCCESS) err = e;
            }
            next[st]++;
            moved = 1;
        }
        if (moved) continue;
        int active = 0, which;
        for (int i = 0; i < nseg * NSTEP; i++) active += s[i] && ct_sched_active(s[i]);
        if (!active) { rc = MPI_ERR_INTERN; break; }   /* cannot happen: nothing would move */
        rc = ct_sched_wait_with(NULL, 0, &which);    /* some schedule moved on */
    }
    /* last first: a schedule that is still active after an error may use the
     * temporaries of an earlier one (ct_sched_free waits for it) */
    for (int i = nseg * NSTEP - 1; i >= 0; i--) {
        if (!s[i]) continue;
        int e = rc == MPI_SUCCESS ? ct_sched_wait(s[i]) : MPI_SUCCESS;
        if (e != MPI_SUCCESS && err == MPI_SUCCESS) err = e;
        ct_sched_free(&s[i]);
    }
    free(s);
    return rc != MPI_SUCCESS ? rc : err;
}
