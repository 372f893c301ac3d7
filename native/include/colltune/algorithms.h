/* colltune's portable flat collective algorithms, built on MPI point-to-point.
 *
 * Every algorithm is one C file with a static descriptor (ct_algorithm); the
 * catalogue (algorithms/catalog.c) is a table of pointers to those descriptors.
 * Nothing switches on algorithm names: look an algorithm up with ct_find(), or
 * run it with ct_call() (blocking) or ct_icall() (non-blocking), which fall
 * back to the library's own PMPI_ collective when the algorithm declines the
 * arguments (and say which one really ran). */
#ifndef COLLTUNE_ALGORITHMS_H
#define COLLTUNE_ALGORITHMS_H

#include <stddef.h>
#include <mpi.h>
#include "colltune/sched.h"

/* Calls that built per-communicator state (sub-communicators, a shadow
 * communicator, a shared-memory window) so far in this process: a one-time cost
 * of the communicator, not of the call. Online sampling reads it around a timed
 * call and leaves such calls out of an arm's statistics. */
extern unsigned long ct_setup_events;
/* Every such set-up runs between ct_setup_begin() and ct_setup_end(); a tool may hook
 * them (the interposer's profile mode books that traffic as colltune's own, not as the
 * collective's). */
typedef struct { void (*begin)(void); void (*end)(void); } ct_setup_hooks;
extern ct_setup_hooks ct_setup_hook;
void ct_setup_begin(void);
void ct_setup_end(void);
/* colltune's own traffic that builds nothing (the interposer's topology query, the
 * guard's deciding allreduce): the same hooked span as a set-up, nested with them in
 * one count, but not a set-up event */
void ct_own_begin(void);
void ct_own_end(void);

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

#define CT_MAX_PARAMS 12
#define CT_MAX_PROBES 3
#define CT_MAX_TUNE 6

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
    /* Parameter settings ("k=v,k=v", the others at their defaults) the tuners
     * measure besides the defaults, each a candidate of its own (listed as
     * e.g. ring[segsize=8192]); the correctness tests run them too. */
    const char *tune[CT_MAX_TUNE];
    /* NULL when the algorithm can run these arguments, else why it declines.
     * Depends only on values that agree on all ranks (count, type, op, comm
     * size, root), so every rank takes the same decision. */
    const char *(*supports)(const ct_args *a);
    /* Blocking entry point; params holds nparams values (already validated).
     * NULL: ct_call builds the schedule and waits for it. */
    int (*run)(const ct_args *a, const int *params);
    /* Non-blocking form: adds the algorithm's operations to s, a fresh
     * schedule on a->comm (sched.h). Called only when supports() accepted;
     * every rank of the communicator calls it. NULL: ct_icall runs the
     * library's MPI_I<coll> instead. */
    int (*schedule)(const ct_args *a, const int *params, ct_sched *s);
} ct_algorithm;

const char *ct_coll_name(ct_coll coll);
int ct_coll_from_name(const char *name);          /* -1 when unknown */

int ct_count(void);                               /* number of algorithms */
/* NULL, or what is wrong with the catalogue (two algorithms of a collective with one id
 * or one name: lookups by id, e.g. a hierarchical algorithm's sub-algorithm, would find
 * the first); the listings refuse to print such a catalogue */
const char *ct_catalog_problem(void);
const ct_algorithm *ct_get(int i);                /* 0 <= i < ct_count() */
const ct_algorithm *ct_find(ct_coll coll, const char *name);
const ct_algorithm *ct_find_id(ct_coll coll, int id);   /* by descriptor id (parameters name ids) */
/* params = the descriptor defaults of a (params has room for a->nparams) */
void ct_params_default(const ct_algorithm *a, int *params);
/* params = the defaults of a, then the "k=v,k=v" settings of text; -1 for an
 * unknown parameter, a value out of range or bad syntax. */
int ct_params_parse(const ct_algorithm *a, const char *text, int *params);

/* Run algorithm `name` of `coll` with `params` (NULL: defaults). If it declines,
 * run the library's PMPI_ collective instead. *ran (if not NULL) is set to the
 * algorithm's name or to "library". Returns an MPI error code; MPI_ERR_ARG for
 * an unknown name or a parameter out of range (nothing runs then). */
