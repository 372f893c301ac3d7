/* HAN allgather (hierarchical, task-based; docs/hier.md "Allgather").
 *
 *   sg  intra-node gather of the node's blocks to its leader (node-local rank 0)
 *   ia  inter-node allgather of whole node blocks among the leaders (up[0])
 *   sb  intra-node bcast of each node block from the leader
 *
 * Work happens in a node-ordered layout: node n's ranks, in node-local order,
 * hold positions off[n] .. off[n+1]-1. When that is the communicator's own
 * order (ranks of each node contiguous and nodes in order, the usual block
 * placement) the layout is recvbuf itself; otherwise a temporary buffer, and
 * every rank permutes it into recvbuf at the end (charged copies).
 *
 * imod = 1 (ring): step t, leader i sends node block i-t to leader i+1 and
 * receives block i-t-1 from leader i-1. Task t = ia step t + sb of the block
 * received at step t-1 (task 0: sb of the own node's block), so the intra-node
 * bcast of one block overlaps the inter-node transfer of the next; non-leaders
 * run the same sb sequence: own block, then i-1, i-2, ... (mod N).
 * imod = 0 (library): one PMPI_Iallgatherv on the leaders, overlapped with the
 * sb of the own block; then sb of the blocks before and after it (two ranges).
 * imod = 2 (Bruck): step t (distance d = 2^t), leader i sends the min(d, N-d)
 * node blocks i, i+1, ... it holds to leader i-d and receives blocks i+d, ...
 * from leader i+d (mod N: at most two ranges each way): ceil(log2 N) steps
 * instead of N-1, for many nodes and small blocks, any N. Every block crosses
 * once, as in the ring. Task t = ia step t + sb of the ranges received at step
 * t-1, so a node runs log2 N sbs, not N.
 *
 * Intra-node modules (smod): 0 library (PMPI_Gather, PMPI_Bcast, blocking),
 * 1 colltune (point-to-point gather, the engine's non-blocking tree bcast in
 * pieces of ss bytes, tree salg), 2 shared memory for sb (the engine's shm
 * bcast; sg stays point-to-point). All non-blocking parts are nb_ops of the
 * engine (engine.c) progressed together with MPI_Waitany; plain request sets
 * (ring step, point-to-point gather, library Iallgatherv) are nb_ops of kind
 * NB_LIB_IBCAST filled here, which the engine treats as "ready when all their
 * requests are complete". */
#include <stdlib.h>
#include "../hier_internal.h"

/* Tags: unique among the operations of one call on a communicator (node: sg
 * and sb; leaders: ring steps), which is all MPI's ordering needs. */
enum { AG_TAG_SG = 0, AG_TAG_SB = 4096, AG_TAG_RING = 8192, AG_TAG_BRUCK = 12288 };
enum { AG_IMOD_RING = 1, AG_IMOD_BRUCK = 2 };

typedef struct {
    const ct_args *a;
    ct_hier *h;
    MPI_Comm up;            /* leaders ordered by node index; MPI_COMM_NULL on others */
    int imod, smod, salg, ss;
    int size;
    MPI_Aint ext, blk;      /* bytes of one rank's block */
    int *off;               /* node n's first position in the node-ordered layout (nnodes+1) */
    char *work;             /* node-ordered layout (recvbuf when it is the same order) */
    char *shm;              /* the node's shared segment (smod = SHM): two places of */
    MPI_Aint slot;          /* slot bytes, one per range a task broadcasts at once */
    int *vcounts;           /* imod = LIBRARY: Iallgatherv counts and displs (kept to the end) */
    nb_op *live;            /* started ops, possibly still sending */
} ag_call;

typedef struct { int pos, n; } ag_range;   /* positions [pos, pos+n) of the layout */

static char *at_pos(const ag_call *g, int pos) { return g->work + (MPI_Aint)pos * g->blk; }

/* An op of plain requests, filled by the caller (kind NB_LIB_IBCAST: complete
 * when its requests are). */
