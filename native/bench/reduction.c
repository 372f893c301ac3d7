/* --op charged-sum: a commutative user-defined sum that charges its own arithmetic
 * (ct_charge_reduce: bytes / COLLTUNE_REDUCE_RATE of simulated CPU time under SMPI,
 * nothing on a real library, where the CPU pays for itself).
 *
 * Why: SMPI charges no reduction arithmetic (FACTS.md), so with MPI_SUM the
 * library's own collectives reduce for free while colltune's algorithms charge
 * theirs (algorithms/charge.c): a reduction-heavy library algorithm looks too
 * cheap. Whoever calls this op -- the library's algorithm, or colltune's through
 * MPI_Reduce_local -- pays the same for the same bytes; colltune does not charge
 * this op a second time (ct_charge_exempt_op). */
#include "reduction.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "colltune/algorithms.h"

static const char *const op_names[] = { "sum", "charged-sum" };

int op_parse(const char *s, op_kind_t *k)
{
    for (int i = 0; i <= OP_CHARGED_SUM; i++)
        if (!strcmp(s, op_names[i])) { *k = (op_kind_t)i; return 0; }
    return -1;
}

const char *op_name(op_kind_t k) { return op_names[k]; }

#define SUM_LOOP(T) do { const T *a = in; T *b = inout; \
    for (int i = 0; i < n; i++) b[i] += a[i]; } while (0)

static void charged_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int n = *len, sz;
    MPI_Datatype t = *dt;
    if (t == MPI_FLOAT) SUM_LOOP(float);
    else if (t == MPI_DOUBLE) SUM_LOOP(double);
    else if (t == MPI_INT) SUM_LOOP(int);
    else if (t == MPI_SIGNED_CHAR) SUM_LOOP(signed char);
    else {                  /* the bench reduces only these (dtype_mpi): a new dtype must be added here */
        fprintf(stderr, "colltune-bench: charged-sum has no loop for this datatype\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
        return;
    }
    MPI_Type_size(t, &sz);
    ct_charge_reduce((size_t)n * (size_t)sz);
}

static MPI_Op charged = MPI_OP_NULL;

MPI_Op reduction_op(op_kind_t k)
{
    if (k == OP_SUM) return MPI_SUM;
    if (charged == MPI_OP_NULL) {
        MPI_Op_create(charged_sum, 1, &charged);
        ct_charge_exempt_op(charged);
    }
    return charged;
}

void reduction_free(void)
{
    if (charged != MPI_OP_NULL) MPI_Op_free(&charged);
}
