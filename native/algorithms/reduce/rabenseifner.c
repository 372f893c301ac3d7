/* Rabenseifner reduce: recursive-halving reduce-scatter, then a binomial
 * gather of the blocks to new rank 0, which forwards to the root if needed.
 * Each rank moves ~2m instead of m*log(P): for large vectors. Commutative
 * ops only (halving combines blocks out of rank order). */
#include <stdlib.h>
#include "../internal.h"

static const char *supports(const ct_args *a)
{
    const char *r = ct_need_dense(a);
    return r ? r : ct_need_commutative(a);
}

static int run(const ct_args *a, const int *p)
{
    (void)p;
    int size, rank, nr, rc;
    MPI_Comm_size(a->comm, &size);
    MPI_Comm_rank(a->comm, &rank);
    MPI_Aint ext = ct_extent(a->dtype), bytes = a->count * ext;
    if (a->count == 0) return MPI_SUCCESS;
    const void *in = a->sendbuf == MPI_IN_PLACE ? a->recvbuf : a->sendbuf;
    char *buf = malloc((size_t)bytes), *tmp = malloc((size_t)bytes);
    ct_copy(buf, in, bytes);
    int pof2 = ct_pof2_floor(size), rem = size - pof2;
    rc = ct_fold_in(buf, tmp, a, CT_TAG_REDUCE, &nr);
    if (rc == MPI_SUCCESS && nr >= 0) {
        rc = ct_rs_halving(buf, tmp, a, CT_TAG_REDUCE, nr, pof2);
        /* binomial gather: blocks [base, base+mask) travel to new rank 0 */
        for (int mask = 1; mask < pof2 && rc == MPI_SUCCESS; mask <<= 1) {
            int base = nr & ~(mask - 1), pb = base ^ mask, peer = ct_newrank_to_rank(nr ^ mask, rem);
            int b0 = ct_block_start(a->count, pof2, base), b1 = ct_block_start(a->count, pof2, base + mask);
            int p0 = ct_block_start(a->count, pof2, pb), p1 = ct_block_start(a->count, pof2, pb + mask);
            if (nr & mask) {
                rc = MPI_Send(ct_at(buf, ext, b0), b1 - b0, a->dtype, peer, CT_TAG_REDUCE, a->comm);
                break;
            }
            rc = MPI_Recv(ct_at(buf, ext, p0), p1 - p0, a->dtype, peer, CT_TAG_REDUCE, a->comm,
                          MPI_STATUS_IGNORE);
        }
    }
    int holder = ct_newrank_to_rank(0, rem);
    if (rc == MPI_SUCCESS && holder != a->root) {
        if (rank == holder) rc = MPI_Send(buf, a->count, a->dtype, a->root, CT_TAG_REDUCE, a->comm);
        if (rank == a->root)
            rc = MPI_Recv(a->recvbuf, a->count, a->dtype, holder, CT_TAG_REDUCE, a->comm,
                          MPI_STATUS_IGNORE);
    } else if (rc == MPI_SUCCESS && rank == a->root) {
        ct_copy(a->recvbuf, buf, bytes);
    }
    free(buf);
    free(tmp);
    return rc;
}

const ct_algorithm ct_reduce_rabenseifner = {
    .id = 4, .name = "rabenseifner", .coll = CT_REDUCE,
    .description = "recursive-halving reduce-scatter + binomial gather (commutative ops)",
    .nparams = 0, .supports = supports, .run = run,
};
