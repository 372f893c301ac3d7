/* Traffic counting inside libcolltune (COLLTUNE_PROFILE=<dir>, docs/profile-counting.md).
 *   profile.c        state, regions (MPI_Pcontrol), per-peer counters, init/finalize
 *   profile_p2p.c    the application's sends (MPI_Send ... MPI_Start), world-rank translation
 *   profile_coll.c   blocking collectives: library_calls and Open MPI monitoring deltas
 *   profile_mon.c    Open MPI pml monitoring through MPI_T, shared-memory coll notes
 *   profile_write.c  rank-R.json / job.json, written atomically at MPI_Finalize
 *   profile_uncounted.c  non-blocking collectives and one-sided calls: counted as calls only
 *   profile_pending.c    the application's non-blocking collectives in flight (MPI_Wait ...)
 * intercept.c only calls the hooks below; with profiling off each costs one
 * load and one predictable branch. */
#ifndef CT_PROFILE_H
#define CT_PROFILE_H
#include <stdint.h>
#include <mpi.h>

#include "tls.h"

/* what a send was part of: the application's p2p, or a collective */
typedef enum {
    K_P2P, K_BCAST, K_REDUCE, K_ALLREDUCE, K_ALLGATHER, K_ALLTOALL, K_GATHER, K_SCATTER,
    K_BARRIER, K_SCAN, K_EXSCAN, K_REDUCE_SCATTER, K_REDUCE_SCATTER_BLOCK, K_ALLGATHERV,
    K_ALLTOALLV, K_GATHERV, K_SCATTERV, K_OTHER, K_NKINDS
} ct_kind;
/* who counted it */
typedef enum { S_INTERPOSER, S_COLLTUNE, S_MONITORING, S_NSOURCES } ct_source;

extern int ct_prof_on;              /* enabled and not paused (MPI_Pcontrol(0)) */
extern CT_TLS int ct_prof_depth;    /* kind of the profiled collective in progress, or 0 */
extern CT_TLS int ct_prof_alg;      /* kind of colltune's algorithm running now, or 0 */
extern CT_TLS int ct_prof_ran;      /* set when colltune's algorithm (not the library) ran */

/* ---- hooks used by intercept.c ---- */
/* first line of intercept.c's collective wrappers: the profiled call re-enters it with depth > 0 */
#define CT_PROF_COLL(call) \
    do { if (__builtin_expect(ct_prof_on, 0) && !ct_prof_depth) return call; } while (0)
/* around ct_call: sends posted in between are colltune's, of this collective */
#define CT_PROF_ALG_ENTER(coll) int prof_prev_ = ct_prof_alg; ct_prof_alg = ct_prof_kind_of(coll)
#define CT_PROF_ALG_LEAVE(ran) \
    (ct_prof_alg = prof_prev_, ct_prof_ran |= (ran) && strcmp((ran), "library") != 0)
/* colltune's own traffic in the run (ct_setup_begin/end and ct_own_begin/end: a
 * communicator's set-up, the interposer's topology query, the guard's deciding
 * allreduce) is hooked at init: its time span goes into the rank file's "colltune_own"
 * intervals (the reader leaves the simulator's messages of it out), and Open MPI's
 * monitoring window of the collective in progress skips it */

void ct_prof_init(int *argc, char ***argv);  /* after PMPI_Init and colltune's set-up */
void ct_prof_finalize(void);                 /* before PMPI_Finalize: writes the files */
int ct_prof_kind_of(int ct_coll);            /* colltune's ct_coll -> ct_kind */
int ct_prof_bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm);
int ct_prof_reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
                   MPI_Comm comm);
int ct_prof_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                      MPI_Comm comm);
int ct_prof_allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                      MPI_Datatype rtype, MPI_Comm comm);

/* ---- shared between the profile files ---- */
typedef struct { uint64_t bytes, msgs; } ct_peer;

typedef struct {
    int enabled, paused, rank, size, mt;
    MPI_Comm world;
    char dir[4096], host[MPI_MAX_PROCESSOR_NAME + 1], argv0[512];
    char slurm_node[256];                   /* SLURMD_NODENAME: Slurm's name of this node, or "" */
    char started[32];
    char job[128];                          /* which job wrote the files (job_of_env), or "" */
    uint64_t dropped_bytes, dropped_msgs, unknown_peer_msgs;
    size_t mem, mem_cap;                    /* bytes allocated for counters, and the cap */
} ct_prof_state;
extern ct_prof_state ct_prof;

const char *ct_prof_kind_name(int kind);
const char *ct_prof_source_name(int source);
int ct_prof_region(void);                                  /* innermost open region */
uint64_t ct_prof_regions_refused(void);                    /* opens past the caps */
void ct_prof_add(int kind, int source, int peer, uint64_t bytes, uint64_t msgs);
void ct_prof_lock(void);
void ct_prof_unlock(void);
void *ct_prof_alloc(size_t bytes);                         /* counted against mem_cap; NULL past it */

/* communicator -> world ranks (remote group of an intercommunicator; -1: not in
 * MPI_COMM_WORLD); *idx: the communicator's index in the rank file's comms, -1 until set */
const int *ct_prof_world_map(MPI_Comm comm, int *n, int *inter, int **idx);
void ct_prof_count_send(int dest, long long count, MPI_Datatype dt, MPI_Comm comm);

/* regions and counters, read by the writer */
int ct_prof_nregions(void);
const char *ct_prof_region_name(int i);
int ct_prof_region_parent(int i);           /* -1 for "run" */
ct_peer *ct_prof_cells(int region, int kind, int source);
typedef struct { int region; double t0, t1; } ct_interval;
const ct_interval *ct_prof_intervals(int *n, int *dropped);
const ct_interval *ct_prof_pauses(int *n);
const ct_interval *ct_prof_owns(int *n);

/* library_calls (profile_coll.c) */
typedef struct { int region, kind, comm, root, type_size; long long bytes; uint64_t calls; } ct_libcall;
const ct_libcall *ct_prof_libcalls(int *n, uint64_t *dropped);
const int *ct_prof_comm_members(int i, int *n);
int ct_prof_ncomms(void);

/* calls whose traffic is not counted (profile_uncounted.c): per region and call */
typedef struct { int region, call; uint64_t calls; } ct_uncounted;
const ct_uncounted *ct_prof_uncounted(int *n);
const char *ct_prof_uncounted_name(int call);
void ct_prof_note_blind_window(int kind);     /* the lock held: a monitoring window left out */

/* non-blocking collectives of the application in flight (profile_pending.c) */
int ct_prof_pending(void);
void ct_prof_pending_add(MPI_Request req);    /* the lock held */
void ct_prof_pending_forget(MPI_Request req); /* MPI_Request_free */

/* Open MPI pml monitoring (profile_mon.c) */
void ct_prof_mon_init(void);
void ct_prof_mon_snap(void);                  /* before a library collective */
void ct_prof_mon_skip_begin(void);            /* colltune's own traffic begins: not the call's */
void ct_prof_mon_skip_end(void);
void ct_prof_mon_delta(int kind, int colltune_ran);  /* after it: per-peer deltas -> S_MONITORING */
void ct_prof_mon_finalize(void);
int ct_prof_mon_on(void);                     /* the counters are read */
const char *ct_prof_mon_status(void);         /* "on", "off", "unavailable (...)" */
int ct_prof_mon_notes(const char **notes, int max);

/* files (profile_write.c) */
int ct_prof_write_rank(char *err, size_t errlen);
int ct_prof_write_job(char *err, size_t errlen);
#endif
