/* Ring allreduce: ring reduce-scatter of P blocks, then ring allgather;
 * bandwidth-optimal (2m(P-1)/P per rank). Each block is sent as segments so a
 * rank reduces segment k while k+1 is still arriving. Commutative ops only. */
#include <stdlib.h>
#include "../internal.h"

static const char *supports(const ct_args *a)
{
    const char *r = ct_need_dense(a);
    return r ? r : ct_need_commutative(a);
}

static int run(const ct_args *a, const int *p)
{
    int size, rank, rc = MPI_SUCCESS;
    MPI_Comm_size(a->comm, &size);
    MPI_Comm_rank(a->comm, &rank);
    MPI_Aint ext = ct_extent(a->dtype);
    if (a->sendbuf != MPI_IN_PLACE) ct_copy(a->recvbuf, a->sendbuf, a->count * ext);
    if (a->count == 0 || size == 1) return MPI_SUCCESS;
    char *buf = a->recvbuf;
    int left = (rank - 1 + size) % size, right = (rank + 1) % size;
    int maxblk = ct_block_start(a->count, size, 1);
    int seg = ct_seg_elems(p[0], ext, maxblk > 0 ? maxblk : 1);
    int maxseg = (maxblk + seg - 1) / seg + 1;
    char *tmp = malloc((size_t)(maxblk * ext) + 1);
    MPI_Request *req = malloc(sizeof(MPI_Request) * 2 * (size_t)maxseg);
    for (int step = 0; step < size - 1 && rc == MPI_SUCCESS; step++) {
        int sb = (rank - step + size) % size, rb = (rank - step - 1 + size) % size;
        int s0 = ct_block_start(a->count, size, sb), sn = ct_block_start(a->count, size, sb + 1) - s0;
        int r0 = ct_block_start(a->count, size, rb), rn = ct_block_start(a->count, size, rb + 1) - r0;
        int nr = 0, ns = 0;
        for (int o = 0; o < rn && rc == MPI_SUCCESS; o += seg, nr++)
            rc = MPI_Irecv(tmp + o * ext, rn - o < seg ? rn - o : seg, a->dtype, left,
                           CT_TAG_ALLREDUCE, a->comm, &req[nr]);
        for (int o = 0; o < sn && rc == MPI_SUCCESS; o += seg, ns++)
            rc = MPI_Isend(ct_at(buf, ext, s0 + o), sn - o < seg ? sn - o : seg, a->dtype, right,
                           CT_TAG_ALLREDUCE, a->comm, &req[maxseg + ns]);
        for (int k = 0, o = 0; k < nr && rc == MPI_SUCCESS; k++, o += seg) {
            rc = MPI_Wait(&req[k], MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS)
                rc = ct_reduce_local(tmp + o * ext, ct_at(buf, ext, r0 + o),
                                     rn - o < seg ? rn - o : seg, a->dtype, a->op);
        }
        if (rc == MPI_SUCCESS) rc = MPI_Waitall(ns, req + maxseg, MPI_STATUSES_IGNORE);
    }
    for (int step = 0; step < size - 1 && rc == MPI_SUCCESS; step++) {
        int sb = (rank + 1 - step + size) % size, rb = (rank - step + size) % size;
        int s0 = ct_block_start(a->count, size, sb), r0 = ct_block_start(a->count, size, rb);
        rc = MPI_Sendrecv(ct_at(buf, ext, s0), ct_block_start(a->count, size, sb + 1) - s0, a->dtype,
                          right, CT_TAG_ALLREDUCE, ct_at(buf, ext, r0),
                          ct_block_start(a->count, size, rb + 1) - r0, a->dtype, left,
                          CT_TAG_ALLREDUCE, a->comm, MPI_STATUS_IGNORE);
    }
    free(tmp);
    free(req);
    return rc;
}

const ct_algorithm ct_allreduce_ring = {
    .id = 2, .name = "ring", .coll = CT_ALLREDUCE,
    .description = "ring reduce-scatter + ring allgather, blocks sent in segments (commutative ops)",
    .nparams = 1,
    .params = {
        {.name = "segsize", .unit = "bytes", .help = "segment size inside a block, 0 = whole block",
         .def = 65536, .min = 0, .max = 1 << 30, .nprobe = 2, .probe = {0, 1000}},
    },
    .supports = supports, .run = run,
};
