/* Arguments colltune leaves to the library (ct_check_args).
 *
 * colltune's algorithms communicate before they reduce, so an argument the
 * library would reject (MPI_ERR_OP for MPI_MAX on MPI_BYTE, MPI_ERR_BUFFER for
 * aliased buffers, ...) must never reach them: the library reports it on every
 * rank before any message moves, while an algorithm that fails half-way leaves
 * peers waiting. Such calls run the library's own collective instead, which
 * then behaves (error class, error handler, message) exactly as without
 * colltune.
 *
 * The (datatype, op) table follows the MPI standard's type classes (MPI-4.1
 * sec. 6.9.2) and is conservative: a pair it does not list goes to the
 * library, whose answer is then the one the application gets. */
#include <stdint.h>
#include "internal.h"

enum { K_CINT = 1, K_FINT = 2, K_FLOAT = 4, K_LOGICAL = 8, K_COMPLEX = 16, K_BYTE = 32, K_PAIR = 64 };

typedef struct { MPI_Datatype t; int kinds; } type_class;
typedef struct { MPI_Op op; int kinds; } op_class;

/* Every predefined type of the classes; a handle the library does not
 * provide (MPI_DATATYPE_NULL, or a macro it lacks) is left out. */
static type_class types[96];
static op_class ops[16];
static int ntypes, nops, ready;

static void add_type(MPI_Datatype t, int kinds)
{
    if (t != MPI_DATATYPE_NULL && ntypes < (int)(sizeof types / sizeof types[0]))
        types[ntypes++] = (type_class){t, kinds};
}

static void add_op(MPI_Op op, int kinds)
{
    if (op != MPI_OP_NULL) ops[nops++] = (op_class){op, kinds};
}

/* Called by the interposer at MPI_Init (before any thread can race on it) and
 * lazily by ct_check_args. Most used types first: the lookup is a scan. */
