/* colltune's hierarchical task-based collectives (the HAN design: Luo et al.,
 * "HAN: a Hierarchical AutotuNed Collective Communication Framework",
 * CLUSTER 2020). Ranks are grouped by node, node leaders talk across nodes,
 * the message is cut into segments of fs bytes, and per-segment tasks overlap
 * inter-node (ib, ir) with intra-node (sb, sr) work. See docs/hier.md.
 *
 * The whole collectives are registered in the flat catalogue as bcast/han,
 * reduce/han and allreduce/han (ct_call); this header exposes the tasks one by one for the
 * task benchmark (colltune-taskbench) and the cost-model tuner. */
#ifndef COLLTUNE_HIER_H
#define COLLTUNE_HIER_H

#include "colltune/algorithms.h"

/* Modules of a level: the host library's own collective on the level's
 * sub-communicator (MPI_Ibcast/MPI_Ireduce across nodes, MPI_Bcast/MPI_Reduce
 * inside a node), colltune's non-blocking tree schedules, or (intra-node
 * only) a shared-memory window. */
enum { CT_HAN_MOD_LIBRARY = 0, CT_HAN_MOD_TREE = 1, CT_HAN_MOD_SHM = 2 };
/* Allreduce only, inter-node: the leaders run one of colltune's flat allreduce
 * algorithms (catalogue id iaalg: ring, Rabenseifner, ...) as a non-blocking
 * schedule in place of the ir + ib pair. HAN's reduce-then-bcast sends every
 * leader's full segment both ways along a tree; a ring or reduce-scatter +
 * allgather moves 2m(N-1)/N per leader, the bandwidth bound, and has no
 * N-hop pipeline fill at many nodes. */
enum { CT_HAN_MOD_FLAT = 2 };
/* Intra-node only: the host library's non-blocking MPI_Ibcast/MPI_Ireduce on
 * the node's communicator, progressed together with the inter-node op. With
 * the blocking library module (0) a leader forwards no inter-node piece while
 * it sits in MPI_Bcast, so the inter-node pipeline stalls behind every
 * leader's intra-node step (and a task's cost depends on the whole call). */
enum { CT_HAN_MOD_LIBRARY_NB = 3 };
/* Tree shapes of the colltune tree module (values of ibalg/iralg/salg/sralg).
 * DUAL (bcast's ibalg only): a double binary tree, pieces alternating between
 * the two trees (ct_dual_tree) -- a binary tree's log depth at full link rate. */
enum { CT_HAN_TREE_BINOMIAL = 1, CT_HAN_TREE_BINARY, CT_HAN_TREE_CHAIN, CT_HAN_TREE_KNOMIAL4,
       CT_HAN_TREE_LINEAR, CT_HAN_TREE_DUAL, CT_HAN_NTREES };

/* Frees comm's node / lane communicators and shared-memory window (collective; call on
 * MPI_COMM_WORLD before MPI_Finalize, which does not do it on every rank). */
void ct_hier_release(MPI_Comm comm);

typedef struct {
    int fs;            /* segment size in bytes (0: the whole message is one segment) */
    int imod;          /* inter-node module: CT_HAN_MOD_LIBRARY or CT_HAN_MOD_TREE */
    int ibalg, iralg;  /* inter-node bcast / reduce tree shape (imod = TREE) */
    int ibs, irs;      /* inner segment size of one inter-node bcast / reduce (0: whole) */
    int smod;          /* intra-node module: LIBRARY, TREE or SHM */
    int ss;            /* inner segment of one intra-node tree op (0: whole) */
    int salg, sralg;   /* intra-node tree shapes (smod = TREE) of sb and of sr */
    int iaalg;         /* allreduce, imod = FLAT: catalogue id of the leaders' allreduce */
    int iadepth;       /* allreduce, imod = FLAT: leaders' allreduces in flight (1 or 2) */
    int ibdepth;       /* bcast: inter-node bcasts in flight (1 or 2) */
} ct_han_params;

/* The parameters from a bcast/han, reduce/han or allreduce/han descriptor's values
 * (catalogue order, docs/hier.md). */
ct_han_params ct_han_params_from(ct_coll coll, const int *p);

/* Sub-operations of a task, each on one segment. A step normally starts its
 * op and the task waits for it; CT_HAN_START only starts it (it stays in
 * flight across the task boundary), CT_HAN_AWAIT only waits for the op that an
 * earlier task started on that segment. */
typedef enum { CT_HAN_IB, CT_HAN_SB, CT_HAN_IR, CT_HAN_SR, CT_HAN_NSUBS } ct_han_sub;
enum { CT_HAN_RUN = 0, CT_HAN_START = 1, CT_HAN_AWAIT = 2 };
typedef struct { ct_han_sub sub; int seg; int when; } ct_han_step;

/* Virtual nodes: ranks of one shared-memory node are further split into blocks
 * of v consecutive node-local ranks (tests on one host). 0 = read
 * COLLTUNE_VNODE_SIZE (unset or 0: no split). Applies to hierarchies built
 * afterwards; a communicator's hierarchy is built once and cached. */
void ct_hier_set_vnode_size(int v);

typedef struct { int nnodes, node, lrank, nlocal, maxppn, uneven; } ct_hier_info;
int ct_hier_info_get(MPI_Comm comm, ct_hier_info *info);   /* collective on first use */

/* One HAN collective call in progress (bcast, reduce or allreduce). */
typedef struct ct_han ct_han;
int ct_han_begin(ct_han **h, ct_coll coll, const ct_args *a, const ct_han_params *p);
int ct_han_segments(const ct_han *h);     /* u */
int ct_han_is_leader(const ct_han *h);    /* this rank is its node's leader for this call */
int ct_han_node(const ct_han *h);         /* node index of this rank */
/* Runs the steps concurrently (non-leaders skip ib/ir; steps whose segment is
 * outside 0..u-1 are skipped) and returns when each is locally complete. */
int ct_han_task(ct_han *h, const ct_han_step *steps, int n);
int ct_han_end(ct_han *h);                /* completes what is in flight, frees */

/* Named tasks of the paper: ib(i) sb(i) ir(i) sr(i) sbib(i) irsr(i) ibirsr(i)
 * sbibirsr(i) sbibir(i) sbsr(i), or explicit sums "ib(0)+sb(0)". The index of a
 * composite is its newest segment: sbib(i) = ib(i)+sb(i-1), sbibirsr(i) =
 * sr(i)+ir(i-1)+ib(i-2)+sb(i-3). Returns the number of steps, -1 if malformed. */
int ct_han_parse_task(const char *name, ct_han_step *steps, int max);

/* The whole collectives (what bcast/han, reduce/han and allreduce/han run). */
int ct_han_bcast(const ct_args *a, const ct_han_params *p);
int ct_han_reduce(const ct_args *a, const ct_han_params *p);
int ct_han_allreduce(const ct_args *a, const ct_han_params *p);

#endif
