/* HAN bcast (hierarchical, task-based): leaders run ib(0), sbib(1..u-1),
 * sb(u-1) over segments of fs bytes, the others sb(0..u-1). Any root, uneven
 * nodes: the leaders are the ranks with the root's node-local rank (local
 * rank 0 on smaller nodes). See native/hier/han.c and docs/hier.md. */
#include "../hier_internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int run(const ct_args *a, const int *p)
{
    ct_han_params hp = ct_han_params_from(CT_BCAST, p);
    return ct_han_bcast(a, &hp);
}

const ct_algorithm ct_bcast_han = {
    .id = 8, .name = "han", .coll = CT_BCAST,
    .description = "hierarchical task-based (HAN): segments, inter-node ib overlapped with intra-node sb",
    .nparams = 8,
    .params = {
        {.name = "fs", .unit = "bytes", .help = "segment size, 0 = whole message",
         .def = 524288, .min = 0, .max = 1 << 30, .nprobe = 1, .probe = {1000}},
        {.name = "imod", .unit = "", .help = "inter-node module: 0 library MPI_Ibcast, 1 colltune tree",
         .def = 1, .min = 0, .max = 1, .nprobe = 1, .probe = {0}},
        {.name = "ibalg", .unit = "",
         .help = "inter-node tree: 1 binomial 2 binary 3 chain 4 4-nomial 5 linear 6 double binary tree",
         .def = 1, .min = 1, .max = 6, .nprobe = 2, .probe = {3, 6}},
        {.name = "ibs", .unit = "bytes", .help = "inner segment of one inter-node bcast, 0 = whole",
         .def = 65536, .min = 0, .max = 1 << 30, .nprobe = 1, .probe = {1000}},
        {.name = "smod", .unit = "", .help = "intra-node module: 0 library MPI_Bcast, 1 colltune tree, 2 shared memory, 3 library MPI_Ibcast (non-blocking)",
         .def = 1, .min = 0, .max = 3, .nprobe = 2, .probe = {0, 2}},
        {.name = "salg", .unit = "", .help = "intra-node tree (smod 1), values 1-5 as ibalg",
         .def = 5, .min = 1, .max = 5, .nprobe = 0},
        {.name = "ss", .unit = "bytes", .help = "inner segment of one intra-node tree op, 0 = whole",
         .def = 65536, .min = 0, .max = 1 << 30, .nprobe = 0},
        {.name = "ibdepth", .unit = "",
         .help = "inter-node bcasts in flight: 1 (ib(t) in task t) or 2 (started a task ahead)",
         .def = 1, .min = 1, .max = 2, .nprobe = 0},   /* tests/test_hier_smpi.py: -b ibdepth=2 */
    },
    .tune = {"ibalg=3", "ibalg=6,fs=131072,ibs=32768,ss=0,ibdepth=2", "ibalg=6,ibs=32768,ibdepth=2"},
    .supports = supports, .run = run,
};
