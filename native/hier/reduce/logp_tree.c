/* Greedy LogP tree reduce: the bcast/logp_tree tree run backwards (in LogP the reverse
 * of the optimal broadcast is the optimal summation, Karp et al. 1993). A rank takes its
 * children's partial results (their receives posted together), reduces them in the reverse
 * of the order the broadcast informs them (the last informed has the smallest subtree and
 * is ready first) and sends its own up. The tree does not keep ranks in order: commutative ops.
 * At most WINDOW_BYTES of children's results are received at once (at least one): with a
 * buffer per child, a 64 MiB reduce on 192 ranks had been killed for memory. */
#include <stdlib.h>
#include "../hier_internal.h"

enum { WINDOW_BYTES = 4 << 20 };

/* children received at once: all of them for small messages */
static int window(int nchild, MPI_Aint bytes)
{
    MPI_Aint w = bytes > 0 ? WINDOW_BYTES / bytes : nchild;
    return w < 1 ? 1 : w < nchild ? (int)w : nchild;
}

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    int size, rank;
    ct_size_rank(a, &size, &rank);
    MPI_Aint bytes = a->count * ct_extent(a->dtype);
    char *acc = rank == a->root ? a->recvbuf : ct_sched_alloc(s, (size_t)bytes);
    ct_sched_round(s);
    if (a->sendbuf != MPI_IN_PLACE) ct_sched_copy(s, acc, a->sendbuf, bytes);
    if (a->count == 0 || size == 1) return MPI_SUCCESS;
    ct_logp_key key = ct_logp_key_of(a, p, p[6]);
    const ct_logp_place *t = ct_logp_place_get(ct_hier_get(a->comm), a->comm, &key);
    if (!t) return MPI_ERR_NO_MEM;
    /* a window of receives posted at once: on SMPI (and under a rendezvous) a message
     * moves only once its receive is posted, so one at a time would pay the latency per
     * child */
    int n = t->nchild, w = window(n, bytes);
    char *tmp = n ? ct_sched_alloc(s, (size_t)bytes * (size_t)w) : NULL;
    if (n && !tmp) return MPI_ERR_NO_MEM;
    for (int first = n - 1; first >= 0; first -= w) {
        for (int i = first, j = 0; i >= 0 && j < w; i--, j++)
            ct_sched_recv(s, tmp + (MPI_Aint)j * bytes, a->count, a->dtype, t->child[i]);
        ct_sched_round(s);
        for (int i = first, j = 0; i >= 0 && j < w; i--, j++)
            ct_sched_reduce(s, tmp + (MPI_Aint)j * bytes, acc, a->count, a->dtype, a->op);
    }
    if (t->parent >= 0) ct_sched_send(s, acc, a->count, a->dtype, t->parent);
    return MPI_SUCCESS;
}

/* Blocking: each child's result is combined as it arrives (MPI_Waitany), not after the
 * last, so a parent spends (receive + reduction) per child, the model's gap; the schedule
 * above (non-blocking calls) reduces only once every child has arrived. A failed local
 * reduction still receives everything and sends up (no peer waits for ever). */
static int run(const ct_args *a, const int *p)
{
    int size, rank;
    ct_size_rank(a, &size, &rank);
    MPI_Aint bytes = a->count * ct_extent(a->dtype);
    if (size == 1 || a->count == 0) {
        if (rank == a->root && a->sendbuf != MPI_IN_PLACE) ct_copy(a->recvbuf, a->sendbuf, bytes);
        return MPI_SUCCESS;
    }
    ct_logp_key key = ct_logp_key_of(a, p, p[6]);
    const ct_logp_place *t = ct_logp_place_get(ct_hier_get(a->comm), a->comm, &key);
    ct_sched *wire;
    if (!t || ct_sched_create(a->comm, &wire) != MPI_SUCCESS) return MPI_ERR_NO_MEM;
    MPI_Comm comm;
    int tag, rc = MPI_SUCCESS, n = t->nchild, w = window(n, bytes), next = n - 1;
    ct_sched_wire(wire, &comm, &tag);
    char *acc = rank == a->root ? a->recvbuf : malloc((size_t)bytes);
    char *tmp = malloc((size_t)bytes * (size_t)(w ? w : 1));
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)(w ? w : 1));
    if (!acc || !tmp || !req) {
        rc = MPI_ERR_NO_MEM;   /* as a failed reduction: the messages still flow */
        n = w = 0;
    }
    /* children in the reverse of the order they were informed; a slot that is free again
     * takes the next one */
    for (int j = 0; j < w; j++, next--)
        MPI_Irecv(tmp + (MPI_Aint)j * bytes, a->count, a->dtype, t->child[next], tag, comm, &req[j]);
    if (acc && a->sendbuf != MPI_IN_PLACE) ct_copy(acc, a->sendbuf, bytes);
    for (int k = 0; k < n; k++) {
        int j, r2 = MPI_Waitany(w, req, &j, MPI_STATUS_IGNORE);
        if (r2 != MPI_SUCCESS || j == MPI_UNDEFINED) {
            rc = rc != MPI_SUCCESS ? rc : r2 != MPI_SUCCESS ? r2 : MPI_ERR_INTERN;
            break;
        }
        r2 = ct_reduce_local(tmp + (MPI_Aint)j * bytes, acc, a->count, a->dtype, a->op);
        if (rc == MPI_SUCCESS) rc = r2;
        if (next >= 0)
            MPI_Irecv(tmp + (MPI_Aint)j * bytes, a->count, a->dtype, t->child[next--], tag, comm,
                      &req[j]);
    }
    if (t->parent >= 0) {
        int r2 = acc ? MPI_Send(acc, a->count, a->dtype, t->parent, tag, comm)
                     : MPI_Send(MPI_BOTTOM, 0, MPI_BYTE, t->parent, tag, comm);
        if (rc == MPI_SUCCESS) rc = r2;
    }
    if (acc != a->recvbuf) free(acc);
    free(tmp);
    free(req);
    ct_sched_free(&wire);
    return rc;
}

const ct_algorithm ct_reduce_logp_tree = {
    .id = 7, .name = "logp_tree", .coll = CT_REDUCE,
    .description = "hierarchical greedy LogP tree (bcast/logp_tree's, backwards): partial results up the tree the model finds fastest (small messages, commutative ops)",
    .nparams = 7,
    .params = {CT_LOGP_TREE_PARAMS,
               {.name = "rbw", .unit = "MB/s", .help = "model: rate of a local reduction (bytes of one operand)",
                .def = 4000, .min = 1, .max = 100000000, .nprobe = 0}},
    .tune = {"inter=800", "inter=2500"},
    .supports = ct_need_dense_commutative, .run = run, .schedule = schedule,
};
