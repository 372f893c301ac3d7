/* Blocking collectives in profile mode (docs/profile-counting.md). A call the
 * MPI library runs itself (not colltune's algorithm) is aggregated into
 * library_calls by (region, kind, communicator, root, bytes), and with Open
 * MPI's pml monitoring its per-peer traffic is the counters' delta over the
 * call; when colltune's algorithm ran, the delta less its exactly counted sends
 * is the library collectives it called (HAN's steps) and its set-up traffic.
 * bcast / reduce / allreduce / allgather re-enter intercept.c's wrappers
 * (which decide between colltune and the library); the others go to PMPI.
 * Entries also keep the datatype size (a model of an algorithm that splits by
 * elements needs it). "bytes" per kind: count x type size (bcast, reduce, allreduce, scan, exscan);
 * one rank's block (allgather, alltoall, gather, scatter, reduce_scatter_block);
 * the whole vector (reduce_scatter, allgatherv: sum of counts); this rank's total
 * (alltoallv: sent; gatherv / scatterv: the root's whole vector, else own block). */
#include <stdlib.h>
#include <string.h>
#include "profile.h"

enum { MAX_LIBCALLS = 4096, MAX_COMMS = 1024 };

static ct_libcall *calls;
static int ncalls, capcalls, *buckets, nbuckets;   /* buckets: open hash of call indices + 1 */
static uint64_t calls_dropped;
static CT_TLS int call_tsize;     /* the type size behind the call's bytes (0: barrier) */
static int *comm_members[MAX_COMMS], comm_size[MAX_COMMS], ncomms;

const ct_libcall *ct_prof_libcalls(int *n, uint64_t *dropped)
{
    *n = ncalls, *dropped = calls_dropped;
    return calls;
}
int ct_prof_ncomms(void) { return ncomms; }
const int *ct_prof_comm_members(int i, int *n)
{
    *n = comm_size[i];
    return comm_members[i];
}

/* the rank file's index of comm (same members, same index), or -1 */
static int comm_index(MPI_Comm comm)
{
    int n, inter, *idx;
    const int *w = ct_prof_world_map(comm, &n, &inter, &idx);
    if (!w || inter) return -1;
    if (*idx >= 0) return *idx;
    for (int i = 0; i < ncomms; i++)
        if (comm_size[i] == n && !memcmp(comm_members[i], w, (size_t)n * sizeof *w))
            return *idx = i;
    if (ncomms == MAX_COMMS || !(comm_members[ncomms] = ct_prof_alloc((size_t)n * sizeof *w)))
        return -1;
    memcpy(comm_members[ncomms], w, (size_t)n * sizeof *w);
    comm_size[ncomms] = n;
    return *idx = ncomms++;
}

static unsigned hash_call(const ct_libcall *c)
{
    uint64_t h = (uint64_t)c->region * 31 + (uint64_t)c->kind;
    h = h * 1000003u + (uint64_t)c->comm;
    h = h * 1000003u + (uint64_t)(c->root + 1);
    h = h * 1000003u + (uint64_t)c->bytes;
    h = h * 1000003u + (uint64_t)c->type_size;
    return (unsigned)((h * 0x9e3779b97f4a7c15ull) >> 33);
}

static int grow(void)
{
    int ncap = capcalls ? 2 * capcalls : 32;
    ct_libcall *nc = ct_prof_alloc((size_t)ncap * sizeof *nc);
    int *nb = ct_prof_alloc((size_t)ncap * 2 * sizeof *nb);
    if (!nc || !nb) {
        free(nc), free(nb);
        return 0;
    }
    memcpy(nc, calls, (size_t)ncalls * sizeof *nc);
    free(calls), free(buckets);
    ct_prof.mem -= (size_t)capcalls * (sizeof *nc + 2 * sizeof *nb);
    calls = nc, buckets = nb, capcalls = ncap, nbuckets = 2 * ncap;
    for (int i = 0; i < ncalls; i++) {
        unsigned b = hash_call(&calls[i]) & (unsigned)(nbuckets - 1);
        while (buckets[b]) b = (b + 1) & (unsigned)(nbuckets - 1);
        buckets[b] = i + 1;
    }
    return 1;
}

static void record_call(int kind, MPI_Comm comm, int root, long long bytes)
{
    ct_libcall key = {ct_prof_region(), kind, comm_index(comm), root, call_tsize, bytes, 1};
    if (key.comm < 0) {
        calls_dropped++;                            /* intercommunicator, or past the caps */
        return;
    }
    unsigned b;
    if (nbuckets) {
        for (b = hash_call(&key) & (unsigned)(nbuckets - 1); buckets[b]; b = (b + 1) & (unsigned)(nbuckets - 1)) {
            ct_libcall *c = &calls[buckets[b] - 1];
            if (c->region == key.region && c->kind == kind && c->comm == key.comm &&
                c->root == root && c->bytes == bytes && c->type_size == key.type_size) {
                c->calls++;
                return;
            }
        }
    }
    if (ncalls == MAX_LIBCALLS || (ncalls == capcalls && !grow())) {
        calls_dropped++;
        return;
    }
    for (b = hash_call(&key) & (unsigned)(nbuckets - 1); buckets[b]; b = (b + 1) & (unsigned)(nbuckets - 1)) {}
    calls[ncalls] = key;
    buckets[b] = ++ncalls;
}

