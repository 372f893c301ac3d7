/* The non-blocking schedule engine (design in colltune/sched.h and
 * docs/algorithms.md): rounds of operations, a private duplicate communicator
 * per caller's communicator with one tag per schedule, and progress of every
 * active schedule of the process by Testsome/Waitany over all their requests. */
#include <stdlib.h>
#include "internal.h"

typedef enum { OP_SEND, OP_RECV, OP_REDUCE, OP_COPY, OP_CHILD } op_kind;

typedef struct {
    op_kind kind;
    const void *in;
    void *out;
    int count, peer;
    MPI_Datatype dtype;
    MPI_Op op;
    MPI_Aint bytes;
    ct_sched *child;
} op_t;

struct ct_sched {
    MPI_Comm user, comm;        /* caller's communicator, its shadow */
    int tag, err;               /* err: building failed (kept for start) */
    op_t *ops;
    int nops, capops;
    int *rstart, nrounds, caprounds;   /* round r = ops[rstart[r] .. rstart[r+1]) */
    struct { void *p; int shared; } *mem;
    int nmem, capmem;
    MPI_Request *req;           /* requests of the current round */
    int nreq, capreq, pending;
    int round, active, rc;      /* rc: first error, local or not */
    int aborted;                /* a message could not be posted or completed: stop */
    int starting;               /* inside start_round: a child's start must not advance us */
};

/* ---- per-communicator state: shadow communicator and sequence number ---- */

typedef struct { MPI_Comm shadow; unsigned long seq; } comm_state;
static int keyval = MPI_KEYVAL_INVALID;
static long tag_span = -1;      /* TAG_UB + 1 */

static int delete_state(MPI_Comm comm, int key, void *val, void *extra)
{
    (void)key; (void)extra;
    comm_state *st = val;
    /* WORLD and SELF lose their attributes inside MPI_Finalize, where SMPI
     * crashes on MPI_Comm_free: leave those two shadows to the library. */
    if (comm != MPI_COMM_WORLD && comm != MPI_COMM_SELF) MPI_Comm_free(&st->shadow);
    free(st);
    return MPI_SUCCESS;
}

static int comm_state_of(MPI_Comm comm, comm_state **out)
{
    int flag = 0, rc = MPI_SUCCESS;
    if (keyval == MPI_KEYVAL_INVALID) {
        void *ub;
        rc = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &keyval, NULL);
        if (rc != MPI_SUCCESS) return rc;
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
        tag_span = flag ? (long)*(int *)ub + 1 : 32768;
    }
    rc = MPI_Comm_get_attr(comm, keyval, out, &flag);
    if (rc != MPI_SUCCESS || flag) return rc;
    comm_state *st = malloc(sizeof *st);
    if (!st) return MPI_ERR_NO_MEM;
    st->seq = 0;
    ct_setup_begin();
    rc = MPI_Comm_dup(comm, &st->shadow);
    ct_setup_end();
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_attr(comm, keyval, st);
    if (rc != MPI_SUCCESS) { free(st); return rc; }
    *out = st;
    return MPI_SUCCESS;
}

int ct_sched_comm_prepare(MPI_Comm comm)
{
    comm_state *st;
    return comm_state_of(comm, &st);
}

int ct_sched_create(MPI_Comm comm, ct_sched **out)
{
    comm_state *st;
    *out = NULL;
    int rc = comm_state_of(comm, &st);
    if (rc != MPI_SUCCESS) return rc;
    ct_sched *s = calloc(1, sizeof *s);
    if (!s) return MPI_ERR_NO_MEM;
    s->user = comm;
    s->comm = st->shadow;
    s->tag = (int)(st->seq++ % (unsigned long)tag_span);
    s->round = -1;
    *out = s;
    return MPI_SUCCESS;
}

MPI_Comm ct_sched_comm(const ct_sched *s) { return s->user; }

void ct_sched_wire(const ct_sched *s, MPI_Comm *comm, int *tag)
{
    *comm = s->comm;
    *tag = s->tag;
}

