/* Collective descriptors: buffer sizes, calls, and result checking.
 *
 * Check patterns: data-moving collectives copy opaque bytes, so their buffers get a
 * hashed byte pattern keyed by (source rank, block, byte), which catches misplaced
 * blocks as well as missing ones. Reductions use small integers so float sums are
 * exact: rval() below, (r mod 4096) + 1 + (3i mod 61) at element i of rank r.
 * Receive buffers are poisoned with a value that differs from the expected one at
 * every position, so a collective that writes nothing cannot pass. */
#include "colls.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- datatypes ---- */

static const char *const dt_names[] = { "char", "int", "float", "double" };

const char *dtype_name(dtype_kind_t k) { return k < DT_DEFAULT ? dt_names[k] : "default"; }

size_t dtype_size(dtype_kind_t k)
{
    switch (k) {
    case DT_CHAR: return 1;
    case DT_INT: return sizeof(int);
    case DT_FLOAT: return sizeof(float);
    default: return sizeof(double);
    }
}

MPI_Datatype dtype_mpi(dtype_kind_t k, int reduces)
{
    switch (k) {
    case DT_CHAR: return reduces ? MPI_SIGNED_CHAR : MPI_CHAR;
    case DT_INT: return MPI_INT;
    case DT_FLOAT: return MPI_FLOAT;
    default: return MPI_DOUBLE;
    }
}

int dtype_parse(const char *s, dtype_kind_t *k)
{
    for (int i = 0; i < DT_DEFAULT; i++)
        if (strcmp(s, dt_names[i]) == 0) { *k = (dtype_kind_t)i; return 0; }
    return -1;
}

/* ---- byte patterns for data-moving collectives ---- */

static unsigned char pat(int src, int blk, size_t j)
{
    uint32_t x = (uint32_t)src * 0x9E3779B1u ^ (uint32_t)blk * 0x85EBCA77u ^ (uint32_t)j * 0xC2B2AE3Du;
    x ^= x >> 15; x *= 0x2C1B3C6Du; x ^= x >> 12; x *= 0x297A2D39u; x ^= x >> 15;
    return (unsigned char)(x >> 24);
}

static void fill_bytes(void *buf, size_t n, int src, int blk, int poison)
{
    unsigned char *b = buf;
    for (size_t j = 0; j < n; j++) b[j] = (unsigned char)(pat(src, blk, j) ^ (poison ? 0x5A : 0));
}

/* Compares buf with pattern (src, blk); `shown` is the receive-buffer block
 * named in the message (-1: the buffer holds a single block). */
static int check_bytes(const coll_args_t *a, const void *buf, int src, int blk, int shown,
                       char *err, size_t len)
{
    const unsigned char *b = buf;
    size_t n = (size_t)a->count * dtype_size(a->kind), es = dtype_size(a->kind);
    for (size_t j = 0; j < n; j++) {
        unsigned char want = pat(src, blk, j);
        if (b[j] == want) continue;
        if (shown >= 0)
            snprintf(err, len, "rank %d: wrong data at element %zu of block %d (byte 0x%02x, expected 0x%02x)",
                     a->rank, j / es, shown, b[j], want);
        else
            snprintf(err, len, "rank %d: wrong data at element %zu (byte 0x%02x, expected 0x%02x)",
                     a->rank, j / es, b[j], want);
        return 1;
    }
    return 0;
}

#define BYTES(a) ((size_t)(a)->count * dtype_size((a)->kind))

/* ---- small-integer values for reductions ----
 * Rank r contributes (r mod RMOD) + 1 + (3 i mod 61) at element i: at every element the
 * ranks' values differ (up to RMOD ranks), so a rank whose data is lost, doubled or taken
 * from another rank changes the sum even at count 1 (values 0..3 repeated every 4 ranks
 * hid a recursive-halving partner at distance 4), and elements differ, so a misplaced
 * block is seen too. Sums are exact in float up to about 5700 ranks (< 2^24). */
enum { RMOD = 4096 };

static long rval(int r, size_t i) { return (long)(r % RMOD) + 1 + (long)((3 * i) % 61); }

static void put(dtype_kind_t k, void *b, size_t i, long v)
{
    switch (k) {
    case DT_CHAR: ((unsigned char *)b)[i] = (unsigned char)(v & 0xff); break;
    case DT_INT: ((int *)b)[i] = (int)v; break;
    case DT_FLOAT: ((float *)b)[i] = (float)v; break;
    default: ((double *)b)[i] = (double)v; break;
    }
}

