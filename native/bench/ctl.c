#include "ctl.h"

#include <stdlib.h>
#include <string.h>

void ctl_bcast(void *buf, int count, MPI_Datatype t, MPI_Comm comm)
{
    int rank, size, mask = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    while (mask < size) {
        if (rank & mask) {
            MPI_Recv(buf, count, t, rank - mask, CTL_TAG_BCAST, comm, MPI_STATUS_IGNORE);
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (rank + mask < size) MPI_Send(buf, count, t, rank + mask, CTL_TAG_BCAST, comm);
}

void ctl_gather(const void *send, void *recv, int count, MPI_Datatype t, MPI_Comm comm)
{
    int rank, size, have = 1;
    MPI_Aint lb, ext;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Type_get_extent(t, &lb, &ext);
    size_t item = (size_t)ext * (size_t)count;
    /* a non-root collects its subtree, ranks [rank, rank + lowest set bit of rank) */
    int span = rank ? (rank & -rank) : size;
    if (span > size - rank) span = size - rank;
    char *buf = rank ? malloc((size_t)span * item) : recv;
    if (!buf) MPI_Abort(comm, 1);
    memcpy(buf, send, item);
    for (int mask = 1; mask < size; mask <<= 1) {
        if (rank & mask) {
            MPI_Send(buf, have * count, t, rank - mask, CTL_TAG_GATHER, comm);
            break;
        }
        int src = rank + mask;
        if (src < size) {
            int n = size - src < mask ? size - src : mask;
            MPI_Recv(buf + (size_t)have * item, n * count, t, src, CTL_TAG_GATHER, comm, MPI_STATUS_IGNORE);
            have += n;
        }
    }
    if (rank) free(buf);
}