int ct_call(ct_coll coll, const char *name, const int *params, const ct_args *a,
            const char **ran);
int ct_library_call(ct_coll coll, const ct_args *a);   /* PMPI_<coll> */

/* Why these arguments go to the library rather than to any of colltune's
 * algorithms, or NULL when colltune may run them (validity.c): anything the
 * library reports as an error (negative count, null handle, invalid root, an
 * op not defined on the datatype, null or overlapping buffers) so that it
 * reports it exactly as without colltune, before any message moves. The
 * per-rank checks (buffers) are errors of that rank's own arguments which the
 * library reports there before communicating; a legal call never differs
 * between ranks in them (MPI_BOTTOM with absolute addresses is legal:
 * ct_null_data). ct_call and ct_call_init apply it before an algorithm's
 * supports(). */
const char *ct_check_args(ct_coll coll, const ct_args *a);
/* count elements of t at buf would start at address 0 (buf null or MPI_BOTTOM with a
 * predefined type, or with a derived type whose true lower bound is 0): the
 * libraries' MPI_ERR_BUFFER. MPI_BOTTOM with absolute addresses: 0. */
int ct_null_data(const void *buf, long long count, MPI_Datatype t);
/* op is a reduction defined on t by the MPI standard (user ops: any t). */
int ct_op_accepts(MPI_Op op, MPI_Datatype t);
/* size == extent, lower bound and true lower bound 0: elements are
 * extent-sized slots with no holes (the algorithms may ship them as bytes). */
int ct_type_dense(MPI_Datatype t);
/* The bytes n elements of t at p touch and those of m elements of u at q share one
 * (from each type's true extent: a send and a receive side of different types). */
int ct_spans_overlap(const void *p, long long n, MPI_Datatype t, const void *q, long long m,
                     MPI_Datatype u);
void ct_validity_init(void);   /* optional: ct_check_args calls it lazily */

/* Test hook (algotest -F): while non-zero, every local reduction of this
 * process fails with MPI_ERR_OP, so the tests can show that a failure inside
 * a running algorithm neither hangs its peers nor leaves a message behind. */
extern int ct_test_fault_reduce;
int ct_library_icall(ct_coll coll, const ct_args *a, MPI_Request *req);  /* PMPI_I<coll> */

/* Non-blocking and persistent calls. A ct_request is owned by the caller;
 * the fields are private. Same rules as MPI's non-blocking collectives: every
 * rank issues the calls on a communicator in the same order, buffers stay
 * untouched until completion; progress happens in ct_test / ct_wait (and
 * ct_sched_progress), see sched.h. */
typedef struct {
    ct_sched *sched;          /* the algorithm's schedule; NULL: the library runs */
    MPI_Request lib;          /* the library's request */
    ct_coll coll;
    ct_args args;             /* to restart the library fallback */
    int persistent, active;
} ct_request;

/* Start algorithm `name` (params NULL: defaults) without waiting; fallback and
 * errors as ct_call. ct_wait / a ct_test that completes releases req. */
int ct_icall(ct_coll coll, const char *name, const int *params, const ct_args *a,
             ct_request *req, const char **ran);
/* Persistent form: build once (not started), then ct_start / ct_wait any
 * number of times, finally ct_request_free. */
int ct_call_init(ct_coll coll, const char *name, const int *params, const ct_args *a,
                 ct_request *req, const char **ran);
int ct_start(ct_request *req);
int ct_test(ct_request *req, int *done);
int ct_wait(ct_request *req);
void ct_request_free(ct_request *req);

/* Charge CPU work the simulator does not charge by itself (SMPI builds only,
 * no-ops elsewhere): COLLTUNE_REDUCE_RATE / COLLTUNE_COPY_RATE bytes per second. */
void ct_charge_reduce(size_t bytes);
void ct_charge_copy(size_t bytes);
/* op charges its own arithmetic (the bench's --op charged-sum): ct_reduce_local
 * does not charge it again */
void ct_charge_exempt_op(MPI_Op op);
int ct_charge_exempt(MPI_Op op);

#endif
