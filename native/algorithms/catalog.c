/* The catalogue: a hand-listed table of the algorithms' static descriptors.
 * Adding an algorithm = adding its file and one line here; lookups, listing
 * and fallback are generic over the table. */
#include <string.h>
#include "internal.h"

extern const ct_algorithm ct_bcast_linear, ct_bcast_binomial, ct_bcast_binary,
    ct_bcast_knomial, ct_bcast_pipeline, ct_bcast_scatter_ring_allgather,
    ct_bcast_scatter_rdb_allgather;
extern const ct_algorithm ct_allreduce_recursive_doubling, ct_allreduce_ring,
    ct_allreduce_rabenseifner, ct_allreduce_reduce_bcast;
extern const ct_algorithm ct_reduce_linear, ct_reduce_binomial, ct_reduce_binary_pipelined,
    ct_reduce_rabenseifner;
extern const ct_algorithm ct_allgather_ring, ct_allgather_recursive_doubling,
    ct_allgather_bruck, ct_allgather_neighbor_exchange;
extern const ct_algorithm ct_bcast_han, ct_allreduce_han;   /* native/hier */

static const ct_algorithm *const table[] = {
    &ct_bcast_linear, &ct_bcast_binomial, &ct_bcast_binary, &ct_bcast_knomial,
    &ct_bcast_pipeline, &ct_bcast_scatter_ring_allgather, &ct_bcast_scatter_rdb_allgather,
    &ct_reduce_linear, &ct_reduce_binomial, &ct_reduce_binary_pipelined,
    &ct_reduce_rabenseifner,
    &ct_allreduce_recursive_doubling, &ct_allreduce_ring, &ct_allreduce_rabenseifner,
    &ct_allreduce_reduce_bcast,
    &ct_allgather_ring, &ct_allgather_recursive_doubling, &ct_allgather_bruck,
    &ct_allgather_neighbor_exchange,
    &ct_bcast_han, &ct_allreduce_han,
};

static const char *const coll_names[CT_NCOLLS] = {"bcast", "reduce", "allreduce", "allgather"};

const char *ct_coll_name(ct_coll c) { return c >= 0 && c < CT_NCOLLS ? coll_names[c] : "?"; }

int ct_coll_from_name(const char *name)
{
    for (int c = 0; c < CT_NCOLLS; c++)
        if (strcmp(coll_names[c], name) == 0) return c;
    return -1;
}

int ct_count(void) { return (int)(sizeof table / sizeof table[0]); }

const ct_algorithm *ct_get(int i) { return i >= 0 && i < ct_count() ? table[i] : NULL; }

const ct_algorithm *ct_find(ct_coll coll, const char *name)
{
    for (int i = 0; i < ct_count(); i++)
        if (table[i]->coll == coll && strcmp(table[i]->name, name) == 0) return table[i];
    return NULL;
}

int ct_library_call(ct_coll coll, const ct_args *a)
{
    switch (coll) {  /* on the collective, not on algorithm names */
    case CT_BCAST:
        return PMPI_Bcast(a->recvbuf, a->count, a->dtype, a->root, a->comm);
    case CT_REDUCE:
        return PMPI_Reduce(a->sendbuf, a->recvbuf, a->count, a->dtype, a->op, a->root, a->comm);
    case CT_ALLREDUCE:
        return PMPI_Allreduce(a->sendbuf, a->recvbuf, a->count, a->dtype, a->op, a->comm);
    case CT_ALLGATHER:
        return PMPI_Allgather(a->sendbuf, a->count, a->dtype, a->recvbuf, a->count, a->dtype,
                              a->comm);
    default:
        return MPI_ERR_ARG;
    }
}

int ct_call(ct_coll coll, const char *name, const int *params, const ct_args *a,
            const char **ran)
{
    const ct_algorithm *alg = ct_find(coll, name);
    int p[CT_MAX_PARAMS];
    if (ran) *ran = NULL;
    if (!alg) return MPI_ERR_ARG;
    for (int i = 0; i < alg->nparams; i++) {
        p[i] = params ? params[i] : alg->params[i].def;
        if (p[i] < alg->params[i].min || p[i] > alg->params[i].max) return MPI_ERR_ARG;
    }
    if (alg->supports(a) != NULL) {
        if (ran) *ran = "library";
        return ct_library_call(coll, a);
    }
    if (ran) *ran = alg->name;
    return alg->run(a, p);
}
