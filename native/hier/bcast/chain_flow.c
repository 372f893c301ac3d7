/* Chain of node chains, dataflow (large messages). The nodes form a chain from the
 * root's node on (in node order, wrapping); each node's head (the rank with the root's
 * node-local rank, else local rank 0) passes every piece to the next node's head first
 * and then down its own node's chain, local rank order. Every link of the chain carries
 * the message once, so a node's injection link carries m in and m out, LBnet's bytes.
 *
 * Pieces are small (ps bytes) and each is forwarded as soon as it arrived, not in
 * lock-step rounds (the engine: ../flow.c). A lock-step chain pays a piece's latency every
 * round, (pieces + hops) x (transfer + latency); here the latency of one piece overlaps
 * the transfer of the others, and small pieces keep the fill (hops x piece) short; the
 * fill still grows with the nodes (bcast/tree_flow.c: log2 of them). docs/algorithms.md
 * has the measurements. Blocking only: a round-based schedule would bring the lock-step
 * back (MPI_Ibcast runs the next algorithm). */
#include "../hier_internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

/* both trees the chain: node v feeds v + 1 */
static int node_chain(int t, int v, int nn, int *child, int *nchild)
{
    (void)t;
    *nchild = 0;
    if (v + 1 < nn) child[(*nchild)++] = v + 1;
    return v - 1;
}

static int run(const ct_args *a, const int *prm)
{
    return ct_flow_run(a, node_chain, 1, prm[0], prm[1], 0);
}

const ct_algorithm ct_bcast_chain_flow = {
    .id = 10, .name = "chain_flow", .coll = CT_BCAST,
    .description = "chain through the nodes, each node's ranks a chain from its head; small pieces forwarded as they arrive, a window in flight (large messages)",
    .nparams = 2,
    .params = {
        {.name = "ps", .unit = "bytes", .help = "piece size (at least one element)",
         .def = 4096, .min = 1, .max = 1 << 30, .nprobe = 1, .probe = {1000}},
        {.name = "w", .unit = "", .help = "receives posted, and sends in flight per child",
         .def = 4, .min = 1, .max = 64, .nprobe = 1, .probe = {1}},
    },
    .tune = {"w=8"},
    .supports = supports, .run = run,
};
