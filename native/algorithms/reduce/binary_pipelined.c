/* Segmented binary-tree reduce: segments flow up the tree so reductions at
 * different levels overlap. Children are combined in arrival order of the
 * tree, not rank order: commutative ops only. */
#include "../internal.h"

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    ct_tree_reduce(s, a, CT_TREE_KARY, 2, p[0]);
    return MPI_SUCCESS;
}

const ct_algorithm ct_reduce_binary_pipelined = {
    .id = 3, .name = "binary_pipelined", .coll = CT_REDUCE,
    .description = "binary tree, segmented pipeline (commutative ops)",
    .nparams = 1,
    .params = {
        {.name = "segsize", .unit = "bytes", .help = "segment size, 0 = whole message",
         .def = 8192, .min = 0, .max = 1 << 30, .nprobe = 2, .probe = {0, 1000}},
    },
    .supports = ct_need_dense_commutative, .schedule = schedule,
};
