/* Tree shapes and the generic segmented tree bcast / tree reduce that the
 * binomial, binary, k-nomial, pipeline and binary-pipelined algorithms share. */
#include <stdlib.h>
#include "internal.h"

/* Returns the parent's virtual rank (-1 at the root) and fills child[]. */
int ct_tree(ct_tree_kind kind, int radix, int v, int size, int *child, int *nchild)
{
    int parent = -1, n = 0;
    if (kind == CT_TREE_KARY) {
        parent = v == 0 ? -1 : (v - 1) / radix;
        for (int j = 1; j <= radix; j++)
            if ((long)radix * v + j < size) child[n++] = radix * v + j;
    } else if (kind == CT_TREE_CHAIN) {
        /* size-1 non-root ranks in min(radix, size-1) chains of contiguous ranks */
        int m = size - 1, f = radix < m ? radix : m;
        for (int j = 0; j < f; j++) {
            int lo = 1 + ct_block_start(m, f, j), hi = 1 + ct_block_start(m, f, j + 1);
            if (v == 0) { child[n++] = lo; continue; }
            if (v < lo || v >= hi) continue;
            parent = v == lo ? 0 : v - 1;
            if (v + 1 < hi) child[n++] = v + 1;
        }
    } else {  /* k-nomial: parent clears the lowest non-zero base-radix digit */
        long m = 1;
        if (v == 0) {
            while (m < size) m *= radix;
        } else {
            while (v % (m * radix) == 0) m *= radix;
            parent = (int)(v - v % (m * radix));
        }
        for (long w = m / radix; w >= 1; w /= radix)   /* biggest subtrees first */
            for (int j = 1; j < radix; j++)
                if (v + j * w < size) child[n++] = (int)(v + j * w);
    }
    *nchild = n;
    return parent;
}

/* Each rank receives segment s from its parent while its sends of segment
 * s-1 to its children are still in flight (one segment of look-ahead). */
int ct_tree_bcast(const ct_args *a, ct_tree_kind kind, int radix, int segbytes)
{
    int size, rank, nchild, rc = MPI_SUCCESS;
    MPI_Comm_size(a->comm, &size);
    MPI_Comm_rank(a->comm, &rank);
    if (a->count == 0 || size == 1) return MPI_SUCCESS;
    int v = (rank - a->root + size) % size;
    int *child = malloc(sizeof(int) * (size_t)size);
    MPI_Request *sreq = malloc(sizeof(MPI_Request) * (size_t)size);
    int parent = ct_tree(kind, radix, v, size, child, &nchild);
    MPI_Aint ext = ct_extent(a->dtype);
    int seg = ct_seg_elems(segbytes, ext, a->count), nseg = (a->count + seg - 1) / seg;
    MPI_Request rreq = MPI_REQUEST_NULL;
    int prank = (parent + a->root) % size;
    for (int i = 0; i < nchild; i++) sreq[i] = MPI_REQUEST_NULL;
    if (parent >= 0)
        rc = MPI_Irecv(a->recvbuf, seg < a->count ? seg : a->count, a->dtype, prank,
                       CT_TAG_BCAST, a->comm, &rreq);
    for (int s = 0; s < nseg && rc == MPI_SUCCESS; s++) {
        int off = s * seg, n = a->count - off < seg ? a->count - off : seg;
        if (parent >= 0) {
            rc = MPI_Wait(&rreq, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS && s + 1 < nseg) {
                int n1 = a->count - off - n < seg ? a->count - off - n : seg;
                rc = MPI_Irecv(ct_at(a->recvbuf, ext, off + n), n1, a->dtype, prank,
                               CT_TAG_BCAST, a->comm, &rreq);
            }
        }
        if (rc == MPI_SUCCESS) rc = MPI_Waitall(nchild, sreq, MPI_STATUSES_IGNORE);
        for (int i = 0; i < nchild && rc == MPI_SUCCESS; i++)
            rc = MPI_Isend(ct_at(a->recvbuf, ext, off), n, a->dtype,
                           (child[i] + a->root) % size, CT_TAG_BCAST, a->comm, &sreq[i]);
    }
    if (rc == MPI_SUCCESS) rc = MPI_Waitall(nchild, sreq, MPI_STATUSES_IGNORE);
    free(child);
    free(sreq);
    return rc;
}

/* Commutative reduce up a tree, segment by segment: a rank reduces segment s
 * from all children and sends it up while it starts on segment s+1. */
