/* One measurement point: result check and timed repetitions on a communicator. */
#ifndef COLLTUNE_MEASURE_H
#define COLLTUNE_MEASURE_H

#include <mpi.h>

#include "options.h"
#include "output.h"

typedef struct {
    const options_t *o;
    MPI_Comm comm;
    int rank, size;
    int count;          /* elements per rank (per block) */
    double delay_s;     /* delayed scenario */
    int delayed_rank;   /* rank of comm that starts late; -1 if none */
    double tcalc_s;     /* overlap scenario */
} point_t;

/* Runs the collective once on real, patterned buffers and checks every rank's
 * result. Collective over pt->comm; all ranks return 1 (valid) or 0. On rank 0
 * msg receives the first failing rank's message. */
int point_check(const point_t *pt, char *msg, size_t len);

/* Times the point; fills the timing fields of rec on rank 0. Collective. */
void point_time(const point_t *pt, record_t *rec);

#endif
