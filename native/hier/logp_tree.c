/* The greedy broadcast tree of the LogP model with two message costs.
 *
 * In LogP a message occupies its sender for a gap g and reaches a receiver that can
 * send on after a cost C (send overhead + latency + receive overhead). For one small
 * message the optimal broadcast has every rank that holds the data send it, one
 * message per g, to a rank that does not (Karp, Sahay, Santos, Schauser, "Optimal
 * broadcast and summation in the LogP model", SPAA 1993); its reverse is the optimal
 * summation. A cluster has two costs, inside a node (C_intra) and across nodes
 * (C_inter, about twice or more), so a holder chooses between a rank of its own node
 * (cheap, and one more sender there) and a node nobody holds yet (dear, and a new node
 * in which to spread). The rule here: a holder first informs up to lf ranks of its own
 * node, then the first rank of a node not yet reached, while any remain, then the rest
 * of its node. Every lf from 0 up is simulated with the model's costs and the fastest
 * kept (lf = -1), or lf is given.
 *
 * The ranks of a node share its network port and its memory: a message also holds the
 * node's port (across nodes) or its memory (inside) for bytes / bandwidth, one message
 * after the other (LogGP's G per node). Without it, every rank of a node sending to new
 * nodes at once looked fastest, and at 2 KiB on SMPI's fat-tree took 14.8 us where the
 * tree the bandwidths choose takes 6.9 (768 ranks; 4-nomial 8.7).
 *
 * Every rank simulates the same schedule from the same inputs (node map, root, costs,
 * message size; integer nanoseconds, so no rounding differs) and keeps its own parent
 * and children, in the order it sends to them. k-nomial trees with a fixed radix ignore
 * the two costs (SMPI's fat-tree, 768 ranks, 8 B: 4-nomial 7.21 us, this tree 5.47). */
#include <stdint.h>
#include <stdlib.h>
#include "hier_internal.h"

typedef struct { int64_t t; int seq, rank; } ev;

/* binary min-heap on (t, seq): ties in the order the events were made */
static int ev_less(const ev *a, const ev *b) { return a->t < b->t || (a->t == b->t && a->seq < b->seq); }

static void heap_push(ev *h, int *n, ev e)
{
    int i = (*n)++;
    while (i > 0 && ev_less(&e, &h[(i - 1) / 2])) h[i] = h[(i - 1) / 2], i = (i - 1) / 2;
    h[i] = e;
}

static ev heap_pop(ev *h, int *n)
{
    ev top = h[0], last = h[--*n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && ev_less(&h[c + 1], &h[c])) c++;
        if (!ev_less(&h[c], &last)) break;
        h[i] = h[c], i = c;
    }
    if (*n > 0) h[i] = last;
    return top;
}

typedef struct {
    int size, nnodes;
    const int *node_of;
    int *first, *members;        /* node n's ranks: members[first[n] .. first[n+1]), comm order */
    int *lnext, *sent, *from;    /* per node: cursor; per rank: messages sent, parent (-2: none yet) */
    int64_t *port, *mem;         /* per node: when its network port / memory is free */
    ev *heap;
} sim;

/* next rank of node n that holds nothing, or -1 */
static int take_local(sim *s, int n)
{
    while (s->lnext[n] < s->first[n + 1]) {
        int r = s->members[s->lnext[n]++];
        if (s->from[r] == -2) return r;
    }
    return -1;
}

/* Simulates the schedule for one lf; returns the completion time (ns). When me >= 0,
 * records me's children in send order (child, *nchild) and returns its parent in *parent. */
static int64_t simulate(sim *s, int root, const ct_logp_key *k, int lf, int me, int *parent,
                        int *child, int *nchild)
{
    int n = 0, seq = 0, next_node = 1;
    /* a reduce's parent also combines each child's message: a longer gap (Karp et al.'s
     * summation counts the addition as the sender's gap does a message) */
    int64_t done = 0, c_inter = k->cost[1], c_intra = k->cost[2],
            gap = k->cost[0] + (k->cost[5] ? (int64_t)(k->bytes * 1000.0 / k->cost[5]) : 0);
    /* bytes / (MB/s) = us */
    int64_t x_inter = (int64_t)(k->bytes * 1000.0 / k->cost[3]), x_intra = (int64_t)(k->bytes * 1000.0 / k->cost[4]);
    for (int v = 0; v < s->nnodes; v++) s->lnext[v] = s->first[v], s->port[v] = s->mem[v] = 0;
    for (int r = 0; r < s->size; r++) s->sent[r] = 0, s->from[r] = -2;
    s->from[root] = -1;
    if (nchild) *nchild = 0;
    int rnode = s->node_of[root];
    heap_push(s->heap, &n, (ev){0, seq++, root});
    while (n > 0) {
        ev e = heap_pop(s->heap, &n);
        int r = e.rank, home = s->node_of[r], to = -1, across = 0;
        if (s->sent[r] < lf) to = take_local(s, home);
        if (to < 0 && next_node < s->nnodes) {      /* nodes in order after the root's */
            int v = (rnode + next_node++) % s->nnodes;
            to = take_local(s, v), across = 1;
        }
        if (to < 0) to = take_local(s, home);
        if (to < 0) continue;                        /* nothing left for r to do */
        s->sent[r]++;
        s->from[to] = r;
        if (r == me) child[(*nchild)++] = to;
        int64_t *busy = across ? &s->port[home] : &s->mem[home], x = across ? x_inter : x_intra;
        int64_t start = e.t > *busy ? e.t : *busy, ready = start + (across ? c_inter : c_intra) + x;
        *busy = start + x;
        if (ready > done) done = ready;
        heap_push(s->heap, &n, (ev){ready, seq++, to});
        heap_push(s->heap, &n, (ev){e.t + gap, seq++, r});
    }
    if (parent) *parent = s->from[me];
    return done;
}

