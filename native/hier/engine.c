/* Non-blocking operations on one HAN segment, progressed together so that
 * inter-node and intra-node work of a task overlap: colltune's tree bcast and
 * tree reduce (inner segments of `sub` elements stream through the tree, each
 * forwarded as soon as it is complete), the library's MPI_Ibcast/MPI_Ireduce,
 * the shared-memory ops of shm.c, and a whole flat allreduce of colltune's
 * catalogue across the leaders (its schedule progressed with the rest). One
 * MPI_Waitany over the requests of all ops of a task; nothing busy-polls
 * (SMPI charges time per MPI_Test). */
#include <stdlib.h>
#include "hier_internal.h"

void nb_shape(int alg, int n, ct_tree_kind *kind, int *radix)
{
    switch (alg) {  /* tree values of the parameter space, not algorithm names */
    case CT_HAN_TREE_BINARY: *kind = CT_TREE_KARY; *radix = 2; break;
    case CT_HAN_TREE_CHAIN: *kind = CT_TREE_CHAIN; *radix = 1; break;
    case CT_HAN_TREE_KNOMIAL4: *kind = CT_TREE_KNOMIAL; *radix = 4; break;
    case CT_HAN_TREE_LINEAR: *kind = CT_TREE_KNOMIAL; *radix = n > 2 ? n : 2; break;
    default: *kind = CT_TREE_KNOMIAL; *radix = 2; break;
    }
}

/* A piece's send. One send in flight per link: concurrent pieces on one link
 * would share its bandwidth and all arrive at the end, defeating the pipeline.
 * A real NIC sends queued eager messages one after another, but SMPI shares a
 * link fairly among all flows and completes a detached (< 64 KiB) MPI_Isend at
 * once, so "in flight" cannot be seen there; MPI_Issend completes when the
 * transfer ends (an 8-leader chain of 32 x 16 KiB took 254 us with Isend,
 * 77 us with Issend; 2 leaders: 45 vs 63 us). Real MPI keeps MPI_Isend. */
static int piece_send(const void *buf, int n, MPI_Datatype dt, int to, int tag, MPI_Comm comm,
                      MPI_Request *req)
{
#ifdef COLLTUNE_SMPI
    return MPI_Issend(buf, n, dt, to, tag, comm, req);
#else
    return MPI_Isend(buf, n, dt, to, tag, comm, req);
#endif
}

/* The two trees of a dual bcast use their own tags: a rank may have the same
 * parent in both, whose two streams of pieces need not leave in piece order.
 * (Dual trees run on the leaders' communicator only, where no shared-memory
 * op uses the alternate range.) */
static int tree_tag(const nb_op *o, int t) { return o->tag + t * CT_HAN_TAG_ALT; }

/* Bcast: piece got[c] (the next of child c's tree) goes to child c once it
 * is here and the link to c is free: the previous piece sent to c has left,
 * and with a shared busy[] also the pieces of the call's other segments (a
 * NIC sends one message after another; without this a leader that is done
 * with segment t starts t+1 on the same link and both crawl at half rate). */
static int bcast_pump(nb_op *o)
{
    int rc = MPI_SUCCESS;
    for (int c = 0; c < o->nchild && rc == MPI_SUCCESS; c++) {
        int s = o->got[c], prev = s - o->ntrees;
        if (s >= o->nsub || (o->tparent[s % o->ntrees] >= 0 && o->req[s] != MPI_REQUEST_NULL))
            continue;                   /* not here yet (receives are all posted at start) */
        if (o->busy ? o->busy[o->child[c]] > 0
                    : prev >= 0 && o->req[o->nsub + (size_t)prev * o->nchild + c] != MPI_REQUEST_NULL)
            continue;
        int off = s * o->sub, n = o->count - off < o->sub ? o->count - off : o->sub;
        rc = piece_send(ct_at(o->buf, o->ext, off), n, o->dt, o->child[c], tree_tag(o, o->ctree[c]),
                        o->comm, &o->req[o->nsub + (size_t)s * o->nchild + c]);
        o->pending++;
        o->got[c] += o->ntrees;
        if (o->busy) o->busy[o->child[c]]++;
    }
    return rc;
}

