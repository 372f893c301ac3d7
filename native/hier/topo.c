/* The node hierarchy of a communicator: nodes from MPI_Comm_split_type(SHARED),
 * optionally cut into virtual nodes of v consecutive node-local ranks; node
 * leaders' communicators created on first use; all cached in an attribute of
 * the communicator and freed with it. */
#include <stdlib.h>
#include "hier_internal.h"

static int vnode_size = -1;           /* -1: not set, read the environment */
static int keyval = MPI_KEYVAL_INVALID;

void ct_hier_set_vnode_size(int v) { vnode_size = v > 0 ? v : -1; }

static int current_vnode(void)
{
    if (vnode_size > 0) return vnode_size;
    const char *s = getenv("COLLTUNE_VNODE_SIZE");
    int v = s ? atoi(s) : 0;
    return v > 0 ? v : 0;
}

static int free_hier(MPI_Comm comm, int key, void *val, void *extra)
{
    (void)comm; (void)key; (void)extra;
    ct_hier *h = val;
    for (int j = 0; j < h->maxppn; j++)
        if (h->up[j] != MPI_COMM_NULL) MPI_Comm_free(&h->up[j]);
    if (h->win != MPI_WIN_NULL) MPI_Win_free(&h->win);
    if (h->lane != MPI_COMM_NULL) MPI_Comm_free(&h->lane);
    MPI_Comm_free(&h->node);
    ct_logp_free(h->logp);
    free(h->node_of); free(h->lrank_of); free(h->node_size); free(h->up); free(h->up_built);
    free(h);
    return MPI_SUCCESS;
}

/* MPI_Finalize deletes MPI_COMM_WORLD's attributes on no rank (MPI) or on one (SMPI ran
 * free_hier in a single actor: its collective MPI_Win_free left rank 0 waiting for ever,
 * "Deadlock detected" after every run with the shared-memory module): every rank frees
 * the communicator's hierarchy here, together, before MPI_Finalize. */
void ct_hier_release(MPI_Comm comm)
{
    void *h;
    int found = 0;
    /* deleting an attribute the communicator does not have is an error (MPI_ERR_ARG,
     * fatal by default): HAN may have run on sub-communicators only */
    if (keyval != MPI_KEYVAL_INVALID && MPI_Comm_get_attr(comm, keyval, &h, &found) == MPI_SUCCESS
        && found)
        MPI_Comm_delete_attr(comm, keyval);
}

ct_hier *ct_hier_get(MPI_Comm comm)
{
    ct_hier *h;
    int found = 0, size, rank, v = current_vnode();
    if (keyval == MPI_KEYVAL_INVALID)
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_hier, &keyval, NULL);
    MPI_Comm_get_attr(comm, keyval, &h, &found);
    if (found) return h;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    ct_setup_begin();
    h = calloc(1, sizeof *h);
    h->win = MPI_WIN_NULL;
    h->lane = MPI_COMM_NULL;
    MPI_Comm shared;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared);
    if (v > 0) {
        int srank;
        MPI_Comm_rank(shared, &srank);
        MPI_Comm_split(shared, srank / v, rank, &h->node);
        MPI_Comm_free(&shared);
    } else {
        h->node = shared;
    }
    MPI_Comm_rank(h->node, &h->lrank);
    MPI_Comm_size(h->node, &h->nlocal);
    /* a node is named by its lowest comm rank (its local rank 0: the splits are keyed by
     * rank), found by translating ranks, without a message; nodes are numbered in that order */
    int mine[2] = {rank, h->lrank}, zero = 0, *all = malloc(sizeof(int) * 2 * (size_t)size);
    MPI_Group node_group, comm_group;
    MPI_Comm_group(h->node, &node_group);
    MPI_Comm_group(comm, &comm_group);
    MPI_Group_translate_ranks(node_group, 1, &zero, comm_group, &mine[0]);
    MPI_Group_free(&node_group);
    MPI_Group_free(&comm_group);
    /* Gather + Bcast, not Allgather: SMPI's default Allgather is n^2 point-to-point
     * messages and takes ~1 min of wall time at 256 ranks on the fat-tree */
    PMPI_Gather(mine, 2, MPI_INT, all, 2, MPI_INT, 0, comm);
    PMPI_Bcast(all, 2 * size, MPI_INT, 0, comm);
    int *idx = malloc(sizeof(int) * (size_t)size);
    h->node_of = malloc(sizeof(int) * (size_t)size);
    h->lrank_of = malloc(sizeof(int) * (size_t)size);
    h->node_size = calloc((size_t)size, sizeof(int));
    for (int r = 0; r < size; r++) idx[r] = -1;
    for (int r = 0; r < size; r++) {
        int key = all[2 * r];
        if (idx[key] < 0) idx[key] = h->nnodes++;
        h->node_of[r] = idx[key];
        h->lrank_of[r] = all[2 * r + 1];
        h->node_size[idx[key]]++;
    }
    h->node_idx = h->node_of[rank];
    for (int n = 0; n < h->nnodes; n++) {
        if (h->node_size[n] > h->maxppn) h->maxppn = h->node_size[n];
        if (h->node_size[n] != h->node_size[0]) h->uneven = 1;
    }
    h->up = malloc(sizeof(MPI_Comm) * (size_t)h->maxppn);
    h->up_built = calloc((size_t)h->maxppn, 1);
    for (int j = 0; j < h->maxppn; j++) h->up[j] = MPI_COMM_NULL;
    free(all); free(idx);
    MPI_Comm_set_attr(comm, keyval, h);
    ct_setup_end();
    return h;
}

