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
 * kept (lf = -1), or lf is given. The search stops at the first lf that never held a
 * holder back (the larger ones make the same tree, so the choice is the same): at 1024
 * nodes x 128 ranks and 8 B, 11 of the 128 are simulated (0.36 s instead of 4.1 of CPU
 * per rank, on the first call of a size class; native/tests/logpsearch.c).
 *
 * The ranks of a node share its network port and its memory: a message also holds the
 * node's port (across nodes) or its memory (inside) for bytes / bandwidth, one message
 * after the other (LogGP's G per node). Without it, every rank of a node sending to new
 * nodes at once looked fastest, and at 2 KiB on SMPI's fat-tree took 14.8 us where the
 * tree the bandwidths choose takes 6.9 (768 ranks; 4-nomial 8.7).
 *
 * Every rank simulates the same schedule from the same inputs (node map, costs, message
 * size; integer nanoseconds, so no rounding differs). Where every node has as many ranks,
 * the tree is built once for any root, in virtual ranks (node and local rank counted from
 * the root's): a program that broadcasts from every rank in turn does not simulate per
 * call; nodes of different sizes have a tree per root. The last CT_LOGP_CACHED trees are
 * kept per communicator. k-nomial trees with a fixed radix ignore
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
    const int *first, *members;  /* node n's ranks: members[first[n] .. first[n+1]), in order */
    int *lnext, *sent, *from;    /* per node: cursor; per rank: messages sent, parent (-2: none yet) */
    int *sender, *receiver;      /* the sends in the order they are made (when recorded) */
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

/* whether node n has a rank that holds nothing (the cursor skips only ranks that hold) */
static int has_local(sim *s, int n)
{
    while (s->lnext[n] < s->first[n + 1] && s->from[s->members[s->lnext[n]]] != -2) s->lnext[n]++;
    return s->lnext[n] < s->first[n + 1];
}

/* Simulates the schedule for one lf; returns the completion time (ns); with record, the
 * sends in s->sender / s->receiver (size - 1 of them) and the parents in s->from.
 * *bound: whether lf ever sent a holder across while its node had a rank to inform and
 * nodes remained; if not, any larger lf makes the same schedule (the same branch at
 * every step), so the search over lf can stop there. */
static int64_t simulate(sim *s, int root, const ct_logp_key *k, int lf, int record, int *bound)
{
    int n = 0, seq = 0, next_node = 1, nsent = 0;
    /* a reduce's parent also combines each child's message: a longer gap (Karp et al.'s
     * summation counts the addition as the sender's gap does a message) */
    int64_t done = 0, c_inter = k->cost[1], c_intra = k->cost[2],
            gap = k->cost[0] + (k->cost[5] ? (int64_t)(k->bytes * 1000.0 / k->cost[5]) : 0);
    /* bytes / (MB/s) = us */
    int64_t x_inter = (int64_t)(k->bytes * 1000.0 / k->cost[3]), x_intra = (int64_t)(k->bytes * 1000.0 / k->cost[4]);
    for (int v = 0; v < s->nnodes; v++) s->lnext[v] = s->first[v], s->port[v] = s->mem[v] = 0;
    for (int r = 0; r < s->size; r++) s->sent[r] = 0, s->from[r] = -2;
    s->from[root] = -1;
    int rnode = s->node_of[root];
    heap_push(s->heap, &n, (ev){0, seq++, root});
    while (n > 0) {
        ev e = heap_pop(s->heap, &n);
        int r = e.rank, home = s->node_of[r], to = -1, across = 0;
        if (s->sent[r] < lf) to = take_local(s, home);
        else if (!*bound && next_node < s->nnodes && has_local(s, home)) *bound = 1;
        if (to < 0 && next_node < s->nnodes) {      /* nodes in order after the root's */
            int v = (rnode + next_node++) % s->nnodes;
            to = take_local(s, v), across = 1;
        }
        if (to < 0) to = take_local(s, home);
        if (to < 0) continue;                        /* nothing left for r to do */
        s->sent[r]++;
        s->from[to] = r;
        if (record) s->sender[nsent] = r, s->receiver[nsent] = to, nsent++;
        int64_t *busy = across ? &s->port[home] : &s->mem[home], x = across ? x_inter : x_intra;
        int64_t start = e.t > *busy ? e.t : *busy, ready = start + (across ? c_inter : c_intra) + x;
        *busy = start + x;
        if (ready > done) done = ready;
        heap_push(s->heap, &n, (ev){ready, seq++, to});
        heap_push(s->heap, &n, (ev){e.t + gap, seq++, r});
    }
    return done;
}

/* The model's fastest lf over 0 .. nlf - 1 (a larger lf only on a strict gain), with
 * stop up to the first lf that never binds (simulate); *sims counts the simulations. */
static int best_lf(sim *s, int root, const ct_logp_key *k, int nlf, int stop, long *sims)
{
    int64_t tbest = INT64_MAX;
    int best = 0, bound = 1;
    for (int l = 0; l < nlf && (bound || !stop); l++, ++*sims) {
        bound = 0;
        int64_t tl = simulate(s, root, k, l, 0, &bound);
        if (tl < tbest) tbest = tl, best = l;
    }
    return best;
}

/* One tree: every rank's parent and children (in send order), in virtual ranks (key.root
 * -1: the root is 0, node and local rank counted from the root's) or comm ranks. */
typedef struct {
    ct_logp_key key;             /* bytes: the size class; root -1: virtual */
    int built;
    int *parent, *cfirst, *clist;   /* children of v: clist[cfirst[v] .. cfirst[v + 1]) */
} tree;

struct ct_logp_cache {
    int size, uniform, ppn;
    int *first, *members, *vnode_of, *vfirst;   /* the comm's nodes; the virtual ones */
    tree trees[CT_LOGP_CACHED];
    int next;                                   /* the slot the next new tree takes */
    ct_logp_place place;                        /* the answer of the last call */
};

static struct ct_logp_cache *cache_of(ct_hier *h, MPI_Comm comm)
{
    if (h->logp) return h->logp;
    struct ct_logp_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    MPI_Comm_size(comm, &c->size);
    int size = c->size, nn = h->nnodes;
    c->uniform = !h->uneven;
    c->ppn = h->node_size[0];
    c->first = calloc((size_t)nn + 1, sizeof(int));
    c->members = malloc(sizeof(int) * (size_t)size);
    c->vnode_of = malloc(sizeof(int) * (size_t)size);
    c->vfirst = malloc(sizeof(int) * ((size_t)nn + 1));
    c->place.child = malloc(sizeof(int) * (size_t)size);
    if (!c->first || !c->members || !c->vnode_of || !c->vfirst || !c->place.child) {
        ct_logp_free(c);
        return NULL;
    }
    for (int r = 0; r < size; r++) c->first[h->node_of[r] + 1]++;
    for (int v = 0; v < nn; v++) c->first[v + 1] += c->first[v];
    /* comm order inside a node is local rank order (the node split is keyed by rank) */
    for (int r = 0; r < size; r++) c->members[c->first[h->node_of[r]] + h->lrank_of[r]] = r;
    for (int v = 0; v <= nn; v++) c->vfirst[v] = v * c->ppn;
    for (int r = 0; r < size; r++) c->vnode_of[r] = c->uniform ? r / c->ppn : 0;
    h->logp = c;
    return c;
}

static int same_key(const ct_logp_key *a, const ct_logp_key *b)
{
    return a->root == b->root && a->lf == b->lf && a->bytes == b->bytes &&
           !memcmp(a->cost, b->cost, sizeof a->cost);
}

/* the model's message size for `bytes`: the next power of two (at least 8), so that a
 * program's many sizes share a few trees */
static long long size_class(long long bytes)
{
    long long b = 8;
    while (b < bytes) b *= 2;
    return b;
}

/* builds t for k (lf -1: the model's fastest); MPI_ERR_NO_MEM leaves t unbuilt */
static int build(struct ct_logp_cache *c, const ct_hier *h, tree *t, const ct_logp_key *k)
{
    int size = c->size, virt = k->root < 0, rc = MPI_SUCCESS;
    sim s = {.size = size, .nnodes = h->nnodes, .node_of = virt ? c->vnode_of : h->node_of,
             .first = virt ? c->vfirst : c->first, .members = NULL};
    int *ident = NULL;
    if (virt) {       /* virtual rank v is node v / ppn, local rank v % ppn */
        ident = malloc(sizeof(int) * (size_t)size);
        if (ident) for (int v = 0; v < size; v++) ident[v] = v;
        s.members = ident;
    } else {
        s.members = c->members;
    }
    s.lnext = malloc(sizeof(int) * (size_t)h->nnodes);
    s.sent = malloc(sizeof(int) * (size_t)size);
    s.from = malloc(sizeof(int) * (size_t)size);
    s.sender = malloc(2 * sizeof(int) * (size_t)size);
    s.receiver = s.sender ? s.sender + size : NULL;
    s.heap = malloc(sizeof(ev) * 2 * (size_t)size);
    s.port = malloc(2 * sizeof(int64_t) * (size_t)h->nnodes);
    s.mem = s.port ? s.port + h->nnodes : NULL;
    free(t->parent); free(t->cfirst); free(t->clist);
    t->built = 0;
    t->parent = malloc(sizeof(int) * (size_t)size);
    t->cfirst = calloc((size_t)size + 1, sizeof(int));
    t->clist = malloc(sizeof(int) * (size_t)size);
    if (!s.members || !s.lnext || !s.sent || !s.from || !s.sender || !s.heap || !s.port ||
        !t->parent || !t->cfirst || !t->clist) {
        rc = MPI_ERR_NO_MEM;
        goto out;
    }
    int root = virt ? 0 : k->root, best = k->lf, bound = 0;
    long sims = 0;
    if (best < 0) best = best_lf(&s, root, k, h->maxppn, 1, &sims);   /* the model's choice */
    simulate(&s, root, k, best, 1, &bound);
    /* children per sender, in send order (a stable counting sort of the sends) */
    for (int i = 0; i < size - 1; i++) t->cfirst[s.sender[i] + 1]++;
    for (int v = 0; v < size; v++) t->cfirst[v + 1] += t->cfirst[v];
    int *fill = s.sent;                                        /* per sender: next slot */
    for (int v = 0; v < size; v++) fill[v] = t->cfirst[v];
    for (int i = 0; i < size - 1; i++) t->clist[fill[s.sender[i]]++] = s.receiver[i];
    memcpy(t->parent, s.from, sizeof(int) * (size_t)size);
    t->key = *k;
    t->built = 1;
out:
    free(ident); free(s.lnext); free(s.sent); free(s.from); free(s.sender); free(s.heap);
    free(s.port);
    return rc;
}

const ct_logp_place *ct_logp_place_get(ct_hier *h, MPI_Comm comm, const ct_logp_key *key)
{
    struct ct_logp_cache *c = cache_of(h, comm);
    if (!c) return NULL;
    ct_logp_key k = *key;
    int root = k.root, me;
    k.bytes = size_class(k.bytes);
    if (c->uniform) k.root = -1;
    MPI_Comm_rank(comm, &me);
    tree *t = NULL;
    for (int i = 0; i < CT_LOGP_CACHED && !t; i++)
        if (c->trees[i].built && same_key(&c->trees[i].key, &k)) t = &c->trees[i];
    ct_logp_place *p = &c->place;
    if (!t) {
        t = &c->trees[c->next];
        if (build(c, h, t, &k) != MPI_SUCCESS) return NULL;
        c->next = (c->next + 1) % CT_LOGP_CACHED;
    }
    /* comm rank <-> the tree's rank: the identity, or nodes and local ranks rotated so
     * that the root is virtual rank 0 */
    int nn = h->nnodes, ppn = c->ppn, rn = h->node_of[root], rl = h->lrank_of[root];
    int v = !c->uniform ? me
                        : ((h->node_of[me] - rn + nn) % nn) * ppn + (h->lrank_of[me] - rl + ppn) % ppn;
#define COMM_RANK(u) (!c->uniform ? (u) : c->members[c->first[((u) / ppn + rn) % nn] + ((u) % ppn + rl) % ppn])
    p->parent = t->parent[v] < 0 ? -1 : COMM_RANK(t->parent[v]);
    p->nchild = t->cfirst[v + 1] - t->cfirst[v];
    for (int i = 0; i < p->nchild; i++) p->child[i] = COMM_RANK(t->clist[t->cfirst[v] + i]);
#undef COMM_RANK
    return p;
}

void ct_logp_free(struct ct_logp_cache *c)
{
    if (!c) return;
    for (int i = 0; i < CT_LOGP_CACHED; i++)
        free(c->trees[i].parent), free(c->trees[i].cfirst), free(c->trees[i].clist);
    free(c->first); free(c->members); free(c->vnode_of); free(c->vfirst); free(c->place.child);
    free(c);
}

ct_logp_key ct_logp_key_of(const ct_args *a, const int *p, int rbw)
{
    return (ct_logp_key){.root = a->root, .cost = {p[0], p[1], p[2], p[3], p[4], rbw}, .lf = p[5],
                         .bytes = (long long)a->count * ct_extent(a->dtype)};
}
