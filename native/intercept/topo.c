/* A communicator's nodes, ppn and this rank's place in its node (the rules' keys, online
 * mode's samplers). Every world rank's node is learnt once in MPI_Init (one
 * MPI_Comm_split_type and one allgather on MPI_COMM_WORLD), so a new communicator's come
 * from its group alone. Asking its members (by_communicating: MPI_Comm_split_type on it
 * and one or two allreduces, still the way where the map cannot tell) cost about 9 us per
 * new communicator under SMPI at 64 ranks, which codes that split communicators all run
 * long (miniAMR) paid outside any timed collective. Memory: two ints per world rank, up
 * to CT_TOPO_MAP_MAX ranks. COLLTUNE_NODE_MAP=0 on any rank: every communicator asks its
 * members (the path of larger jobs and spawned ranks, tested and compared that way). */
#include <stdlib.h>
#include <string.h>
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
    const char *map = getenv("COLLTUNE_NODE_MAP");   /* "0": ask the members (tests, comparisons) */
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
    if (map && !strcmp(map, "0")) first = -1;
    PMPI_Allgather(&first, 1, MPI_INT, node_of, 1, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < world_size; i++)
        if (node_of[i] < 0) {        /* any rank without the map: none has it (agreed) */
            ct_topo_free();
            return;
        }
    for (int i = 0; i < CT_TOPO_LOCAL_MAX; i++) ranks[i] = i;
    PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
}

/* Without the map: MPI_Comm_split_type on comm, then nodes and ppn (the largest node)
 * in one allreduce where the nodes are even: leaders' sums of 1, local and local^2 are
 * equal-size iff n*sum(l^2) == sum(l)^2 (Cauchy-Schwarz); uneven nodes take a second
 * one for the largest. */
static void by_communicating(MPI_Comm comm, ct_topo *t)
{
    MPI_Comm node;
    int local = 1, lrank = 0;
    if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        PMPI_Comm_size(node, &local);
        PMPI_Comm_rank(node, &lrank);
        PMPI_Comm_free(&node);
    }
    long long in[3] = {lrank == 0, lrank == 0 ? local : 0, lrank == 0 ? (long long)local * local : 0}, out[3];
    PMPI_Allreduce(in, out, 3, MPI_LONG_LONG, MPI_SUM, comm);
    *t = (ct_topo){(int)out[0], 0, lrank, -1};
    if (out[0] * out[2] == out[1] * out[1]) t->ppn = (int)(out[1] / out[0]);
    else PMPI_Allreduce(&local, &t->ppn, 1, MPI_INT, MPI_MAX, comm);
}

/* 1: *t from the map; 0: the map cannot tell (agreed: the same group on every member) */
static int from_map(MPI_Comm comm, int size, ct_topo *t)
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

int ct_topo_mapped(void) { return node_of != NULL; }

void ct_topo_of(MPI_Comm comm, int size, ct_topo *t)
{
    if (!from_map(comm, size, t)) by_communicating(comm, t);
}

void ct_topo_free(void)
{
    if (world_group != MPI_GROUP_NULL) PMPI_Group_free(&world_group);
    free(node_of), free(count), free(ranks), free(wranks);
    node_of = count = ranks = wranks = NULL;
}