/* Leaders for a root of node-local rank j: on every node the rank of local
 * rank j, or local rank 0 where the node is smaller; ordered by node index. */
MPI_Comm ct_hier_up(ct_hier *h, MPI_Comm comm, int j)
{
    if (!h->up_built[j]) {
        h->up_built[j] = 1;
        if (h->lrank != ct_hier_leader(h, h->node_idx, j)) {
            ct_setup_events++;
            return h->up[j];                                                  /* MPI_COMM_NULL */
        }
        ct_setup_begin();
        /* only the leaders take part (MPI_Comm_create_group): every rank knows the node map,
         * so no split (a collective over all of comm) is needed */
        int *leaders = malloc(sizeof(int) * (size_t)h->nnodes), size;
        MPI_Comm_size(comm, &size);
        for (int r = 0; r < size; r++)
            if (h->lrank_of[r] == ct_hier_leader(h, h->node_of[r], j)) leaders[h->node_of[r]] = r;
        MPI_Group comm_group, group;
        MPI_Comm_group(comm, &comm_group);
        MPI_Group_incl(comm_group, h->nnodes, leaders, &group);
        MPI_Comm_create_group(comm, group, CT_HIER_UP_TAG, &h->up[j]);
        MPI_Group_free(&group);
        MPI_Group_free(&comm_group);
        free(leaders);
        ct_setup_end();
    }
    return h->up[j];
}

/* One split of comm by node-local rank, ordered by node: lane j holds local rank j
 * of every node that has one. */
MPI_Comm ct_hier_lane(ct_hier *h, MPI_Comm comm)
{
    if (h->lane == MPI_COMM_NULL) {
        ct_setup_begin();
        MPI_Comm_split(comm, h->lrank, h->node_idx, &h->lane);
        ct_setup_end();
        /* a lane's error goes back to the algorithm, which reports it on comm */
        MPI_Comm_set_errhandler(h->lane, MPI_ERRORS_RETURN);
    }
    return h->lane;
}

int ct_lane_split_init(const ct_hier *h, int count, MPI_Aint ext, ct_lane_split *s)
{
    int n = h->nlocal;
    s->cnt = malloc(2 * sizeof(int) * (size_t)n);
    if (!s->cnt) return MPI_ERR_NO_MEM;
    s->displ = s->cnt + n;
    for (int j = 0; j < n; j++)
        s->displ[j] = ct_block_start(count, n, j), s->cnt[j] = ct_block_start(count, n, j + 1) - s->displ[j];
    s->block = malloc((size_t)(s->cnt[h->lrank] > 0 ? s->cnt[h->lrank] : 1) * (size_t)ext);
    if (!s->block) {
        free(s->cnt);
        return MPI_ERR_NO_MEM;
    }
    return MPI_SUCCESS;
}

void ct_lane_split_free(ct_lane_split *s)
{
    free(s->block);
    free(s->cnt);
}

int ct_hier_info_get(MPI_Comm comm, ct_hier_info *info)
{
    ct_hier *h = ct_hier_get(comm);
    *info = (ct_hier_info){h->nnodes, h->node_idx, h->lrank, h->nlocal, h->maxppn, h->uneven};
    return MPI_SUCCESS;
}
