/* Tree shapes and the generic segmented tree bcast / tree reduce that the
 * binomial, binary, k-nomial, pipeline and binary-pipelined algorithms share. */
#include <stdlib.h>
#include "internal.h"

/* Returns the parent's virtual rank (-1 at the root) and fills child[]. */
int ct_tree(ct_tree_kind kind, int radix, int v, int size, int *child, int *nchild)
{
    int parent = -1, n = 0;
    if (kind == CT_TREE_KARY) {
        parent = v == 0 ? -1 : (v - 1) / radix;
        for (int j = 1; j <= radix; j++)
            if ((long)radix * v + j < size) child[n++] = radix * v + j;
    } else if (kind == CT_TREE_CHAIN) {
        /* size-1 non-root ranks in min(radix, size-1) chains of contiguous ranks */
        int m = size - 1, f = radix < m ? radix : m;
        for (int j = 0; j < f; j++) {
            int lo = 1 + ct_block_start(m, f, j), hi = 1 + ct_block_start(m, f, j + 1);
            if (v == 0) { child[n++] = lo; continue; }
            if (v < lo || v >= hi) continue;
            parent = v == lo ? 0 : v - 1;
            if (v + 1 < hi) child[n++] = v + 1;
        }
    } else {  /* k-nomial: parent clears the lowest non-zero base-radix digit */
        long m = 1;
        if (v == 0) {
            while (m < size) m *= radix;
        } else {
            while (v % (m * radix) == 0) m *= radix;
            parent = (int)(v - v % (m * radix));
        }
        for (long w = m / radix; w >= 1; w /= radix)   /* biggest subtrees first */
            for (int j = 1; j < radix; j++)
                if (v + j * w < size) child[n++] = (int)(v + j * w);
    }
    *nchild = n;
    return parent;
}

/* Double binary tree over positions 1..m (m = size - 1 non-root ranks): the
 * in-order tree in which x's level is its lowest set bit, leaves are the odd
 * positions and the top is the highest power of two <= m. Tree 0 puts vrank v
 * at position v; tree 1 mirrors (m even) or shifts by one (m odd) so that the
 * odd (leaf) positions of one are the even (inner) ones of the other. */
static int dual_pos(int t, int v, int m) { return t == 0 ? v : (m % 2 == 0 ? m + 1 - v : v % m + 1); }
static int dual_vrank(int t, int x, int m) { return t == 0 ? x : (m % 2 == 0 ? m + 1 - x : (x + m - 2) % m + 1); }

int ct_dual_tree(int t, int v, int size, int *child, int *nchild)
{
    int m = size - 1, top = 1, n = 0;
    *nchild = 0;
    if (m < 1) return -1;
    while (top * 2 <= m) top *= 2;
    if (v == 0) {                        /* the root feeds the top of tree t */
        child[0] = dual_vrank(t, top, m);
        *nchild = 1;
        return -1;
    }
    int x = dual_pos(t, v, m), b = x & -x;
    if (b > 1) {
        child[n++] = dual_vrank(t, x - b / 2, m);
        int h = b / 2;
        while (h > 1 && x + h > m) h /= 2;   /* right subtree cut by m: its first node <= m */
        if (x + h <= m) child[n++] = dual_vrank(t, x + h, m);
    }
    *nchild = n;
    if (x == top) return 0;
    int p = x;
    do {                                 /* up until a position that exists */
        int pb = p & -p;
        p = (p & 2 * pb) ? p - pb : p + pb;
    } while (p > m);
    return dual_vrank(t, p, m);
}

/* Round r: receive segment r from the parent and forward segment r-1 to the
 * children (the root sends segment r), so a rank receives the next segment
 * while its sends of the previous one are in flight. */
void ct_tree_bcast(ct_sched *s, const ct_args *a, ct_tree_kind kind, int radix, int segbytes)
{
    int size, rank, nchild;
    ct_size_rank(a, &size, &rank);
    if (a->count == 0 || size == 1) return;
    int v = (rank - a->root + size) % size;
    int *child = ct_sched_alloc(s, sizeof(int) * (size_t)size);
    if (!child) return;   /* the schedule keeps the error */
    int parent = ct_tree(kind, radix, v, size, child, &nchild);
    MPI_Aint ext = ct_extent(a->dtype);
    int seg = ct_seg_elems(segbytes, ext, a->count), nseg = (a->count + seg - 1) / seg;
    int lag = parent >= 0, prank = (parent + a->root) % size;
    ct_sched_round(s);
    if (nseg == 1) {   /* whole message: one child at a time, biggest subtree first, as
                        * MPICH's binomial; sent together they share the link and every
                        * subtree starts only when the last send ends */
        if (parent >= 0) ct_sched_recv(s, a->recvbuf, a->count, a->dtype, prank), ct_sched_round(s);
        for (int i = 0; i < nchild; i++) {
            ct_sched_send(s, a->recvbuf, a->count, a->dtype, (child[i] + a->root) % size);
            ct_sched_round(s);
        }
        return;
    }
    for (int r = 0; r < nseg + lag; r++) {
        if (parent >= 0 && r < nseg) {
            int off = r * seg;
            ct_sched_recv(s, ct_at(a->recvbuf, ext, off), a->count - off < seg ? a->count - off : seg,
                          a->dtype, prank);
        }
        int f = r - lag, off = f * seg;
        for (int i = 0; f >= 0 && i < nchild; i++)
            ct_sched_send(s, ct_at(a->recvbuf, ext, off), a->count - off < seg ? a->count - off : seg,
                          a->dtype, (child[i] + a->root) % size);
        ct_sched_round(s);
    }
}

