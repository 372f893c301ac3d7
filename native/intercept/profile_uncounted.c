/* Calls whose traffic no counter of libcolltune sees (docs/profile-counting.md): the
 * application's non-blocking collectives, one-sided communication, MPI_Alltoallw and the
 * large-count (_c) collectives. Their calls are counted per region and written as
 * "uncounted", so a report says what is missing instead of drawing a silent zero (under
 * SMPI the simulator's trace has their messages). Calls made inside colltune's own
 * algorithms (HAN's MPI_Ibcast module) are colltune's business, not the application's:
 * not counted. The application's non-blocking collective requests are followed until
 * they complete (profile_pending.c): a blocking collective's Open MPI monitoring window
 * while one is in flight holds its traffic too, and is written here as well
 * ("<kind> during a non-blocking collective"), not counted. */
#include <stdio.h>
#include <stddef.h>
#include "profile.h"

static const char *const call_names[] = {
    "MPI_Ibcast", "MPI_Ireduce", "MPI_Iallreduce", "MPI_Iallgather", "MPI_Ialltoall",
    "MPI_Igather", "MPI_Iscatter", "MPI_Ibarrier", "MPI_Ireduce_scatter_block",
    "MPI_Put", "MPI_Get", "MPI_Accumulate", "MPI_Alltoallw",
    "MPI_Bcast_c", "MPI_Reduce_c", "MPI_Allreduce_c", "MPI_Allgather_c", "MPI_Alltoall_c",
    "MPI_Gather_c", "MPI_Scatter_c", "MPI_Alltoallw_c"};
enum { C_IBCAST, C_IREDUCE, C_IALLREDUCE, C_IALLGATHER, C_IALLTOALL, C_IGATHER, C_ISCATTER,
       C_IBARRIER, C_IRSB, C_PUT, C_GET, C_ACC, C_ALLTOALLW,
       C_BCAST_C, C_REDUCE_C, C_ALLREDUCE_C, C_ALLGATHER_C, C_ALLTOALL_C, C_GATHER_C,
       C_SCATTER_C, C_ALLTOALLW_C, C_NCALLS, MAX_ENTRIES = 512 };

static ct_uncounted entries[MAX_ENTRIES];
static int nentries;

const ct_uncounted *ct_prof_uncounted(int *n)
{
    *n = nentries;
    return entries;
}

/* calls past C_NCALLS: a blocking collective of kind call - C_NCALLS whose monitoring
 * window a non-blocking collective shared (the reader knows the suffix) */
const char *ct_prof_uncounted_name(int call)
{
    static char blind[K_NKINDS][64];
    if (call < C_NCALLS) return call_names[call];
    int kind = call - C_NCALLS;
    if (!blind[kind][0])
        snprintf(blind[kind], sizeof blind[kind], "%s during a non-blocking collective",
                 ct_prof_kind_name(kind));
    return blind[kind];
}

static void add(int call)           /* the caller holds the lock */
{
    int region = ct_prof_region();
    int i = 0;
    while (i < nentries && (entries[i].region != region || entries[i].call != call)) i++;
    if (i == nentries && nentries < MAX_ENTRIES) entries[nentries++] = (ct_uncounted){region, call, 0};
    if (i < nentries) entries[i].calls++;
}

static void note(int call)
{
    if (!__builtin_expect(ct_prof_on, 0) || ct_prof_alg) return;
    ct_prof_lock();
    add(call);
    ct_prof_unlock();
}

void ct_prof_note_blind_window(int kind)
{
    add(C_NCALLS + kind);
}

/* a non-blocking collective of the application: its request is followed to completion */
static int started(int call, int rc, MPI_Request *req)
{
    if (!__builtin_expect(ct_prof_on, 0) || ct_prof_alg) return rc;
    ct_prof_lock();
    add(call);
    if (rc == MPI_SUCCESS) ct_prof_pending_add(*req);
    ct_prof_unlock();
    return rc;
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm, MPI_Request *req)
{
    return started(C_IBCAST, PMPI_Ibcast(buf, count, dt, root, comm, req), req);
}

int MPI_Ireduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request *req)
{
    return started(C_IREDUCE, PMPI_Ireduce(sbuf, rbuf, count, dt, op, root, comm, req), req);
}

int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                   MPI_Comm comm, MPI_Request *req)
{
    return started(C_IALLREDUCE, PMPI_Iallreduce(sbuf, rbuf, count, dt, op, comm, req), req);
}