static nb_op *raw_op(int nreq)
{
    nb_op *o = calloc(1, sizeof *o);
    o->kind = NB_LIB_IBCAST;
    o->nreq = nreq;
    o->req = malloc(sizeof(MPI_Request) * (size_t)(nreq > 0 ? nreq : 1));
    for (int i = 0; i < nreq; i++) o->req[i] = MPI_REQUEST_NULL;
    return o;
}

static void add_live(ag_call *g, nb_op *o)
{
    o->ready = o->ready || o->pending == 0;
    o->next = g->live;
    g->live = o;
}

/* Progresses every live op until each of mine[0..n) is ready (all: n < 0). */
static int progress(ag_call *g, nb_op **mine, int n)
{
    int rc = MPI_SUCCESS;
    for (;;) {
        int waiting = 0, k = 0, open = 0;
        for (nb_op *o = g->live; o; o = o->next) k++, open += o->pending;
        if (n < 0) waiting = open > 0;
        else
            for (int i = 0; i < n; i++) waiting += !mine[i]->ready;
        if (!waiting || rc != MPI_SUCCESS) break;
        nb_op **all = malloc(sizeof(nb_op *) * (size_t)k);
        k = 0;
        for (nb_op *o = g->live; o; o = o->next) all[k++] = o;
        rc = nb_progress(all, k, 1);
        free(all);
    }
    for (nb_op **pp = &g->live; *pp;) {       /* drop what is over */
        nb_op *o = *pp;
        if (o->ready && o->pending == 0) { *pp = o->next; nb_free(o); }
        else pp = &o->next;
    }
    return rc;
}

/* sb of positions r on the node (root: the leader); NULL with smod = LIBRARY
 * (then *rc holds the blocking PMPI_Bcast's result). place: which of the shared
 * segment's places it uses (a Bruck step's blocks that wrap around are two ranges
 * broadcast at once: in one place the second overwrote the first before the other
 * ranks had copied it; a correctness review). */
static nb_op *start_sb(ag_call *g, ag_range r, int k, int place, int *rc)
{
    const ct_args *a = g->a;
    *rc = MPI_SUCCESS;
    if (g->smod == CT_HAN_MOD_LIBRARY) {
        if (g->h->nlocal > 1) *rc = PMPI_Bcast(at_pos(g, r.pos), r.n * a->count, a->dtype, 0, g->h->node);
        return NULL;
    }
    nb_op *o = calloc(1, sizeof *o);
    o->kind = g->smod == CT_HAN_MOD_SHM ? NB_SHM_BCAST : NB_BCAST;
    o->comm = g->h->node;
    o->root = 0;
    o->buf = at_pos(g, r.pos);
    o->count = r.n * a->count;
    o->dt = a->dtype;
    o->op = MPI_OP_NULL;
    o->tag = AG_TAG_SB + k % 4096;
    o->parent = g->salg;                      /* tree value, see nb_start */
    o->sub = ct_seg_elems(g->ss, g->ext, o->count);
    o->shm = g->shm ? g->shm + (MPI_Aint)place * g->slot : NULL;
    o->slot = o->count * g->ext;
    *rc = nb_start(o);
    add_live(g, o);
    return o;
}

