/* Greedy LogP tree bcast (native/hier/logp_tree.c): every rank holding the message
 * sends it on, one whole message per step, first to up to lf ranks of its node, then to
 * nodes not reached yet, then to the rest of its node; the tree the model predicts
 * fastest for the communicator's node map. For small messages, where a k-nomial tree's
 * fixed radix wastes either the cheap intra-node sends or the senders' time. */
#include "../hier_internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    int size;
    MPI_Comm_size(a->comm, &size);
    if (a->count == 0 || size == 1) return MPI_SUCCESS;
    ct_logp_key key = ct_logp_key_of(a, p, 0);
    const ct_logp_place *t = ct_logp_place_get(ct_hier_get(a->comm), a->comm, &key);
    if (!t) return MPI_ERR_NO_MEM;
    ct_sched_round(s);
    if (t->parent >= 0) {
        ct_sched_recv(s, a->recvbuf, a->count, a->dtype, t->parent);
        ct_sched_round(s);
    }
    /* one child at a time, in the model's order: a small message leaves at once, and a
     * large one does not share the link with its siblings */
    for (int i = 0; i < t->nchild; i++) {
        ct_sched_send(s, a->recvbuf, a->count, a->dtype, t->child[i]);
        ct_sched_round(s);
    }
    return MPI_SUCCESS;
}

const ct_algorithm ct_bcast_logp_tree = {
    .id = 9, .name = "logp_tree", .coll = CT_BCAST,
    .description = "hierarchical greedy LogP tree: holders send on, to their node's ranks and to new nodes, as the model (two costs) finds fastest (small messages)",
    .nparams = 6,
    .params = {CT_LOGP_TREE_PARAMS},
    .tune = {"inter=800", "inter=2500"},
    .supports = supports, .schedule = schedule,
};
