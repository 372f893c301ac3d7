/* The catalogue: a hand-listed table of the algorithms' static descriptors.
 * Adding an algorithm = adding its file, its extern declaration and its entry in
 * the table here; lookups, listing and fallback are generic over the table. Ids
 * and names are unique per collective (ct_catalog_problem). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

extern const ct_algorithm ct_allgather_han;   /* native/hier/allgather/han.c */

extern const ct_algorithm ct_bcast_linear, ct_bcast_binomial, ct_bcast_binary,
    ct_bcast_knomial, ct_bcast_pipeline, ct_bcast_scatter_ring_allgather,
    ct_bcast_scatter_rdb_allgather;
extern const ct_algorithm ct_allreduce_recursive_doubling, ct_allreduce_ring,
    ct_allreduce_rabenseifner, ct_allreduce_reduce_bcast;
extern const ct_algorithm ct_reduce_linear, ct_reduce_binomial, ct_reduce_binary_pipelined,
    ct_reduce_rabenseifner;
extern const ct_algorithm ct_allgather_ring, ct_allgather_recursive_doubling,
    ct_allgather_bruck, ct_allgather_neighbor_exchange;
extern const ct_algorithm ct_bcast_han, ct_allreduce_han, ct_reduce_han;   /* native/hier */
extern const ct_algorithm ct_allreduce_multileader, ct_reduce_multileader;  /* native/hier */
extern const ct_algorithm ct_bcast_logp_tree, ct_reduce_logp_tree;           /* native/hier */
extern const ct_algorithm ct_bcast_chain_flow, ct_bcast_tree_flow;           /* native/hier */

static const ct_algorithm *const table[] = {
    &ct_bcast_linear, &ct_bcast_binomial, &ct_bcast_binary, &ct_bcast_knomial,
    &ct_bcast_pipeline, &ct_bcast_scatter_ring_allgather, &ct_bcast_scatter_rdb_allgather,
    &ct_reduce_linear, &ct_reduce_binomial, &ct_reduce_binary_pipelined,
    &ct_reduce_rabenseifner,
    &ct_allreduce_recursive_doubling, &ct_allreduce_ring, &ct_allreduce_rabenseifner,
    &ct_allreduce_reduce_bcast,
    &ct_allgather_han,
    &ct_allgather_ring, &ct_allgather_recursive_doubling, &ct_allgather_bruck,
    &ct_allgather_neighbor_exchange,
    &ct_bcast_han, &ct_allreduce_han, &ct_reduce_han, &ct_allreduce_multileader,
    &ct_reduce_multileader,
    &ct_bcast_logp_tree, &ct_reduce_logp_tree, &ct_bcast_chain_flow, &ct_bcast_tree_flow,
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

const char *ct_catalog_problem(void)
{
    static char msg[256];
    for (int i = 0; i < ct_count(); i++)
        for (int j = i + 1; j < ct_count(); j++) {
            const ct_algorithm *a = table[i], *b = table[j];
            if (a->coll != b->coll) continue;
            if (a->id == b->id)
                snprintf(msg, sizeof msg, "%s algorithms '%s' and '%s' share id %d", ct_coll_name(a->coll),
                         a->name, b->name, a->id);
            else if (strcmp(a->name, b->name) == 0)
                snprintf(msg, sizeof msg, "%s algorithms %d and %d share the name '%s'",
                         ct_coll_name(a->coll), a->id, b->id, a->name);
            else
                continue;
            strncat(msg, ": ids and names are unique per collective (native/algorithms/catalog.c)",
                    sizeof msg - strlen(msg) - 1);
            return msg;
        }
    return NULL;
}

const ct_algorithm *ct_find(ct_coll coll, const char *name)
{
    for (int i = 0; i < ct_count(); i++)
        if (table[i]->coll == coll && strcmp(table[i]->name, name) == 0) return table[i];
    return NULL;
}

const ct_algorithm *ct_find_id(ct_coll coll, int id)
{
    for (int i = 0; i < ct_count(); i++)
        if (table[i]->coll == coll && table[i]->id == id) return table[i];
    return NULL;
}

void ct_params_default(const ct_algorithm *a, int *params)
{
    for (int i = 0; i < a->nparams; i++) params[i] = a->params[i].def;
}

int ct_params_parse(const ct_algorithm *a, const char *text, int *params)
{
    ct_params_default(a, params);
    for (const char *t = text; t && *t;) {
        const char *eq = strchr(t, '='), *end = strchr(t, ',');
        if (!end) end = t + strlen(t);
        if (!eq || eq > end) return -1;
        int i = 0;
        while (i < a->nparams && !(strlen(a->params[i].name) == (size_t)(eq - t) &&
                                   strncmp(a->params[i].name, t, (size_t)(eq - t)) == 0)) i++;
        char *stop;
        long v = strtol(eq + 1, &stop, 10);
        if (i == a->nparams || stop != end || eq + 1 == end || v < a->params[i].min ||
            v > a->params[i].max) return -1;
        params[i] = (int)v;
        t = *end ? end + 1 : end;
    }
    return 0;
}
