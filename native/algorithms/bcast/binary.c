/* Binary-tree bcast, segmented: segments stream down the tree so the two
 * children of a node receive while the node is still receiving. */
#include "../internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    ct_tree_bcast(s, a, CT_TREE_KARY, 2, p[0]);
    return MPI_SUCCESS;
}

const ct_algorithm ct_bcast_binary = {
    .id = 3, .name = "binary", .coll = CT_BCAST,
    .description = "binary tree (heap order from the root), segmented pipeline",
    .nparams = 1,
    .params = {
        {.name = "segsize", .unit = "bytes", .help = "segment size, 0 = whole message",
         .def = 8192, .min = 0, .max = 1 << 30, .nprobe = 2, .probe = {0, 64}},
    },
    .supports = supports, .schedule = schedule,
};
