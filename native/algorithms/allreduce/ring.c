/* Ring allreduce: ring reduce-scatter of P blocks, then ring allgather;
 * bandwidth-optimal (2m(P-1)/P per rank). Each block is sent as segments so a
 * rank reduces segment k while k+1 is still arriving. Commutative ops only. */
#include "../internal.h"

/* Reduce-scatter: in round j of a step, send segment j of the outgoing
 * block, receive segment j of the incoming one and fold segment j-1 while
 * they move (the last fold of a step runs in the first round of the next
 * step). Then a ring allgather of the blocks. */
static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    int size, rank;
    ct_size_rank(a, &size, &rank);
    MPI_Aint ext = ct_extent(a->dtype);
    if (a->sendbuf != MPI_IN_PLACE) ct_sched_copy(s, a->recvbuf, a->sendbuf, a->count * ext);
    if (a->count == 0 || size == 1) return MPI_SUCCESS;
    char *buf = a->recvbuf, *fold_in = NULL, *fold_out = NULL;
    int left = (rank - 1 + size) % size, right = (rank + 1) % size, fold_n = 0;
    int maxblk = ct_block_start(a->count, size, 1);
    int seg = ct_seg_elems(p[0], ext, maxblk > 0 ? maxblk : 1);
    char *tmp = ct_sched_alloc(s, (size_t)(maxblk * ext));
    ct_sched_round(s);
    for (int step = 0; step < size - 1; step++) {
        int sb = (rank - step + size) % size, rb = (rank - step - 1 + size) % size;
        int s0 = ct_block_start(a->count, size, sb), sn = ct_block_start(a->count, size, sb + 1) - s0;
        int r0 = ct_block_start(a->count, size, rb), rn = ct_block_start(a->count, size, rb + 1) - r0;
        for (int o = 0; o < sn || o < rn; o += seg) {
            char *out = ct_at(buf, ext, s0 + o), *in = tmp + o * ext;
            /* the fold runs after this round's messages are posted, so it
             * overlaps them, unless it touches their buffers (one segment
             * per block: the block it folds is the one sent next) */
            int first = fold_in && ((o < sn && fold_out == out) || (o < rn && fold_in == in));
            if (first) ct_sched_reduce(s, fold_in, fold_out, fold_n, a->dtype, a->op);
            if (o < sn) ct_sched_send(s, out, sn - o < seg ? sn - o : seg, a->dtype, right);
            if (o < rn) ct_sched_recv(s, in, rn - o < seg ? rn - o : seg, a->dtype, left);
            if (fold_in && !first) ct_sched_reduce(s, fold_in, fold_out, fold_n, a->dtype, a->op);
            fold_in = NULL;
            if (o < rn) {
                fold_n = rn - o < seg ? rn - o : seg;
                fold_in = in;
                fold_out = ct_at(buf, ext, r0 + o);
            }
            ct_sched_round(s);
        }
    }
    if (fold_in) ct_sched_reduce(s, fold_in, fold_out, fold_n, a->dtype, a->op);
    for (int step = 0; step < size - 1; step++) {
        int sb = (rank + 1 - step + size) % size, rb = (rank - step + size) % size;
        int s0 = ct_block_start(a->count, size, sb), r0 = ct_block_start(a->count, size, rb);
        ct_sched_send(s, ct_at(buf, ext, s0), ct_block_start(a->count, size, sb + 1) - s0, a->dtype, right);
        ct_sched_recv(s, ct_at(buf, ext, r0), ct_block_start(a->count, size, rb + 1) - r0, a->dtype, left);
        ct_sched_round(s);
    }
    return MPI_SUCCESS;
}

const ct_algorithm ct_allreduce_ring = {
    .id = 2, .name = "ring", .coll = CT_ALLREDUCE,
    .description = "ring reduce-scatter + ring allgather, blocks sent in segments (commutative ops)",
    .nparams = 1,
    .params = {
        {.name = "segsize", .unit = "bytes", .help = "segment size inside a block, 0 = whole block",
         .def = 65536, .min = 0, .max = 1 << 30, .nprobe = 2, .probe = {0, 1000}},
    },
    .tune = {"segsize=8192"},
    .supports = ct_need_dense_commutative, .schedule = schedule,
};
