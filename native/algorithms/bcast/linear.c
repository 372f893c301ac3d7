/* Linear bcast: the root sends the whole buffer to every other rank. */
#include <stdlib.h>
#include "../internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int run(const ct_args *a, const int *p)
{
    (void)p;
    int size, rank, rc, n = 0;
    MPI_Comm_size(a->comm, &size);
    MPI_Comm_rank(a->comm, &rank);
    if (a->count == 0 || size == 1) return MPI_SUCCESS;
    if (rank != a->root)
        return MPI_Recv(a->recvbuf, a->count, a->dtype, a->root, CT_TAG_BCAST, a->comm,
                        MPI_STATUS_IGNORE);
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)size);
    for (int r = 0; r < size; r++)
        if (r != rank)
            MPI_Isend(a->recvbuf, a->count, a->dtype, r, CT_TAG_BCAST, a->comm, &req[n++]);
    rc = MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
    free(req);
    return rc;
}

const ct_algorithm ct_bcast_linear = {
    .id = 1, .name = "linear", .coll = CT_BCAST,
    .description = "root sends the whole message to each rank (P-1 sends at the root)",
    .nparams = 0, .supports = supports, .run = run,
};
