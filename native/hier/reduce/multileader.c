/* Multi-leader reduce: allreduce/multileader's first two steps, then a gather inside
 * the root's node only. The library's reduce-scatter inside each node leaves
 * node-local rank j with block j of the node's sum; the ranks of local rank j, one per
 * node (a lane), reduce that block to the lane's member on the root's node, all lanes
 * at once; the library's gatherv inside the root's node collects the blocks at the
 * root. Every rank of a node leads one block, so no rank (the root included, which in
 * HAN and in a flat tree reduces the whole vector) reduces more than m/ppn across the
 * nodes. Commutative ops; nodes of different sizes, or fewer elements than ranks per
 * node (empty blocks: SMPI's `ompi` MPI_Reduce_scatter, see allreduce/multileader),
 * run the flat Rabenseifner. */
#include "../hier_internal.h"

static int run(const ct_args *a, const int *p)
{
    ct_hier *h = ct_hier_get(a->comm);
    if (h->uneven || a->count < h->nlocal) return ct_call(CT_REDUCE, "rabenseifner", NULL, a, NULL);
    const ct_algorithm *lane_alg = ct_find_id(CT_REDUCE, p[0]);
    if (!lane_alg) return MPI_ERR_ARG;
    MPI_Comm lane = ct_hier_lane(h, a->comm);   /* lane ranks = node indices */
    if (h->nlocal == 1) {   /* one rank per node: the lane's reduce to the root's node is the */
        ct_args whole = *a; /* whole reduce; no node steps (SMPI's `ompi` selector aborts on */
        whole.root = h->node_of[a->root], whole.comm = lane;  /* one-rank communicators: hier.md) */
        return ct_call(CT_REDUCE, lane_alg->name, NULL, &whole, NULL);
    }
    ct_lane_split s;
    if (ct_lane_split_init(h, a->count, ct_extent(a->dtype), &s) != MPI_SUCCESS) return MPI_ERR_NO_MEM;
    int root_node = h->node_of[a->root], mine = h->node_idx == root_node;
    /* as in allreduce/multileader: a step that fails locally does not stop the
     * others; the first error is returned at the end */
    const void *in = a->sendbuf == MPI_IN_PLACE ? a->recvbuf : a->sendbuf;
    int rc = PMPI_Reduce_scatter(in, s.block, s.cnt, a->dtype, a->op, h->node);
    ct_args across = {.sendbuf = mine ? MPI_IN_PLACE : s.block, .recvbuf = mine ? s.block : NULL,
                      .count = s.cnt[h->lrank], .dtype = a->dtype, .op = a->op, .root = root_node,
                      .comm = lane};
    int rc2 = ct_call(CT_REDUCE, lane_alg->name, NULL, &across, NULL);
    int rc3 = !mine ? MPI_SUCCESS
                    : PMPI_Gatherv(s.block, s.cnt[h->lrank], a->dtype, a->recvbuf, s.cnt, s.displ,
                                   a->dtype, h->lrank_of[a->root], h->node);
    rc = rc != MPI_SUCCESS ? rc : rc2 != MPI_SUCCESS ? rc2 : rc3;
    ct_lane_split_free(&s);
    return rc;
}

const ct_algorithm ct_reduce_multileader = {
    .id = 6, .name = "multileader", .coll = CT_REDUCE,
    .description = "hierarchical: node reduce-scatter, one reduce per node-local rank across the nodes to the root's node (all at once), gather in the root's node (commutative ops)",
    .nparams = 1,
    .params = {
        {.name = "iralg", .unit = "", .help = "the lanes' reduce, catalogue id: 1 linear 2 binomial 3 binary_pipelined 4 rabenseifner",
         .def = 4, .min = 1, .max = 4, .nprobe = 1, .probe = {2}},
    },
    .tune = {"iralg=2"},
    .supports = ct_need_dense_commutative, .run = run,
};
