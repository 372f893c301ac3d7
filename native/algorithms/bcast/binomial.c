/* Binomial-tree bcast: log2(P) rounds, whole message per hop. */
#include "../internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    (void)p;
    ct_tree_bcast(s, a, CT_TREE_KNOMIAL, 2, 0);
    return MPI_SUCCESS;
}

const ct_algorithm ct_bcast_binomial = {
    .id = 2, .name = "binomial", .coll = CT_BCAST,
    .description = "binomial tree rooted at root, whole message per hop",
    .nparams = 0, .supports = supports, .schedule = schedule,
};
