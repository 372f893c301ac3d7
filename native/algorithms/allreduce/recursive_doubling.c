/* Recursive-doubling allreduce: log2(P) exchanges of the whole vector (plus a
 * fold/unfold step for non-powers of two). The lower-ranked partial result is
 * always the left operand, so non-commutative ops are fine. Small vectors. */
#include <stdlib.h>
#include "../internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int run(const ct_args *a, const int *p)
{
    (void)p;
    int size, nr, rc;
    MPI_Comm_size(a->comm, &size);
    MPI_Aint ext = ct_extent(a->dtype), bytes = a->count * ext;
    if (a->sendbuf != MPI_IN_PLACE) ct_copy(a->recvbuf, a->sendbuf, bytes);
    if (a->count == 0 || size == 1) return MPI_SUCCESS;
    char *buf = a->recvbuf, *tmp = malloc((size_t)bytes);
    int pof2 = ct_pof2_floor(size), rem = size - pof2;
    rc = ct_fold_in(buf, tmp, a, CT_TAG_ALLREDUCE, &nr);
    for (int mask = 1; nr >= 0 && mask < pof2 && rc == MPI_SUCCESS; mask <<= 1) {
        int pnr = nr ^ mask, peer = ct_newrank_to_rank(pnr, rem);
        rc = MPI_Sendrecv(buf, a->count, a->dtype, peer, CT_TAG_ALLREDUCE, tmp, a->count,
                          a->dtype, peer, CT_TAG_ALLREDUCE, a->comm, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) break;
        if (pnr < nr) {
            rc = ct_reduce_local(tmp, buf, a->count, a->dtype, a->op);
        } else {  /* buf op tmp must land in recvbuf */
            rc = ct_reduce_local(buf, tmp, a->count, a->dtype, a->op);
            ct_copy(buf, tmp, bytes);
        }
    }
    if (rc == MPI_SUCCESS) rc = ct_fold_out(buf, a, CT_TAG_ALLREDUCE);
    free(tmp);
    return rc;
}

const ct_algorithm ct_allreduce_recursive_doubling = {
    .id = 1, .name = "recursive_doubling", .coll = CT_ALLREDUCE,
    .description = "recursive doubling on whole vectors, keeps operand order",
    .nparams = 0, .supports = supports, .run = run,
};