/* ---- building ---- */

static int grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap) return 1;
    int n = *cap ? *cap * 2 : 16;
    while (n < need) n *= 2;
    void *q = realloc(*p, (size_t)n * elem);
    if (!q) return 0;
    *p = q;
    *cap = n;
    return 1;
}

static op_t *add(ct_sched *s, op_kind kind)
{
    if (s->err) return NULL;
    if (!grow((void **)&s->ops, &s->capops, s->nops + 1, sizeof(op_t)) ||
        !grow((void **)&s->rstart, &s->caprounds, s->nrounds + 1, sizeof(int))) {
        s->err = MPI_ERR_NO_MEM;
        return NULL;
    }
    if (s->nrounds == 0) s->rstart[s->nrounds++] = 0;
    op_t *o = &s->ops[s->nops++];
    *o = (op_t){.kind = kind};
    return o;
}

void ct_sched_send(ct_sched *s, const void *buf, int count, MPI_Datatype t, int peer)
{
    op_t *o = add(s, OP_SEND);
    if (o) { o->in = buf; o->count = count; o->dtype = t; o->peer = peer; }
}

void ct_sched_recv(ct_sched *s, void *buf, int count, MPI_Datatype t, int peer)
{
    op_t *o = add(s, OP_RECV);
    if (o) { o->out = buf; o->count = count; o->dtype = t; o->peer = peer; }
}

void ct_sched_reduce(ct_sched *s, const void *in, void *inout, int count, MPI_Datatype t, MPI_Op op)
{
    if (count <= 0) return;
    op_t *o = add(s, OP_REDUCE);
    if (o) { o->in = in; o->out = inout; o->count = count; o->dtype = t; o->op = op; }
}

void ct_sched_copy(ct_sched *s, void *dst, const void *src, MPI_Aint bytes)
{
    if (bytes <= 0 || dst == src) return;
    op_t *o = add(s, OP_COPY);
    if (o) { o->in = src; o->out = dst; o->bytes = bytes; }
}

void ct_sched_child(ct_sched *s, ct_sched *child)
{
    op_t *o = add(s, OP_CHILD);
    if (o) o->child = child;
    else ct_sched_free(&child);
}

void ct_sched_round(ct_sched *s)
{
    if (s->err || s->nrounds == 0 || s->rstart[s->nrounds - 1] == s->nops) return;
    if (!grow((void **)&s->rstart, &s->caprounds, s->nrounds + 1, sizeof(int))) {
        s->err = MPI_ERR_NO_MEM;
        return;
    }
    s->rstart[s->nrounds++] = s->nops;
}

/* SMPI timing runs: temporaries from SMPI_SHARED_MALLOC (one copy for all
 * simulated ranks, contents garbage) so that large calls on hundreds of
 * ranks fit in memory (256 ranks x 2 x 64 MiB of a reduce's temporaries were
 * killed for memory); the bench turns it on around timed calls on shared
 * buffers only, never while it checks results. Privatized: per rank. */
static int shared_scratch;
void ct_sched_shared_scratch(int on) { shared_scratch = on; }

void *ct_sched_alloc(ct_sched *s, size_t bytes)
{
    void *p = NULL;
    int shared = 0;
    if (!s->err && grow((void **)&s->mem, &s->capmem, s->nmem + 1, sizeof s->mem[0])) {
#ifdef COLLTUNE_SMPI
        shared = shared_scratch;
        p = shared ? SMPI_SHARED_MALLOC(bytes ? bytes : 1) : malloc(bytes ? bytes : 1);
#else
        p = malloc(bytes ? bytes : 1);
#endif
    }
    if (!p) { s->err = MPI_ERR_NO_MEM; return NULL; }
    s->mem[s->nmem].shared = shared;
    return s->mem[s->nmem++].p = p;
}

/* ---- running ---- */

static ct_sched **act;          /* active schedules of this process */
static int nact, capact;

static int round_end(const ct_sched *s, int r) { return r + 1 < s->nrounds ? s->rstart[r + 1] : s->nops; }

