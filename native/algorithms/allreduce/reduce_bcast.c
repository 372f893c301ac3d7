/* Allreduce as binomial reduce to rank 0 followed by binomial bcast: 2 log2(P)
 * rounds of whole vectors, order-preserving. The simple baseline. */
#include "../internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    (void)p;
    int rank;
    MPI_Comm_rank(a->comm, &rank);
    ct_args r = *a;
    r.root = 0;
    /* MPI_IN_PLACE is only legal at a reduce root: elsewhere read recvbuf */
    if (a->sendbuf == MPI_IN_PLACE && rank != 0) r.sendbuf = a->recvbuf;
    ct_binomial_reduce(s, &r);
    ct_tree_bcast(s, &r, CT_TREE_KNOMIAL, 2, 0);
    return MPI_SUCCESS;
}

const ct_algorithm ct_allreduce_reduce_bcast = {
    .id = 4, .name = "reduce_bcast", .coll = CT_ALLREDUCE,
    .description = "binomial reduce to rank 0, then binomial bcast; keeps operand order",
    .nparams = 0, .supports = supports, .schedule = schedule,
};
