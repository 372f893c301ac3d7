/* Helpers shared by the algorithm files (not part of the public API). */
#ifndef COLLTUNE_ALGORITHMS_INTERNAL_H
#define COLLTUNE_ALGORITHMS_INTERNAL_H

#include <string.h>
#include "colltune/algorithms.h"

/* Address of element i of a dense buffer. */
static inline char *ct_at(const void *buf, MPI_Aint ext, MPI_Aint i)
{
    return (char *)buf + ext * i;
}

MPI_Aint ct_extent(MPI_Datatype t);
int ct_is_commutative(MPI_Op op);
int ct_is_pof2(int n);
int ct_pof2_floor(int n);

/* Common supports() checks; each returns NULL or the reason to decline. */
const char *ct_need_dense(const ct_args *a);       /* contiguous, no holes, lb 0 */
const char *ct_need_commutative(const ct_args *a);
const char *ct_need_dense_commutative(const ct_args *a);   /* both: the reductions' usual check */
const char *ct_need_pof2(const ct_args *a);
const char *ct_need_bytes_fit(const ct_args *a, int times);  /* count*ext*times <= INT_MAX */
const char *ct_need_comm_elems_fit(const ct_args *a);        /* count*size <= INT_MAX */

/* memcpy / MPI_Reduce_local that also charge their cost under SMPI. */
void ct_copy(void *dst, const void *src, MPI_Aint bytes);
int ct_reduce_local(const void *in, void *inout, int n, MPI_Datatype t, MPI_Op op);

/* Elements per segment for a segment size in bytes (0: one segment). */
int ct_seg_elems(int segbytes, MPI_Aint ext, int count);

/* Tree shapes in "virtual rank" space (root = 0). Children are written to
 * child[] (capacity size), largest subtree first where that matters. */
typedef enum { CT_TREE_KNOMIAL, CT_TREE_KARY, CT_TREE_CHAIN } ct_tree_kind;
int ct_tree(ct_tree_kind kind, int radix, int vrank, int size, int *child, int *nchild);
/* Tree t (0 or 1) of a double binary tree (as in NCCL): the non-root ranks
 * 1..size-1 form two in-order binary trees hung below the root, such that a
 * rank with children in one is a leaf in the other. Splitting the pieces of a
 * message between the two trees, every rank sends about as much as it
 * receives at a depth of ~log2(size): a pipelined binary tree's bandwidth
 * without its halved rate, and no chain's size-1 hops of fill. */
int ct_dual_tree(int t, int vrank, int size, int *child, int *nchild);

/* Schedule builders shared by the algorithms (one implementation each; the
 * blocking forms are "build + wait"). Each starts a new round, so it may read
 * whatever earlier operations produced. Peers are ranks of a->comm. */

/* Segmented tree bcast / commutative tree reduce over any ct_tree shape. */
void ct_tree_bcast(ct_sched *s, const ct_args *a, ct_tree_kind kind, int radix, int segbytes);
void ct_tree_reduce(ct_sched *s, const ct_args *a, ct_tree_kind kind, int radix, int segbytes);

/* Order-preserving binomial reduce (used by reduce/binomial and allreduce). */
void ct_binomial_reduce(ct_sched *s, const ct_args *a);

/* Recursive halving / doubling on any number of ranks (halving_any.c): no
 * fold, so no rank moves the vector more than an allreduce must. Commutative
 * op. ct_rs_any leaves each rank one of size blocks (ct_block_start(count,
 * size, .)) fully reduced in buf and returns the number of levels k (lev needs
 * ceil(log2 size) entries); ct_ag_any walks them back. */
typedef struct { int n, c, i, base, stride; } ct_halving_level;   /* group, blocks, my index */
int ct_rs_any(ct_sched *s, void *buf, void *tmp, const ct_args *a, ct_halving_level *lev);
void ct_ag_any(ct_sched *s, void *buf, const ct_args *a, const ct_halving_level *lev, int k);
/* The blocks of ct_rs_any's levels gathered at rank root (a reduce's second half). */
void ct_gather_any(ct_sched *s, void *buf, const ct_args *a, const ct_halving_level *lev, int k,
                   int root);

/* Block b of count elements split into n nearly equal blocks. */
static inline int ct_block_start(int count, int n, int b)
{
    return b * (count / n) + (b < count % n ? b : count % n);
}

/* Scatter + allgather building blocks (scatter.c), on the message as bytes
 * cut into size pieces of chunk bytes in virtual-rank order (root = 0). */
typedef void (*ct_pieces_fn)(ct_sched *s, char *buf, MPI_Aint nbytes, MPI_Aint chunk,
                             const ct_args *a);
void ct_scatter_pieces(ct_sched *s, char *buf, MPI_Aint nbytes, MPI_Aint chunk, const ct_args *a);
void ct_ring_pieces(ct_sched *s, char *buf, MPI_Aint nbytes, MPI_Aint chunk, const ct_args *a);
void ct_rdb_pieces(ct_sched *s, char *buf, MPI_Aint nbytes, MPI_Aint chunk, const ct_args *a);
/* The whole scatter + allgather bcast, with the allgather of pieces given. */
void ct_bcast_scatter_allgather(ct_sched *s, const ct_args *a, ct_pieces_fn allgather);

/* Communicator size and rank, for builders. */
static inline void ct_size_rank(const ct_args *a, int *size, int *rank)
{
    MPI_Comm_size(a->comm, size);
    MPI_Comm_rank(a->comm, rank);
}

#endif