/* sg: every rank's block to its place in the leader's node block. */
static int gather(ag_call *g)
{
    const ct_args *a = g->a;
    ct_hier *h = g->h;
    int rank = 0, rc = MPI_SUCCESS;
    MPI_Comm_rank(a->comm, &rank);
    const char *mine = a->sendbuf == MPI_IN_PLACE ? (char *)a->recvbuf + (MPI_Aint)rank * g->blk
                                                  : (const char *)a->sendbuf;
    char *node_blk = at_pos(g, g->off[h->node_idx]);
    if (h->nlocal == 1) {
        ct_copy(node_blk, mine, g->blk);
        return MPI_SUCCESS;
    }
    if (g->smod == CT_HAN_MOD_LIBRARY) {
        if (h->lrank == 0)
            return PMPI_Gather(node_blk == mine ? MPI_IN_PLACE : mine, a->count, a->dtype, node_blk,
                               a->count, a->dtype, 0, h->node);
        return PMPI_Gather(mine, a->count, a->dtype, NULL, a->count, a->dtype, 0, h->node);
    }
    nb_op *o = raw_op(h->lrank == 0 ? h->nlocal - 1 : 1);
    if (h->lrank == 0) {
        for (int l = 1; l < h->nlocal && rc == MPI_SUCCESS; l++, o->pending++)
            rc = MPI_Irecv(node_blk + (MPI_Aint)l * g->blk, a->count, a->dtype, l, AG_TAG_SG, h->node,
                           &o->req[l - 1]);
        ct_copy(node_blk, mine, g->blk);
    } else {
        rc = MPI_Isend(mine, a->count, a->dtype, 0, AG_TAG_SG, h->node, &o->req[0]);
        o->pending++;
    }
    add_live(g, o);
    int rc2 = progress(g, &o, 1);
    return rc != MPI_SUCCESS ? rc : rc2;
}

/* ring step t among the leaders (N >= 2) */
static nb_op *ring_step(ag_call *g, int t, int *rc)
{
    int N = g->h->nnodes, i = g->h->node_idx;
    int sb = ((i - t) % N + N) % N, rb = ((i - t - 1) % N + N) % N;
    const ct_args *a = g->a;
    nb_op *o = raw_op(2);
    *rc = MPI_Irecv(at_pos(g, g->off[rb]), g->h->node_size[rb] * a->count, a->dtype, (i - 1 + N) % N,
                    AG_TAG_RING + t % 4096, g->up, &o->req[0]);
    if (*rc == MPI_SUCCESS)
        *rc = MPI_Isend(at_pos(g, g->off[sb]), g->h->node_size[sb] * a->count, a->dtype, (i + 1) % N,
                        AG_TAG_RING + t % 4096, g->up, &o->req[1]);
    o->pending = 2;
    add_live(g, o);
    return o;
}

/* Node blocks [first, first+n) mod N as at most two ranges of positions. */
static int node_ranges(const ag_call *g, int first, int n, ag_range out[2])
{
    int N = g->h->nnodes, k = 0;
    while (n > 0) {
        int end = first + n < N ? first + n : N;
        out[k++] = (ag_range){g->off[first], g->off[end] - g->off[first]};
        n -= end - first;
        first = 0;
    }
    return k;
}

/* Bruck step t among the leaders: blocks i.. to leader i-d, blocks i+d.. from i+d. */
static nb_op *bruck_step(ag_call *g, int t, int *rc)
{
    int N = g->h->nnodes, i = g->h->node_idx, d = 1 << t, n = d < N - d ? d : N - d;
    ag_range mine[2], theirs[2];
    int nm = node_ranges(g, i, n, mine), nt = node_ranges(g, (i + d) % N, n, theirs);
    const ct_args *a = g->a;
    nb_op *o = raw_op(nm + nt);
    *rc = MPI_SUCCESS;
    for (int k = 0; k < nt && *rc == MPI_SUCCESS; k++, o->pending++)
        *rc = MPI_Irecv(at_pos(g, theirs[k].pos), theirs[k].n * a->count, a->dtype, (i + d) % N,
                        AG_TAG_BRUCK + 2 * t + k, g->up, &o->req[k]);
    for (int k = 0; k < nm && *rc == MPI_SUCCESS; k++, o->pending++)
        *rc = MPI_Isend(at_pos(g, mine[k].pos), mine[k].n * a->count, a->dtype, (i - d + N) % N,
                        AG_TAG_BRUCK + 2 * t + k, g->up, &o->req[nt + k]);
    add_live(g, o);
    return o;
}

