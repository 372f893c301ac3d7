/* Chain of node chains, dataflow (large messages). The nodes form a chain from the
 * root's node on (in node order, wrapping); each node's head (the rank with the root's
 * node-local rank, else local rank 0) passes every piece to the next node's head first
 * and then down its own node's chain, local rank order. Every link of the chain carries
 * the message once, so a node's injection link carries m in and m out, LBnet's bytes.
 *
 * Pieces are small (ps bytes) and each is forwarded as soon as it arrived, not in
 * lock-step rounds: a rank keeps w receives posted (on SMPI, and under a rendezvous, a
 * message moves only once its receive is posted, so w bounds the pieces sharing a link),
 * and at most w sends per child in flight. A lock-step chain pays a piece's latency every
 * round, (pieces + hops) x (transfer + latency); here the latency of one piece overlaps
 * the transfer of the others, and small pieces keep the fill (hops x piece) short.
 * docs/algorithms.md has the measurements. Blocking only: a round-based schedule would
 * bring the lock-step back (MPI_Ibcast runs the next algorithm). */
#include <stdlib.h>
#include "../hier_internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

typedef struct { int parent, kid[2], nkid; } place;

/* comm rank at node-local rank lr of node n (-1: none) */
static int rank_at(const ct_hier *h, int size, int n, int lr)
{
    for (int r = 0; r < size; r++)
        if (h->node_of[r] == n && h->lrank_of[r] == lr) return r;
    return -1;
}

/* node-local rank at position q of a node's chain: the head first, then the others in
 * local rank order (and back: position of local rank lr) */
static int lrank_at(int q, int head_lr) { return q == 0 ? head_lr : q <= head_lr ? q - 1 : q; }
static int pos_of(int lr, int head_lr) { return lr == head_lr ? 0 : lr < head_lr ? lr + 1 : lr; }

/* comm rank of node n's head when the root has node-local rank j */
static int head_of(const ct_hier *h, int size, int n, int j)
{
    return rank_at(h, size, n, ct_hier_leader(h, n, j));
}

/* This rank's parent and children. A node's chain starts at its head (the root on the
 * root's node); the heads form the chain of nodes. */
static place place_of(const ct_hier *h, int size, int rank, int root)
{
    place p = {.parent = -1, .nkid = 0};
    int rn = h->node_of[root], j = h->lrank_of[root], nn = h->nnodes;
    int n = h->node_of[rank], pos = (n - rn + nn) % nn;          /* node's place in the chain */
    int head_lr = ct_hier_leader(h, n, j), at = pos_of(h->lrank_of[rank], head_lr);
    if (at == 0) {
        if (pos > 0) p.parent = head_of(h, size, (n - 1 + nn) % nn, j);
        if (pos + 1 < nn) p.kid[p.nkid++] = head_of(h, size, (n + 1) % nn, j);
    } else {
        p.parent = rank_at(h, size, n, lrank_at(at - 1, head_lr));
    }
    if (at + 1 < h->node_size[n]) p.kid[p.nkid++] = rank_at(h, size, n, lrank_at(at + 1, head_lr));
    return p;
}

static int run(const ct_args *a, const int *prm)
{
    int size, rank;
    ct_size_rank(a, &size, &rank);
    if (size == 1 || a->count == 0) return MPI_SUCCESS;
    ct_hier *h = ct_hier_get(a->comm);
    ct_sched *wire;
    if (!h || ct_sched_create(a->comm, &wire) != MPI_SUCCESS) return MPI_ERR_NO_MEM;
    MPI_Comm comm;
    int tag;
    ct_sched_wire(wire, &comm, &tag);
    place p = place_of(h, size, rank, a->root);
    MPI_Aint ext = ct_extent(a->dtype);
    int pe = ext > 0 && prm[0] / ext > 0 ? (int)(prm[0] / ext) : 1;   /* elements per piece */
    int n = (int)((a->count + (long long)pe - 1) / pe), w = prm[1];
    char *buf = a->recvbuf;
    MPI_Request *rr = malloc(sizeof(MPI_Request) * (size_t)w * 3), *sr = rr + w;
    if (!rr) { ct_sched_free(&wire); return MPI_ERR_NO_MEM; }
#define PIECE(k) buf + (MPI_Aint)(k) * pe * ext, (k) == n - 1 ? a->count - (k) * pe : pe, a->dtype
    int rc = MPI_SUCCESS, posted = 0;
#define KEEP(call) do { int r_ = (call); if (rc == MPI_SUCCESS) rc = r_; } while (0)
    for (int i = 0; i < 2 * w; i++) sr[i] = MPI_REQUEST_NULL;
    if (p.parent >= 0)
        for (; posted < n && posted < w; posted++)
            KEEP(MPI_Irecv(PIECE(posted), p.parent, tag, comm, &rr[posted]));
    for (int k = 0; k < n; k++) {
        if (p.parent >= 0) {
            KEEP(MPI_Wait(&rr[k % w], MPI_STATUS_IGNORE));
            if (posted < n) {
                KEEP(MPI_Irecv(PIECE(posted), p.parent, tag, comm, &rr[posted % w]));
                posted++;
            }
        }
        for (int c = 0; c < p.nkid; c++) {   /* the next node first: its chain is longer */
            MPI_Request *s = &sr[c * w + k % w];
            KEEP(MPI_Wait(s, MPI_STATUS_IGNORE));
            KEEP(MPI_Isend(PIECE(k), p.kid[c], tag, comm, s));
        }
    }
    KEEP(MPI_Waitall(2 * w, sr, MPI_STATUSES_IGNORE));
#undef PIECE
#undef KEEP
    free(rr);
    ct_sched_free(&wire);
    return rc;
}

const ct_algorithm ct_bcast_chain_flow = {
    .id = 10, .name = "chain_flow", .coll = CT_BCAST,
    .description = "chain through the nodes, each node's ranks a chain from its head; small pieces forwarded as they arrive, a window in flight (large messages)",
    .nparams = 2,
    .params = {
        {.name = "ps", .unit = "bytes", .help = "piece size (at least one element)",
         .def = 4096, .min = 1, .max = 1 << 30, .nprobe = 1, .probe = {1000}},
        {.name = "w", .unit = "", .help = "receives posted, and sends in flight per child",
         .def = 4, .min = 1, .max = 64, .nprobe = 1, .probe = {1}},
    },
    .tune = {"w=8"},
    .supports = supports, .run = run,
};
