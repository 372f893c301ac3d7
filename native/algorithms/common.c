/* Shared helpers: datatype checks, charged copies and reductions, segments. */
#include <limits.h>
#include <stdlib.h>
#include "internal.h"

unsigned long ct_setup_events;
ct_setup_hooks ct_setup_hook;
static int setup_depth;              /* a set-up inside another: the outer one is the span */

void ct_own_begin(void)
{
    if (setup_depth++ == 0 && ct_setup_hook.begin) ct_setup_hook.begin();
}

void ct_own_end(void)
{
    if (--setup_depth == 0 && ct_setup_hook.end) ct_setup_hook.end();
}

void ct_setup_begin(void)
{
    ct_setup_events++;
    ct_own_begin();
}

void ct_setup_end(void) { ct_own_end(); }

MPI_Aint ct_extent(MPI_Datatype t)
{
    MPI_Aint lb, ext;
    MPI_Type_get_extent(t, &lb, &ext);
    return ext;
}

int ct_is_commutative(MPI_Op op)
{
    int c = 0;
    MPI_Op_commutative(op, &c);
    return c;
}

int ct_is_pof2(int n) { return n > 0 && (n & (n - 1)) == 0; }

int ct_pof2_floor(int n)
{
    int p = 1;
    while (p * 2 <= n) p *= 2;
    return p;
}

/* The algorithms address elements as ext-sized slots and may ship them as
 * bytes, so the type must be dense: size == extent and both lower bounds 0. */
int ct_type_dense(MPI_Datatype t)
{
    MPI_Aint lb, ext, tlb, text;
    int size;
    MPI_Type_get_extent(t, &lb, &ext);
    MPI_Type_get_true_extent(t, &tlb, &text);
    MPI_Type_size(t, &size);
    return lb == 0 && tlb == 0 && (MPI_Aint)size == ext && text == ext;
}

const char *ct_need_dense(const ct_args *a)
{
    if (a->count < 0) return "negative count";
    return ct_type_dense(a->dtype) ? NULL : "datatype is not contiguous";
}

const char *ct_need_commutative(const ct_args *a)
{
    return ct_is_commutative(a->op) ? NULL : "operation is not commutative";
}

const char *ct_need_dense_commutative(const ct_args *a)
{
    const char *r = ct_need_dense(a);
    return r ? r : ct_need_commutative(a);
}

const char *ct_need_pof2(const ct_args *a)
{
    int n;
    MPI_Comm_size(a->comm, &n);
    return ct_is_pof2(n) ? NULL : "communicator size is not a power of two";
}

const char *ct_need_bytes_fit(const ct_args *a, int times)
{
    if ((double)a->count * (double)ct_extent(a->dtype) * times > (double)INT_MAX)
        return "message too large for byte counts in an int";
    return NULL;
}

/* allgathers send several blocks as one count of elements */
const char *ct_need_comm_elems_fit(const ct_args *a)
{
    int size;
    MPI_Comm_size(a->comm, &size);
    if ((double)a->count * size > (double)INT_MAX) return "count x size exceeds INT_MAX";
    return NULL;
}

void ct_copy(void *dst, const void *src, MPI_Aint bytes)
{
    if (bytes <= 0 || dst == src) return;
    memcpy(dst, src, (size_t)bytes);
    ct_charge_copy((size_t)bytes);
}

int ct_test_fault_reduce;

int ct_reduce_local(const void *in, void *inout, int n, MPI_Datatype t, MPI_Op op)
{
    if (n <= 0) return MPI_SUCCESS;
    if (ct_test_fault_reduce) return MPI_ERR_OP;
    if (!ct_charge_exempt(op)) ct_charge_reduce((size_t)n * (size_t)ct_extent(t));
    return MPI_Reduce_local(in, inout, n, t, op);
}

int ct_seg_elems(int segbytes, MPI_Aint ext, int count)
{
    if (segbytes <= 0 || ext <= 0) return count > 0 ? count : 1;
    MPI_Aint n = segbytes / ext;
    if (n < 1) n = 1;
    return n < count ? (int)n : (count > 0 ? count : 1);
}
