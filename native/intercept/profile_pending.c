/* The application's non-blocking collectives in flight (profile_uncounted.c starts
 * following a request). Open MPI's monitoring counters only tell how much the pml sent
 * to each peer, not for which call: a blocking collective's window while a non-blocking
 * one progresses held the latter's traffic too (an 8 MiB MPI_Iallreduce was counted as
 * 48 MiB of MPI_Barrier, an analyst's review). profile_coll.c asks ct_prof_pending()
 * before such a window and leaves its delta out, written as uncounted instead.
 *
 * A request is in flight from its start until the call that completes it sets the
 * application's handle to MPI_REQUEST_NULL (a wait or a successful test) or frees it.
 * While nothing is followed, each wrapper below costs one load and one branch. */
#include <string.h>
#include "profile.h"

enum { MAX_PENDING = 256 };
static MPI_Request pending[MAX_PENDING];
static int npending, overflow;     /* overflow: one was not followed: in flight until the end */

int ct_prof_pending(void) { return npending > 0 || overflow; }

void ct_prof_pending_add(MPI_Request req)     /* the caller holds the lock */
{
    if (req == MPI_REQUEST_NULL) return;
    if (npending == MAX_PENDING) overflow = 1;
    else pending[npending++] = req;
}

static int find(MPI_Request req)
{
    for (int i = 0; i < npending; i++)
        if (!memcmp(&pending[i], &req, sizeof req)) return i;
    return -1;
}

void ct_prof_pending_forget(MPI_Request req)
{
    ct_prof_lock();
    int i = find(req);
    if (i >= 0) pending[i] = pending[--npending];
    ct_prof_unlock();
}

/* Before a completion call: the followed ones among reqs[0..n), their indices and
 * handles (the call may set a completed one to MPI_REQUEST_NULL); returns how many. */
static int followed(int n, const MPI_Request *reqs, int *idx, MPI_Request *was)
{
    int k = 0;
    ct_prof_lock();
    for (int i = 0; i < n && k < npending; i++)
        if (find(reqs[i]) >= 0) idx[k] = i, was[k++] = reqs[i];
    ct_prof_unlock();
    return k;
}

/* After it: those whose handle is now MPI_REQUEST_NULL completed. */
static void completed(int k, const int *idx, const MPI_Request *was, const MPI_Request *reqs)
{
    ct_prof_lock();
    for (int j = 0; j < k; j++) {
        if (reqs[idx[j]] != MPI_REQUEST_NULL) continue;
        int f = find(was[j]);
        if (f >= 0) pending[f] = pending[--npending];
    }
    ct_prof_unlock();
}

/* One body for the eight completion calls: n requests at reqs. At most npending of
 * them can be followed, so the scratch has room for MAX_PENDING (an array of any
 * length is searched whole: only its first 64 were, and a followed request further
 * on stayed in flight until the end, every later blocking collective uncounted). */
#define FOLLOW(N, REQS, CALL)                                              \
    do {                                                                   \
        if (__builtin_expect(npending == 0, 1)) return CALL;               \
        int idx_[MAX_PENDING];                                             \
        MPI_Request was_[MAX_PENDING];                                     \
        int k_ = followed((N), (REQS), idx_, was_);                        \
        int rc_ = CALL;                                                    \
        if (k_) completed(k_, idx_, was_, (REQS));                         \
        return rc_;                                                        \
    } while (0)

int MPI_Wait(MPI_Request *req, MPI_Status *st) { FOLLOW(1, req, PMPI_Wait(req, st)); }

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st)
{
    FOLLOW(1, req, PMPI_Test(req, flag, st));
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
    FOLLOW(n, reqs, PMPI_Waitall(n, reqs, sts));
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
    FOLLOW(n, reqs, PMPI_Testall(n, reqs, flag, sts));
}

int MPI_Waitany(int n, MPI_Request reqs[], int *idx, MPI_Status *st)
{
    FOLLOW(n, reqs, PMPI_Waitany(n, reqs, idx, st));
}

int MPI_Testany(int n, MPI_Request reqs[], int *idx, int *flag, MPI_Status *st)
{
    FOLLOW(n, reqs, PMPI_Testany(n, reqs, idx, flag, st));
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int idx[], MPI_Status sts[])
{
    FOLLOW(n, reqs, PMPI_Waitsome(n, reqs, outcount, idx, sts));
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int idx[], MPI_Status sts[])
{
    FOLLOW(n, reqs, PMPI_Testsome(n, reqs, outcount, idx, sts));
}
