/* K-nomial-tree bcast: ceil(log_k P) rounds, up to k-1 children per round;
 * a larger radix trades depth for root fan-out. */
#include "../internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    ct_tree_bcast(s, a, CT_TREE_KNOMIAL, p[0], p[1]);
    return MPI_SUCCESS;
}

const ct_algorithm ct_bcast_knomial = {
    .id = 4, .name = "knomial", .coll = CT_BCAST,
    .description = "k-nomial tree (radix k), optionally segmented",
    .nparams = 2,
    .params = {
        {.name = "radix", .unit = "", .help = "tree radix k", .def = 4, .min = 2, .max = 32,
         .nprobe = 2, .probe = {3, 8}},
        {.name = "segsize", .unit = "bytes", .help = "segment size, 0 = whole message",
         .def = 0, .min = 0, .max = 1 << 30, .nprobe = 1, .probe = {100}},
    },
    .supports = supports, .schedule = schedule,
};
