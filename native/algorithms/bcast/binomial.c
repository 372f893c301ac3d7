/* Binomial-tree bcast: log2(P) rounds, whole message per hop. */
#include "../internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int run(const ct_args *a, const int *p)
{
    (void)p;
    return ct_tree_bcast(a, CT_TREE_KNOMIAL, 2, 0);
}

const ct_algorithm ct_bcast_binomial = {
    .id = 2, .name = "binomial", .coll = CT_BCAST,
    .description = "binomial tree rooted at root, whole message per hop",
    .nparams = 0, .supports = supports, .run = run,
};
