/* Internals of the hierarchical collectives (not part of the public API). */
#ifndef COLLTUNE_HIER_INTERNAL_H
#define COLLTUNE_HIER_INTERNAL_H

#include "colltune/hier.h"
#include "../algorithms/internal.h"

/* What a greedy LogP tree is built for: root, the model's costs (gap, inter, intra in ns;
 * port and memory bandwidths, and the rate at which a parent combines what a child sent, in
 * MB/s, 0: nothing to combine), message bytes, lf (-1: the model's choice). */
typedef struct {
    int root, cost[6], lf;
    long long bytes;
} ct_logp_key;
/* A rank's place in the greedy LogP broadcast tree of one call (logp_tree.c). */
typedef struct {
    int parent, nchild, *child;    /* comm ranks; children in send order; parent -1: root */
} ct_logp_place;
struct ct_logp_cache;

enum { CT_LOGP_CACHED = 4 };

/* The hierarchy of one communicator, built once and cached as an attribute. */
typedef struct {
    MPI_Comm node;          /* this rank's (virtual) node, ranks in comm order */
    int nnodes, node_idx, lrank, nlocal, maxppn, uneven;
    int *node_of, *lrank_of;  /* per comm rank */
    int *node_size;           /* per node index (nodes ordered by lowest comm rank) */
    MPI_Comm *up;           /* up[j]: the leaders when a root has node-local rank j */
    char *up_built;
    MPI_Comm lane;          /* the ranks of this node-local rank, one per node (ct_hier_lane) */
    MPI_Win win;            /* shared-memory segment of the node (smod = SHM) */
    char *shm;
    MPI_Aint shm_bytes;
    struct ct_logp_cache *logp;  /* greedy LogP trees built (bcast/ reduce/logp_tree) */
} ct_hier;

ct_hier *ct_hier_get(MPI_Comm comm);                     /* collective on first use */
MPI_Comm ct_hier_up(ct_hier *h, MPI_Comm comm, int j);   /* collective on first use of j */
MPI_Comm ct_hier_lane(ct_hier *h, MPI_Comm comm);        /* collective on first use */
/* The multi-leader algorithms' split of a vector of `count` elements into one block per
 * node-local rank (block j: local rank j's; counts and displacements for the node's
 * reduce-scatter and gather(v)), and a buffer for this rank's block. */
typedef struct {
    int *cnt, *displ;       /* nlocal each, one allocation */
    char *block;            /* cnt[lrank] elements (at least one byte) */
} ct_lane_split;
int ct_lane_split_init(const ct_hier *h, int count, MPI_Aint ext, ct_lane_split *s); /* MPI_ERR_NO_MEM: nothing to free */
void ct_lane_split_free(ct_lane_split *s);
/* allreduce/multileader with segments in flight (multileader_pipeline.c):
 * how many segments of about fs bytes (0: fs off), and the call itself */
int ct_multileader_segments(const ct_hier *h, int count, MPI_Aint ext, int fs);
int ct_multileader_pipeline(const ct_args *a, ct_hier *h, MPI_Comm lane, const ct_algorithm *lane_alg,
                            int nseg);
/* This rank's place in the greedy LogP tree of `key` (its bytes rounded up to a power of
 * two), the tree built on first use (one for every root where the nodes are even), the last
 * CT_LOGP_CACHED kept; valid until the next call on h; NULL when out of memory. Local: no
 * message. */
const ct_logp_place *ct_logp_place_get(ct_hier *h, MPI_Comm comm, const ct_logp_key *key);
void ct_logp_free(struct ct_logp_cache *c);
/* the key of a call of bcast/ or reduce/logp_tree with parameters p (CT_LOGP_TREE_PARAMS)
 * and combining rate rbw (MB/s; 0: bcast) */
ct_logp_key ct_logp_key_of(const ct_args *a, const int *p, int rbw);
/* the parameters of bcast/ and reduce/logp_tree: the model's costs, then lf */
#define CT_LOGP_TREE_PARAMS \
    {.name = "gap", .unit = "ns", .help = "model: time a sender spends per message (LogP o, g)", \
     .def = 250, .min = 1, .max = 1000000, .nprobe = 0}, \
    {.name = "inter", .unit = "ns", .help = "model: send to receiver ready, across nodes (o + L + o)", \
     .def = 1300, .min = 1, .max = 1000000, .nprobe = 1, .probe = {400}}, \
    {.name = "intra", .unit = "ns", .help = "model: send to receiver ready, inside a node", \
     .def = 550, .min = 1, .max = 1000000, .nprobe = 0}, \
    {.name = "ibw", .unit = "MB/s", .help = "model: a node's network port, shared by its ranks' sends", \
     .def = 12500, .min = 1, .max = 100000000, .nprobe = 0}, \
    {.name = "sbw", .unit = "MB/s", .help = "model: a node's memory, shared by its ranks' messages inside it", \
     .def = 8000, .min = 1, .max = 100000000, .nprobe = 1, .probe = {100000000}}, \
    {.name = "lf", .unit = "", .help = "ranks of its own node a holder informs before other nodes; -1: the model's fastest", \
     .def = -1, .min = -1, .max = 1024, .nprobe = 2, .probe = {0, 2}}