/* Commutative reduce up a tree, segment by segment: round r reduces segment
 * r-1 from all children and sends it up while segment r arrives. */
void ct_tree_reduce(ct_sched *s, const ct_args *a, ct_tree_kind kind, int radix, int segbytes)
{
    int size, rank, nchild;
    ct_size_rank(a, &size, &rank);
    MPI_Aint ext = ct_extent(a->dtype), bytes = a->count * ext;
    char *acc = rank == a->root ? a->recvbuf : ct_sched_alloc(s, (size_t)bytes);
    ct_sched_round(s);
    if (a->sendbuf != MPI_IN_PLACE) ct_sched_copy(s, acc, a->sendbuf, bytes);
    if (a->count == 0 || size == 1) return;
    int v = (rank - a->root + size) % size;
    int *child = ct_sched_alloc(s, sizeof(int) * (size_t)size);
    if (!child) return;
    int parent = ct_tree(kind, radix, v, size, child, &nchild);
    int seg = ct_seg_elems(segbytes, ext, a->count), nseg = (a->count + seg - 1) / seg;
    char *tmp = ct_sched_alloc(s, (size_t)(seg * ext) * (size_t)(nchild > 0 ? nchild : 1));
    for (int r = 0; r <= nseg; r++) {
        if (r > 0) {
            int off = (r - 1) * seg, n = a->count - off < seg ? a->count - off : seg;
            for (int i = 0; i < nchild; i++)
                ct_sched_reduce(s, tmp + (MPI_Aint)i * seg * ext, ct_at(acc, ext, off), n, a->dtype, a->op);
            if (parent >= 0)
                ct_sched_send(s, ct_at(acc, ext, off), n, a->dtype, (parent + a->root) % size);
        }
        if (r < nseg) {
            int off = r * seg, n = a->count - off < seg ? a->count - off : seg;
            for (int i = 0; i < nchild; i++)
                ct_sched_recv(s, tmp + (MPI_Aint)i * seg * ext, n, a->dtype, (child[i] + a->root) % size);
        }
        ct_sched_round(s);
    }
}

/* Binomial reduce that keeps operands in rank order, so non-commutative ops
 * work: for those the tree is rooted at rank 0 (every subtree is then a
 * contiguous range of ranks) and rank 0 forwards the result to the root.
 * Which buffer holds the partial result is decided while building. */
void ct_binomial_reduce(ct_sched *s, const ct_args *a)
{
    int size, rank;
    ct_size_rank(a, &size, &rank);
    MPI_Aint ext = ct_extent(a->dtype), bytes = a->count * ext;
    int commute = ct_is_commutative(a->op), troot = commute ? a->root : 0;
    char *tmp = ct_sched_alloc(s, (size_t)bytes);
    char *acc = rank == a->root ? a->recvbuf : ct_sched_alloc(s, (size_t)bytes);
    ct_sched_round(s);
    if (a->sendbuf != MPI_IN_PLACE) ct_sched_copy(s, acc, a->sendbuf, bytes);
    if (a->count == 0) return;
    int v = (rank - troot + size) % size;
    for (int mask = 1; mask < size; mask <<= 1) {
        if (v & mask) {
            ct_sched_send(s, acc, a->count, a->dtype, (v - mask + troot) % size);
            break;
        }
        if (v + mask >= size) continue;
        ct_sched_recv(s, tmp, a->count, a->dtype, (v + mask + troot) % size);
        ct_sched_round(s);
        if (commute) {
            ct_sched_reduce(s, tmp, acc, a->count, a->dtype, a->op);
        } else {  /* acc holds lower ranks: tmp = acc op tmp, then swap roles */
            ct_sched_reduce(s, acc, tmp, a->count, a->dtype, a->op);
            char *t = acc; acc = tmp; tmp = t;
        }
    }
    if (troot != a->root) {
        ct_sched_round(s);
        if (rank == troot) ct_sched_send(s, acc, a->count, a->dtype, a->root);
        else if (rank == a->root) ct_sched_recv(s, a->recvbuf, a->count, a->dtype, troot);
    } else if (rank == a->root) {
        ct_sched_copy(s, a->recvbuf, acc, bytes);
    }
}
