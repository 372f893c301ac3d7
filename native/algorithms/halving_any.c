/* Recursive halving / doubling for any number of ranks (commutative ops).
 *
 * MPICH's scheme (halving.c) folds the first 2*rem ranks pairwise before a
 * power-of-two exchange and unfolds after it: each rank that works on then
 * moves the whole vector twice more, about 3m per link direction against the
 * 2m(P-1)/P an allreduce needs, 1.5x the bound whenever P is not a power of
 * two. benchmarks/best_of_both_links.py measured exactly that on the held-out
 * 48x4 dragonfly layout (48 lanes: 2.94m through a node's link).
 *
 * Here a group of n ranks (base + j*stride, j < n) splits into its even
 * members (A) and its odd ones (B); A keeps the lower ceil(n/2) of the group's
 * n blocks, B the upper floor(n/2). Members 2j and 2j+1 exchange halves, so
 * the largest exchange goes to the nearest rank (allreduce/rabenseifner.c says
 * why). When n is odd A's last member has no partner: it sends B's j-th member
 * the j-th block of B's range, one block more for that member, and in the
 * allgather gets the blocks back the same way. Each contribution is still
 * reduced into every block exactly once; a link carries 2m(P-1)/P plus at most
 * one block per odd level. For powers of two the schedule is the one the
 * fold's power-of-two exchange made, message for message. */
#include "internal.h"

static int member(const ct_halving_level *l, int j) { return l->base + j * l->stride; }

/* Element bounds at level l: A keeps [a0, a1), B [a1, b1). */
static void halves(const ct_args *a, int size, const ct_halving_level *l, int *a0, int *a1, int *b1)
{
    *a0 = ct_block_start(a->count, size, l->c);
    *a1 = ct_block_start(a->count, size, l->c + (l->n + 1) / 2);
    *b1 = ct_block_start(a->count, size, l->c + l->n);
}

/* Element bounds [*e0, *e1) of B's j-th block at level l (what A's unpartnered member
 * and B's member j exchange when n is odd). */
static void b_block(const ct_args *a, int size, const ct_halving_level *l, int j, int *e0, int *e1)
{
    int b = l->c + (l->n + 1) / 2 + j;
    *e0 = ct_block_start(a->count, size, b);
    *e1 = ct_block_start(a->count, size, b + 1);
}

int ct_rs_any(ct_sched *s, void *buf, void *tmp, const ct_args *a, ct_halving_level *lev)
{
    int size, rank, k = 0;
    ct_size_rank(a, &size, &rank);
    MPI_Aint ext = ct_extent(a->dtype);
    /* one block from A's unpartnered member, at odd levels only */
    void *extra = ct_is_pof2(size) ? NULL : ct_sched_alloc(s, (size_t)((a->count / size + 1) * ext));
    ct_halving_level l = {.n = size, .c = 0, .i = rank, .base = 0, .stride = 1};
    while (l.n > 1) {
        int na = (l.n + 1) / 2, odd = l.n % 2, j = l.i / 2;
        int a0, a1, b1;
        halves(a, size, &l, &a0, &a1, &b1);
        lev[k++] = l;
        ct_sched_round(s);
        if (l.i % 2 == 0 && l.i + 1 < l.n) {            /* A, with a partner */
            int peer = member(&l, l.i + 1);
            ct_sched_send(s, ct_at(buf, ext, a1), b1 - a1, a->dtype, peer);
            ct_sched_recv(s, ct_at(tmp, ext, a0), a1 - a0, a->dtype, peer);
            ct_sched_round(s);
            ct_sched_reduce(s, ct_at(tmp, ext, a0), ct_at(buf, ext, a0), a1 - a0, a->dtype, a->op);
        } else if (l.i % 2 == 0) {                      /* A's last member, n odd */
            for (int b = 0; b < l.n / 2; b++) {
                int e0, e1;
                b_block(a, size, &l, b, &e0, &e1);
                ct_sched_send(s, ct_at(buf, ext, e0), e1 - e0, a->dtype, member(&l, 2 * b + 1));
            }
        } else {                                        /* B */
            int e0, e1;
            b_block(a, size, &l, j, &e0, &e1);
            ct_sched_send(s, ct_at(buf, ext, a0), a1 - a0, a->dtype, member(&l, l.i - 1));
            ct_sched_recv(s, ct_at(tmp, ext, a1), b1 - a1, a->dtype, member(&l, l.i - 1));
            if (odd) ct_sched_recv(s, extra, e1 - e0, a->dtype, member(&l, l.n - 1));
            ct_sched_round(s);
            ct_sched_reduce(s, ct_at(tmp, ext, a1), ct_at(buf, ext, a1), b1 - a1, a->dtype, a->op);
            if (odd) {          /* its own round: the block lies in the range just reduced */
                ct_sched_round(s);
                ct_sched_reduce(s, extra, ct_at(buf, ext, e0), e1 - e0, a->dtype, a->op);
            }
        }
        if (l.i % 2) {
            l.c += na;
            l.n /= 2;
            l.base += l.stride;
        } else {
            l.n = na;
        }
        l.i = j;
        l.stride *= 2;
    }
    return k;
}

