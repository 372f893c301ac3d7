/* Dataflow bcast engine of the *_flow algorithms (bcast/chain_flow.c, bcast/tree_flow.c).
 * The message is cut into pieces; with two trees piece k travels along tree k % 2 of the
 * rank's ct_flow_place. Each piece is forwarded to its children as soon as it arrived,
 * not in lock-step rounds: per tree, w receives stay posted (on SMPI, as under a
 * rendezvous, a message moves only once its receive is posted, so w bounds the pieces
 * sharing a link) and at most w sends per child are in flight.
 * The trees are independent streams: a rank waits for whichever can go on. Taken in one
 * piece order, a rank inner in one tree and a leaf in the other would wait for the other
 * tree's piece before forwarding the next of its own, and two such ranks feeding each
 * other play ping-pong, one hop per piece (on the bundled dragonfly 2.5x slower than a chain
 * at 4 nodes, 11x at 128). `lag` bounds how far one stream may run ahead of the other
 * (0: no bound). Within a stream every rank receives and sends in piece order, so the rank
 * blocked at the lowest piece can always progress: no deadlock whatever w. */
#include <stdlib.h>
#include <limits.h>
#include "hier_internal.h"

enum { CT_FLOW_MAX_KIDS = 3 };   /* two nodes below in a tree, the next rank of the node */
/* A rank's parent (comm rank, -1: none) and children, in send order, in each of two
 * trees; piece k of a message travels along tree k % 2. */
typedef struct { int parent[2], kid[2][CT_FLOW_MAX_KIDS], nkid[2]; } ct_flow_place;

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

/* The nodes' heads (the rank with the root's node-local rank, else local rank 0) form
 * the node tree; each node's ranks a chain from its head, in local rank order. A head
 * sends to the other nodes first: their subtrees are longer. */
static ct_flow_place place_of(const ct_hier *h, int size, int rank, int root, ct_node_tree tree)
{
    ct_flow_place p = {.parent = {-1, -1}, .nkid = {0, 0}};
    int rn = h->node_of[root], j = h->lrank_of[root], nn = h->nnodes;
    int n = h->node_of[rank], v = (n - rn + nn) % nn;            /* node's place in the tree */
    int head_lr = ct_hier_leader(h, n, j), at = pos_of(h->lrank_of[rank], head_lr);
    int next = at + 1 < h->node_size[n] ? rank_at(h, size, n, lrank_at(at + 1, head_lr)) : -1;
    for (int t = 0; t < 2; t++) {
        if (at == 0) {
            int kids[2], nkids = 0, pv = tree(t, v, nn, kids, &nkids);
            if (pv >= 0) p.parent[t] = head_of(h, size, (pv + rn) % nn, j);
            for (int c = 0; c < nkids; c++)
                p.kid[t][p.nkid[t]++] = head_of(h, size, (kids[c] + rn) % nn, j);
        } else {
            p.parent[t] = rank_at(h, size, n, lrank_at(at - 1, head_lr));
        }
        if (next >= 0) p.kid[t][p.nkid[t]++] = next;
    }
    return p;
}

/* One tree's stream: its pieces t, t + ntrees, ... (stream index i is piece t + ntrees i),
 * on a wire (communicator and tag) of its own, so the streams never match each other's
 * messages. */
typedef struct {
    int np, parent, nkid, kid[CT_FLOW_MAX_KIDS], sent;   /* sent: children given piece done */
    ct_sched *wire;
    MPI_Comm comm;
    int tag, posted, done, got;  /* receives posted; pieces forwarded; piece `done` arrived */
    MPI_Request *rr, *sr;        /* w receives; w sends per child */
} stream;

/* A request is free once the wait below completed it (MPI_REQUEST_NULL). No MPI_Test:
 * SMPI charges each unsuccessful one simulated time (smpi/test), and blocking in a wait
 * is what a busy rank should do anyway. */
static int ready(const MPI_Request *r) { return *r == MPI_REQUEST_NULL; }

/* Forward the stream's pieces while they can go; returns the request it waits for
 * (NULL: the stream is done, or an error stopped it). */