void ct_validity_init(void)
{
    if (ready) return;
    add_type(MPI_DOUBLE, K_FLOAT); add_type(MPI_INT, K_CINT); add_type(MPI_FLOAT, K_FLOAT);
    add_type(MPI_LONG, K_CINT); add_type(MPI_LONG_LONG, K_CINT);
    add_type(MPI_UNSIGNED, K_CINT); add_type(MPI_UNSIGNED_LONG, K_CINT);
    add_type(MPI_UNSIGNED_LONG_LONG, K_CINT); add_type(MPI_SHORT, K_CINT);
    add_type(MPI_UNSIGNED_SHORT, K_CINT); add_type(MPI_SIGNED_CHAR, K_CINT);
    add_type(MPI_UNSIGNED_CHAR, K_CINT); add_type(MPI_LONG_DOUBLE, K_FLOAT);
    add_type(MPI_BYTE, K_BYTE);
    add_type(MPI_INT8_T, K_CINT); add_type(MPI_INT16_T, K_CINT); add_type(MPI_INT32_T, K_CINT);
    add_type(MPI_INT64_T, K_CINT); add_type(MPI_UINT8_T, K_CINT); add_type(MPI_UINT16_T, K_CINT);
    add_type(MPI_UINT32_T, K_CINT); add_type(MPI_UINT64_T, K_CINT);
    add_type(MPI_AINT, K_FINT); add_type(MPI_OFFSET, K_FINT);
#ifdef MPI_COUNT
    add_type(MPI_COUNT, K_FINT);
#endif
    add_type(MPI_C_BOOL, K_LOGICAL);
    add_type(MPI_C_FLOAT_COMPLEX, K_COMPLEX); add_type(MPI_C_DOUBLE_COMPLEX, K_COMPLEX);
    add_type(MPI_C_LONG_DOUBLE_COMPLEX, K_COMPLEX);
    add_type(MPI_FLOAT_INT, K_PAIR); add_type(MPI_DOUBLE_INT, K_PAIR); add_type(MPI_LONG_INT, K_PAIR);
    add_type(MPI_2INT, K_PAIR); add_type(MPI_SHORT_INT, K_PAIR); add_type(MPI_LONG_DOUBLE_INT, K_PAIR);
#ifdef MPI_CXX_BOOL
    add_type(MPI_CXX_BOOL, K_LOGICAL);
#endif
#ifdef MPI_CXX_FLOAT_COMPLEX
    add_type(MPI_CXX_FLOAT_COMPLEX, K_COMPLEX); add_type(MPI_CXX_DOUBLE_COMPLEX, K_COMPLEX);
    add_type(MPI_CXX_LONG_DOUBLE_COMPLEX, K_COMPLEX);
#endif
    /* Fortran-named types: the headers define them whether or not the
     * library was built with Fortran; such a handle is then null or of size
     * 0 (ct_check_args also declines a zero-size type). */
#ifdef MPI_INTEGER
    add_type(MPI_INTEGER, K_FINT); add_type(MPI_REAL, K_FLOAT);
    add_type(MPI_DOUBLE_PRECISION, K_FLOAT); add_type(MPI_LOGICAL, K_LOGICAL);
    add_type(MPI_COMPLEX, K_COMPLEX); add_type(MPI_DOUBLE_COMPLEX, K_COMPLEX);
    add_type(MPI_2REAL, K_PAIR); add_type(MPI_2DOUBLE_PRECISION, K_PAIR);
    add_type(MPI_2INTEGER, K_PAIR);
#endif
#ifdef MPI_INTEGER1
    add_type(MPI_INTEGER1, K_FINT); add_type(MPI_INTEGER2, K_FINT);
    add_type(MPI_INTEGER4, K_FINT); add_type(MPI_INTEGER8, K_FINT);
#endif
#ifdef MPI_REAL4
    add_type(MPI_REAL4, K_FLOAT); add_type(MPI_REAL8, K_FLOAT);
#endif
    add_op(MPI_SUM, K_CINT | K_FINT | K_FLOAT | K_COMPLEX);
    add_op(MPI_MAX, K_CINT | K_FINT | K_FLOAT);
    add_op(MPI_MIN, K_CINT | K_FINT | K_FLOAT);
    add_op(MPI_PROD, K_CINT | K_FINT | K_FLOAT | K_COMPLEX);
    add_op(MPI_LAND, K_CINT | K_LOGICAL);
    add_op(MPI_LOR, K_CINT | K_LOGICAL);
    add_op(MPI_LXOR, K_CINT | K_LOGICAL);
    add_op(MPI_BAND, K_CINT | K_FINT | K_BYTE);
    add_op(MPI_BOR, K_CINT | K_FINT | K_BYTE);
    add_op(MPI_BXOR, K_CINT | K_FINT | K_BYTE);
    add_op(MPI_MINLOC, K_PAIR);
    add_op(MPI_MAXLOC, K_PAIR);
    add_op(MPI_REPLACE, 0);       /* one-sided only: never a reduction */
#ifdef MPI_NO_OP
    add_op(MPI_NO_OP, 0);
#endif
    ready = 1;
}

static int kinds_of_type(MPI_Datatype t)
{
    for (int i = 0; i < ntypes; i++)
        if (types[i].t == t) return types[i].kinds;
    return 0;
}

/* -1: not a predefined op (a user-defined one takes any type) */
static int kinds_of_op(MPI_Op op)
{
    for (int i = 0; i < nops; i++)
        if (ops[i].op == op) return ops[i].kinds;
    return -1;
}

int ct_op_accepts(MPI_Op op, MPI_Datatype t)
{
    ct_validity_init();
    if (op == MPI_OP_NULL || t == MPI_DATATYPE_NULL) return 0;
    int k = kinds_of_op(op);
    return k < 0 || (k & kinds_of_type(t)) != 0;
}

/* [p, p + n) and [q, q + m) share a byte */
static int overlap(const void *p, MPI_Aint n, const void *q, MPI_Aint m)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return n > 0 && m > 0 && a < b + (uintptr_t)m && b < a + (uintptr_t)n;
}

/* [lo, hi) of the bytes n elements of t at p touch: from the true lower bound, and
 * both ends of a type whose extent is negative; 0 when they cannot be told.
 * MPI_BOTTOM is address 0 (SMPI's handle is not a null pointer). */
static int span_of(const void *p, long long n, MPI_Datatype t, uintptr_t *lo, MPI_Aint *len)
{
    MPI_Aint lb, ext, tlb, text;
    if (n <= 0 || PMPI_Type_get_extent(t, &lb, &ext) != MPI_SUCCESS
        || PMPI_Type_get_true_extent(t, &tlb, &text) != MPI_SUCCESS || text <= 0)
        return 0;
    intptr_t a0 = (p == MPI_BOTTOM ? 0 : (intptr_t)p) + tlb, a1 = a0 + (intptr_t)((n - 1) * ext);
    *lo = (uintptr_t)(a0 < a1 ? a0 : a1);
    *len = (MPI_Aint)((a0 < a1 ? a1 - a0 : a0 - a1) + text);
    return 1;
}

