/* Binomial scatter used by the scatter + allgather bcasts. The message (as
 * bytes) is cut into size pieces of `chunk` bytes, piece j for virtual rank j
 * (the last pieces may be short or empty); a rank receives the pieces of its
 * whole subtree [v, v + lowbit(v)) and passes on its children's parts. */
#include "internal.h"

static MPI_Aint lo(MPI_Aint j, MPI_Aint chunk, MPI_Aint nbytes)
{
    return j * chunk < nbytes ? j * chunk : nbytes;
}

int ct_scatter_pieces(char *buf, MPI_Aint nbytes, MPI_Aint chunk, const ct_args *a)
{
    int size, rank, rc = MPI_SUCCESS, mask = 1;
    MPI_Comm_size(a->comm, &size);
    MPI_Comm_rank(a->comm, &rank);
    int v = (rank - a->root + size) % size;
    for (; mask < size; mask <<= 1) {
        if (!(v & mask)) continue;
        int end = v + mask < size ? v + mask : size;
        MPI_Aint b0 = lo(v, chunk, nbytes), b1 = lo(end, chunk, nbytes);
        rc = MPI_Recv(buf + b0, (int)(b1 - b0), MPI_BYTE, (v - mask + a->root) % size,
                      CT_TAG_BCAST, a->comm, MPI_STATUS_IGNORE);
        break;
    }
    for (mask >>= 1; mask > 0 && rc == MPI_SUCCESS; mask >>= 1) {
        int c = v + mask;
        if (c >= size) continue;
        int end = c + mask < size ? c + mask : size;
        MPI_Aint b0 = lo(c, chunk, nbytes), b1 = lo(end, chunk, nbytes);
        rc = MPI_Send(buf + b0, (int)(b1 - b0), MPI_BYTE, (c + a->root) % size, CT_TAG_BCAST,
                      a->comm);
    }
    return rc;
}

/* Ring allgather of the pieces, in virtual-rank order. */
int ct_ring_pieces(char *buf, MPI_Aint nbytes, MPI_Aint chunk, const ct_args *a)
{
    int size, rank, rc = MPI_SUCCESS;
    MPI_Comm_size(a->comm, &size);
    MPI_Comm_rank(a->comm, &rank);
    int v = (rank - a->root + size) % size;
    int left = (v - 1 + size + a->root) % size, right = (v + 1 + a->root) % size;
    for (int i = 0; i < size - 1 && rc == MPI_SUCCESS; i++) {
        int sp = (v - i + size) % size, rp = (v - i - 1 + size) % size;
        MPI_Aint s0 = lo(sp, chunk, nbytes), r0 = lo(rp, chunk, nbytes);
        rc = MPI_Sendrecv(buf + s0, (int)(lo(sp + 1, chunk, nbytes) - s0), MPI_BYTE, right,
                          CT_TAG_BCAST, buf + r0, (int)(lo(rp + 1, chunk, nbytes) - r0),
                          MPI_BYTE, left, CT_TAG_BCAST, a->comm, MPI_STATUS_IGNORE);
    }
    return rc;
}

/* Recursive-doubling allgather of the pieces (size must be a power of two). */
int ct_rdb_pieces(char *buf, MPI_Aint nbytes, MPI_Aint chunk, const ct_args *a)
{
    int size, rank, rc = MPI_SUCCESS;
    MPI_Comm_size(a->comm, &size);
    MPI_Comm_rank(a->comm, &rank);
    int v = (rank - a->root + size) % size;
    for (int mask = 1; mask < size && rc == MPI_SUCCESS; mask <<= 1) {
        int base = v & ~(mask - 1), pb = base ^ mask;
        MPI_Aint s0 = lo(base, chunk, nbytes), r0 = lo(pb, chunk, nbytes);
        rc = MPI_Sendrecv(buf + s0, (int)(lo(base + mask, chunk, nbytes) - s0), MPI_BYTE,
                          ((v ^ mask) + a->root) % size, CT_TAG_BCAST, buf + r0,
                          (int)(lo(pb + mask, chunk, nbytes) - r0), MPI_BYTE,
                          ((v ^ mask) + a->root) % size, CT_TAG_BCAST, a->comm,
                          MPI_STATUS_IGNORE);
    }
    return rc;
}

int ct_bcast_scatter_allgather(const ct_args *a, ct_pieces_fn allgather)
{
    int size;
    MPI_Comm_size(a->comm, &size);
    if (a->count == 0 || size == 1) return MPI_SUCCESS;
    MPI_Aint nbytes = a->count * ct_extent(a->dtype), chunk = (nbytes + size - 1) / size;
    int rc = ct_scatter_pieces(a->recvbuf, nbytes, chunk, a);
    return rc != MPI_SUCCESS ? rc : allgather(a->recvbuf, nbytes, chunk, a);
}