/* node-local rank of node n's leader when the root has node-local rank j */
static inline int ct_hier_leader(const ct_hier *h, int n, int j)
{
    return h->node_size[n] > j ? j : 0;
}
/* shared buffer of at least `bytes` on this node (collective over the node) */
char *ct_hier_shm(ct_hier *h, MPI_Aint bytes);

/* ---- dataflow bcast (flow.c; bcast/chain_flow.c, bcast/tree_flow.c) ---- */
/* Tree t (0, 1) across nodes: node v's parent and children (v: the node's place counted
 * from the root's node, which is 0); returns the parent, -1 for none. At most 2 children. */
typedef int (*ct_node_tree)(int t, int v, int nnodes, int *child, int *nchild);
/* An algorithm's run: the blocking dataflow bcast on a->comm's hierarchy, nodes in `tree`'s
 * shape along its first ntrees (1, 2) trees: pieces of piece_bytes (at least one element), per
 * tree w receives posted and w sends per child in flight; lag as in flow.c. */
int ct_flow_run(const ct_args *a, ct_node_tree tree, int ntrees, int piece_bytes, int w, int lag);

/* Tags of a call's ops stay below CT_HAN_TAG_ALT (step_tag in han.c: sub-op x
 * 4096 + segment); adding it gives a second, disjoint range: shared-memory ops
 * on the node's communicator, a dual tree's second tree on the leaders'. */
enum { CT_HAN_TAG_ALT = 16384 };
/* MPI_Comm_create_group's tag for the leaders' communicators (ct_hier_up) */
enum { CT_HIER_UP_TAG = 2 * CT_HAN_TAG_ALT + 1 };

/* ---- non-blocking operations on one segment (engine.c) ---- */
typedef enum { NB_BCAST, NB_REDUCE, NB_LIB_IBCAST, NB_LIB_IREDUCE, NB_SHM_BCAST,
               NB_SHM_REDUCE, NB_FLAT_ALLREDUCE } nb_kind;

typedef struct nb_op {
    nb_kind kind;
    MPI_Comm comm;
    int rank, size, root;
    char *buf;               /* bcast: data; reduce: accumulator (result at root) */
    const char *sbuf;        /* library reduce: contribution when not in buf (NULL: in buf) */
    int count;
    MPI_Datatype dt;
    MPI_Op op;
    MPI_Aint ext;
    int tag;
    int parent, nchild, *child;   /* tree neighbours (comm ranks) */
    int ntrees, tparent[2], *ctree;  /* bcast: piece s goes down tree s % ntrees, from
                                        tparent[s % ntrees]; child c is in tree ctree[c] */
    int *busy;               /* bcast: sends in flight per peer, shared by the ops of one
                                call on this communicator (NULL: per op) */
    int sub, nsub;           /* inner segments: elements per piece, number of pieces */
    MPI_Request *req;
    int nreq;
    char *tmp;               /* reduce: one piece buffer per child */
    int *got;                /* reduce: children reduced per piece */
    int next_send, pending;  /* reduce: next piece to send up; open requests */
    int ready;               /* locally complete: data in place, buffer reusable */
    int err;                 /* first local error (a failed reduction, the library's op):
                                the op still sends and receives everything it would, so
                                no peer is left waiting; returned when the call ends */
    char *shm;               /* shm ops: the node's shared segment */
    int phase;               /* shm ops: protocol phase */
    MPI_Aint slot;           /* shm ops: bytes of one region (a full segment) */
    ct_request flat;         /* NB_FLAT_ALLREDUCE: colltune's schedule (or the library's) */
    struct nb_op *next;
} nb_op;

/* Tree shape of a ct_han tree value on a communicator of size n. */
void nb_shape(int alg, int n, ct_tree_kind *kind, int *radix);
int nb_start(nb_op *o);                 /* posts the first requests */
int nb_progress(nb_op **ops, int n, int block);  /* waits for >= 1 completion if block */
int nb_idle(const nb_op *o);            /* ready and nothing left to send or wait for */
/* MPI_ERR_INTERN when nothing of ops[0..n) is pending yet one is not idle:
 * it can never complete, and waiting for it would spin forever */
int nb_stuck(nb_op **ops, int n);
void nb_free(nb_op *o);

#endif
