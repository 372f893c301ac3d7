/* HAN tasks: one collective call cut into segments, each task a set of
 * per-segment sub-operations (ib, sb, ir, sr) started together and progressed
 * together. Bcast: task t = ib(t) + sb(t-1) (leaders: ib(0), sbib(1..u-1),
 * sb(u-1); others: sb(0..u-1)). Allreduce: task t = sr(t) + ir(t-1) + ib(t-2)
 * + sb(t-3), the inter-node allreduce being a reduce (ir) and a bcast (ib) on
 * the same tree and root, running in opposite directions. Reduce: task t =
 * sr(t) + ir(t-1) towards the root's node leader (leaders: sr(0),
 * irsr(1..u-1), ir(u-1); others: sr(0..u-1)); recvbuf is only significant at
 * the root, every other rank accumulates in a buffer of its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hier_internal.h"

struct ct_han {
    ct_coll coll;
    ct_args a;
    ct_han_params p;
    ct_hier *h;
    MPI_Comm up;           /* leaders (MPI_COMM_NULL on non-leaders) */
    int uproot, lroot;     /* root among leaders, this node's intra root */
    int seg, u;            /* elements per segment, number of segments */
    MPI_Aint ext;
    char *acc;             /* accumulator / data: recvbuf, or (reduce, not the root) own */
    char *own;             /* reduce on a non-root rank: allocated accumulator */
    nb_op *live;           /* started ops with requests still open */
    int err;               /* first local error of the call (ops', library steps') */
    int *up_busy;          /* per leader: sends in flight to it from this rank (all ib ops) */
};

int ct_han_segments(const ct_han *h) { return h->u; }
int ct_han_is_leader(const ct_han *h) { return h->up != MPI_COMM_NULL; }
int ct_han_node(const ct_han *h) { return h->h->node_idx; }

/* The parameters a call really runs with. SMPI 3.32's MPI_Ireduce returns the
 * root's own data for derived datatypes (checked with a 4-rank test), and its
 * MPI_Allreduce, where a declined call would go, dies of SIGFPE on 17 ranks
 * with 1 element: reductions of derived types use colltune's trees across
 * nodes there (docs/hier.md). */
static ct_han_params usable_params(ct_coll coll, const ct_args *a, const ct_han_params *p)
{
    ct_han_params q = *p;
#ifdef COLLTUNE_SMPI
    int ni, na, nd, comb;
    MPI_Type_get_envelope(a->dtype, &ni, &na, &nd, &comb);
    if (coll != CT_BCAST && comb != MPI_COMBINER_NAMED) {
        q.imod = CT_HAN_MOD_TREE;
        if (q.smod == CT_HAN_MOD_LIBRARY_NB) q.smod = CT_HAN_MOD_TREE;   /* same MPI_Ireduce */
    }
#else
    (void)coll; (void)a;
#endif
    return q;
}

int ct_han_begin(ct_han **out, ct_coll coll, const ct_args *a, const ct_han_params *p)
{
    ct_han *h = calloc(1, sizeof *h);
    h->coll = coll; h->a = *a; h->p = usable_params(coll, a, p);
    h->h = ct_hier_get(a->comm);
    h->ext = ct_extent(a->dtype);
    h->seg = ct_seg_elems(p->fs, h->ext, a->count);
    h->u = a->count > 0 ? (a->count + h->seg - 1) / h->seg : 0;
    h->acc = a->recvbuf;
    int rank;
    MPI_Comm_rank(a->comm, &rank);
    if (coll == CT_REDUCE && rank != a->root && a->count > 0) {
        /* recvbuf is not significant here (may be NULL): a private accumulator */
        h->own = malloc((size_t)(a->count * h->ext));
        h->acc = h->own;
    }
    int j = 0;   /* node-local rank of the root; allreduce: leaders are local rank 0 */
    if (coll == CT_BCAST || coll == CT_REDUCE) {
        j = h->h->lrank_of[a->root];
        h->uproot = h->h->node_of[a->root];
    }
    h->up = ct_hier_up(h->h, a->comm, j);
    h->lroot = ct_hier_leader(h->h, h->h->node_idx, j);
    *out = h;
    return MPI_SUCCESS;
}

static int seg_count(const ct_han *h, int i)
{
    int off = i * h->seg;
    return h->a.count - off < h->seg ? h->a.count - off : h->seg;
}

