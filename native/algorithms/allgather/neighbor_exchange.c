/* Neighbour-exchange allgather (Chen et al.): P/2 steps; even ranks alternate
 * between right and left neighbour, each step forwarding the two blocks just
 * received. Needs an even communicator size. */
#include "../internal.h"

static const char *supports(const ct_args *a)
{
    int size;
    const char *r = ct_need_dense(a);
    if (!r) r = ct_need_comm_elems_fit(a);
    MPI_Comm_size(a->comm, &size);
    return r ? r : (size % 2 ? "communicator size is odd" : NULL);
}

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    (void)p;
    int size, rank;
    ct_size_rank(a, &size, &rank);
    MPI_Aint blk = a->count * ct_extent(a->dtype);
    char *buf = a->recvbuf;
    if (a->sendbuf != MPI_IN_PLACE) ct_sched_copy(s, buf + rank * blk, a->sendbuf, blk);
    if (a->count == 0) return MPI_SUCCESS;
    int even = rank % 2 == 0;
    int nb[2] = {even ? (rank + 1) % size : (rank - 1 + size) % size,
                 even ? (rank - 1 + size) % size : (rank + 1) % size};
    /* first pair of blocks held: {rank, nb[0]}, aligned on an even index */
    ct_sched_send(s, buf + rank * blk, a->count, a->dtype, nb[0]);
    ct_sched_recv(s, buf + nb[0] * blk, a->count, a->dtype, nb[0]);
    ct_sched_round(s);
    int pair = even ? rank : nb[0];            /* first block of the pair to send */
    int from[2] = {pair, pair};                /* last pair received on each side */
    int off[2] = {even ? 2 : -2, even ? -2 : 2};
    for (int i = 1; i < size / 2; i++) {
        int k = i % 2;
        from[k] = (from[k] + off[k] + size) % size;
        ct_sched_send(s, buf + pair * blk, 2 * a->count, a->dtype, nb[k]);
        ct_sched_recv(s, buf + from[k] * blk, 2 * a->count, a->dtype, nb[k]);
        ct_sched_round(s);
        pair = from[k];
    }
    return MPI_SUCCESS;
}

const ct_algorithm ct_allgather_neighbor_exchange = {
    .id = 4, .name = "neighbor_exchange", .coll = CT_ALLGATHER,
    .description = "neighbour exchange: P/2 steps of two blocks (even sizes)",
    .nparams = 0, .supports = supports, .schedule = schedule,
};
