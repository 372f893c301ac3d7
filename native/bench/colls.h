/* One descriptor per collective: everything the driver needs to know about a
 * collective lives here, so no other file switches on collective names. */
#ifndef COLLTUNE_COLLS_H
#define COLLTUNE_COLLS_H

#include <mpi.h>
#include <stddef.h>

typedef enum { DT_CHAR, DT_INT, DT_FLOAT, DT_DOUBLE, DT_DEFAULT } dtype_kind_t;

const char *dtype_name(dtype_kind_t k);
size_t dtype_size(dtype_kind_t k);
/* MPI_SIGNED_CHAR stands for "char" in reductions (MPI_SUM is not defined on MPI_CHAR). */
MPI_Datatype dtype_mpi(dtype_kind_t k, int reduces);
int dtype_parse(const char *s, dtype_kind_t *k);

/* Arguments of one call. count is the per-rank element count (the block size for
 * the collectives that move one block per peer). */
typedef struct {
    void *sbuf, *rbuf;
    int count;
    dtype_kind_t kind;
    MPI_Datatype dtype;
    MPI_Op op;          /* reductions: MPI_SUM or the charged sum (--op) */
    int root, rank, size;
    MPI_Comm comm;
} coll_args_t;

typedef struct coll_desc {
    const char *name;
    int reduces;     /* sums (--op); default dtype float */
    int rooted;      /* takes --root */
    int has_data;    /* 0 for barrier: count is always 0 */
    /* elements needed in the send and receive buffers of `rank` */
    void (*buf_elems)(size_t count, int size, int rank, int root, size_t *send, size_t *recv);
    int (*run)(const coll_args_t *a);
    int (*start)(const coll_args_t *a, MPI_Request *req);
    /* fill send buffers with the check pattern and poison receive buffers */
    void (*fill)(const coll_args_t *a);
    /* 0 if this rank's result is right, else 1 with a short message in err */
    int (*check)(const coll_args_t *a, char *err, size_t errlen);
} coll_desc_t;

extern const coll_desc_t *const coll_table[];
const coll_desc_t *coll_find(const char *name);

#endif
