/* The application's point-to-point sends, counted by destination world rank
 * (docs/profile-counting.md). Covered: MPI_Send, Bsend, Ssend, Rsend, Isend,
 * Ibsend, Issend, Irsend, Sendrecv, Sendrecv_replace, Isendrecv,
 * Isendrecv_replace (where the library has them), and persistent sends
 * (Send_init, Bsend_init, Ssend_init, Rsend_init) counted at every MPI_Start /
 * MPI_Startall; with MPI 4 also each one's large-count _c form. colltune's own algorithms post their sends through the same
 * MPI_Isend / MPI_Issend, so they are counted here too, as source "colltune"
 * and the collective's kind (ct_prof_alg). A send counts once it was posted
 * successfully; MPI_PROC_NULL is skipped. */
#include <stdlib.h>
#include <string.h>
#include "profile.h"

/* ---- communicator -> world ranks, cached as an attribute -------------------- */
typedef struct { int n, inter, idx; int world[]; } world_map;   /* idx: in rank file's comms */
static int keyval = MPI_KEYVAL_INVALID;
static MPI_Comm last_comm = MPI_COMM_NULL;      /* one-entry cache, dropped with the map */
static world_map *last_map;

static int delete_map(MPI_Comm comm, int kv, void *value, void *extra)
{
    (void)comm, (void)kv, (void)extra;
    if (value == last_map) last_map = NULL, last_comm = MPI_COMM_NULL;
    ct_prof.mem -= sizeof(world_map) + (size_t)((world_map *)value)->n * sizeof(int);
    free(value);
    return MPI_SUCCESS;
}

static world_map *build_map(MPI_Comm comm)
{
    MPI_Group g, wg;
    int inter = 0, n = 0;
    world_map *m;
    PMPI_Comm_test_inter(comm, &inter);
    if ((inter ? PMPI_Comm_remote_group(comm, &g) : PMPI_Comm_group(comm, &g)) != MPI_SUCCESS)
        return NULL;
    PMPI_Group_size(g, &n);
    if ((m = ct_prof_alloc(sizeof *m + (size_t)n * sizeof(int)))) {
        int *in = malloc((size_t)n * sizeof *in);
        m->n = n, m->inter = inter, m->idx = -1;
        PMPI_Comm_group(ct_prof.world, &wg);
        for (int i = 0; in && i < n; i++) in[i] = i;
        if (!in || PMPI_Group_translate_ranks(g, n, in, wg, m->world) != MPI_SUCCESS)
            for (int i = 0; i < n; i++) m->world[i] = -1;
        free(in);
        PMPI_Group_free(&wg);
    }
    PMPI_Group_free(&g);
    return m;
}

static world_map *map_of(MPI_Comm comm)
{
    world_map *m = NULL;
    int flag = 0;
    if (!ct_prof.mt && comm == last_comm && last_map) return last_map;
    if (keyval == MPI_KEYVAL_INVALID &&
        PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_map, &keyval, NULL) != MPI_SUCCESS)
        return NULL;
    if (PMPI_Comm_get_attr(comm, keyval, &m, &flag) != MPI_SUCCESS || !flag) {
        if (!(m = build_map(comm))) return NULL;
        if (PMPI_Comm_set_attr(comm, keyval, m) != MPI_SUCCESS) {
            ct_prof.mem -= sizeof *m + (size_t)m->n * sizeof(int);
            free(m);
            return NULL;
        }
    }
    if (!ct_prof.mt) last_comm = comm, last_map = m;
    return m;
}

const int *ct_prof_world_map(MPI_Comm comm, int *n, int *inter, int **idx)
{
    world_map *m = map_of(comm);
    if (!m) return NULL;
    *n = m->n, *inter = m->inter, *idx = &m->idx;
    return m->world;
}

/* ---- counting ------------------------------------------------------------------ */
static int world_rank_of(MPI_Comm comm, int dest)
{
    if (comm == ct_prof.world) return dest;
    const world_map *m = map_of(comm);
    return m && dest >= 0 && dest < m->n ? m->world[dest] : -1;
}

static void count(int world, uint64_t bytes)
{
    /* inside a library collective (ct_prof_depth) a send through MPI_Isend is
     * that collective's: no library here does that, but one could */
    int kind = ct_prof_depth, source = S_INTERPOSER;
    if (ct_prof_alg) kind = ct_prof_alg, source = S_COLLTUNE;
    ct_prof_add(kind, source, world, bytes, 1);
}

