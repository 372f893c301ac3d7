/* Recursive halving / doubling building blocks for non-powers of two
 * (MPICH's scheme, re-implemented): fold the first 2*rem ranks pairwise, work
 * among pof2 "new ranks", unfold. New rank r stands for old ranks {2r, 2r+1}
 * when r < rem, else for r + rem: contiguous and in order, so an order-keeping
 * exchange on new ranks keeps operands in rank order. Of each pair the odd
 * rank works on (keep = 1), or the even one (keep = 0, commutative ops only:
 * a reduce whose root is even keeps the root and saves the last hop). */
#include <stdlib.h>
#include "internal.h"

int ct_newrank_to_rank(int nr, int rem, int keep) { return nr < rem ? nr * 2 + keep : nr + rem; }

void ct_fold_in(ct_sched *s, void *buf, void *tmp, const ct_args *a, int keep, int *newrank)
{
    int size, rank;
    ct_size_rank(a, &size, &rank);
    int rem = size - ct_pof2_floor(size);
    if (rank >= 2 * rem) { *newrank = rank - rem; return; }
    ct_sched_round(s);
    int partner = rank ^ 1;
    if (rank % 2 != keep) {
        *newrank = -1;
        ct_sched_send(s, buf, a->count, a->dtype, partner);
        return;
    }
    *newrank = rank / 2;
    ct_sched_recv(s, tmp, a->count, a->dtype, partner);
    ct_sched_round(s);
    ct_sched_reduce(s, tmp, buf, a->count, a->dtype, a->op);  /* keep 1: lower op mine */
}

void ct_fold_out(ct_sched *s, void *buf, const ct_args *a)
{
    int size, rank;
    ct_size_rank(a, &size, &rank);
    int rem = size - ct_pof2_floor(size);
    if (rank >= 2 * rem) return;
    ct_sched_round(s);
    if (rank % 2) ct_sched_send(s, buf, a->count, a->dtype, rank - 1);
    else ct_sched_recv(s, buf, a->count, a->dtype, rank + 1);
}

/* Nearest partner first: the step with distance mask exchanges half the
 * current range, so the largest exchange (half the vector) goes to the
 * nearest new rank, which block placement puts on the same node or router.
 * The range halves every step: the lower half is kept when bit `mask` of the
 * new rank is 0, the upper half otherwise. */
int ct_rs_nearest(ct_sched *s, void *buf, void *tmp, const ct_args *a, int newrank, int pof2,
                  int keep, int *lo)
{
    int size, k = 0, cur = 0, len = pof2;
    MPI_Comm_size(a->comm, &size);
    int rem = size - pof2;
    MPI_Aint ext = ct_extent(a->dtype);
    for (int mask = 1; mask < pof2; mask <<= 1, k++) {
        int half = len / 2, peer = ct_newrank_to_rank(newrank ^ mask, rem, keep);
        int mine = (newrank & mask) ? cur + half : cur, give = (newrank & mask) ? cur : cur + half;
        int k0 = ct_block_start(a->count, pof2, mine), k1 = ct_block_start(a->count, pof2, mine + half);
        int g0 = ct_block_start(a->count, pof2, give), g1 = ct_block_start(a->count, pof2, give + half);
        ct_sched_round(s);
        ct_sched_send(s, ct_at(buf, ext, g0), g1 - g0, a->dtype, peer);
        ct_sched_recv(s, ct_at(tmp, ext, k0), k1 - k0, a->dtype, peer);
        ct_sched_round(s);
        ct_sched_reduce(s, ct_at(tmp, ext, k0), ct_at(buf, ext, k0), k1 - k0, a->dtype, a->op);
        lo[k] = cur = mine;
        len = half;
    }
    return k;
}
