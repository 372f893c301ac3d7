/* Erroneous collective calls under MPI_ERRORS_RETURN, as an MPI test suite
 * makes them: every rank that calls gets an error from the library before
 * any communication. Knows nothing about colltune; the test runs it with and
 * without the interposer and compares what it prints.
 *
 *   errpaths [CASE ...]      (no argument: every case)
 *   errpaths fatal CASE      the same call under MPI_ERRORS_ARE_FATAL
 *
 * Per case, rank 0 prints "CASE: c0 c1 ..." with the error class every rank
 * got (0: MPI_SUCCESS; - for a rank that did not call). After each case a checked allreduce
 * and bcast on the same communicator show that nothing was left in flight:
 * a message left behind by an abandoned algorithm would be matched by them
 * (or hang them). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4
static int rank, size;
static MPI_Comm comm;

typedef int (*case_fn)(void);

static int buf_i[64], buf_o[64];
static unsigned char ba = 3, bb;

static int reduce_byte_max(void) { return MPI_Reduce(&ba, &bb, 1, MPI_BYTE, MPI_MAX, 0, comm); }
static int allreduce_byte_max(void) { return MPI_Allreduce(&ba, &bb, 1, MPI_BYTE, MPI_MAX, comm); }
static int allreduce_double_band(void)
{
    double x = 1, y;
    return MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_BAND, comm);
}
static int reduce_op_null(void) { return MPI_Reduce(buf_i, buf_o, N, MPI_INT, MPI_OP_NULL, 0, comm); }
static int allreduce_op_null(void) { return MPI_Allreduce(buf_i, buf_o, N, MPI_INT, MPI_OP_NULL, comm); }
static int bcast_count_neg(void) { return MPI_Bcast(buf_i, -1, MPI_INT, 0, comm); }
static int reduce_count_neg(void) { return MPI_Reduce(buf_i, buf_o, -2, MPI_INT, MPI_SUM, 0, comm); }
static int allreduce_count_neg(void) { return MPI_Allreduce(buf_i, buf_o, -3, MPI_INT, MPI_SUM, comm); }
static int allgather_count_neg(void) { return MPI_Allgather(buf_i, -1, MPI_INT, buf_o, -1, MPI_INT, comm); }
static int bcast_null_buf(void) { return MPI_Bcast(NULL, N, MPI_INT, 0, comm); }
static int allreduce_null_buf(void) { return MPI_Allreduce(buf_i, NULL, N, MPI_INT, MPI_SUM, comm); }
static int bcast_root_size(void) { return MPI_Bcast(buf_i, N, MPI_INT, size, comm); }
static int reduce_root_neg(void) { return MPI_Reduce(buf_i, buf_o, N, MPI_INT, MPI_SUM, -7, comm); }
static int bcast_type_null(void) { return MPI_Bcast(buf_i, N, MPI_DATATYPE_NULL, 0, comm); }
static int allreduce_type_null(void) { return MPI_Allreduce(buf_i, buf_o, N, MPI_DATATYPE_NULL, MPI_SUM, comm); }
static int allgather_type_null(void)
{
    return MPI_Allgather(buf_i, 1, MPI_DATATYPE_NULL, buf_o, 1, MPI_DATATYPE_NULL, comm);
}
static int bcast_type_uncommitted(void)
{
    MPI_Datatype t;
    MPI_Type_contiguous(2, MPI_INT, &t);     /* never committed */
    int rc = MPI_Bcast(buf_i, 1, t, 0, comm);
    MPI_Type_free(&t);
    return rc;
}
static int allreduce_alias(void) { return MPI_Allreduce(buf_i, buf_i, N, MPI_INT, MPI_SUM, comm); }
/* the root alone calls (noalias2's shape): a hang if anything communicates */
static int reduce_alias_root(void)
{
    return rank == 0 ? MPI_Reduce(buf_i, buf_i, N, MPI_INT, MPI_SUM, 0, comm) : -1;
}
/* the send buffer is this rank's own block of the receive buffer */
static int allgather_alias(void)
{
    return MPI_Allgather(&buf_i[rank], 1, MPI_INT, buf_i, 1, MPI_INT, comm);
}
static int bcast_comm_null(void) { return MPI_Bcast(buf_i, N, MPI_INT, 0, MPI_COMM_NULL); }
static int allreduce_comm_null(void) { return MPI_Allreduce(buf_i, buf_o, N, MPI_INT, MPI_SUM, MPI_COMM_NULL); }

static const struct { const char *name; case_fn fn; } cases[] = {
#define C(f) {#f, f}
    C(reduce_byte_max), C(allreduce_byte_max), C(allreduce_double_band), C(reduce_op_null),
    C(allreduce_op_null), C(bcast_count_neg), C(reduce_count_neg), C(allreduce_count_neg),
    C(allgather_count_neg), C(bcast_null_buf), C(allreduce_null_buf), C(bcast_root_size),
    C(reduce_root_neg), C(bcast_type_null), C(allreduce_type_null), C(allgather_type_null),
    C(bcast_type_uncommitted), C(allreduce_alias), C(reduce_alias_root), C(allgather_alias),
    C(bcast_comm_null), C(allreduce_comm_null),
#undef C
};
enum { NCASES = sizeof cases / sizeof cases[0] };

/* A correct allreduce and bcast on comm: anything an earlier call left in
 * flight would corrupt or hang them. Returns the number of wrong values. */
static int check_clean(int round)
{
    long in[N], out[N], want, b[N];
    int bad = 0;
    for (int i = 0; i < N; i++) in[i] = rank * 10 + i + round;
    MPI_Allreduce(in, out, N, MPI_LONG, MPI_SUM, comm);
    for (int i = 0; i < N; i++) {
        want = 10L * size * (size - 1) / 2 + (long)size * (i + round);
        bad += out[i] != want;
    }
    for (int i = 0; i < N; i++) b[i] = rank == size - 1 ? 1000 + i + round : -1;
    MPI_Bcast(b, N, MPI_LONG, size - 1, comm);
    for (int i = 0; i < N; i++) bad += b[i] != 1000 + i + round;
    return bad;
}

static int find(const char *name)
{
    for (int i = 0; i < NCASES; i++)
        if (!strcmp(cases[i].name, name)) return i;
    fprintf(stderr, "errpaths: unknown case %s\n", name);
    MPI_Abort(MPI_COMM_WORLD, 2);
    return -1;
}

int main(int argc, char **argv)
{
    int fatal = argc > 1 && !strcmp(argv[1], "fatal"), first = 1 + fatal, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (!fatal) {
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);   /* MPI_COMM_NULL's errors */
    }
    for (int i = 0; i < 64; i++) buf_i[i] = rank + i;
    int ncase = argc > first ? argc - first : NCASES;
    for (int k = 0; k < ncase; k++) {
        int c = argc > first ? find(argv[first + k]) : k, rc = cases[c].fn(), cls = -1;
        if (rc >= 0) MPI_Error_class(rc, &cls);
        int *all = malloc(sizeof(int) * (size_t)size);
        MPI_Gather(&cls, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("%s:", cases[c].name);
            for (int r = 0; r < size; r++)
                if (all[r] < 0) printf(" -");
                else printf(" %d", all[r]);
            printf("\n");
            fflush(stdout);
        }
        free(all);
        bad += check_clean(k);
    }
    int tot = 0;
    MPI_Reduce(&bad, &tot, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("errpaths: %d cases, %d wrong values after them\n", ncase, tot);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