void ct_prof_count_send(int dest, long long n, MPI_Datatype dt, MPI_Comm comm)
{
    int tsize = 0;
    if (dest == MPI_PROC_NULL) return;
    ct_prof_lock();
    PMPI_Type_size(dt, &tsize);
    count(world_rank_of(comm, dest), (uint64_t)n * (uint64_t)tsize);
    ct_prof_unlock();
}

#define COUNTED(call, dest, n, dt, comm)                                            \
    do {                                                                            \
        int rc_ = call;                                                             \
        if (__builtin_expect(ct_prof_on, 0) && rc_ == MPI_SUCCESS)                  \
            ct_prof_count_send(dest, n, dt, comm);                                  \
        return rc_;                                                                 \
    } while (0)

/* NAME: the call; CT: its count type (int, or MPI_Count for MPI-4's _c forms) */
#define SEND_WRAPPER(NAME, CT)                                                      \
    int MPI_##NAME(const void *buf, CT n, MPI_Datatype dt, int dest, int tag,      \
                   MPI_Comm comm)                                                   \
    {                                                                               \
        COUNTED(PMPI_##NAME(buf, n, dt, dest, tag, comm), dest, n, dt, comm);      \
    }
#define ISEND_WRAPPER(NAME, CT)                                                     \
    int MPI_##NAME(const void *buf, CT n, MPI_Datatype dt, int dest, int tag,      \
                   MPI_Comm comm, MPI_Request *req)                                 \
    {                                                                               \
        COUNTED(PMPI_##NAME(buf, n, dt, dest, tag, comm, req), dest, n, dt, comm); \
    }
#define SENDRECV_WRAPPER(NAME, CT, LAST_T, LAST)                                    \
    int MPI_##NAME(const void *sbuf, CT scount, MPI_Datatype stype, int dest,      \
                   int stag, void *rbuf, CT rcount, MPI_Datatype rtype, int source, \
                   int rtag, MPI_Comm comm, LAST_T LAST)                            \
    {                                                                               \
        COUNTED(PMPI_##NAME(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype,   \
                            source, rtag, comm, LAST), dest, scount, stype, comm);  \
    }
#define REPLACE_WRAPPER(NAME, CT, LAST_T, LAST)                                     \
    int MPI_##NAME(void *buf, CT n, MPI_Datatype dt, int dest, int stag, int source,\
                   int rtag, MPI_Comm comm, LAST_T LAST)                            \
    {                                                                               \
        COUNTED(PMPI_##NAME(buf, n, dt, dest, stag, source, rtag, comm, LAST), dest,\
                n, dt, comm);                                                       \
    }