/* Intra-node step with the library module: blocking PMPI_ call. */
static int library_step(ct_han *h, ct_han_step s)
{
    MPI_Aint off = (MPI_Aint)s.seg * h->seg;
    int n = seg_count(h, s.seg), root = h->h->lrank == h->lroot;
    char *r = ct_at(h->acc, h->ext, off);
    const void *in = h->a.sendbuf == MPI_IN_PLACE ? r : ct_at(h->a.sendbuf, h->ext, off);
    if (h->h->nlocal == 1) {      /* alone on the node: nothing to move (SMPI's ompi reduce */
        if (s.sub != CT_HAN_SB && in != r)            /* crashed on a one-rank communicator) */
            ct_copy(r, in, (MPI_Aint)n * h->ext);
        return MPI_SUCCESS;
    }
    int rc = s.sub == CT_HAN_SB ? PMPI_Bcast(r, n, h->a.dtype, h->lroot, h->h->node)
           : root ? PMPI_Reduce(h->a.sendbuf == MPI_IN_PLACE ? MPI_IN_PLACE : in, r, n,
                                h->a.dtype, h->a.op, h->lroot, h->h->node)
                  : PMPI_Reduce(in, NULL, n, h->a.dtype, h->a.op, h->lroot, h->h->node);
    /* the library returned on the node's ranks: a local error, the pipeline
     * goes on so the other nodes' leaders are not left waiting */
    if (rc != MPI_SUCCESS && !h->err) h->err = rc;
    return MPI_SUCCESS;
}

/* The communicator and tag of a step's op: below CT_HAN_TAG_ALT, which the
 * shared-memory ops add on the node's communicator (a dual tree adds it for
 * its second tree on the leaders', engine.c). */
static int step_tag(const ct_han *h, ct_han_step s, MPI_Comm *comm)
{
    int inter = s.sub == CT_HAN_IB || s.sub == CT_HAN_IR;
    *comm = inter ? h->up : h->h->node;
    return (!inter && h->p.smod == CT_HAN_MOD_SHM ? CT_HAN_TAG_ALT : 0) + (int)s.sub * 4096 + s.seg % 4096;
}

static nb_op *make_op(ct_han *h, ct_han_step s)
{
    MPI_Aint off = (MPI_Aint)s.seg * h->seg;
    int inter = s.sub == CT_HAN_IB || s.sub == CT_HAN_IR;
    int red = s.sub == CT_HAN_IR || s.sub == CT_HAN_SR;
    int mod = inter ? h->p.imod : h->p.smod;
    nb_op *o = calloc(1, sizeof *o);
    o->tag = step_tag(h, s, &o->comm);
    o->root = inter ? h->uproot : h->lroot;
    o->buf = ct_at(h->acc, h->ext, off);
    if (s.sub == CT_HAN_SR && mod == CT_HAN_MOD_LIBRARY_NB && h->a.sendbuf != MPI_IN_PLACE)
        o->sbuf = ct_at(h->a.sendbuf, h->ext, off);
    o->count = seg_count(h, s.seg);
    o->dt = h->a.dtype;
    o->op = h->a.op;
    if (inter && mod == CT_HAN_MOD_FLAT) o->kind = NB_FLAT_ALLREDUCE;   /* ir = the whole allreduce */
    else if (mod == CT_HAN_MOD_LIBRARY || mod == CT_HAN_MOD_LIBRARY_NB)
        o->kind = red ? NB_LIB_IREDUCE : NB_LIB_IBCAST;
    else if (mod == CT_HAN_MOD_SHM) o->kind = red ? NB_SHM_REDUCE : NB_SHM_BCAST;
    else o->kind = red ? NB_REDUCE : NB_BCAST;
    o->parent = inter ? (red ? h->p.iralg : h->p.ibalg) : (red ? h->p.sralg : h->p.salg);  /* tree value, see nb_start */
    if (o->kind == NB_FLAT_ALLREDUCE) o->parent = h->p.iaalg;   /* catalogue id */
    int inner = inter ? (red ? h->p.irs : h->p.ibs) : h->p.ss;
    o->sub = ct_seg_elems(inner, h->ext, o->count);
    o->slot = h->seg * h->ext;
    if (inter && o->kind == NB_BCAST) {     /* one piece at a time per link, across segments */
        int n;
        MPI_Comm_size(h->up, &n);
        if (!h->up_busy) h->up_busy = calloc((size_t)n, sizeof(int));
        o->busy = h->up_busy;
    }
    if (o->kind == NB_SHM_BCAST || o->kind == NB_SHM_REDUCE)
        o->shm = ct_hier_shm(h->h, (MPI_Aint)h->seg * h->ext * (h->h->nlocal + 1));
    return o;
}

