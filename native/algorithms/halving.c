/* Recursive halving / doubling building blocks for non-powers of two
 * (MPICH's scheme, re-implemented): fold the first 2*rem ranks pairwise, work
 * among pof2 "new ranks", unfold. New rank r stands for old ranks {2r, 2r+1}
 * when r < rem, else for r + rem: contiguous and in order, so an order-keeping
 * exchange on new ranks keeps operands in rank order. Of each pair the odd
 * rank works on (keep = 1), or the even one (keep = 0, commutative ops only).
 * Latency-bound algorithms only (allreduce/recursive_doubling): the fold moves
 * the whole vector twice more, which the bandwidth-bound halving avoids
 * (halving_any.c). */
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
