/* colltune's portable flat collective algorithms, built on MPI point-to-point.
 *
 * Every algorithm is one C file with a static descriptor (ct_algorithm); the
 * catalogue (algorithms/catalog.c) is a table of pointers to those descriptors.
 * Nothing switches on algorithm names: look an algorithm up with ct_find(), or
 * run it with ct_call(), which falls back to the library's own PMPI_ collective
 * when the algorithm declines the arguments (and says which one really ran). */
#ifndef COLLTUNE_ALGORITHMS_H
#define COLLTUNE_ALGORITHMS_H

#include <stddef.h>
#include <mpi.h>

typedef enum { CT_BCAST, CT_REDUCE, CT_ALLREDUCE, CT_ALLGATHER, CT_NCOLLS } ct_coll;

/* Arguments of one call, as in the MPI signature of the collective.
 * bcast: recvbuf is the buffer (sendbuf unused). allgather: count elements per
 * rank, same count and type on both sides; recvbuf holds size*count elements.
 * sendbuf may be MPI_IN_PLACE where MPI allows it (reduce at the root,
 * allreduce and allgather everywhere). op is unused by bcast and allgather. */
typedef struct {
    const void *sendbuf;
    void *recvbuf;
    int count;
    MPI_Datatype dtype;
    MPI_Op op;
    int root;
    MPI_Comm comm;
} ct_args;

#define CT_MAX_PARAMS 10
#define CT_MAX_PROBES 3

/* One tunable parameter: default, allowed range [min, max], and a few values
 * the correctness tests try besides the default (probe). */
typedef struct {
    const char *name;
    const char *unit;
    const char *help;
    int def, min, max;
    int nprobe;
    int probe[CT_MAX_PROBES];
} ct_param;

typedef struct ct_algorithm {
    int id;                   /* stable within its collective, used in rules files */
    const char *name;
    ct_coll coll;
    const char *description;
    int nparams;
    ct_param params[CT_MAX_PARAMS];
    /* NULL when the algorithm can run these arguments, else why it declines.
     * Depends only on values that agree on all ranks (count, type, op, comm
     * size, root), so every rank takes the same decision. */
    const char *(*supports)(const ct_args *a);
    /* Blocking entry point; params holds nparams values (already validated). */
    int (*run)(const ct_args *a, const int *params);
} ct_algorithm;

const char *ct_coll_name(ct_coll coll);
int ct_coll_from_name(const char *name);          /* -1 when unknown */

int ct_count(void);                               /* number of algorithms */
const ct_algorithm *ct_get(int i);                /* 0 <= i < ct_count() */
const ct_algorithm *ct_find(ct_coll coll, const char *name);

/* Run algorithm `name` of `coll` with `params` (NULL: defaults). If it declines,
 * run the library's PMPI_ collective instead. *ran (if not NULL) is set to the
 * algorithm's name or to "library". Returns an MPI error code; MPI_ERR_ARG for
 * an unknown name or a parameter out of range (nothing runs then). */
int ct_call(ct_coll coll, const char *name, const int *params, const ct_args *a,
            const char **ran);
int ct_library_call(ct_coll coll, const ct_args *a);   /* PMPI_<coll> */

/* Charge CPU work the simulator does not charge by itself (SMPI builds only,
 * no-ops elsewhere): COLLTUNE_REDUCE_RATE / COLLTUNE_COPY_RATE bytes per second. */
void ct_charge_reduce(size_t bytes);
void ct_charge_copy(size_t bytes);

#endif