static int skip(const ct_han *h, ct_han_step s)
{
    if (s.seg < 0 || s.seg >= h->u) return 1;
    if (s.sub == CT_HAN_IB && h->p.imod == CT_HAN_MOD_FLAT) return 1;   /* done by ir */
    return (s.sub == CT_HAN_IB || s.sub == CT_HAN_IR) && h->up == MPI_COMM_NULL;
}

static int progress_until_ready(ct_han *h, nb_op **mine, int n)
{
    int rc = MPI_SUCCESS, nlive = 0;
    for (nb_op *o = h->live; o; o = o->next) nlive++;
    nb_op **all = malloc(sizeof(nb_op *) * (size_t)(nlive + 1));
    for (;;) {
        int waiting = 0;
        for (int i = 0; i < n; i++) waiting += !mine[i]->ready;
        if (!waiting || rc != MPI_SUCCESS) break;
        int k = 0;
        for (nb_op *o = h->live; o; o = o->next) all[k++] = o;
        rc = nb_progress(all, k, 1);
    }
    free(all);
    return rc;
}

/* Drops (frees) live ops whose requests are all complete. */
static void drop(ct_han *h, nb_op *o)
{
    if (o->err && !h->err) h->err = o->err;
    nb_free(o);
}

static void reap(ct_han *h)
{
    for (nb_op **pp = &h->live; *pp;) {
        nb_op *o = *pp;
        if (nb_idle(o)) { *pp = o->next; drop(h, o); }
        else pp = &o->next;
    }
}

/* The live op an earlier task started for this step (NULL: already done and freed). */
static nb_op *started(ct_han *h, ct_han_step s)
{
    MPI_Comm comm;
    int tag = step_tag(h, s, &comm);
    for (nb_op *o = h->live; o; o = o->next)
        if (o->comm == comm && o->tag == tag) return o;
    return NULL;
}

int ct_han_task(ct_han *h, const ct_han_step *steps, int n)
{
    int rc = MPI_SUCCESS, nmine = 0;
    nb_op **mine = malloc(sizeof(nb_op *) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
        ct_han_step s = steps[i];
        if (skip(h, s)) continue;
        if (s.when == CT_HAN_AWAIT) {
            nb_op *o = started(h, s);
            if (o) mine[nmine++] = o;
            continue;
        }
        int inter = s.sub == CT_HAN_IB || s.sub == CT_HAN_IR;
        if (s.sub == CT_HAN_SR && h->a.sendbuf != MPI_IN_PLACE && h->p.smod != CT_HAN_MOD_LIBRARY
            && h->p.smod != CT_HAN_MOD_LIBRARY_NB)        /* the library reduces from sendbuf */
            ct_copy(ct_at(h->acc, h->ext, (MPI_Aint)s.seg * h->seg),
                    ct_at(h->a.sendbuf, h->ext, (MPI_Aint)s.seg * h->seg),
                    seg_count(h, s.seg) * h->ext);
        if (!inter && h->p.smod == CT_HAN_MOD_LIBRARY) continue;   /* blocking, below */
        nb_op *o = make_op(h, s);
        rc = nb_start(o);
        o->next = h->live;
        h->live = o;
        if (s.when != CT_HAN_START) mine[nmine++] = o;
    }
    /* blocking library steps in task order (the same on every rank of a node) */
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
        ct_han_step s = steps[i];
        if (skip(h, s) || s.sub == CT_HAN_IB || s.sub == CT_HAN_IR || s.when == CT_HAN_AWAIT)
            continue;
        if (h->p.smod == CT_HAN_MOD_LIBRARY) rc = library_step(h, s);
    }
    if (rc == MPI_SUCCESS) rc = progress_until_ready(h, mine, nmine);
    reap(h);
    free(mine);
    return rc;
}

