/* Binomial-tree reduce: log2(P) rounds. Order-preserving (for
 * non-commutative ops the tree is rooted at rank 0, then forwarded). */
#include "../internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    (void)p;
    ct_binomial_reduce(s, a);
    return MPI_SUCCESS;
}

const ct_algorithm ct_reduce_binomial = {
    .id = 2, .name = "binomial", .coll = CT_REDUCE,
    .description = "binomial tree, whole vector per hop, keeps operand order",
    .nparams = 0, .supports = supports, .schedule = schedule,
};