static nb_op *library_ia(ag_call *g, int *rc)
{
    int N = g->h->nnodes;
    int *counts = g->vcounts = malloc(sizeof(int) * 2 * (size_t)N), *displs = counts + N;
    for (int n = 0; n < N; n++) {
        counts[n] = g->h->node_size[n] * g->a->count;
        displs[n] = g->off[n] * g->a->count;
    }
    nb_op *o = raw_op(1);
    *rc = PMPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g->work, counts, displs, g->a->dtype,
                           g->up, &o->req[0]);
    o->pending = 1;
    add_live(g, o);
    return o;
}

/* recvbuf block r = layout position pos(r); runs of consecutive positions are
 * copied together. */
static void permute(ag_call *g, const int *pos)
{
    for (int r = 0; r < g->size;) {
        int n = 1;
        while (r + n < g->size && pos[r + n] == pos[r] + n) n++;
        ct_copy((char *)g->a->recvbuf + (MPI_Aint)r * g->blk, at_pos(g, pos[r]), n * g->blk);
        r += n;
    }
}

static int han_allgather(const ct_args *a, const int *p)
{
    ag_call g = {.a = a, .imod = p[0], .smod = p[1], .salg = p[2], .ss = p[3]};
    int rank, rc = MPI_SUCCESS;
    MPI_Comm_size(a->comm, &g.size);
    MPI_Comm_rank(a->comm, &rank);
    g.ext = ct_extent(a->dtype);
    g.blk = (MPI_Aint)a->count * g.ext;
    if (a->count == 0) return MPI_SUCCESS;
    if (g.size == 1) {
        if (a->sendbuf != MPI_IN_PLACE) ct_copy(a->recvbuf, a->sendbuf, g.blk);
        return MPI_SUCCESS;
    }
    ct_hier *h = g.h = ct_hier_get(a->comm);
    g.up = ct_hier_up(h, a->comm, 0);
    int N = h->nnodes, i = h->node_idx, leader = h->lrank == 0;
    g.off = malloc(sizeof(int) * (size_t)(N + 1));
    int *pos = malloc(sizeof(int) * (size_t)g.size), same = 1;
    g.off[0] = 0;
    for (int n = 0; n < N; n++) g.off[n + 1] = g.off[n] + h->node_size[n];
    for (int r = 0; r < g.size; r++) {
        pos[r] = g.off[h->node_of[r]] + h->lrank_of[r];
        same &= pos[r] == r;
    }
    g.work = same ? a->recvbuf : malloc((size_t)(g.size * g.blk));

    /* ia steps, and the sb sequence (the same on every rank of a node): range k is
     * broadcast in task task_of[k], with ia step task_of[k] */
    int nia = 0;
    if (N > 1) nia = g.imod == CT_HAN_MOD_LIBRARY ? 1 : g.imod == AG_IMOD_RING ? N - 1 : 0;
    if (g.imod == AG_IMOD_BRUCK)
        while ((1 << nia) < N) nia++;
    ag_range *seq = malloc(sizeof(ag_range) * (size_t)(N + 2 * nia + 2));
    int *task_of = malloc(sizeof(int) * (size_t)(N + 2 * nia + 2));
    int nseq = 0;
    seq[nseq++] = (ag_range){g.off[i], h->node_size[i]};
    if (g.imod == CT_HAN_MOD_LIBRARY) {
        if (g.off[i] > 0) seq[nseq++] = (ag_range){0, g.off[i]};
        if (g.off[i + 1] < g.size) seq[nseq++] = (ag_range){g.off[i + 1], g.size - g.off[i + 1]};
        for (int k = 0; k < nseq; k++) task_of[k] = k;
    } else if (g.imod == AG_IMOD_RING) {
        for (int t = 1; t < N; t++) {
            int b = ((i - t) % N + N) % N;
            seq[nseq++] = (ag_range){g.off[b], h->node_size[b]};
        }
        for (int k = 0; k < nseq; k++) task_of[k] = k;
    } else {
        task_of[0] = 0;
        for (int t = 0; t < nia; t++) {
            int d = 1 << t, got = node_ranges(&g, (i + d) % N, d < N - d ? d : N - d, seq + nseq);
            for (int k = 0; k < got; k++) task_of[nseq++] = t + 1;
        }
    }
    if (g.smod == CT_HAN_MOD_SHM && h->nlocal > 1) {   /* collective over the node */
        int most = 0;
        for (int k = 0; k < nseq; k++) most = seq[k].n > most ? seq[k].n : most;
        g.slot = (MPI_Aint)most * g.blk;
        g.shm = ct_hier_shm(h, 2 * g.slot);   /* node_ranges: at most two per task */
    }

    rc = gather(&g);
    /* task t: ia step t (leaders) + sb of the ranges of task t */
    int nsteps = leader ? nia : 0, ntasks = task_of[nseq - 1] + 1, k = 0;
    if (nsteps > ntasks) ntasks = nsteps;
    for (int t = 0; t < ntasks && rc == MPI_SUCCESS; t++) {
        nb_op *mine[3];
        int n = 0, rc2 = MPI_SUCCESS;
        if (t < nsteps)
            mine[n++] = g.imod == CT_HAN_MOD_LIBRARY ? library_ia(&g, &rc)
                      : g.imod == AG_IMOD_RING    ? ring_step(&g, t, &rc)
                                                  : bruck_step(&g, t, &rc);
        for (int place = 0; k < nseq && task_of[k] == t && rc == MPI_SUCCESS && rc2 == MPI_SUCCESS;
             k++, place++) {
            nb_op *o = start_sb(&g, seq[k], k, place, &rc2);
            if (o) mine[n++] = o;
        }
        int rc3 = progress(&g, mine, n);
        if (rc == MPI_SUCCESS) rc = rc2 != MPI_SUCCESS ? rc2 : rc3;
    }
    int rc4 = progress(&g, NULL, -1);          /* forwarding still in flight */
    if (rc == MPI_SUCCESS) rc = rc4;
    while (g.live) { nb_op *o = g.live; g.live = o->next; nb_free(o); }
    if (!same && rc == MPI_SUCCESS) permute(&g, pos);
    if (!same) free(g.work);
    free(seq); free(task_of); free(pos); free(g.off); free(g.vcounts);
    return rc;
}

