/* Recursive-doubling allreduce: log2(P) exchanges of the whole vector (plus a
 * fold/unfold step for non-powers of two). The lower-ranked partial result is
 * always the left operand, so non-commutative ops are fine. Small vectors. */
#include "../internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    (void)p;
    int size, nr;
    MPI_Comm_size(a->comm, &size);
    MPI_Aint ext = ct_extent(a->dtype), bytes = a->count * ext;
    if (a->sendbuf != MPI_IN_PLACE) ct_sched_copy(s, a->recvbuf, a->sendbuf, bytes);
    if (a->count == 0 || size == 1) return MPI_SUCCESS;
    char *buf = a->recvbuf, *tmp = ct_sched_alloc(s, (size_t)bytes);
    int pof2 = ct_pof2_floor(size), rem = size - pof2;
    ct_fold_in(s, buf, tmp, a, 1, &nr);
    for (int mask = 1; nr >= 0 && mask < pof2; mask <<= 1) {
        int pnr = nr ^ mask, peer = ct_newrank_to_rank(pnr, rem, 1);
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
    ct_fold_out(s, buf, a);
    return MPI_SUCCESS;
}

const ct_algorithm ct_allreduce_recursive_doubling = {
    .id = 1, .name = "recursive_doubling", .coll = CT_ALLREDUCE,
    .description = "recursive doubling on whole vectors, keeps operand order",
    .nparams = 0, .supports = supports, .schedule = schedule,
};