/* ---- the wrappers ------------------------------------------------------------ */
static long long type_bytes(long long count, MPI_Datatype dt)
{
    int size = 0;
    if (dt != MPI_DATATYPE_NULL) PMPI_Type_size(dt, &size);
    call_tsize = size;
    return count * size;
}

static long long sum_counts(const int *counts, MPI_Comm comm)
{
    int n = 0;
    long long s = 0;
    PMPI_Comm_size(comm, &n);
    for (int i = 0; counts && i < n; i++) s += counts[i];
    return s;
}

static int is_root(int root, MPI_Comm comm)
{
    int rank = -1;
    PMPI_Comm_rank(comm, &rank);
    return rank == root;
}

/* a non-blocking collective of the application was in flight when the window opened:
 * the pml's counters over the window hold its traffic too (profile_pending.c) */
static CT_TLS int window_shared;

static void begin(int kind)
{
    ct_prof_depth = kind;
    ct_prof_ran = 0;
    call_tsize = 0;
    window_shared = ct_prof_mon_on() && ct_prof_pending();
    if (!window_shared) ct_prof_mon_snap();
}

static int end(int rc, int kind, MPI_Comm comm, int root, long long bytes)
{
    ct_prof_depth = 0;
    if (!ct_prof_on) return rc;
    ct_prof_lock();
    if (!ct_prof_ran) record_call(kind, comm, root, bytes);  /* colltune's: counted send by send */
    if (window_shared) ct_prof_note_blind_window(kind);
    else ct_prof_mon_delta(kind, ct_prof_ran);
    ct_prof_unlock();
    return rc;
}

/* BYTES is evaluated after the call, which leaves the arguments as they were */
#define PROFILED(KIND, COMM, ROOT, BYTES, CALL)                          \
    do {                                                                 \
        if (__builtin_expect(!ct_prof_on, 1) || ct_prof_depth) return CALL; \
        begin(KIND);                                                     \
        int rc_ = CALL;                                                  \
        return end(rc_, KIND, COMM, ROOT, BYTES);                        \
    } while (0)

/* intercept.c's four: into its wrapper again, which now skips this hook */
int ct_prof_bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
    PROFILED(K_BCAST, comm, root, type_bytes(count, dt), MPI_Bcast(buf, count, dt, root, comm));
}

int ct_prof_reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
                   MPI_Comm comm)
{
    PROFILED(K_REDUCE, comm, root, type_bytes(count, dt),
             MPI_Reduce(sbuf, rbuf, count, dt, op, root, comm));
}

int ct_prof_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                      MPI_Comm comm)
{
    PROFILED(K_ALLREDUCE, comm, -1, type_bytes(count, dt),
             MPI_Allreduce(sbuf, rbuf, count, dt, op, comm));
}

int ct_prof_allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                      MPI_Datatype rtype, MPI_Comm comm)
{
    PROFILED(K_ALLGATHER, comm, -1, type_bytes(rcount, rtype),
             MPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Barrier(MPI_Comm comm) { PROFILED(K_BARRIER, comm, -1, 0, PMPI_Barrier(comm)); }

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, MPI_Comm comm)
{
    PROFILED(K_ALLTOALL, comm, -1, type_bytes(rcount, rtype),
             PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
               MPI_Datatype rtype, int root, MPI_Comm comm)
{
    PROFILED(K_GATHER, comm, root,
             is_root(root, comm) ? type_bytes(rcount, rtype) : type_bytes(scount, stype),
             PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm)
{
    PROFILED(K_SCATTER, comm, root,
             is_root(root, comm) ? type_bytes(scount, stype) : type_bytes(rcount, rtype),
             PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

int MPI_Scan(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    PROFILED(K_SCAN, comm, -1, type_bytes(count, dt), PMPI_Scan(sbuf, rbuf, count, dt, op, comm));
}

int MPI_Exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    PROFILED(K_EXSCAN, comm, -1, type_bytes(count, dt), PMPI_Exscan(sbuf, rbuf, count, dt, op, comm));
}

int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype dt,
                       MPI_Op op, MPI_Comm comm)
{
    PROFILED(K_REDUCE_SCATTER, comm, -1, type_bytes(sum_counts(rcounts, comm), dt),
             PMPI_Reduce_scatter(sbuf, rbuf, rcounts, dt, op, comm));
}

int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype dt, MPI_Op op,
                             MPI_Comm comm)
{
    PROFILED(K_REDUCE_SCATTER_BLOCK, comm, -1, type_bytes(rcount, dt),
             PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, dt, op, comm));
}

int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                   const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm)
{
    PROFILED(K_ALLGATHERV, comm, -1, type_bytes(sum_counts(rcounts, comm), rtype),
             PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm));
}

int MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                  void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                  MPI_Comm comm)
{
    PROFILED(K_ALLTOALLV, comm, -1,
             sbuf == MPI_IN_PLACE ? type_bytes(sum_counts(rcounts, comm), rtype)
                                  : type_bytes(sum_counts(scounts, comm), stype),
             PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm));
}

int MPI_Gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                const int displs[], MPI_Datatype rtype, int root, MPI_Comm comm)
{
    PROFILED(K_GATHERV, comm, root,
             is_root(root, comm) ? type_bytes(sum_counts(rcounts, comm), rtype)
                                 : type_bytes(scount, stype),
             PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm));
}

int MPI_Scatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype,
                 void *rbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    PROFILED(K_SCATTERV, comm, root,
             is_root(root, comm) ? type_bytes(sum_counts(scounts, comm), stype)
                                 : type_bytes(rcount, rtype),
             PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm));
}