/* the model's message size for `bytes`: the next power of two (at least 8), so that a
 * program's many sizes share a few trees */
static long long size_class(long long bytes)
{
    long long b = 8;
    while (b < bytes) b *= 2;
    return b;
}

static int same_key(const ct_logp_key *a, const ct_logp_key *b)
{
    return a->root == b->root && a->lf == b->lf && a->bytes == b->bytes &&
           !memcmp(a->cost, b->cost, sizeof a->cost);
}

const ct_logp_tree *ct_logp_tree_get(ct_hier *h, MPI_Comm comm, const ct_logp_key *key)
{
    ct_logp_key k = *key;
    k.bytes = size_class(k.bytes);
    for (int i = 0; i < CT_LOGP_CACHED; i++)
        if (h->logp[i] && same_key(&h->logp[i]->key, &k)) return h->logp[i];
    int size, me, slot = h->logp_next;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &me);
    ct_logp_tree *t = h->logp[slot];
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t || !(t->child = malloc(sizeof(int) * (size_t)size))) {
            free(t);
            return NULL;
        }
        h->logp[slot] = t;
    }
    t->key.root = -1;             /* not valid until built */
    int root = k.root, lf = k.lf;
    sim s = {.size = size, .nnodes = h->nnodes, .node_of = h->node_of};
    s.first = calloc((size_t)h->nnodes + 1, sizeof(int));
    s.lnext = malloc(sizeof(int) * (size_t)h->nnodes);
    s.members = malloc(sizeof(int) * (size_t)size);
    s.sent = malloc(sizeof(int) * (size_t)size);
    s.from = malloc(sizeof(int) * (size_t)size);
    s.heap = malloc(sizeof(ev) * 2 * (size_t)size);
    s.port = malloc(2 * sizeof(int64_t) * (size_t)h->nnodes);
    s.mem = s.port ? s.port + h->nnodes : NULL;
    if (!s.first || !s.lnext || !s.members || !s.sent || !s.from || !s.heap || !s.port) {
        t = NULL;
        goto out;
    }
    for (int r = 0; r < size; r++) s.first[h->node_of[r] + 1]++;
    for (int v = 0; v < h->nnodes; v++) s.first[v + 1] += s.first[v];
    for (int v = 0; v < h->nnodes; v++) s.lnext[v] = s.first[v];
    for (int r = 0; r < size; r++) s.members[s.lnext[h->node_of[r]]++] = r;
    int best = lf;
    if (lf < 0) {          /* the model's choice; a larger lf only on a strict gain */
        int64_t tbest = INT64_MAX;
        for (int l = 0; l < h->maxppn; l++) {
            int64_t tl = simulate(&s, root, &k, l, -1, NULL, NULL, NULL);
            if (tl < tbest) tbest = tl, best = l;
        }
    }
    t->lf = best;
    t->model_ns = simulate(&s, root, &k, best, me, &t->parent, t->child, &t->nchild);
    t->key = k;
    h->logp_next = (slot + 1) % CT_LOGP_CACHED;
out:
    free(s.first); free(s.lnext); free(s.members); free(s.sent); free(s.from); free(s.heap);
    free(s.port);
    return t;
}

void ct_logp_tree_free(ct_logp_tree *t)
{
    if (t) free(t->child);
    free(t);
}

ct_logp_key ct_logp_key_of(const ct_args *a, const int *p, int rbw)
{
    return (ct_logp_key){.root = a->root, .cost = {p[0], p[1], p[2], p[3], p[4], rbw}, .lf = p[5],
                         .bytes = (long long)a->count * ct_extent(a->dtype)};
}
