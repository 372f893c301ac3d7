/* Recursive-doubling allreduce: log2(P) exchanges of the whole vector (plus a
 * fold/unfold step for non-powers of two). The lower-ranked partial result is
 * always the left operand, so non-commutative ops are fine. Small vectors: the
 * fold moves the whole vector twice more, which the bandwidth-bound halving
 * avoids (halving_any.c). */
#include "../internal.h"

/* MPICH's fold for non-powers of two (re-implemented): the first 2*rem ranks
 * pair up and the odd one of each pair works on, so pof2 "new ranks" remain;
 * new rank r stands for old ranks {2r, 2r+1} when r < rem, else for r + rem:
 * contiguous and in order, so exchanges on new ranks keep operand order. */
static int newrank_to_rank(int nr, int rem) { return nr < rem ? nr * 2 + 1 : nr + rem; }

static void fold_in(ct_sched *s, void *buf, void *tmp, const ct_args *a, int rank, int rem,
                    int *newrank)
{
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
    ct_sched_reduce(s, tmp, buf, a->count, a->dtype, a->op);  /* lower rank's operand first */
}

static void fold_out(ct_sched *s, void *buf, const ct_args *a, int rank, int rem)
{
    if (rank >= 2 * rem) return;
    ct_sched_round(s);
    if (rank % 2) ct_sched_send(s, buf, a->count, a->dtype, rank - 1);
    else ct_sched_recv(s, buf, a->count, a->dtype, rank + 1);
}

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    (void)p;
    int size, rank, nr;
    ct_size_rank(a, &size, &rank);
    MPI_Aint ext = ct_extent(a->dtype), bytes = a->count * ext;
    if (a->sendbuf != MPI_IN_PLACE) ct_sched_copy(s, a->recvbuf, a->sendbuf, bytes);
    if (a->count == 0 || size == 1) return MPI_SUCCESS;
    char *buf = a->recvbuf, *tmp = ct_sched_alloc(s, (size_t)bytes);
    int pof2 = ct_pof2_floor(size), rem = size - pof2;
    fold_in(s, buf, tmp, a, rank, rem, &nr);
    for (int mask = 1; nr >= 0 && mask < pof2; mask <<= 1) {
        int pnr = nr ^ mask, peer = newrank_to_rank(pnr, rem);
        ct_sched_round(s);
        ct_sched_send(s, buf, a->count, a->dtype, peer);
        ct_sched_recv(s, tmp, a->count, a->dtype, peer);
        ct_sched_round(s);
        if (pnr < nr) {
            ct_sched_reduce(s, tmp, buf, a->count, a->dtype, a->op);
        } else {  /* buf op tmp must land in recvbuf */
            ct_sched_reduce(s, buf, tmp, a->count, a->dtype, a->op);
            ct_sched_copy(s, buf, tmp, bytes);
        }
    }
    fold_out(s, buf, a, rank, rem);
    return MPI_SUCCESS;
}

const ct_algorithm ct_allreduce_recursive_doubling = {
    .id = 1, .name = "recursive_doubling", .coll = CT_ALLREDUCE,
    .description = "recursive doubling on whole vectors, keeps operand order",
    .nparams = 0, .supports = supports, .schedule = schedule,
};