static MPI_Request *advance(stream *s, const ct_args *a, int t, int nt, int pe, int n, int w,
                            int limit, int *rc)
{
    MPI_Aint ext = ct_extent(a->dtype);
#define PIECE(i) (char *)a->recvbuf + (MPI_Aint)(t + nt * (i)) * pe * ext, \
                 t + nt * (i) == n - 1 ? a->count - (t + nt * (i)) * pe : pe, a->dtype
    while (s->done < s->np && s->done < limit && *rc == MPI_SUCCESS) {
        int i = s->done;
        if (s->parent >= 0 && !s->got) {
            for (; s->posted < s->np && s->posted < i + w; s->posted++)
                *rc = MPI_Irecv(PIECE(s->posted), s->parent, s->tag, s->comm,
                                &s->rr[s->posted % w]);
            if (!ready(&s->rr[i % w])) return &s->rr[i % w];
            s->got = 1;
            /* the slot it freed takes piece i + w before piece i is sent on: w receives
             * stay posted while the sends go (posted after them, chain_flow at 16x12 2 MiB
             * took 6 % longer) */
            if (s->posted < s->np && *rc == MPI_SUCCESS) {
                *rc = MPI_Irecv(PIECE(s->posted), s->parent, s->tag, s->comm,
                                &s->rr[s->posted % w]);
                s->posted++;
            }
        }
        for (; s->sent < s->nkid && *rc == MPI_SUCCESS; s->sent++) {   /* in the place's order */
            MPI_Request *slot = &s->sr[s->sent * w + i % w];
            if (!ready(slot)) return slot;
            *rc = MPI_Isend(PIECE(i), s->kid[s->sent], s->tag, s->comm, slot);
        }
        s->sent = 0;
        s->got = 0;
        s->done++;
    }
#undef PIECE
    return NULL;
}

/* The bcast of a->recvbuf along p's first ntrees (1, 2) trees (size > 1, count > 0). */
static int flow_bcast(const ct_args *a, const ct_flow_place *p, int ntrees, int piece_bytes, int w,
                      int lag)
{
    MPI_Aint ext = ct_extent(a->dtype);
    int pe = ext > 0 && piece_bytes / ext > 0 ? (int)(piece_bytes / ext) : 1;  /* elements/piece */
    int n = (int)((a->count + (long long)pe - 1) / pe), rc = MPI_SUCCESS;
    stream st[2];
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)ntrees * w * (1 + CT_FLOW_MAX_KIDS));
    if (!req) return MPI_ERR_NO_MEM;
    for (int t = 0; t < ntrees; t++) {
        stream *s = &st[t];
        *s = (stream){.np = (n - t + ntrees - 1) / ntrees, .parent = p->parent[t], .nkid = p->nkid[t],
                      .rr = req + (size_t)t * w * (1 + CT_FLOW_MAX_KIDS)};
        s->sr = s->rr + w;
        for (int c = 0; c < s->nkid; c++) s->kid[c] = p->kid[t][c];
        for (int i = 0; i < w * (1 + CT_FLOW_MAX_KIDS); i++) s->rr[i] = MPI_REQUEST_NULL;
        /* every rank creates both wires, in the same order: matching tags */
        if (rc == MPI_SUCCESS) rc = ct_sched_create(a->comm, &s->wire);
        else s->wire = NULL;
        if (s->wire) ct_sched_wire(s->wire, &s->comm, &s->tag);
    }
    while (rc == MPI_SUCCESS) {
        MPI_Request *blocked[2], wait[2];
        int nb = 0, i, left = 0;
        for (int t = 0; t < ntrees; t++) {
            const stream *o = &st[1 - t];     /* lag > 0: at most lag pieces ahead of it */
            int limit = ntrees == 2 && lag > 0 && o->done < o->np ? o->done + lag : INT_MAX;
            MPI_Request *b = advance(&st[t], a, t, ntrees, pe, n, w, limit, &rc);
            if (b) blocked[nb++] = b;
            left += st[t].done < st[t].np;
        }
        if (!left || rc != MPI_SUCCESS) break;
        if (nb == 0) continue;     /* a stream held back by the lag may go on now */
        for (int k = 0; k < nb; k++) wait[k] = *blocked[k];
        rc = MPI_Waitany(nb, wait, &i, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && i != MPI_UNDEFINED) *blocked[i] = wait[i];   /* now NULL */
    }
    /* what is still in flight (all of it after an error: no peer is left waiting) */
    int e = MPI_Waitall(ntrees * w * (1 + CT_FLOW_MAX_KIDS), req, MPI_STATUSES_IGNORE);
    if (rc == MPI_SUCCESS) rc = e;
    for (int t = 0; t < ntrees; t++)
        if (st[t].wire) ct_sched_free(&st[t].wire);
    free(req);
    return rc;
}

int ct_flow_run(const ct_args *a, ct_node_tree tree, int ntrees, int piece_bytes, int w, int lag)
{
    int size, rank;
    ct_size_rank(a, &size, &rank);
    if (size == 1 || a->count == 0) return MPI_SUCCESS;
    ct_hier *h = ct_hier_get(a->comm);
    if (!h) return MPI_ERR_NO_MEM;
    ct_flow_place p = place_of(h, size, rank, a->root, tree);
    return flow_bcast(a, &p, ntrees, piece_bytes, w, lag);
}