int ct_spans_overlap(const void *p, long long n, MPI_Datatype t, const void *q, long long m,
                     MPI_Datatype u)
{
    uintptr_t a, b;
    MPI_Aint la, lb;
    return span_of(p, n, t, &a, &la) && span_of(q, m, u, &b, &lb) &&
           overlap((const void *)a, la, (const void *)b, lb);
}

/* A null (or MPI_BOTTOM) buffer is legal: MPI_BOTTOM is a null pointer on Open MPI
 * and MPICH, and a buffer at MPI_BOTTOM with a derived type of absolute addresses
 * (MPI_Get_address, hindexed/struct) is ordinary MPI, which a root may pass while the
 * other ranks receive into plain arrays. Erroneous is only data that would start at
 * address 0: a predefined type, or a derived one whose true lower bound is 0 — the
 * libraries' own test (Open MPI's OMPI_CHECK_USER_BUFFER, MPICH's
 * MPIR_ERRTEST_USERBUFFER), which they report on that rank before communicating.
 * (Treating every null buffer as an error had sent that root alone to the library
 * while its peers ran colltune's algorithm: the job hung.) */
int ct_null_data(const void *buf, long long count, MPI_Datatype t)
{
    int ni, na, nd, comb, size = 0;
    MPI_Aint tlb, text;
    if ((buf != NULL && buf != MPI_BOTTOM) || count <= 0) return 0;
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS || comb == MPI_COMBINER_NAMED)
        return 1;
    return PMPI_Type_get_true_extent(t, &tlb, &text) == MPI_SUCCESS && tlb == 0 &&
           PMPI_Type_size(t, &size) == MPI_SUCCESS && size > 0;
}

/* Cheapest checks first: a decided call pays for this on every call, so the
 * MPI queries are made only where a check needs them. */
const char *ct_check_args(ct_coll coll, const ct_args *a)
{
    int size = 0, rank = 0, tsize = 0;
    MPI_Aint lb, ext;
    if (a->comm == MPI_COMM_NULL) return "null communicator";
    if (a->count < 0) return "negative count";
    if (a->dtype == MPI_DATATYPE_NULL) return "null datatype";
    if ((coll == CT_REDUCE || coll == CT_ALLREDUCE) && !ct_op_accepts(a->op, a->dtype))
        return "operation not defined on this datatype";
    if (coll == CT_BCAST || coll == CT_REDUCE || coll == CT_ALLGATHER) {
        PMPI_Comm_size(a->comm, &size);
        if (coll != CT_ALLGATHER && (a->root < 0 || a->root >= size)) return "invalid root";
    }
    if (a->count == 0) return NULL;
    if (PMPI_Type_size(a->dtype, &tsize) != MPI_SUCCESS || tsize == 0) return "datatype of size 0";
    /* rank-local checks: each is an error of this rank's own arguments that the
     * library reports on this rank before communicating (so a legal call never
     * differs between ranks here; the buffers' other legal forms, such as MPI_BOTTOM
     * with absolute addresses, go on: ct_null_data) */
    if (coll == CT_BCAST) return ct_null_data(a->recvbuf, a->count, a->dtype) ? "null buffer" : NULL;
    if (coll == CT_REDUCE) PMPI_Comm_rank(a->comm, &rank);
    int recv_here = coll != CT_REDUCE || rank == a->root;
    int send_here = a->sendbuf != MPI_IN_PLACE;
    if ((recv_here && ct_null_data(a->recvbuf, a->count, a->dtype)) ||
        (send_here && ct_null_data(a->sendbuf, a->count, a->dtype)))
        return "null buffer";
    if (!send_here || !recv_here) return NULL;
    PMPI_Type_get_extent(a->dtype, &lb, &ext);
    MPI_Aint bytes = (MPI_Aint)a->count * ext;
    if (overlap(a->sendbuf, bytes, a->recvbuf, coll == CT_ALLGATHER ? bytes * size : bytes))
        return "send and receive buffers overlap";
    return NULL;
}