static const char *supports(const ct_args *a)
{
    const char *r = ct_need_dense(a);
    return r ? r : ct_need_comm_elems_fit(a);
}

static int run(const ct_args *a, const int *p) { return han_allgather(a, p); }

const ct_algorithm ct_allgather_han = {
    .id = 5, .name = "han", .coll = CT_ALLGATHER,
    .description = "hierarchical task-based (HAN): node gather, leaders' ring (or Bruck) of node blocks overlapped with intra-node bcast",
    .nparams = 4,
    .params = {
        {.name = "imod", .unit = "", .help = "inter-node module: 0 library MPI_Iallgatherv, 1 colltune ring, 2 colltune Bruck (ceil(log2 N) steps)",
         .def = 1, .min = 0, .max = 2, .nprobe = 2, .probe = {0, 2}},
        {.name = "smod", .unit = "", .help = "intra-node module: 0 library MPI_Gather/MPI_Bcast, 1 colltune, 2 shared-memory bcast",
         .def = 1, .min = 0, .max = 2, .nprobe = 2, .probe = {0, 2}},
        {.name = "salg", .unit = "", .help = "intra-node bcast tree (smod 1): 1 binomial 2 binary 3 chain 4 4-nomial 5 linear",
         .def = 5, .min = 1, .max = 5, .nprobe = 1, .probe = {3}},
        {.name = "ss", .unit = "bytes", .help = "piece size of one intra-node bcast (smod 1), 0 = whole",
         .def = 65536, .min = 0, .max = 1 << 30, .nprobe = 1, .probe = {100}},
    },
    .tune = {"smod=0", "imod=2", "imod=2,smod=0"},
    .supports = supports, .run = run,
};
