/* Chain / pipeline bcast: the root feeds `fanout` chains of contiguous ranks
 * and segments flow down each chain; for large messages the time approaches
 * m/B plus one segment per hop. fanout 1 is the classic pipeline. */
#include "../internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    ct_tree_bcast(s, a, CT_TREE_CHAIN, p[1], p[0]);
    return MPI_SUCCESS;
}

const ct_algorithm ct_bcast_pipeline = {
    .id = 5, .name = "pipeline", .coll = CT_BCAST,
    .description = "segmented chain(s): root -> fanout chains of ranks",
    .nparams = 2,
    .params = {
        {.name = "segsize", .unit = "bytes", .help = "segment size, 0 = whole message",
         .def = 8192, .min = 0, .max = 1 << 30, .nprobe = 2, .probe = {0, 100}},
        {.name = "fanout", .unit = "", .help = "number of chains leaving the root",
         .def = 1, .min = 1, .max = 64, .nprobe = 1, .probe = {4}},
    },
    .tune = {"segsize=65536"},
    .supports = supports, .schedule = schedule,
};
