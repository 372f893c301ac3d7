/* Binomial scatter used by the scatter + allgather bcasts. The message (as
 * bytes) is cut into size pieces of `chunk` bytes, piece j for virtual rank j
 * (the last pieces may be short or empty); a rank receives the pieces of its
 * whole subtree [v, v + lowbit(v)) and passes on its children's parts. */
#include "internal.h"

static MPI_Aint lo(MPI_Aint j, MPI_Aint chunk, MPI_Aint nbytes)
{
    return j * chunk < nbytes ? j * chunk : nbytes;
}

void ct_scatter_pieces(ct_sched *s, char *buf, MPI_Aint nbytes, MPI_Aint chunk, const ct_args *a)
{
    int size, rank, mask = 1;
    ct_size_rank(a, &size, &rank);
    int v = (rank - a->root + size) % size;
    ct_sched_round(s);
    for (; mask < size; mask <<= 1) {
        if (!(v & mask)) continue;
        int end = v + mask < size ? v + mask : size;
        MPI_Aint b0 = lo(v, chunk, nbytes), b1 = lo(end, chunk, nbytes);
        ct_sched_recv(s, buf + b0, (int)(b1 - b0), MPI_BYTE, (v - mask + a->root) % size);
        ct_sched_round(s);
        break;
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
        int c = v + mask;
        if (c >= size) continue;
        int end = c + mask < size ? c + mask : size;
        MPI_Aint b0 = lo(c, chunk, nbytes), b1 = lo(end, chunk, nbytes);
        /* one child per round, biggest subtree first: concurrent sends would
         * share the link and delay the critical path (+22% at 1 MiB, 32 ranks) */
        ct_sched_send(s, buf + b0, (int)(b1 - b0), MPI_BYTE, (c + a->root) % size);
        ct_sched_round(s);
    }
}

/* Ring allgather of the pieces, in virtual-rank order. */
void ct_ring_pieces(ct_sched *s, char *buf, MPI_Aint nbytes, MPI_Aint chunk, const ct_args *a)
{
    int size, rank;
    ct_size_rank(a, &size, &rank);
    int v = (rank - a->root + size) % size;
    int left = (v - 1 + size + a->root) % size, right = (v + 1 + a->root) % size;
    for (int i = 0; i < size - 1; i++) {
        int sp = (v - i + size) % size, rp = (v - i - 1 + size) % size;
        MPI_Aint s0 = lo(sp, chunk, nbytes), r0 = lo(rp, chunk, nbytes);
        ct_sched_round(s);
        ct_sched_send(s, buf + s0, (int)(lo(sp + 1, chunk, nbytes) - s0), MPI_BYTE, right);
        ct_sched_recv(s, buf + r0, (int)(lo(rp + 1, chunk, nbytes) - r0), MPI_BYTE, left);
    }
}

/* Recursive-doubling allgather of the pieces (size must be a power of two). */
void ct_rdb_pieces(ct_sched *s, char *buf, MPI_Aint nbytes, MPI_Aint chunk, const ct_args *a)
{
    int size, rank;
    ct_size_rank(a, &size, &rank);
    int v = (rank - a->root + size) % size;
    for (int mask = 1; mask < size; mask <<= 1) {
        int base = v & ~(mask - 1), pb = base ^ mask, peer = ((v ^ mask) + a->root) % size;
        MPI_Aint s0 = lo(base, chunk, nbytes), r0 = lo(pb, chunk, nbytes);
        ct_sched_round(s);
        ct_sched_send(s, buf + s0, (int)(lo(base + mask, chunk, nbytes) - s0), MPI_BYTE, peer);
        ct_sched_recv(s, buf + r0, (int)(lo(pb + mask, chunk, nbytes) - r0), MPI_BYTE, peer);
    }
}

void ct_bcast_scatter_allgather(ct_sched *s, const ct_args *a, ct_pieces_fn allgather)
{
    int size;
    MPI_Comm_size(a->comm, &size);
    if (a->count == 0 || size == 1) return;
    MPI_Aint nbytes = a->count * ct_extent(a->dtype), chunk = (nbytes + size - 1) / size;
    ct_scatter_pieces(s, a->recvbuf, nbytes, chunk, a);
    allgather(s, a->recvbuf, nbytes, chunk, a);
}