int MPI_Iallgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                   MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    return started(C_IALLGATHER, PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req), req);
}

int MPI_Ialltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    return started(C_IALLTOALL, PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req), req);
}

int MPI_Igather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req)
{
    return started(C_IGATHER, PMPI_Igather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req), req);
}

int MPI_Iscatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req)
{
    return started(C_ISCATTER, PMPI_Iscatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req), req);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req)
{
    return started(C_IBARRIER, PMPI_Ibarrier(comm, req), req);
}

int MPI_Ireduce_scatter_block(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                              MPI_Comm comm, MPI_Request *req)
{
    return started(C_IRSB, PMPI_Ireduce_scatter_block(sbuf, rbuf, count, dt, op, comm, req), req);
}

int MPI_Put(const void *origin, int ocount, MPI_Datatype otype, int target, MPI_Aint disp,
            int tcount, MPI_Datatype ttype, MPI_Win win)
{
    note(C_PUT);
    return PMPI_Put(origin, ocount, otype, target, disp, tcount, ttype, win);
}

int MPI_Get(void *origin, int ocount, MPI_Datatype otype, int target, MPI_Aint disp, int tcount,
            MPI_Datatype ttype, MPI_Win win)
{
    note(C_GET);
    return PMPI_Get(origin, ocount, otype, target, disp, tcount, ttype, win);
}

int MPI_Accumulate(const void *origin, int ocount, MPI_Datatype otype, int target, MPI_Aint disp,
                   int tcount, MPI_Datatype ttype, MPI_Op op, MPI_Win win)
{
    note(C_ACC);
    return PMPI_Accumulate(origin, ocount, otype, target, disp, tcount, ttype, op, win);
}

int MPI_Alltoallw(const void *sbuf, const int scounts[], const int sdispls[],
                  const MPI_Datatype stypes[], void *rbuf, const int rcounts[], const int rdispls[],
                  const MPI_Datatype rtypes[], MPI_Comm comm)
{
    note(C_ALLTOALLW);
    return PMPI_Alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm);
}

#if MPI_VERSION >= 4                    /* large counts (MPICH 5) */
int MPI_Bcast_c(void *buf, MPI_Count count, MPI_Datatype dt, int root, MPI_Comm comm)
{
    note(C_BCAST_C);
    return PMPI_Bcast_c(buf, count, dt, root, comm);
}

int MPI_Reduce_c(const void *sbuf, void *rbuf, MPI_Count count, MPI_Datatype dt, MPI_Op op,
                 int root, MPI_Comm comm)
{
    note(C_REDUCE_C);
    return PMPI_Reduce_c(sbuf, rbuf, count, dt, op, root, comm);
}

int MPI_Allreduce_c(const void *sbuf, void *rbuf, MPI_Count count, MPI_Datatype dt, MPI_Op op,
                    MPI_Comm comm)
{
    note(C_ALLREDUCE_C);
    return PMPI_Allreduce_c(sbuf, rbuf, count, dt, op, comm);
}

int MPI_Allgather_c(const void *sbuf, MPI_Count scount, MPI_Datatype stype, void *rbuf,
                    MPI_Count rcount, MPI_Datatype rtype, MPI_Comm comm)
{
    note(C_ALLGATHER_C);
    return PMPI_Allgather_c(sbuf, scount, stype, rbuf, rcount, rtype, comm);
}

int MPI_Alltoall_c(const void *sbuf, MPI_Count scount, MPI_Datatype stype, void *rbuf,
                   MPI_Count rcount, MPI_Datatype rtype, MPI_Comm comm)
{
    note(C_ALLTOALL_C);
    return PMPI_Alltoall_c(sbuf, scount, stype, rbuf, rcount, rtype, comm);
}

int MPI_Gather_c(const void *sbuf, MPI_Count scount, MPI_Datatype stype, void *rbuf,
                 MPI_Count rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    note(C_GATHER_C);
    return PMPI_Gather_c(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
}

int MPI_Scatter_c(const void *sbuf, MPI_Count scount, MPI_Datatype stype, void *rbuf,
                  MPI_Count rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    note(C_SCATTER_C);
    return PMPI_Scatter_c(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
}

int MPI_Alltoallw_c(const void *sbuf, const MPI_Count scounts[], const MPI_Aint sdispls[],
                    const MPI_Datatype stypes[], void *rbuf, const MPI_Count rcounts[],
                    const MPI_Aint rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm)
{
    note(C_ALLTOALLW_C);
    return PMPI_Alltoallw_c(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm);
}
#endif