static double get(dtype_kind_t k, const void *b, size_t i)
{
    switch (k) {
    case DT_CHAR: return ((const unsigned char *)b)[i];
    case DT_INT: return ((const int *)b)[i];
    case DT_FLOAT: return ((const float *)b)[i];
    default: return ((const double *)b)[i];
    }
}

/* char sums wrap modulo 256 (two's complement), so compare modulo 256 */
static long norm(dtype_kind_t k, long v) { return k == DT_CHAR ? (v & 0xff) : v; }

static void fill_values(const coll_args_t *a, size_t n)
{
    for (size_t i = 0; i < n; i++) put(a->kind, a->sbuf, i, rval(a->rank, i));
}

/* the sum over ranks of element 0 (rval's rank part, summed once per check) */
static long sum_at_0(const coll_args_t *a)
{
    long s = 0;
    for (int r = 0; r < a->size; r++) s += rval(r, 0);
    return s;
}

/* the sum over ranks of element i, from sum_at_0: every rank adds rval's element part */
static long sum_at(const coll_args_t *a, long s0, size_t i)
{
    return s0 + (long)a->size * (rval(0, i) - rval(0, 0));
}

/* a value no correct result has at element i (its sum + 1), so an unwritten one is seen */
static void poison_sums(const coll_args_t *a, size_t first, size_t n)
{
    long s0 = sum_at_0(a);
    for (size_t i = 0; i < n; i++) put(a->kind, a->rbuf, i, norm(a->kind, sum_at(a, s0, first + i) + 1));
}

/* checks rbuf[k] == sum over ranks of element (first + k) */
static int check_sums(const coll_args_t *a, size_t first, size_t n, char *err, size_t len)
{
    long s0 = sum_at_0(a);
    for (size_t k = 0; k < n; k++) {
        double want = (double)norm(a->kind, sum_at(a, s0, first + k));
        double got = get(a->kind, a->rbuf, k);
        if (got != want) {
            snprintf(err, len, "rank %d: wrong sum at element %zu (got %g, expected %g)", a->rank, k, got, want);
            return 1;
        }
    }
    return 0;
}

/* ---- bcast ---- */
static void bcast_elems(size_t c, int p, int r, int root, size_t *s, size_t *rv)
{ (void)p; (void)r; (void)root; *s = c; *rv = 0; }
static int bcast_run(const coll_args_t *a)
{ return MPI_Bcast(a->sbuf, a->count, a->dtype, a->root, a->comm); }
static int bcast_start(const coll_args_t *a, MPI_Request *q)
{ return MPI_Ibcast(a->sbuf, a->count, a->dtype, a->root, a->comm, q); }
static void bcast_fill(const coll_args_t *a)
{ fill_bytes(a->sbuf, BYTES(a), a->root, 0, a->rank != a->root); }
static int bcast_check(const coll_args_t *a, char *e, size_t l)
{ return check_bytes(a, a->sbuf, a->root, 0, -1, e, l); }

/* ---- reduce ---- */
static void reduce_elems(size_t c, int p, int r, int root, size_t *s, size_t *rv)
{ (void)p; *s = c; *rv = r == root ? c : 0; }
static int reduce_run(const coll_args_t *a)
{ return MPI_Reduce(a->sbuf, a->rbuf, a->count, a->dtype, a->op, a->root, a->comm); }
static int reduce_start(const coll_args_t *a, MPI_Request *q)
{ return MPI_Ireduce(a->sbuf, a->rbuf, a->count, a->dtype, a->op, a->root, a->comm, q); }
static void reduce_fill(const coll_args_t *a)
{ fill_values(a, (size_t)a->count); if (a->rank == a->root) poison_sums(a, 0, (size_t)a->count); }
static int reduce_check(const coll_args_t *a, char *e, size_t l)
{ return a->rank == a->root ? check_sums(a, 0, (size_t)a->count, e, l) : 0; }

/* ---- allreduce ---- */
static void allreduce_elems(size_t c, int p, int r, int root, size_t *s, size_t *rv)
{ (void)p; (void)r; (void)root; *s = c; *rv = c; }
static int allreduce_run(const coll_args_t *a)
{ return MPI_Allreduce(a->sbuf, a->rbuf, a->count, a->dtype, a->op, a->comm); }
static int allreduce_start(const coll_args_t *a, MPI_Request *q)
{ return MPI_Iallreduce(a->sbuf, a->rbuf, a->count, a->dtype, a->op, a->comm, q); }
static void allreduce_fill(const coll_args_t *a)
{ fill_values(a, (size_t)a->count); poison_sums(a, 0, (size_t)a->count); }
static int allreduce_check(const coll_args_t *a, char *e, size_t l)
{ return check_sums(a, 0, (size_t)a->count, e, l); }

