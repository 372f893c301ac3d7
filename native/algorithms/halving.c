/* Recursive halving / doubling building blocks for non-powers of two
 * (MPICH's scheme, re-implemented): fold the first 2*rem ranks pairwise, work
 * among pof2 "new ranks", unfold. New rank r stands for old ranks {2r, 2r+1}
 * when r < rem, else for r + rem: contiguous and in order, so an order-keeping
 * exchange on new ranks keeps operands in rank order. */
#include <stdlib.h>
#include "internal.h"

int ct_newrank_to_rank(int nr, int rem) { return nr < rem ? nr * 2 + 1 : nr + rem; }

void ct_fold_in(ct_sched *s, void *buf, void *tmp, const ct_args *a, int *newrank)
{
    int size, rank;
    ct_size_rank(a, &size, &rank);
    int rem = size - ct_pof2_floor(size);
    if (rank >= 2 * rem) { *newrank = rank - rem; return; }
    ct_sched_round(s);
    if (rank % 2 == 0) {
        *newrank = -1;
        ct_sched_send(s, buf, a->count, a->dtype, rank + 1);
        return;
    }
    *newrank = rank / 2;
    ct_sched_recv(s, tmp, a->count, a->dtype, rank - 1);
    ct_sched_round(s);
    ct_sched_reduce(s, tmp, buf, a->count, a->dtype, a->op);  /* lower op mine */
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

/* Before the step with distance mask a rank holds 2*mask blocks; it keeps the
 * half that contains its own block (blocks keep_base .. keep_base+mask-1) and
 * hands the other half to its partner. */
void ct_rs_halving(ct_sched *s, void *buf, void *tmp, const ct_args *a, int newrank, int pof2)
{
    int size;
    MPI_Comm_size(a->comm, &size);
    int rem = size - pof2;
    MPI_Aint ext = ct_extent(a->dtype);
    for (int mask = pof2 / 2; mask >= 1; mask >>= 1) {
        int keep = newrank & ~(mask - 1), give = keep ^ mask;
        int k0 = ct_block_start(a->count, pof2, keep), k1 = ct_block_start(a->count, pof2, keep + mask);
        int g0 = ct_block_start(a->count, pof2, give), g1 = ct_block_start(a->count, pof2, give + mask);
        int peer = ct_newrank_to_rank(newrank ^ mask, rem);
        ct_sched_round(s);
        ct_sched_send(s, ct_at(buf, ext, g0), g1 - g0, a->dtype, peer);
        ct_sched_recv(s, ct_at(tmp, ext, k0), k1 - k0, a->dtype, peer);
        ct_sched_round(s);
        ct_sched_reduce(s, ct_at(tmp, ext, k0), ct_at(buf, ext, k0), k1 - k0, a->dtype, a->op);
    }
}