static void finish(ct_sched *s)
{
    for (int i = 0; i < s->nreq; i++)   /* only after an error */
        if (s->req[i] != MPI_REQUEST_NULL) MPI_Request_free(&s->req[i]);
    s->pending = 0;
    s->active = 0;
    for (int i = 0; i < nact; i++)
        if (act[i] == s) { act[i] = act[--nact]; break; }
}

static void start_round(ct_sched *s, int r)
{
    int rc = MPI_SUCCESS;
    s->round = r;
    s->nreq = s->pending = 0;
    s->starting = 1;
    for (int i = s->rstart[r]; i < round_end(s, r) && rc == MPI_SUCCESS; i++) {
        op_t *o = &s->ops[i];
        switch (o->kind) {
        case OP_SEND:
            rc = MPI_Isend(o->in, o->count, o->dtype, o->peer, s->tag, s->comm, &s->req[s->nreq++]);
            break;
        case OP_RECV:
            rc = MPI_Irecv(o->out, o->count, o->dtype, o->peer, s->tag, s->comm, &s->req[s->nreq++]);
            break;
        case OP_REDUCE:
            /* A local error does not stop the schedule: every message of
             * it still moves, so no peer waits for one that never comes and
             * none is left unreceived; the error is returned at the end. */
            if (s->rc == MPI_SUCCESS) s->rc = ct_reduce_local(o->in, o->out, o->count, o->dtype, o->op);
            break;
        case OP_COPY:
            ct_copy(o->out, o->in, o->bytes);
            break;
        case OP_CHILD:
            rc = ct_sched_start(o->child);
            if (rc != MPI_SUCCESS && !o->child->err && !o->child->active && !o->child->aborted) {
                if (s->rc == MPI_SUCCESS) s->rc = rc;    /* it ran through with a local error */
                rc = MPI_SUCCESS;
            }
            break;
        }
        if (rc == MPI_SUCCESS && (o->kind == OP_SEND || o->kind == OP_RECV)) s->pending++;
        else if (rc != MPI_SUCCESS && (o->kind == OP_SEND || o->kind == OP_RECV))
            s->req[s->nreq - 1] = MPI_REQUEST_NULL;
    }
    s->starting = 0;
    if (rc != MPI_SUCCESS) { s->rc = rc; s->aborted = 1; finish(s); }
}

/* Round done: no request pending and every child of the round complete. */
static int round_done(ct_sched *s)
{
    if (s->pending || s->starting) return 0;
    for (int i = s->round >= 0 ? s->rstart[s->round] : 0; s->round >= 0 && i < round_end(s, s->round); i++)
        if (s->ops[i].kind == OP_CHILD) {
            if (s->ops[i].child->active) return 0;
            if (s->ops[i].child->rc != MPI_SUCCESS && s->rc == MPI_SUCCESS) s->rc = s->ops[i].child->rc;
            s->aborted |= s->ops[i].child->aborted;
        }
    return 1;
}

/* Start next rounds of every active schedule whose round is done, until none is. */
static void advance_all(void)
{
    for (int again = 1; again;) {
        again = 0;
        for (int i = 0; i < nact; i++) {
            ct_sched *s = act[i];
            if (!round_done(s)) continue;
            if (s->aborted || s->round + 1 >= s->nrounds) finish(s);
            else start_round(s, s->round + 1);
            again = 1;
            break;
        }
    }
}

int ct_sched_start(ct_sched *s)
{
    if (s->err) return s->err;
    if (s->active) return MPI_ERR_REQUEST;
    int maxreq = 0;
    for (int r = 0; r < s->nrounds; r++) {
        int n = 0;
        for (int i = s->rstart[r]; i < round_end(s, r); i++)
            n += s->ops[i].kind == OP_SEND || s->ops[i].kind == OP_RECV;
        if (n > maxreq) maxreq = n;
    }
    if (!grow((void **)&s->req, &s->capreq, maxreq, sizeof(MPI_Request)) ||
        !grow((void **)&act, &capact, nact + 1, sizeof(ct_sched *)))
        return MPI_ERR_NO_MEM;
    s->rc = MPI_SUCCESS;
    s->aborted = 0;
    s->round = -1;
    s->nreq = s->pending = 0;
    s->active = 1;
    act[nact++] = s;
    advance_all();
    return s->active ? MPI_SUCCESS : s->rc;
}