/* ---- allgather / gather: block s of the result comes from rank s ---- */
static void fill_own_poison_blocks(const coll_args_t *a)
{
    size_t n = BYTES(a);
    fill_bytes(a->sbuf, n, a->rank, 0, 0);
    for (int s = 0; s < a->size; s++) fill_bytes((char *)a->rbuf + (size_t)s * n, n, s, 0, 1);
}
static int check_gathered(const coll_args_t *a, char *e, size_t l)
{
    size_t n = BYTES(a);
    for (int s = 0; s < a->size; s++)
        if (check_bytes(a, (char *)a->rbuf + (size_t)s * n, s, 0, s, e, l)) return 1;
    return 0;
}
static void allgather_elems(size_t c, int p, int r, int root, size_t *s, size_t *rv)
{ (void)r; (void)root; *s = c; *rv = c * (size_t)p; }
static int allgather_run(const coll_args_t *a)
{ return MPI_Allgather(a->sbuf, a->count, a->dtype, a->rbuf, a->count, a->dtype, a->comm); }
static int allgather_start(const coll_args_t *a, MPI_Request *q)
{ return MPI_Iallgather(a->sbuf, a->count, a->dtype, a->rbuf, a->count, a->dtype, a->comm, q); }

static void gather_elems(size_t c, int p, int r, int root, size_t *s, size_t *rv)
{ *s = c; *rv = r == root ? c * (size_t)p : 0; }
static int gather_run(const coll_args_t *a)
{ return MPI_Gather(a->sbuf, a->count, a->dtype, a->rbuf, a->count, a->dtype, a->root, a->comm); }
static int gather_start(const coll_args_t *a, MPI_Request *q)
{ return MPI_Igather(a->sbuf, a->count, a->dtype, a->rbuf, a->count, a->dtype, a->root, a->comm, q); }
static void gather_fill(const coll_args_t *a)
{
    if (a->rank == a->root) fill_own_poison_blocks(a);
    else fill_bytes(a->sbuf, BYTES(a), a->rank, 0, 0);
}
static int gather_check(const coll_args_t *a, char *e, size_t l)
{ return a->rank == a->root ? check_gathered(a, e, l) : 0; }

/* ---- scatter: block d of the root's buffer goes to rank d ---- */
static void scatter_elems(size_t c, int p, int r, int root, size_t *s, size_t *rv)
{ *s = r == root ? c * (size_t)p : 0; *rv = c; }
static int scatter_run(const coll_args_t *a)
{ return MPI_Scatter(a->sbuf, a->count, a->dtype, a->rbuf, a->count, a->dtype, a->root, a->comm); }
static int scatter_start(const coll_args_t *a, MPI_Request *q)
{ return MPI_Iscatter(a->sbuf, a->count, a->dtype, a->rbuf, a->count, a->dtype, a->root, a->comm, q); }
static void scatter_fill(const coll_args_t *a)
{
    size_t n = BYTES(a);
    if (a->rank == a->root)
        for (int d = 0; d < a->size; d++) fill_bytes((char *)a->sbuf + (size_t)d * n, n, a->root, d, 0);
    fill_bytes(a->rbuf, n, a->root, a->rank, 1);
}
static int scatter_check(const coll_args_t *a, char *e, size_t l)
{ return check_bytes(a, a->rbuf, a->root, a->rank, -1, e, l); }

