/* The guard: see guard.h. Every rank of a communicator sees the same sequence of
 * (collective, bytes) calls on it, so the per-block counters agree without
 * communication, and the deciding allreduce is reached by all ranks in the same
 * call. The slowest rank's sum stands for the collective's completion time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "guard.h"

#define GUARD_MAX 100000               /* timed calls per arm */
#define GUARD_BLOCKS 64                /* blocks per communicator; later ones are not guarded */

typedef struct {
    int coll;
    long long bytes;
    int calls, verdict;                /* verdict: 0 exploring, CT_GUARD_KEPT / CT_GUARD_LIB */
    double t[2];                       /* this rank's timed sums: [0] library, [1] the rule's */
    ct_rule lib;                       /* the library, with the rule's line (for reports) */
} block;

typedef struct { int n; block b[GUARD_BLOCKS]; } guard_comm;

int ct_guard_calls;
void *ct_guard_timing;
static int timing_arm;

static int parse(const char *s)
{
    if (!s || !*s) return 0;
    char *end;
    long v = strtol(s, &end, 10);
    return (*end == '\0' && v >= 0 && v <= GUARD_MAX) ? (int)v : -1;
}

void ct_guard_init(int world_rank, int thread_multiple, int online)
{
    const char *s = getenv("COLLTUNE_GUARD");
    /* the thread level is per rank (MPI_Init_thread): agreed by the same reduction, or a
     * rank at MPI_THREAD_MULTIPLE ran the rules alone while its peers alternated with the
     * library, and left them in the deciding allreduce */
    int v = parse(s), in[3] = {v, -v, -(thread_multiple != 0)}, out[3];
    ct_guard_calls = 0;
    PMPI_Allreduce(in, out, 3, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    thread_multiple = out[2] < 0;
    if (out[0] != -out[1] || out[0] < 0) {        /* differs between ranks, or malformed */
        if (world_rank == 0)
            fprintf(stderr, "colltune: warning: COLLTUNE_GUARD=%s %s; the guard is off\n",
                    s ? s : "", out[0] < 0 ? "is not an integer in [0, 100000] (on some rank)"
                                              : "differs between ranks");
        return;
    }
    if (v > 0 && (thread_multiple || online)) {
        if (world_rank == 0)
            fprintf(stderr, "colltune: warning: COLLTUNE_GUARD ignored: %s\n", online
                    ? "online mode decides every call" : "its counters are not thread-safe "
                    "(MPI_THREAD_MULTIPLE on some rank)");
        return;
    }
    ct_guard_calls = v;
}

const ct_rule *ct_guard_pick(void **slot, MPI_Comm comm, ct_coll coll, long long bytes,
                             const ct_rule *r, int *from)
{
    guard_comm *g = *slot;
    block *b = NULL;
    ct_guard_timing = NULL;
    if (!g && !(g = *slot = calloc(1, sizeof *g))) return r;
    for (int i = 0; i < g->n && !b; i++)
        if (g->b[i].coll == (int)coll && g->b[i].bytes == bytes) b = &g->b[i];
    if (!b) {
        if (g->n == GUARD_BLOCKS) return r;
        b = &g->b[g->n++];
        b->coll = coll, b->bytes = bytes, b->lib = *r, b->lib.alg = NULL;
    }
    int explore = 2 * (ct_guard_calls + 1);       /* each arm's first call sets up: not timed */
    if (b->calls < explore) {
        timing_arm = b->calls % 2;                /* library first: 0 library, 1 the rule's */
        if (b->calls >= 2) ct_guard_timing = b;
        b->calls++;
        *from = CT_GUARD_TRY;
        return timing_arm ? r : &b->lib;
    }
    if (!b->verdict) {
        double worst[2];
        PMPI_Allreduce(b->t, worst, 2, MPI_DOUBLE, MPI_MAX, comm);
        b->verdict = worst[1] <= worst[0] ? CT_GUARD_KEPT : CT_GUARD_LIB;
    }
    *from = b->verdict;
    return b->verdict == CT_GUARD_KEPT ? r : &b->lib;
}

void ct_guard_took(double seconds)
{
    ((block *)ct_guard_timing)->t[timing_arm] += seconds;
    ct_guard_timing = NULL;
}

void ct_guard_free(void *slot) { free(slot); }
