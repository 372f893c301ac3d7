/* Linear reduce: the root receives every rank's vector and folds them from
 * the highest rank down (acc = x_i op acc), so rank order is kept and
 * non-commutative ops are fine. */
#include <stdlib.h>
#include "../internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int run(const ct_args *a, const int *p)
{
    (void)p;
    int size, rank, rc = MPI_SUCCESS;
    MPI_Comm_size(a->comm, &size);
    MPI_Comm_rank(a->comm, &rank);
    MPI_Aint ext = ct_extent(a->dtype), bytes = a->count * ext;
    if (rank != a->root)
        return a->count == 0 ? MPI_SUCCESS
                             : MPI_Send(a->sendbuf, a->count, a->dtype, a->root, CT_TAG_REDUCE, a->comm);
    /* the root's own vector: in recvbuf when in place, so keep a copy of it */
    const char *mine = a->sendbuf;
    char *saved = NULL, *tmp = malloc((size_t)bytes + 1);
    if (a->sendbuf == MPI_IN_PLACE) {
        mine = saved = malloc((size_t)bytes + 1);
        ct_copy(saved, a->recvbuf, bytes);
    }
    for (int r = size - 1; r >= 0 && a->count > 0 && rc == MPI_SUCCESS; r--) {
        const char *x = mine;
        if (r != rank) {
            rc = MPI_Recv(tmp, a->count, a->dtype, r, CT_TAG_REDUCE, a->comm, MPI_STATUS_IGNORE);
            x = tmp;
        }
        if (rc != MPI_SUCCESS) break;
        if (r == size - 1) ct_copy(a->recvbuf, x, bytes);
        else rc = ct_reduce_local(x, a->recvbuf, a->count, a->dtype, a->op);
    }
    free(tmp);
    free(saved);
    return rc;
}

const ct_algorithm ct_reduce_linear = {
    .id = 1, .name = "linear", .coll = CT_REDUCE,
    .description = "root receives from every rank and reduces in rank order",
    .nparams = 0, .supports = supports, .run = run,
};