/* ---- alltoall: block d sent by rank s is keyed (s, d) ---- */
static void alltoall_elems(size_t c, int p, int r, int root, size_t *s, size_t *rv)
{ (void)r; (void)root; *s = c * (size_t)p; *rv = c * (size_t)p; }
static int alltoall_run(const coll_args_t *a)
{ return MPI_Alltoall(a->sbuf, a->count, a->dtype, a->rbuf, a->count, a->dtype, a->comm); }
static int alltoall_start(const coll_args_t *a, MPI_Request *q)
{ return MPI_Ialltoall(a->sbuf, a->count, a->dtype, a->rbuf, a->count, a->dtype, a->comm, q); }
static void alltoall_fill(const coll_args_t *a)
{
    size_t n = BYTES(a);
    for (int p = 0; p < a->size; p++) {
        fill_bytes((char *)a->sbuf + (size_t)p * n, n, a->rank, p, 0);
        fill_bytes((char *)a->rbuf + (size_t)p * n, n, p, a->rank, 1);
    }
}
static int alltoall_check(const coll_args_t *a, char *e, size_t l)
{
    size_t n = BYTES(a);
    for (int s = 0; s < a->size; s++)
        if (check_bytes(a, (char *)a->rbuf + (size_t)s * n, s, a->rank, s, e, l)) return 1;
    return 0;
}

/* ---- reduce_scatter_block: rank d gets elements [d*count, (d+1)*count) of the sum ---- */
static void rsb_elems(size_t c, int p, int r, int root, size_t *s, size_t *rv)
{ (void)r; (void)root; *s = c * (size_t)p; *rv = c; }
static int rsb_run(const coll_args_t *a)
{ return MPI_Reduce_scatter_block(a->sbuf, a->rbuf, a->count, a->dtype, a->op, a->comm); }
static int rsb_start(const coll_args_t *a, MPI_Request *q)
{ return MPI_Ireduce_scatter_block(a->sbuf, a->rbuf, a->count, a->dtype, a->op, a->comm, q); }
static void rsb_fill(const coll_args_t *a)
{ fill_values(a, (size_t)a->count * (size_t)a->size); poison_sums(a, (size_t)a->rank * (size_t)a->count, (size_t)a->count); }
static int rsb_check(const coll_args_t *a, char *e, size_t l)
{ return check_sums(a, (size_t)a->rank * (size_t)a->count, (size_t)a->count, e, l); }

/* ---- barrier ---- */
static void barrier_elems(size_t c, int p, int r, int root, size_t *s, size_t *rv)
{ (void)c; (void)p; (void)r; (void)root; *s = 0; *rv = 0; }
static int barrier_run(const coll_args_t *a) { return MPI_Barrier(a->comm); }
static int barrier_start(const coll_args_t *a, MPI_Request *q) { return MPI_Ibarrier(a->comm, q); }
static void barrier_fill(const coll_args_t *a) { (void)a; }
static int barrier_check(const coll_args_t *a, char *e, size_t l) { (void)a; (void)e; (void)l; return 0; }

/* name, reduces, rooted, has_data, sizes, blocking, non-blocking, fill, check */
static const coll_desc_t d_bcast = { "bcast", 0, 1, 1, bcast_elems, bcast_run, bcast_start, bcast_fill, bcast_check };
static const coll_desc_t d_reduce = { "reduce", 1, 1, 1, reduce_elems, reduce_run, reduce_start, reduce_fill, reduce_check };
static const coll_desc_t d_allreduce = { "allreduce", 1, 0, 1, allreduce_elems, allreduce_run, allreduce_start,
                                         allreduce_fill, allreduce_check };
static const coll_desc_t d_allgather = { "allgather", 0, 0, 1, allgather_elems, allgather_run, allgather_start,
                                         fill_own_poison_blocks, check_gathered };
static const coll_desc_t d_gather = { "gather", 0, 1, 1, gather_elems, gather_run, gather_start, gather_fill, gather_check };
static const coll_desc_t d_scatter = { "scatter", 0, 1, 1, scatter_elems, scatter_run, scatter_start, scatter_fill,
                                       scatter_check };
static const coll_desc_t d_alltoall = { "alltoall", 0, 0, 1, alltoall_elems, alltoall_run, alltoall_start,
                                        alltoall_fill, alltoall_check };
static const coll_desc_t d_rsb = { "reduce_scatter_block", 1, 0, 1, rsb_elems, rsb_run, rsb_start, rsb_fill, rsb_check };
static const coll_desc_t d_barrier = { "barrier", 0, 0, 0, barrier_elems, barrier_run, barrier_start, barrier_fill,
                                       barrier_check };

const coll_desc_t *const coll_table[] = { &d_bcast, &d_reduce, &d_allreduce, &d_allgather, &d_gather,
                                          &d_scatter, &d_alltoall, &d_rsb, &d_barrier, NULL };

const coll_desc_t *coll_find(const char *name)
{
    for (int i = 0; coll_table[i]; i++)
        if (strcmp(coll_table[i]->name, name) == 0) return coll_table[i];
    return NULL;
}
