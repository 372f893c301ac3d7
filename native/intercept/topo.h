/* A communicator's nodes, from its group alone (topo.c). */
#ifndef CT_TOPO_H
#define CT_TOPO_H
#include <mpi.h>

typedef struct {
    int nodes, ppn;                  /* ppn: the largest node's ranks */
    int lrank;                       /* this rank's place among its node's, by comm rank */
    int leaders_before;              /* node leaders (a node's first rank) before this one */
} ct_topo;

/* MPI_Init, collective on MPI_COMM_WORLD: every world rank's node */
void ct_topo_init(int world_rank, int world_size);
/* comm's topology: from the node map without communicating, or, where the map cannot
 * tell (no map, a member outside MPI_COMM_WORLD, a communicator past CT_TOPO_LOCAL_MAX
 * ranks: the same answer on every member), collectively over comm, every member alike
 * (leaders_before is then -1: not counted) */
void ct_topo_of(MPI_Comm comm, int size, ct_topo *t);
void ct_topo_free(void);
int ct_topo_mapped(void);        /* 1: communicators' topology from the world node map */
#endif
