/* The reduction operator of the reducing collectives (--op). */
#ifndef COLLTUNE_REDUCTION_H
#define COLLTUNE_REDUCTION_H

#include <mpi.h>

typedef enum { OP_SUM, OP_CHARGED_SUM } op_kind_t;

int op_parse(const char *s, op_kind_t *k);
const char *op_name(op_kind_t k);

/* MPI_SUM, or the charged sum (created on first use, freed by reduction_free).
 * Call after MPI_Init, on every rank. */
MPI_Op reduction_op(op_kind_t k);
void reduction_free(void);

#endif
