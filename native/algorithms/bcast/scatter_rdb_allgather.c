/* Scatter + allgather bcast: the root's message is scattered in P pieces,
 * then every rank collects the others' pieces; each rank sends/receives about
 * 2m in total instead of m*log(P), good for large messages. */
#include "../internal.h"

static const char *supports(const ct_args *a)
{
    const char *r = ct_need_dense(a);
    if (!r) r = ct_need_pof2(a);
    return r ? r : ct_need_bytes_fit(a, 1);
}

static int run(const ct_args *a, const int *p)
{
    (void)p;
    int size;
    MPI_Comm_size(a->comm, &size);
    if (a->count == 0 || size == 1) return MPI_SUCCESS;
    MPI_Aint nbytes = a->count * ct_extent(a->dtype), chunk = (nbytes + size - 1) / size;
    int rc = ct_scatter_pieces(a->recvbuf, nbytes, chunk, a);
    return rc != MPI_SUCCESS ? rc : ct_rdb_pieces(a->recvbuf, nbytes, chunk, a);
}

const ct_algorithm ct_bcast_scatter_rdb_allgather = {
    .id = 7, .name = "scatter_rdb_allgather", .coll = CT_BCAST,
    .description = "binomial scatter of P pieces, then recursive-doubling allgather (power-of-two sizes)",
    .nparams = 0, .supports = supports, .run = run,
};