/* Reduce: piece next_send goes up once every child's part is reduced into
 * it and the previous piece's send is complete. */
static int reduce_send_ready(nb_op *o)
{
    int rc = MPI_SUCCESS;
    MPI_Request *sreq = o->req + (size_t)o->nsub * o->nchild;
    while (o->next_send < o->nsub && o->got[o->next_send] == o->nchild && rc == MPI_SUCCESS) {
        int s = o->next_send, off = s * o->sub, n = o->count - off < o->sub ? o->count - off : o->sub;
        if (o->parent >= 0 && s > 0 && sreq[s - 1] != MPI_REQUEST_NULL) break;
        o->next_send++;
        if (o->parent < 0) continue;
        rc = piece_send(ct_at(o->buf, o->ext, off), n, o->dt, o->parent, o->tag, o->comm, &sreq[s]);
        o->pending++;
    }
    return rc;
}

static void update_ready(nb_op *o)
{
    if (o->kind == NB_REDUCE) o->ready = o->pending == 0 && o->next_send == o->nsub;
    else if (o->kind == NB_BCAST) o->ready = o->next_send == o->nsub;  /* sends may go on */
    else if (o->kind == NB_SHM_BCAST || o->kind == NB_SHM_REDUCE) o->ready = o->pending == 0 && o->phase < 0;
    else o->ready = o->pending == 0;
}

/* Children (comm ranks) and parents of this rank in the op's tree(s). */
static void build_tree(nb_op *o, int alg)
{
    int v = (o->rank - o->root + o->size) % o->size, n;
    o->child = malloc(sizeof(int) * (size_t)(o->size + 2));
    o->ctree = calloc((size_t)o->size + 2, sizeof(int));
    o->ntrees = alg == CT_HAN_TREE_DUAL && o->kind == NB_BCAST ? 2 : 1;
    o->nchild = 0;
    for (int t = 0; t < o->ntrees; t++) {
        ct_tree_kind kind;
        int radix, p;
        if (o->ntrees == 2) {
            p = ct_dual_tree(t, v, o->size, o->child + o->nchild, &n);
        } else {
            nb_shape(alg, o->size, &kind, &radix);   /* a dual reduce tree is not offered: binomial */
            p = ct_tree(kind, radix, v, o->size, o->child, &n);
        }
        for (int c = o->nchild; c < o->nchild + n; c++) {
            o->child[c] = (o->child[c] + o->root) % o->size;
            o->ctree[c] = t;
        }
        o->nchild += n;
        o->tparent[t] = p < 0 ? -1 : (p + o->root) % o->size;
    }
    o->parent = o->tparent[0];
}

