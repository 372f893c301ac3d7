/* Double binary tree of node chains, dataflow (large messages, many nodes). The nodes'
 * heads (the rank with the root's node-local rank, else local rank 0) form two binary
 * trees below the root's node (ct_dual_tree, as NCCL's): a node with children in one is
 * a leaf in the other, and the pieces alternate between the trees, so every head sends
 * about the message once and receives it once (LBnet's bytes) at a depth of ~2 log2
 * nodes, where bcast/chain_flow's fill is nodes - 1 hops. Each node's ranks form a chain
 * from its head. Pieces are forwarded as soon as they arrive, a window of w in flight
 * (the engine: ../flow.c); no lock-step rounds as the HAN bcast's dual tree (ibalg=6).
 * docs/algorithms.md has the measurements. Blocking only (MPI_Ibcast runs the next
 * algorithm). */
#include "../hier_internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int run(const ct_args *a, const int *prm)
{
    return ct_flow_run(a, ct_dual_tree, 2, prm[0], prm[1], prm[2]);
}

const ct_algorithm ct_bcast_tree_flow = {
    .id = 11, .name = "tree_flow", .coll = CT_BCAST,
    .description = "double binary tree through the nodes, each node's ranks a chain from its head; pieces alternate between the trees and are forwarded as they arrive, a window in flight (large messages, many nodes)",
    .nparams = 3,
    .params = {
        {.name = "ps", .unit = "bytes", .help = "piece size (at least one element)",
         .def = 8192, .min = 1, .max = 1 << 30, .nprobe = 1, .probe = {1000}},
        {.name = "w", .unit = "", .help = "receives posted, and sends in flight per child",
         .def = 4, .min = 1, .max = 64, .nprobe = 1, .probe = {1}},
        {.name = "lag", .unit = "", .help = "pieces a tree may run ahead of the other; 0: any",
         .def = 0, .min = 0, .max = 1 << 20, .nprobe = 1, .probe = {1}},
    },
    .tune = {"ps=16384"},
    .supports = supports, .run = run,
};
