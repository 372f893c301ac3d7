/* Calls whose traffic no counter of libcolltune sees (docs/profile-counting.md): the
 * application's non-blocking collectives and one-sided communication. Their calls are
 * counted per region and written as "uncounted", so a report says what is missing
 * instead of drawing a silent zero (under SMPI the simulator's trace has their messages).
 * Calls made inside colltune's own algorithms (HAN's MPI_Ibcast module) are colltune's
 * business, not the application's: not counted. */
#include <stddef.h>
#include "profile.h"

static const char *const call_names[] = {
    "MPI_Ibcast", "MPI_Ireduce", "MPI_Iallreduce", "MPI_Iallgather", "MPI_Ialltoall",
    "MPI_Igather", "MPI_Iscatter", "MPI_Ibarrier", "MPI_Ireduce_scatter_block",
    "MPI_Put", "MPI_Get", "MPI_Accumulate"};
enum { C_IBCAST, C_IREDUCE, C_IALLREDUCE, C_IALLGATHER, C_IALLTOALL, C_IGATHER, C_ISCATTER,
       C_IBARRIER, C_IRSB, C_PUT, C_GET, C_ACC, C_NCALLS, MAX_ENTRIES = 512 };

static ct_uncounted entries[MAX_ENTRIES];
static int nentries;

const ct_uncounted *ct_prof_uncounted(int *n)
{
    *n = nentries;
    return entries;
}

const char *ct_prof_uncounted_name(int call) { return call_names[call]; }

static void note(int call)
{
    if (!__builtin_expect(ct_prof_on, 0) || ct_prof_alg) return;
    int region = ct_prof_region();
    ct_prof_lock();
    int i = 0;
    while (i < nentries && (entries[i].region != region || entries[i].call != call)) i++;
    if (i == nentries && nentries < MAX_ENTRIES) entries[nentries++] = (ct_uncounted){region, call, 0};
    if (i < nentries) entries[i].calls++;
    ct_prof_unlock();
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm, MPI_Request *req)
{
    note(C_IBCAST);
    return PMPI_Ibcast(buf, count, dt, root, comm, req);
}

int MPI_Ireduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request *req)
{
    note(C_IREDUCE);
    return PMPI_Ireduce(sbuf, rbuf, count, dt, op, root, comm, req);
}

int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                   MPI_Comm comm, MPI_Request *req)
{
    note(C_IALLREDUCE);
    return PMPI_Iallreduce(sbuf, rbuf, count, dt, op, comm, req);
}

int MPI_Iallgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                   MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    note(C_IALLGATHER);
    return PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
}

int MPI_Ialltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    note(C_IALLTOALL);
    return PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
}

int MPI_Igather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req)
{
    note(C_IGATHER);
    return PMPI_Igather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req);
}

int MPI_Iscatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req)
{
    note(C_ISCATTER);
    return PMPI_Iscatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req)
{
    note(C_IBARRIER);
    return PMPI_Ibarrier(comm, req);
}

int MPI_Ireduce_scatter_block(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                              MPI_Comm comm, MPI_Request *req)
{
    note(C_IRSB);
    return PMPI_Ireduce_scatter_block(sbuf, rbuf, count, dt, op, comm, req);
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