static int start_tree(nb_op *o, int alg)
{
    int rc = MPI_SUCCESS;
    build_tree(o, alg);
    o->nsub = (o->count + o->sub - 1) / o->sub;
    o->nreq = o->nsub * (o->nchild + 1);
    o->req = malloc(sizeof(MPI_Request) * (size_t)(o->nreq > 0 ? o->nreq : 1));
    for (int i = 0; i < o->nreq; i++) o->req[i] = MPI_REQUEST_NULL;
    if (o->kind == NB_BCAST) {
        o->got = malloc(sizeof(int) * ((size_t)o->nchild + 1));   /* next piece per child */
        for (int c = 0; c < o->nchild; c++) o->got[c] = o->ctree[c];
        if (o->parent < 0) {
            o->next_send = o->nsub;
            rc = bcast_pump(o);
        } else {
            for (int s = 0; s < o->nsub && rc == MPI_SUCCESS; s++, o->pending++) {
                int off = s * o->sub, n = o->count - off < o->sub ? o->count - off : o->sub;
                rc = MPI_Irecv(ct_at(o->buf, o->ext, off), n, o->dt, o->tparent[s % o->ntrees],
                               tree_tag(o, s % o->ntrees), o->comm, &o->req[s]);
            }
        }
        return rc;
    }
    /* reduce: a receive buffer per child for the whole op, pieces posted at once */
    o->tmp = malloc((size_t)(o->count * o->ext) * (size_t)(o->nchild > 0 ? o->nchild : 1) + 1);
    o->got = calloc((size_t)o->nsub + 1, sizeof(int));
    for (int s = 0; s < o->nsub && rc == MPI_SUCCESS; s++) {
        int off = s * o->sub, n = o->count - off < o->sub ? o->count - off : o->sub;
        for (int c = 0; c < o->nchild && rc == MPI_SUCCESS; c++, o->pending++)
            rc = MPI_Irecv(o->tmp + ((MPI_Aint)c * o->count + off) * o->ext, n, o->dt, o->child[c],
                           o->tag, o->comm, &o->req[(size_t)s * o->nchild + c]);
    }
    return rc == MPI_SUCCESS ? reduce_send_ready(o) : rc;
}

int nb_start_shm(nb_op *o);

/* A flat allreduce of the catalogue (id = alg) in place on the leaders, as a
 * schedule of the sched engine; nb_progress waits on its requests together
 * with the other ops'. If the algorithm declines, the library's
 * MPI_Iallreduce runs instead and its request is the op's only one. */
static int start_flat_allreduce(nb_op *o, int alg)
{
    const ct_algorithm *a = ct_find_id(CT_ALLREDUCE, alg);
    if (!a) return MPI_ERR_ARG;
    ct_args args = {.sendbuf = MPI_IN_PLACE, .recvbuf = o->buf, .count = o->count, .dtype = o->dt,
                    .op = o->op, .root = 0, .comm = o->comm};
    int rc = ct_icall(CT_ALLREDUCE, a->name, NULL, &args, &o->flat, NULL);
    if (rc != MPI_SUCCESS) return rc;
    o->pending = 1;
    if (!o->flat.sched) {             /* declined: the library's request */
        o->req = malloc(sizeof(MPI_Request));
        o->req[0] = o->flat.lib;
        o->nreq = 1;
        o->flat.active = 0;
    }
    return MPI_SUCCESS;
}

/* A flat allreduce's schedule finished: collect its result code. */
static int flat_done(nb_op *o)
{
    if (o->kind != NB_FLAT_ALLREDUCE || !o->flat.sched || !o->pending
        || ct_sched_active(o->flat.sched))
        return MPI_SUCCESS;
    o->pending = 0;
    int rc = ct_wait(&o->flat);       /* returns at once; releases the schedule */
    if (rc != MPI_SUCCESS && !o->err) o->err = rc;   /* it ran through: a local error */
    update_ready(o);
    return MPI_SUCCESS;
}
int nb_complete_shm(nb_op *o, int idx);

/* o->kind, comm, root, buf, count, dt, op, tag and sub (0 = whole) are set;
 * for tree ops o->parent holds the tree value (ct_han tree enum) on entry. */
