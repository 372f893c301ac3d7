/* Every world rank's node, learnt once in MPI_Init (one MPI_Comm_split_type and one
 * allgather on MPI_COMM_WORLD), so that a new communicator's nodes, ppn and this rank's
 * place in its node come from its group alone: MPI_Comm_split_type on it, one or two
 * allreduces and an exscan cost about 9 us per new communicator under SMPI (64 ranks),
 * which codes that split communicators all run long (miniAMR) paid outside any timed
 * collective. Memory: two ints per world rank, up to CT_TOPO_MAP_MAX ranks. */
#include <stdlib.h>
#include "topo.h"

#define CT_TOPO_MAP_MAX (1 << 18)     /* world ranks mapped (2 MiB); larger jobs communicate */
#define CT_TOPO_LOCAL_MAX 4096        /* past this a communicator's allreduce is cheaper */

static int *node_of;                 /* world rank -> its node's lowest world rank */
static int *count;                   /* scratch per node id, all 0 between calls */
static int *ranks, *wranks;          /* scratch: 0..n-1 and their world ranks */
static MPI_Group world_group = MPI_GROUP_NULL;

void ct_topo_init(int world_rank, int world_size)
{
    MPI_Comm node;
    int first = world_rank;
    if (world_size > CT_TOPO_MAP_MAX) return;                       /* agreed: the size */
    if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return;          /* an error handler that returns: on every rank alike (collective) */
    PMPI_Allreduce(&world_rank, &first, 1, MPI_INT, MPI_MIN, node);
    PMPI_Comm_free(&node);
    node_of = malloc((size_t)world_size * sizeof *node_of);
    count = calloc((size_t)world_size, sizeof *count);
    ranks = malloc((size_t)CT_TOPO_LOCAL_MAX * sizeof *ranks);
    wranks = malloc((size_t)CT_TOPO_LOCAL_MAX * sizeof *wranks);
    if (!node_of || !count || !ranks || !wranks)     /* a rank without the map would disagree */
        PMPI_Abort(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
    PMPI_Allgather(&first, 1, MPI_INT, node_of, 1, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < CT_TOPO_LOCAL_MAX; i++) ranks[i] = i;
    PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
}

int ct_topo_of(MPI_Comm comm, int size, ct_topo *t)
{
    MPI_Group g;
    int me, ok = 1;
    if (!node_of || size > CT_TOPO_LOCAL_MAX || PMPI_Comm_group(comm, &g) != MPI_SUCCESS) return 0;
    PMPI_Comm_rank(comm, &me);
    if (PMPI_Group_translate_ranks(g, size, ranks, world_group, wranks) != MPI_SUCCESS) ok = 0;
    PMPI_Group_free(&g);
    for (int i = 0; ok && i < size; i++) ok = wranks[i] != MPI_UNDEFINED;   /* spawned ranks */
    if (!ok) return 0;
    *t = (ct_topo){0, 0, 0, 0};
    for (int i = 0; i < size; i++) {      /* in comm rank order, as split_type(key 0) numbers */
        int *c = &count[node_of[wranks[i]]];
        if (i == me) t->lrank = *c, t->leaders_before = t->nodes;
        t->nodes += *c == 0;
        if (++*c > t->ppn) t->ppn = *c;
    }
    for (int i = 0; i < size; i++) count[node_of[wranks[i]]] = 0;
    return 1;
}

void ct_topo_free(void)
{
    if (world_group != MPI_GROUP_NULL) PMPI_Group_free(&world_group);
    free(node_of), free(count), free(ranks), free(wranks);
    node_of = count = ranks = wranks = NULL;
}