/* each family once with int counts, and (S = _c) with MPI-4's MPI_Count */
#define SEND_FAMILY(S, CT)                                                          \
    SEND_WRAPPER(Send##S, CT) SEND_WRAPPER(Bsend##S, CT) SEND_WRAPPER(Ssend##S, CT)  \
    SEND_WRAPPER(Rsend##S, CT) ISEND_WRAPPER(Isend##S, CT) ISEND_WRAPPER(Ibsend##S, CT) \
    ISEND_WRAPPER(Issend##S, CT) ISEND_WRAPPER(Irsend##S, CT)                       \
    SENDRECV_WRAPPER(Sendrecv##S, CT, MPI_Status *, status)                         \
    REPLACE_WRAPPER(Sendrecv_replace##S, CT, MPI_Status *, status)
#define ISENDRECV_FAMILY(S, CT)                                                     \
    SENDRECV_WRAPPER(Isendrecv##S, CT, MPI_Request *, req)                          \
    REPLACE_WRAPPER(Isendrecv_replace##S, CT, MPI_Request *, req)
SEND_FAMILY(, int)
/* MPI-4's non-blocking sendrecv: MPICH 5, and Open MPI 5 (which reports MPI 3.1) */
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
ISENDRECV_FAMILY(, int)
#endif
#if MPI_VERSION >= 4                    /* large counts (MPICH 5) */
SEND_FAMILY(_c, MPI_Count)
ISENDRECV_FAMILY(_c, MPI_Count)
#endif

/* ---- persistent sends: a small open-addressing table of live requests ------- */
typedef struct { MPI_Request req; int world; uint64_t bytes; int used; } persistent;
static persistent *table;
static size_t cap, live, filled;                  /* filled: live + tombstones */

static size_t slot_of(MPI_Request req)
{
    uint64_t h = 0;
    memcpy(&h, &req, sizeof req < sizeof h ? sizeof req : sizeof h);
    h *= 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

static persistent *find(MPI_Request req)
{
    if (!cap) return NULL;
    for (size_t i = slot_of(req), k = 0; k < cap && table[i].used; i = (i + 1) & (cap - 1), k++)
        if (table[i].used == 1 && !memcmp(&table[i].req, &req, sizeof req)) return &table[i];
    return NULL;
}

static void insert(persistent e)
{
    size_t i = slot_of(e.req);
    while (table[i].used == 1) i = (i + 1) & (cap - 1);
    filled += table[i].used == 0;
    table[i] = e;
    live++;
}

/* Rehashes at half full (dropping tombstones) into 4 x the live entries. */
static void track(MPI_Request req, int world, uint64_t bytes)
{
    if (2 * (filled + 1) > cap) {
        size_t old = cap, want = 64;
        persistent *prev = table;
        while (want < 4 * (live + 1)) want *= 2;
        if (!(table = ct_prof_alloc(want * sizeof *table))) {
            table = prev;
            ct_prof.dropped_msgs++;               /* this request's starts are never counted */
            return;
        }
        cap = want, live = filled = 0;
        for (size_t i = 0; i < old; i++)
            if (prev[i].used == 1) insert(prev[i]);
        free(prev);
        ct_prof.mem -= old * sizeof *table;
    }
    insert((persistent){req, world, bytes, 1});
}

static int persistent_send(int rc, int dest, long long n, MPI_Datatype dt, MPI_Comm comm,
                           MPI_Request *req)
{
    int tsize = 0;
    /* followed even while paused: a start after MPI_Pcontrol(1) counts */
    if (!ct_prof.enabled || rc != MPI_SUCCESS || dest == MPI_PROC_NULL) return rc;
    ct_prof_lock();
    PMPI_Type_size(dt, &tsize);
    track(*req, world_rank_of(comm, dest), (uint64_t)n * (uint64_t)tsize);
    ct_prof_unlock();
    return rc;
}

#define INIT_WRAPPER(NAME, CT)                                                      \
    int MPI_##NAME(const void *buf, CT n, MPI_Datatype dt, int dest, int tag,      \
                   MPI_Comm comm, MPI_Request *req)                                 \
    {                                                                               \
        return persistent_send(PMPI_##NAME(buf, n, dt, dest, tag, comm, req), dest, \
                               n, dt, comm, req);                                   \
    }
#define INIT_FAMILY(S, CT)                                                          \
    INIT_WRAPPER(Send_init##S, CT) INIT_WRAPPER(Bsend_init##S, CT)                  \
    INIT_WRAPPER(Ssend_init##S, CT) INIT_WRAPPER(Rsend_init##S, CT)
INIT_FAMILY(, int)
#if MPI_VERSION >= 4
INIT_FAMILY(_c, MPI_Count)
#endif

static void started(MPI_Request req)
{
    persistent *p = find(req);
    if (p) count(p->world, p->bytes);
}

int MPI_Start(MPI_Request *req)
{
    MPI_Request r = *req;
    int rc = PMPI_Start(req);
    if (__builtin_expect(ct_prof_on, 0) && rc == MPI_SUCCESS && live) {
        ct_prof_lock();
        started(r);
        ct_prof_unlock();
    }
    return rc;
}

int MPI_Startall(int n, MPI_Request reqs[])
{
    int rc = PMPI_Startall(n, reqs);
    if (__builtin_expect(ct_prof_on, 0) && rc == MPI_SUCCESS && live) {
        ct_prof_lock();
        for (int i = 0; i < n; i++) started(reqs[i]);
        ct_prof_unlock();
    }
    return rc;
}

/* Tracked requests are forgotten here even while paused (a tombstone); so is a
 * non-blocking collective's (profile_pending.c). */
int MPI_Request_free(MPI_Request *req)
{
    if (__builtin_expect(ct_prof_pending(), 0)) ct_prof_pending_forget(*req);
    if (__builtin_expect(live > 0, 0)) {
        ct_prof_lock();
        persistent *p = find(*req);
        if (p) p->used = 2, live--;
        ct_prof_unlock();
    }
    return PMPI_Request_free(req);
}