/* Scratch arrays of one progress call, kept between calls. */
static MPI_Request *all_req;
static MPI_Status *all_st;
static int *all_idx, *owner_idx, all_cap;
static ct_sched **owner;

static int scratch(int n)
{
    if (n <= all_cap) return 1;
    int c = 2 * n;
    void *p;
    if (!(p = realloc(all_req, sizeof(MPI_Request) * (size_t)c))) return 0;
    all_req = p;
    if (!(p = realloc(all_st, sizeof(MPI_Status) * (size_t)c))) return 0;
    all_st = p;
    if (!(p = realloc(all_idx, sizeof(int) * (size_t)c))) return 0;
    all_idx = p;
    if (!(p = realloc(owner_idx, sizeof(int) * (size_t)c))) return 0;
    owner_idx = p;
    if (!(p = realloc(owner, sizeof(ct_sched *) * (size_t)c))) return 0;
    owner = p;
    all_cap = c;
    return 1;
}

/* One Testsome (block = 0) or Waitany over the pending requests of every
 * active schedule, then advance. Returns 0 when nothing was pending. */
/* The open requests of every active schedule into all_req[0..n) (owners
 * noted), with room for `extra` more after them. Returns n, -1 if no memory. */
static int gather_requests(int extra)
{
    int n = 0;
    for (int i = 0; i < nact; i++) n += act[i]->pending;
    if (!scratch(n + extra)) return -1;
    n = 0;
    for (int i = 0; i < nact; i++)
        for (int j = 0; j < act[i]->nreq; j++)
            if (act[i]->req[j] != MPI_REQUEST_NULL) {
                all_req[n] = act[i]->req[j];
                owner[n] = act[i];
                owner_idx[n++] = j;
            }
    return n;
}

/* A wait may release more requests than it reports (Open MPI 5 frees every
 * request that failed): the schedules' own handles (and the caller's extra
 * ones) follow the scratch copy, so none is waited on or freed twice. */
static void forget_released(int n, int nextra, MPI_Request *extra)
{
    for (int i = 0; i < n; i++)
        if (all_req[i] == MPI_REQUEST_NULL) owner[i]->req[owner_idx[i]] = MPI_REQUEST_NULL;
    for (int k = 0; k < nextra; k++) extra[k] = all_req[n + k];
}