int ct_han_end(ct_han *h)
{
    int rc = MPI_SUCCESS;
    while (h->live && rc == MPI_SUCCESS) {
        int k = 0;
        for (nb_op *o = h->live; o; o = o->next) k++;
        nb_op **all = malloc(sizeof(nb_op *) * (size_t)k);
        k = 0;
        for (nb_op *o = h->live; o; o = o->next) all[k++] = o;
        rc = nb_progress(all, k, 1);
        free(all);
        reap(h);
        int open = 0;
        for (nb_op *o = h->live; o; o = o->next) open += !nb_idle(o);
        if (!open) break;
    }
    while (h->live) { nb_op *o = h->live; h->live = o->next; drop(h, o); }
    if (rc == MPI_SUCCESS) rc = h->err;
    free(h->own);
    free(h->up_busy);
    free(h);
    return rc;
}

/* ---- named tasks ---- */
static const struct { const char *name; int n; ct_han_step s[4]; } named[] = {
    {"ib", 1, {{CT_HAN_IB, 0, CT_HAN_RUN}}},
    {"sb", 1, {{CT_HAN_SB, 0, CT_HAN_RUN}}},
    {"ir", 1, {{CT_HAN_IR, 0, CT_HAN_RUN}}},
    {"sr", 1, {{CT_HAN_SR, 0, CT_HAN_RUN}}},
    {"sbib", 2, {{CT_HAN_IB, 0, CT_HAN_RUN}, {CT_HAN_SB, -1, CT_HAN_RUN}}},
    {"irsr", 2, {{CT_HAN_SR, 0, CT_HAN_RUN}, {CT_HAN_IR, -1, CT_HAN_RUN}}},
    {"ibirsr", 3, {{CT_HAN_SR, 0, CT_HAN_RUN}, {CT_HAN_IR, -1, CT_HAN_RUN}, {CT_HAN_IB, -2, CT_HAN_RUN}}},
    {"sbibirsr", 4, {{CT_HAN_SR, 0, CT_HAN_RUN}, {CT_HAN_IR, -1, CT_HAN_RUN}, {CT_HAN_IB, -2, CT_HAN_RUN}, {CT_HAN_SB, -3, CT_HAN_RUN}}},
    {"sbibir", 3, {{CT_HAN_IR, 0, CT_HAN_RUN}, {CT_HAN_IB, -1, CT_HAN_RUN}, {CT_HAN_SB, -2, CT_HAN_RUN}}},
    {"sbsr", 2, {{CT_HAN_SR, 0, CT_HAN_RUN}, {CT_HAN_SB, -3, CT_HAN_RUN}}},
};

int ct_han_parse_task(const char *name, ct_han_step *steps, int max)
{
    int n = 0;
    const char *s = name;
    while (*s) {
        char word[16];
        int len = 0, idx, used = 0;
        while (s[len] && s[len] != '(' && len < 15) { word[len] = s[len]; len++; }
        word[len] = '\0';
        if (s[len] != '(' || sscanf(s + len, "(%d)%n", &idx, &used) != 1 || used == 0) return -1;
        s += len + used;
        int k = -1;
        for (int i = 0; i < (int)(sizeof named / sizeof named[0]); i++)
            if (strcmp(named[i].name, word) == 0) k = i;
        if (k < 0 || n + named[k].n > max) return -1;
        for (int i = 0; i < named[k].n; i++)
            steps[n++] = (ct_han_step){named[k].s[i].sub, idx + named[k].s[i].seg, CT_HAN_RUN};
        if (*s == '+') s++;
        else if (*s) return -1;
    }
    return n;
}

ct_han_params ct_han_params_from(ct_coll coll, const int *p)
{
    if (coll == CT_BCAST)
        return (ct_han_params){.fs = p[0], .imod = p[1], .ibalg = p[2], .ibs = p[3], .smod = p[4],
                               .salg = p[5], .sralg = p[5], .ss = p[6], .ibdepth = p[7]};
    if (coll == CT_REDUCE)
        return (ct_han_params){.fs = p[0], .imod = p[1], .iralg = p[2], .ibalg = p[2], .irs = p[3],
                               .ibs = p[3], .smod = p[4], .sralg = p[5], .salg = p[5], .ss = p[6]};
    return (ct_han_params){.fs = p[0], .imod = p[1], .ibalg = p[2], .iralg = p[3], .ibs = p[4],
                           .irs = p[5], .smod = p[6], .sralg = p[7], .salg = p[8], .ss = p[9],
                           .iaalg = p[10], .iadepth = p[11]};
}