int nb_start(nb_op *o)
{
    int rc = MPI_SUCCESS, alg = o->parent;
    MPI_Comm_rank(o->comm, &o->rank);
    MPI_Comm_size(o->comm, &o->size);
    o->ext = ct_extent(o->dt);
    o->parent = -1;
    if (o->sub <= 0 || o->sub > o->count) o->sub = o->count > 0 ? o->count : 1;
    if (o->count == 0 || o->size == 1) {   /* alone: a library reduce's result is its own data */
        if (o->sbuf && o->count) ct_copy(o->buf, o->sbuf, (MPI_Aint)o->count * o->ext);
        o->ready = 1;
        return MPI_SUCCESS;
    }
    switch (o->kind) {
    case NB_BCAST: case NB_REDUCE:
        rc = start_tree(o, alg);
        break;
    case NB_LIB_IBCAST:
        o->req = malloc(sizeof(MPI_Request));
        o->nreq = o->pending = 1;
        rc = PMPI_Ibcast(o->buf, o->count, o->dt, o->root, o->comm, o->req);
        break;
    case NB_LIB_IREDUCE:
        o->req = malloc(sizeof(MPI_Request));
        o->nreq = o->pending = 1;
        rc = o->rank == o->root
             ? PMPI_Ireduce(o->sbuf ? o->sbuf : MPI_IN_PLACE, o->buf, o->count, o->dt, o->op, o->root,
                            o->comm, o->req)
             : PMPI_Ireduce(o->sbuf ? o->sbuf : o->buf, NULL, o->count, o->dt, o->op, o->root, o->comm,
                            o->req);
        break;
    case NB_FLAT_ALLREDUCE:
        rc = start_flat_allreduce(o, alg);
        break;
    default:
        rc = nb_start_shm(o);
    }
    if (rc != MPI_SUCCESS && (o->kind == NB_LIB_IBCAST || o->kind == NB_LIB_IREDUCE)) {
        o->err = rc;                  /* the library refused at once: nothing in flight */
        o->req[0] = MPI_REQUEST_NULL;
        o->pending = 0;
        rc = MPI_SUCCESS;
    }
    update_ready(o);
    return rc;
}

static int complete(nb_op *o, int idx)
{
    int rc = MPI_SUCCESS;
    o->pending--;
    if (o->kind == NB_BCAST) {          /* a piece arrived or a send finished */
        if (idx >= o->nsub && o->busy) o->busy[o->child[(idx - o->nsub) % o->nchild]]--;
        while (o->next_send < o->nsub && o->req[o->next_send] == MPI_REQUEST_NULL) o->next_send++;
        if (!o->busy) rc = bcast_pump(o);   /* shared links: nb_progress pumps, oldest op first */
    } else if (o->kind == NB_REDUCE && idx >= o->nsub * o->nchild) {
        rc = reduce_send_ready(o);      /* a send finished: the next piece may go */
    } else if (o->kind == NB_REDUCE) {
        int s = idx / o->nchild, c = idx % o->nchild, off = s * o->sub;
        int n = o->count - off < o->sub ? o->count - off : o->sub;
        int lrc = o->err ? o->err : ct_reduce_local(o->tmp + ((MPI_Aint)c * o->count + off) * o->ext,
                                                    ct_at(o->buf, o->ext, off), n, o->dt, o->op);
        if (lrc != MPI_SUCCESS) o->err = lrc;     /* the piece still goes up */
        o->got[s]++;
        rc = reduce_send_ready(o);
    } else if (o->kind == NB_SHM_BCAST || o->kind == NB_SHM_REDUCE) {
        rc = nb_complete_shm(o, idx);
    }
    update_ready(o);
    return rc;
}

/* Bcast ops on shared links: a freed link serves the oldest op with a piece
 * for it (ops[] lists the newest first), so every link carries a call's
 * segments in order -- which is also what makes waiting on it deadlock-free:
 * a child has been sent all of segment t on a link before any of t+1. */
static int pump_shared(nb_op **ops, int n)
{
    int rc = MPI_SUCCESS;
    for (int i = n - 1; i >= 0 && rc == MPI_SUCCESS; i--)
        if (ops[i]->kind == NB_BCAST && ops[i]->busy && ops[i]->nchild) {
            rc = bcast_pump(ops[i]);
            update_ready(ops[i]);
        }
    return rc;
}

int nb_stuck(nb_op **ops, int n)
{
    int pending = 0, open = 0;
    for (int i = 0; i < n; i++) {
        pending += ops[i]->pending > 0;
        open += !nb_idle(ops[i]);
    }
    return open && !pending ? MPI_ERR_INTERN : MPI_SUCCESS;
}