static int progress(int block)
{
    advance_all();
    int n = gather_requests(0);
    if (n <= 0) return n;
    int done = n, rc;
    if (!block) {
#ifdef COLLTUNE_SMPI
        /* one Testany: see the Waitany note below. Every failed test costs
         * SMPI 3.32 simulation speed for the rest of the run (each leaves
         * state behind), so call ct_test sparingly under SMPI. */
        int flag = 0;
        rc = MPI_Testany(n, all_req, all_idx, &flag, all_st);
        done = flag && all_idx[0] != MPI_UNDEFINED;
        if (done && rc != MPI_SUCCESS) { all_st[0].MPI_ERROR = rc; rc = MPI_ERR_IN_STATUS; }
#else
        rc = MPI_Testsome(n, all_req, &done, all_idx, all_st);
#endif
    } else if (nact == 1) {   /* nothing else to progress: one wait for the round */
        rc = MPI_Waitall(n, all_req, all_st);
        for (int k = 0; k < n; k++) all_idx[k] = k;
    } else {
#ifdef COLLTUNE_SMPI
        /* SMPI 3.32's Waitsome makes the simulation slower and slower over a
         * run (5x over a 9-rank algotest); its Waitany does not */
        done = 1;
        rc = MPI_Waitany(n, all_req, all_idx, all_st);
        if (all_idx[0] == MPI_UNDEFINED) done = 0;
        else if (rc != MPI_SUCCESS) { all_st[0].MPI_ERROR = rc; rc = MPI_ERR_IN_STATUS; }
#else
        /* one call per completion batch: on MPICH each wait call is costly */
        rc = MPI_Waitsome(n, all_req, &done, all_idx, all_st);
#endif
    }
    forget_released(n, 0, NULL);
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
        for (int i = 0; i < n; i++) if (owner[i]->rc == MPI_SUCCESS) owner[i]->rc = rc;
        for (int i = 0; i < n; i++) owner[i]->aborted = 1;
        for (int i = 0; i < n; i++) if (owner[i]->active) finish(owner[i]);
        return 1;
    }
    for (int k = 0; k < done && done != MPI_UNDEFINED; k++) {
        int i = all_idx[k];
        ct_sched *s = owner[i];
        if (rc == MPI_ERR_IN_STATUS && all_st[k].MPI_ERROR == MPI_ERR_PENDING) continue;
        s->req[owner_idx[i]] = MPI_REQUEST_NULL;
        s->pending--;
        if (rc == MPI_ERR_IN_STATUS && all_st[k].MPI_ERROR != MPI_SUCCESS) {
            if (s->rc == MPI_SUCCESS) s->rc = all_st[k].MPI_ERROR;
            s->aborted = 1;
        }
    }
    advance_all();
    return 1;
}

int ct_sched_progress(void) { return progress(0) < 0 ? MPI_ERR_NO_MEM : MPI_SUCCESS; }

int ct_sched_active(const ct_sched *s) { return s->active; }

int ct_sched_wait_with(MPI_Request *extra, int nextra, int *which)
{
    *which = -1;
    advance_all();
    int n = gather_requests(nextra);
    if (n < 0) return MPI_ERR_NO_MEM;
    if (n + nextra == 0) return MPI_SUCCESS;
    for (int k = 0; k < nextra; k++) all_req[n + k] = extra[k];
    int idx, rc = MPI_Waitany(n + nextra, all_req, &idx, &all_st[0]);
    forget_released(n, nextra, extra);
    if (idx == MPI_UNDEFINED) return rc;
    if (idx >= n) {                     /* the caller's request */
        extra[idx - n] = MPI_REQUEST_NULL;
        *which = idx - n;
        return rc;
    }
    ct_sched *s = owner[idx];
    s->req[owner_idx[idx]] = MPI_REQUEST_NULL;
    s->pending--;
    if (rc != MPI_SUCCESS) {
        if (s->rc == MPI_SUCCESS) s->rc = rc;
        s->aborted = 1;
    }
    advance_all();
    return MPI_SUCCESS;
}

int ct_sched_test(ct_sched *s, int *done)
{
    *done = 0;
    if (s->active && progress(0) < 0) return MPI_ERR_NO_MEM;
    *done = !s->active;
    return *done ? s->rc : MPI_SUCCESS;
}

int ct_sched_wait(ct_sched *s)
{
    while (s->active) {
        int p = progress(1);
        if (p < 0) return MPI_ERR_NO_MEM;
        if (p == 0 && s->active) return MPI_ERR_INTERN;   /* nothing can complete it */
    }
    return s->rc;
}

void ct_sched_free(ct_sched **sp)
{
    ct_sched *s = *sp;
    if (!s) return;
    if (s->active) ct_sched_wait(s);
    for (int i = 0; i < s->nops; i++)
        if (s->ops[i].kind == OP_CHILD) ct_sched_free(&s->ops[i].child);
    for (int i = 0; i < s->nmem; i++) {
#ifdef COLLTUNE_SMPI
        if (s->mem[i].shared) { SMPI_SHARED_FREE(s->mem[i].p); continue; }
#endif
        free(s->mem[i].p);
    }
    free(s->mem); free(s->ops); free(s->rstart); free(s->req);
    free(s);
    *sp = NULL;
}
