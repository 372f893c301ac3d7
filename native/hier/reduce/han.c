/* HAN reduce (hierarchical, task-based): per segment sr (intra-node reduce to
 * the node's leader) and ir (inter-node reduce among the leaders to the root);
 * leaders run sr(0), irsr(1..u-1), ir(u-1), the others sr(0..u-1). Any root,
 * uneven nodes: as for bcast/han the leaders are the ranks with the root's
 * node-local rank (local rank 0 on smaller nodes), so the result lands on the
 * root itself. recvbuf is only used at the root; other ranks accumulate in a
 * buffer of their own. Commutative ops only (the trees reduce in arrival
 * order). See native/hier/han.c and docs/hier.md. */
#include "../hier_internal.h"

static int run(const ct_args *a, const int *p)
{
    ct_han_params hp = ct_han_params_from(CT_REDUCE, p);
    return ct_han_reduce(a, &hp);
}

const ct_algorithm ct_reduce_han = {
    .id = 5, .name = "han", .coll = CT_REDUCE,
    .description = "hierarchical task-based (HAN): intra-node sr overlapped with inter-node ir per segment (commutative ops)",
    .nparams = 7,
    .params = {
        {.name = "fs", .unit = "bytes", .help = "segment size, 0 = whole message",
         .def = 524288, .min = 0, .max = 1 << 30, .nprobe = 1, .probe = {1000}},
        {.name = "imod", .unit = "", .help = "inter-node module: 0 library MPI_Ireduce, 1 colltune tree",
         .def = 1, .min = 0, .max = 1, .nprobe = 1, .probe = {0}},
        {.name = "iralg", .unit = "", .help = "inter-node reduce tree: 1 binomial 2 binary 3 chain 4 4-nomial 5 linear",
         .def = 1, .min = 1, .max = 5, .nprobe = 1, .probe = {3}},
        {.name = "irs", .unit = "bytes", .help = "inner segment of one inter-node reduce, 0 = whole",
         .def = 65536, .min = 0, .max = 1 << 30, .nprobe = 1, .probe = {1000}},
        {.name = "smod", .unit = "", .help = "intra-node module: 0 library MPI_Reduce, 1 colltune tree, 2 shared memory, 3 library MPI_Ireduce (non-blocking)",
         .def = 1, .min = 0, .max = 3, .nprobe = 2, .probe = {0, 2}},
        {.name = "sralg", .unit = "", .help = "intra-node reduce tree (smod 1), values as iralg",
         .def = 3, .min = 1, .max = 5, .nprobe = 0},
        {.name = "ss", .unit = "bytes", .help = "inner segment of one intra-node tree op, 0 = whole",
         .def = 65536, .min = 0, .max = 1 << 30, .nprobe = 0},
    },
    .supports = ct_need_dense_commutative, .run = run,
};