int nb_idle(const nb_op *o)
{
    if (!o->ready || o->pending) return 0;
    for (int c = 0; o->kind == NB_BCAST && c < o->nchild; c++)
        if (o->got[c] < o->nsub) return 0;    /* a piece still waits for its link */
    return 1;
}

/* One round: waits (block) or tests for completions among all open requests
 * of ops[0..n), and reacts to them. Returns an MPI error code. */
int nb_progress(nb_op **ops, int n, int block)
{
    int total = 0, rc, outcount, nflat = 0;
    if ((rc = pump_shared(ops, n)) != MPI_SUCCESS) return rc;
    for (int i = 0; i < n; i++) {
        total += ops[i]->pending > 0 ? ops[i]->nreq : 0;
        nflat += ops[i]->kind == NB_FLAT_ALLREDUCE && ops[i]->flat.sched && ops[i]->pending > 0;
    }
    if (total == 0 && nflat == 0) return nb_stuck(ops, n);
    MPI_Request *all = malloc(sizeof(MPI_Request) * (size_t)total);
    int *owner = malloc(sizeof(int) * 2 * (size_t)total), *done = malloc(sizeof(int) * (size_t)total);
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (ops[i]->pending <= 0) continue;
        for (int j = 0; j < ops[i]->nreq; j++) {
            all[k] = ops[i]->req[j];
            owner[2 * k] = i; owner[2 * k + 1] = j;
            k++;
        }
    }
    /* MPI_Waitany, not MPI_Waitsome: SMPI 3.32's Waitsome slows transfers
     * down (8 pieces of 128 KiB between two nodes took 781 us instead of
     * 85 us with Waitany or Waitall) */
    if (nflat) {                      /* schedules' requests and ours in one wait */
        int which;
        rc = ct_sched_wait_with(all, total, &which);
        done[0] = which;
        outcount = which < 0 ? 0 : 1;
    } else if (block) {
        rc = MPI_Waitany(total, all, &done[0], MPI_STATUS_IGNORE);
        outcount = done[0] == MPI_UNDEFINED ? MPI_UNDEFINED : 1;
        if (rc != MPI_SUCCESS && outcount == 1) {   /* that op failed; the others go on */
            nb_op *o = ops[owner[2 * done[0]]];
            if (!o->err) o->err = rc;
            rc = MPI_SUCCESS;
        }
    } else {
        rc = MPI_Testsome(total, all, &outcount, done, MPI_STATUSES_IGNORE);
    }
    /* The wait may have released more requests than it reports (Open MPI 5
     * frees every request that failed): the ops' own handles follow the
     * copy's, so none is waited on or freed twice. */
    for (int q = 0; q < total; q++)
        if (all[q] == MPI_REQUEST_NULL) ops[owner[2 * q]]->req[owner[2 * q + 1]] = MPI_REQUEST_NULL;
    if (block && !nflat && outcount == MPI_UNDEFINED && rc == MPI_SUCCESS)
        rc = MPI_ERR_INTERN;          /* ops wait, but no request is left to complete them */
    for (int d = 0; rc == MPI_SUCCESS && outcount != MPI_UNDEFINED && d < outcount; d++) {
        nb_op *o = ops[owner[2 * done[d]]];
        int j = owner[2 * done[d] + 1];
        o->req[j] = MPI_REQUEST_NULL;
        rc = complete(o, j);
    }
    for (int i = 0; i < n && nflat; i++) {
        int r = flat_done(ops[i]);
        if (rc == MPI_SUCCESS) rc = r;
    }
    if (rc == MPI_SUCCESS) rc = pump_shared(ops, n);
    free(all); free(owner); free(done);
    return rc;
}

void nb_free(nb_op *o)
{
    if (o->kind == NB_FLAT_ALLREDUCE && o->flat.sched) ct_request_free(&o->flat);
    free(o->child); free(o->ctree); free(o->req); free(o->tmp); free(o->got);
    free(o);
}
