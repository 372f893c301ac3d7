/* Control-path messaging (start times, results, stop decisions) built on
 * point-to-point calls, so that it never runs the collective algorithm under test
 * (a forced, broken SMPI algorithm must not break the harness). Root is rank 0. */
#ifndef COLLTUNE_CTL_H
#define COLLTUNE_CTL_H

#include <mpi.h>

enum { CTL_TAG_BCAST = 7301, CTL_TAG_GATHER, CTL_TAG_PING, CTL_TAG_PONG, CTL_TAG_OFFSET, CTL_TAG_MSG };

/* binomial-tree broadcast from rank 0 */
void ctl_bcast(void *buf, int count, MPI_Datatype t, MPI_Comm comm);

/* binomial-tree gather to rank 0 of `count` items per rank into recv
 * (count * size items, significant on rank 0 only) */
void ctl_gather(const void *send, void *recv, int count, MPI_Datatype t, MPI_Comm comm);

#endif
