/* Linear reduce: the root receives every rank's vector and folds them from
 * the highest rank down (acc = x_i op acc), so rank order is kept and
 * non-commutative ops are fine. */
#include "../internal.h"

static const char *supports(const ct_args *a) { return ct_need_dense(a); }

/* One vector at a time into one scratch buffer: round i folds the vector that
 * arrived in round i-1, then posts the next receive. */
static int schedule(const ct_args *a, const int *p, ct_sched *s)
{
    (void)p;
    int size, rank;
    ct_size_rank(a, &size, &rank);
    MPI_Aint ext = ct_extent(a->dtype), bytes = a->count * ext;
    if (a->count == 0) return MPI_SUCCESS;
    if (rank != a->root) {
        ct_sched_send(s, a->sendbuf, a->count, a->dtype, a->root);
        return MPI_SUCCESS;
    }
    /* the root's own vector: in recvbuf when in place, so keep a copy of it */
    const char *mine = a->sendbuf;
    char *tmp = ct_sched_alloc(s, (size_t)bytes);
    if (a->sendbuf == MPI_IN_PLACE) {
        char *saved = ct_sched_alloc(s, (size_t)bytes);
        ct_sched_copy(s, saved, a->recvbuf, bytes);
        mine = saved;
    }
    for (int r = size - 1; r >= -1; r--) {
        int prev = r + 1;   /* fold rank prev's vector, received last round */
        if (prev < size) {
            const char *x = prev == rank ? mine : tmp;
            if (prev == size - 1) ct_sched_copy(s, a->recvbuf, x, bytes);
            else ct_sched_reduce(s, x, a->recvbuf, a->count, a->dtype, a->op);
        }
        if (r >= 0 && r != rank) ct_sched_recv(s, tmp, a->count, a->dtype, r);
        ct_sched_round(s);
    }
    return MPI_SUCCESS;
}

const ct_algorithm ct_reduce_linear = {
    .id = 1, .name = "linear", .coll = CT_REDUCE,
    .description = "root receives from every rank and reduces in rank order",
    .nparams = 0, .supports = supports, .schedule = schedule,
};
