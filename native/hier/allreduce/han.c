/* HAN allreduce (hierarchical, task-based): per segment sr (intra-node
 * reduce to the leader), ir + ib (inter-node reduce and bcast on the leaders,
 * same root, opposite directions), sb (intra-node bcast); leaders run sr,
 * irsr, ibirsr, sbibirsr..., sbibir, sbib, sb, the others sbsr. Commutative
 * ops only (the trees reduce in arrival order). See docs/hier.md. */
#include "../hier_internal.h"

static int run(const ct_args *a, const int *p)
{
    ct_han_params hp = ct_han_params_from(CT_ALLREDUCE, p);
    return ct_han_allreduce(a, &hp);
}

const ct_algorithm ct_allreduce_han = {
    .id = 5, .name = "han", .coll = CT_ALLREDUCE,
    .description = "hierarchical task-based (HAN): sr, ir, ib, sb per segment, overlapped (commutative ops)",
    .nparams = 12,
    .params = {
        {.name = "fs", .unit = "bytes", .help = "segment size, 0 = whole message",
         .def = 524288, .min = 0, .max = 1 << 30, .nprobe = 1, .probe = {1000}},
        {.name = "imod", .unit = "", .help = "inter-node module: 0 library MPI_Ireduce+MPI_Ibcast, 1 colltune trees, 2 colltune flat allreduce (iaalg) instead of ir+ib",
         .def = 1, .min = 0, .max = 2, .nprobe = 2, .probe = {0, 2}},
        {.name = "ibalg", .unit = "", .help = "inter-node bcast tree: 1 binomial 2 binary 3 chain 4 4-nomial 5 linear",
         .def = 1, .min = 1, .max = 5, .nprobe = 1, .probe = {3}},
        {.name = "iralg", .unit = "", .help = "inter-node reduce tree, values as ibalg",
         .def = 1, .min = 1, .max = 5, .nprobe = 0},
        {.name = "ibs", .unit = "bytes", .help = "inner segment of one inter-node bcast, 0 = whole",
         .def = 65536, .min = 0, .max = 1 << 30, .nprobe = 0},
        {.name = "irs", .unit = "bytes", .help = "inner segment of one inter-node reduce, 0 = whole",
         .def = 65536, .min = 0, .max = 1 << 30, .nprobe = 1, .probe = {1000}},
        {.name = "smod", .unit = "", .help = "intra-node module: 0 library MPI_Reduce/MPI_Bcast, 1 colltune tree, 2 shared memory, 3 library MPI_Ireduce/MPI_Ibcast (non-blocking)",
         .def = 1, .min = 0, .max = 3, .nprobe = 2, .probe = {0, 2}},
        {.name = "sralg", .unit = "", .help = "intra-node reduce tree (smod 1), values as ibalg",
         .def = 3, .min = 1, .max = 5, .nprobe = 0},
        {.name = "sbalg", .unit = "", .help = "intra-node bcast tree (smod 1), values as ibalg",
         .def = 5, .min = 1, .max = 5, .nprobe = 0},
        {.name = "ss", .unit = "bytes", .help = "inner segment of one intra-node tree op, 0 = whole",
         .def = 65536, .min = 0, .max = 1 << 30, .nprobe = 0},
        {.name = "iaalg", .unit = "", .help = "imod 2: the leaders' allreduce, catalogue id: 1 recursive_doubling 2 ring 3 rabenseifner 4 reduce_bcast",
         .def = 2, .min = 1, .max = 4, .nprobe = 0},
        {.name = "iadepth", .unit = "", .help = "imod 2: leaders' allreduces in flight: 1 (one per task) or 2 (each one spans two tasks)",
         .def = 1, .min = 1, .max = 2, .nprobe = 0},
    },
    .tune = {"imod=2", "imod=2,fs=262144,ss=0,sralg=5,iadepth=2",
             "imod=2,iaalg=3,fs=262144,ss=0,sralg=5,iadepth=2"},
    .supports = ct_need_dense_commutative, .run = run,
};