/* ---- whole collectives ---- */
/* Runs a whole call as its task pipeline: pattern[i] = (sub-op, lag); task t
 * runs sub-op pattern[i].sub on segment t - lag, for t = 0 .. u - 1 + max lag. */
static int run_pipeline(ct_coll coll, const ct_args *a, const ct_han_params *p,
                        const ct_han_step *pattern, int n)
{
    ct_han *h;
    ct_han_step s[4];
    int rc = ct_han_begin(&h, coll, a, p), lag = pattern[n - 1].seg;
    for (int t = 0; t < h->u + lag && rc == MPI_SUCCESS; t++) {
        for (int i = 0; i < n; i++)
            s[i] = (ct_han_step){pattern[i].sub, t - pattern[i].seg, pattern[i].when};
        rc = ct_han_task(h, s, n);
    }
    int rc2 = ct_han_end(h);
    return rc != MPI_SUCCESS ? rc : rc2;
}

int ct_han_bcast(const ct_args *a, const ct_han_params *p)
{
    static const ct_han_step bcast[] = {{CT_HAN_IB, 0, CT_HAN_RUN}, {CT_HAN_SB, 1, CT_HAN_RUN}};
    /* ibdepth 2: ib(t) starts in task t and is awaited in task t+1, so a
     * leader has posted segment t+1's receives before segment t is all in and
     * before its sb(t-1) is done: its parents' next pieces are not held back
     * at every segment boundary (a double binary tree's two trees deliver a
     * segment at different times, and each boundary coupled them) */
    static const ct_han_step bcast2[] = {{CT_HAN_IB, 0, CT_HAN_START}, {CT_HAN_IB, 1, CT_HAN_AWAIT},
                                         {CT_HAN_SB, 2, CT_HAN_RUN}};
    return p->ibdepth >= 2 ? run_pipeline(CT_BCAST, a, p, bcast2, 3) : run_pipeline(CT_BCAST, a, p, bcast, 2);
}

int ct_han_allreduce(const ct_args *a, const ct_han_params *p)
{
    static const ct_han_step han[] = {{CT_HAN_SR, 0, CT_HAN_RUN}, {CT_HAN_IR, 1, CT_HAN_RUN}, {CT_HAN_IB, 2, CT_HAN_RUN}, {CT_HAN_SB, 3, CT_HAN_RUN}};
    /* imod = FLAT: ir is the whole inter-node allreduce, there is no ib stage */
    static const ct_han_step flat[] = {{CT_HAN_SR, 0, CT_HAN_RUN}, {CT_HAN_IR, 1, CT_HAN_RUN}, {CT_HAN_SB, 2, CT_HAN_RUN}};
    /* iadepth 2: ir(t-1) starts in task t and is awaited in task t+1, so two
     * leaders' allreduces overlap and one's latency-bound rounds hide behind the
     * other's transfers (docs/hier.md) */
    static const ct_han_step flat2[] = {{CT_HAN_SR, 0, CT_HAN_RUN}, {CT_HAN_IR, 1, CT_HAN_START},
                                        {CT_HAN_IR, 2, CT_HAN_AWAIT}, {CT_HAN_SB, 3, CT_HAN_RUN}};
    ct_han_params q = usable_params(CT_ALLREDUCE, a, p);   /* the pattern of what will run */
    if (q.imod != CT_HAN_MOD_FLAT) return run_pipeline(CT_ALLREDUCE, a, &q, han, 4);
    return q.iadepth >= 2 ? run_pipeline(CT_ALLREDUCE, a, &q, flat2, 4)
                          : run_pipeline(CT_ALLREDUCE, a, &q, flat, 3);
}

int ct_han_reduce(const ct_args *a, const ct_han_params *p)
{
    static const ct_han_step reduce[] = {{CT_HAN_SR, 0, CT_HAN_RUN}, {CT_HAN_IR, 1, CT_HAN_RUN}};
    return run_pipeline(CT_REDUCE, a, p, reduce, 2);
}
