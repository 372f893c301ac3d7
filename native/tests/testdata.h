/* Test data for the algorithm matrix: element types, operations, generated
 * inputs and analytically computed expected results. */
#ifndef COLLTUNE_TESTDATA_H
#define COLLTUNE_TESTDATA_H
#include <mpi.h>

enum { T_INT, T_DOUBLE, T_B3, NTYPES };           /* b3: MPI_Type_contiguous(3, MPI_BYTE) */
enum { O_NONE, O_SUM, O_MAX, O_NC, O_BSUM, NOPS }; /* NC: non-commutative user op;
                                                      BSUM: commutative user op on bytes */
extern const char *const td_type_name[NTYPES];
extern const char *const td_op_name[NOPS];

void td_init(void);                       /* creates the b3 type and the user ops */
void td_free(void);
MPI_Datatype td_type(int t);
MPI_Op td_op(int o);
int td_size(int t);                        /* bytes per element */

/* Element i of rank r's input, for a test with type t and op o (O_NONE for
 * bcast and allgather), written to out. */
void td_gen(int t, int o, int r, int i, void *out);
/* Fill n elements of rank r's input. */
void td_fill(int t, int o, int r, int n, void *buf);
/* Expected reduction over ranks 0..k-1 in rank order, n elements. */
void td_expect(int t, int o, int k, int n, void *out);
/* acc = acc op (rank r's input), n elements: extends an expectation by one rank. */
void td_fold(int t, int o, int r, int n, void *acc);

#endif
