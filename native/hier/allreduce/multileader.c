/* Multi-leader allreduce: every rank of a node leads one block. A reduce-scatter
 * inside the node leaves node-local rank j with the node's sum of block j; the ranks
 * of local rank j, one per node (a lane), allreduce that block across the nodes, all
 * lanes at once; an allgather inside the node gives every rank the whole result.
 * Each node's network link carries 2 m (N-1)/N bytes, as a flat ring's would, but in
 * 2 log2 N steps of Rabenseifner (or 2 (N-1) of a ring) between N nodes instead of
 * 2 (P-1) between P ranks, and no rank reduces the whole vector alone (one leader per
 * node, as in HAN, does). The node's steps are the library's (MPI_Reduce_scatter,
 * MPI_Allgatherv), as HAN's smod 0. Commutative ops (the node reduces first); nodes of
 * different sizes have lanes of different sizes, and fewer elements than ranks per
 * node leave empty blocks: the flat Rabenseifner then. fs > 0 cuts the vector into
 * segments that are in the three steps at once (multileader_pipeline.c). */
#include "../hier_internal.h"

static int run(const ct_args *a, const int *p)
{
    ct_hier *h = ct_hier_get(a->comm);
    /* blocks of 0 elements: SMPI's `ompi` MPI_Reduce_scatter returned wrong sums with
     * zero counts (768 ranks, 2 elements), and so few elements gain nothing from lanes */
    if (h->uneven || a->count < h->nlocal) return ct_call(CT_ALLREDUCE, "rabenseifner", NULL, a, NULL);
    const ct_algorithm *lane_alg = ct_find_id(CT_ALLREDUCE, p[0]);
    if (!lane_alg) return MPI_ERR_ARG;
    MPI_Comm lane = ct_hier_lane(h, a->comm);
    int nseg = ct_multileader_segments(h, a->count, ct_extent(a->dtype), p[1]);
    if (nseg > 0 && lane_alg->schedule) return ct_multileader_pipeline(a, h, lane, lane_alg, nseg);
    if (h->nlocal == 1) {       /* one rank per node: the lane is the whole allreduce, and the */
        ct_args whole = *a;     /* node steps on a one-rank communicator made SMPI's `ompi` abort */
        whole.comm = lane;      /* (MPI_Allgatherv of 32-255 bytes; docs/hier.md) */
        return ct_call(CT_ALLREDUCE, lane_alg->name, NULL, &whole, NULL);
    }
    ct_lane_split s;
    if (ct_lane_split_init(h, a->count, ct_extent(a->dtype), &s) != MPI_SUCCESS) return MPI_ERR_NO_MEM;
    /* a step that fails locally (a reduction) does not stop the others: the peers
     * would wait for this rank; the first error is returned at the end */
    const void *in = a->sendbuf == MPI_IN_PLACE ? a->recvbuf : a->sendbuf;
    int rc = PMPI_Reduce_scatter(in, s.block, s.cnt, a->dtype, a->op, h->node);
    ct_args across = {.sendbuf = MPI_IN_PLACE, .recvbuf = s.block, .count = s.cnt[h->lrank],
                      .dtype = a->dtype, .op = a->op, .root = 0, .comm = lane};
    int rc2 = ct_call(CT_ALLREDUCE, lane_alg->name, NULL, &across, NULL);
    int rc3 = PMPI_Allgatherv(s.block, s.cnt[h->lrank], a->dtype, a->recvbuf, s.cnt, s.displ, a->dtype,
                              h->node);
    rc = rc != MPI_SUCCESS ? rc : rc2 != MPI_SUCCESS ? rc2 : rc3;
    ct_lane_split_free(&s);
    return rc;
}

const ct_algorithm ct_allreduce_multileader = {
    .id = 6, .name = "multileader", .coll = CT_ALLREDUCE,
    .description = "hierarchical: node reduce-scatter, one allreduce per node-local rank across the nodes (all at once), node allgather (commutative ops)",
    .nparams = 2,
    .params = {
        {.name = "iaalg", .unit = "", .help = "the lanes' allreduce, catalogue id: 1 recursive_doubling 2 ring 3 rabenseifner 4 reduce_bcast",
         .def = 3, .min = 1, .max = 4, .nprobe = 1, .probe = {2}},
        {.name = "fs", .unit = "bytes", .help = "segment size: segments in the node's reduce-scatter, the lanes' allreduce and the node's allgather at once (colltune's own steps inside the node); 0 = one pass, the library's steps inside the node",
         .def = 0, .min = 0, .max = 1 << 30, .nprobe = 1, .probe = {64}},
    },
    .tune = {"iaalg=2", "iaalg=1", "iaalg=3,fs=262144", "iaalg=3,fs=1048576", "iaalg=2,fs=1048576"},
    .supports = ct_need_dense_commutative, .run = run,
};