int ct_tree_reduce(const ct_args *a, ct_tree_kind kind, int radix, int segbytes)
{
    int size, rank, nchild, rc = MPI_SUCCESS;
    MPI_Comm_size(a->comm, &size);
    MPI_Comm_rank(a->comm, &rank);
    MPI_Aint ext = ct_extent(a->dtype);
    char *acc = a->recvbuf, *own = NULL;
    if (rank != a->root) acc = own = malloc((size_t)(a->count * ext) + 1);
    if (a->sendbuf != MPI_IN_PLACE) ct_copy(acc, a->sendbuf, a->count * ext);
    if (a->count == 0 || size == 1) { free(own); return MPI_SUCCESS; }
    int v = (rank - a->root + size) % size;
    int *child = malloc(sizeof(int) * (size_t)size);
    int parent = ct_tree(kind, radix, v, size, child, &nchild);
    int seg = ct_seg_elems(segbytes, ext, a->count), nseg = (a->count + seg - 1) / seg;
    char *tmp = malloc((size_t)(seg * ext) * (size_t)(nchild > 0 ? nchild : 1));
    MPI_Request *rreq = malloc(sizeof(MPI_Request) * (size_t)(nchild + 1));
    MPI_Request sreq = MPI_REQUEST_NULL;
    for (int s = 0; s < nseg && rc == MPI_SUCCESS; s++) {
        int off = s * seg, n = a->count - off < seg ? a->count - off : seg;
        for (int i = 0; i < nchild && rc == MPI_SUCCESS; i++)
            rc = MPI_Irecv(tmp + (MPI_Aint)i * seg * ext, n, a->dtype, (child[i] + a->root) % size,
                           CT_TAG_REDUCE, a->comm, &rreq[i]);
        if (rc == MPI_SUCCESS) rc = MPI_Waitall(nchild, rreq, MPI_STATUSES_IGNORE);
        for (int i = 0; i < nchild && rc == MPI_SUCCESS; i++)
            rc = ct_reduce_local(tmp + (MPI_Aint)i * seg * ext, ct_at(acc, ext, off), n,
                                 a->dtype, a->op);
        if (parent >= 0 && rc == MPI_SUCCESS) {
            rc = MPI_Wait(&sreq, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS)
                rc = MPI_Isend(ct_at(acc, ext, off), n, a->dtype, (parent + a->root) % size,
                               CT_TAG_REDUCE, a->comm, &sreq);
        }
    }
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&sreq, MPI_STATUS_IGNORE);
    free(child); free(tmp); free(rreq); free(own);
    return rc;
}

/* Binomial reduce that keeps operands in rank order, so non-commutative ops
 * work: for those the tree is rooted at rank 0 (every subtree is then a
 * contiguous range of ranks) and rank 0 forwards the result to the root. */
int ct_binomial_reduce(const ct_args *a)
{
    int size, rank, rc = MPI_SUCCESS;
    MPI_Comm_size(a->comm, &size);
    MPI_Comm_rank(a->comm, &rank);
    MPI_Aint ext = ct_extent(a->dtype), bytes = a->count * ext;
    int commute = ct_is_commutative(a->op), troot = commute ? a->root : 0;
    char *mine = NULL, *tmp = malloc((size_t)bytes + 1), *acc = a->recvbuf;
    if (rank != a->root) acc = mine = malloc((size_t)bytes + 1);
    if (a->sendbuf != MPI_IN_PLACE) ct_copy(acc, a->sendbuf, bytes);
    int v = (rank - troot + size) % size;
    for (int mask = 1; mask < size && a->count > 0 && rc == MPI_SUCCESS; mask <<= 1) {
        if (v & mask) {
            rc = MPI_Send(acc, a->count, a->dtype, (v - mask + troot) % size, CT_TAG_REDUCE, a->comm);
            break;
        }
        if (v + mask >= size) continue;
        rc = MPI_Recv(tmp, a->count, a->dtype, (v + mask + troot) % size, CT_TAG_REDUCE,
                      a->comm, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) break;
        if (commute) {
            rc = ct_reduce_local(tmp, acc, a->count, a->dtype, a->op);
        } else {  /* acc holds lower ranks: tmp = acc op tmp, then swap roles */
            rc = ct_reduce_local(acc, tmp, a->count, a->dtype, a->op);
            char *t = acc; acc = tmp; tmp = t;
        }
    }
    if (rc == MPI_SUCCESS && a->count > 0 && troot != a->root) {
        if (rank == troot)
            rc = MPI_Send(acc, a->count, a->dtype, a->root, CT_TAG_REDUCE, a->comm);
        else if (rank == a->root)
            rc = MPI_Recv(a->recvbuf, a->count, a->dtype, troot, CT_TAG_REDUCE, a->comm,
                          MPI_STATUS_IGNORE);
    } else if (rank == a->root && acc != a->recvbuf) {
        ct_copy(a->recvbuf, acc, bytes);
    }
    /* acc and tmp may have swapped: free the two heap blocks, never recvbuf */
    if (acc != a->recvbuf && acc != mine) free(acc);
    if (tmp != a->recvbuf && tmp != mine) free(tmp);
    free(mine);
    return rc;
}