void ct_ag_any(ct_sched *s, void *buf, const ct_args *a, const ct_halving_level *lev, int k)
{
    int size;
    MPI_Comm_size(a->comm, &size);
    MPI_Aint ext = ct_extent(a->dtype);
    while (k-- > 0) {
        const ct_halving_level *l = &lev[k];
        int j = l->i / 2;
        int a0, a1, b1;
        halves(a, size, l, &a0, &a1, &b1);
        ct_sched_round(s);
        if (l->i % 2 == 0 && l->i + 1 < l->n) {
            int peer = member(l, l->i + 1);
            ct_sched_send(s, ct_at(buf, ext, a0), a1 - a0, a->dtype, peer);
            ct_sched_recv(s, ct_at(buf, ext, a1), b1 - a1, a->dtype, peer);
        } else if (l->i % 2 == 0) {
            for (int b = 0; b < l->n / 2; b++) {
                int e0, e1;
                b_block(a, size, l, b, &e0, &e1);
                ct_sched_recv(s, ct_at(buf, ext, e0), e1 - e0, a->dtype, member(l, 2 * b + 1));
            }
        } else {
            ct_sched_send(s, ct_at(buf, ext, a1), b1 - a1, a->dtype, member(l, l->i - 1));
            ct_sched_recv(s, ct_at(buf, ext, a0), a1 - a0, a->dtype, member(l, l->i - 1));
            if (l->n % 2) {
                int e0, e1;
                b_block(a, size, l, j, &e0, &e1);
                ct_sched_send(s, ct_at(buf, ext, e0), e1 - e0, a->dtype, member(l, l->n - 1));
            }
        }
    }
}

/* Group index of the member that gathers for the half of l's group that does not hold
 * collector g: g's partner, or B's last member when g is A's unpartnered last one. */
static int other_collector(const ct_halving_level *l, int g)
{
    if (g % 2) return g - 1;
    return g + 1 < l->n ? g + 1 : l->n - 2;
}

void ct_gather_any(ct_sched *s, void *buf, const ct_args *a, const ct_halving_level *lev, int k,
                   int root)
{
    int size, coll[32], sub[32];
    MPI_Comm_size(a->comm, &size);
    MPI_Aint ext = ct_extent(a->dtype);
    /* top down: who collects each level's group (coll) and this rank's half (sub) */
    for (int t = 0, g = root; t < k; t++) {
        const ct_halving_level *l = &lev[t];
        coll[t] = g;
        sub[t] = (g % 2 == l->i % 2) ? g : other_collector(l, g);
        g = sub[t] / 2;
    }
    /* bottom up: a half's collector hands its range to the group's */
    for (int t = k - 1; t >= 0; t--) {
        const ct_halving_level *l = &lev[t];
        int a0, a1, b1;
        halves(a, size, l, &a0, &a1, &b1);
        int in_a = l->i % 2 == 0;
        ct_sched_round(s);
        if (l->i == sub[t] && sub[t] != coll[t])
            ct_sched_send(s, ct_at(buf, ext, in_a ? a0 : a1), in_a ? a1 - a0 : b1 - a1, a->dtype,
                          member(l, coll[t]));
        else if (l->i == coll[t])
            ct_sched_recv(s, ct_at(buf, ext, in_a ? a1 : a0), in_a ? b1 - a1 : a1 - a0, a->dtype,
                          member(l, other_collector(l, coll[t])));
    }
}
