/* Shared-memory intra-node module (smod = SHM): one MPI_Win_allocate_shared
 * segment per node, synchronised by zero-byte messages (a simulated rank must
 * never spin on a flag: SMPI schedules ranks cooperatively). Under SMPI,
 * MPI_Win_shared_query(r) returns the segment start for every r (a 4-rank test),
 * so only node-local rank 0 allocates and everyone queries rank 0: correct on
 * SMPI and on real libraries alike. Copies and reductions are charged.
 *   sb: root copies the segment into the slot, notifies; each rank copies it
 *       out and acknowledges; after all acks the root releases everyone, so
 *       no rank starts the next op (perhaps as the next root, writing the
 *       slot) while another still reads it.
 *   sr: each rank copies its contribution into its own region, tells the
 *       root; on "go" rank k reduces slice k of every region into the root's
 *       region (the reduction work is spread over the node); on "done" from
 *       all, the root copies the result out and releases the regions. */
#include <stdint.h>
#include <stdlib.h>
#include "hier_internal.h"

enum { SHM_MIN_BYTES = 1 << 20 };

char *ct_hier_shm(ct_hier *h, MPI_Aint bytes)
{
    if (h->shm_bytes >= bytes) return h->shm;
    ct_setup_begin();
    if (h->win != MPI_WIN_NULL) MPI_Win_free(&h->win);
    if (bytes < SHM_MIN_BYTES) bytes = SHM_MIN_BYTES;   /* few reallocations */
    char *base;
    MPI_Aint got;
    int unit;
    MPI_Win_allocate_shared(h->lrank == 0 ? bytes : 0, 1, MPI_INFO_NULL, h->node, &base, &h->win);
#ifdef COLLTUNE_SMPI
    /* SMPI: the simulated ranks share one address space, and what
     * MPI_Win_shared_query(0) returns was not the same memory on every rank
     * once other windows had come and gone (a rank saw stale data): pass
     * local rank 0's base address itself. */
    (void)got; (void)unit;
    unsigned long long addr = (unsigned long long)(uintptr_t)base;
    PMPI_Bcast(&addr, 1, MPI_UNSIGNED_LONG_LONG, 0, h->node);
    h->shm = (char *)(uintptr_t)addr;
#else
    MPI_Win_shared_query(h->win, 0, &got, &unit, &h->shm);
#endif
    h->shm_bytes = bytes;
    ct_setup_end();
    return h->shm;
}

static void fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/* requests: up to 4 per peer; peers are every other node-local rank */
static int post_all(nb_op *o, int base, int send)
{
    int rc = MPI_SUCCESS, k = 0;
    for (int r = 0; r < o->size && rc == MPI_SUCCESS; r++) {
        if (r == o->rank) continue;
        MPI_Request *q = &o->req[base + k++];
        rc = send ? MPI_Isend(NULL, 0, MPI_BYTE, r, o->tag, o->comm, q)
                  : MPI_Irecv(NULL, 0, MPI_BYTE, r, o->tag, o->comm, q);
        o->pending++;
    }
    return rc;
}

static int post_one(nb_op *o, int idx, int send)
{
    o->pending++;
    return send ? MPI_Isend(NULL, 0, MPI_BYTE, o->root, o->tag, o->comm, &o->req[idx])
                : MPI_Irecv(NULL, 0, MPI_BYTE, o->root, o->tag, o->comm, &o->req[idx]);
}

static char *region(nb_op *o, int r) { return o->shm + (MPI_Aint)(r + 1) * o->slot; }

/* this rank's slice of every region, reduced into the root's region */
static int reduce_slice(nb_op *o)
{
    int lo = ct_block_start(o->count, o->size, o->rank);
    int n = ct_block_start(o->count, o->size, o->rank + 1) - lo, rc = MPI_SUCCESS;
    fence();
    for (int r = 0; r < o->size && rc == MPI_SUCCESS && !o->err; r++)
        if (r != o->root)
            rc = ct_reduce_local(ct_at(region(o, r), o->ext, lo), ct_at(region(o, o->root), o->ext, lo),
                                 n, o->dt, o->op);
    fence();
    if (rc != MPI_SUCCESS) o->err = rc;   /* a local error: the protocol goes on */
    return MPI_SUCCESS;
}

int nb_start_shm(nb_op *o)
{
    int m = o->size - 1, root = o->rank == o->root;
    MPI_Aint bytes = o->count * o->ext;
    o->nreq = 4 * m;
    o->req = malloc(sizeof(MPI_Request) * (size_t)o->nreq);
    for (int i = 0; i < o->nreq; i++) o->req[i] = MPI_REQUEST_NULL;
    o->phase = 1;
    if (o->kind == NB_SHM_BCAST) {
        if (!root) return post_one(o, 0, 0);                     /* wait for "filled" */
        ct_copy(o->shm, o->buf, bytes);
        fence();
        int rc = post_all(o, m, 0);                              /* acks */
        return rc == MPI_SUCCESS ? post_all(o, 0, 1) : rc;       /* "filled" */
    }
    ct_copy(region(o, o->rank), o->buf, bytes);
    fence();
    if (root) return post_all(o, 0, 0);                          /* arrivals */
    int rc = post_one(o, 0, 1);                                  /* arrived */
    return rc == MPI_SUCCESS ? post_one(o, 1, 0) : rc;           /* wait for "go" */
}

int nb_complete_shm(nb_op *o, int idx)
{
    int m = o->size - 1, rc = MPI_SUCCESS, root = o->rank == o->root;
    (void)idx;
    if (o->pending > 0 || o->phase < 0) return MPI_SUCCESS;      /* phase not over yet */
    if (o->kind == NB_SHM_BCAST && root) {                       /* all copied: release */
        o->phase = -1;
        return post_all(o, 2 * m, 1);
    }
    if (o->kind == NB_SHM_BCAST && o->phase == 1) {              /* slot filled: copy, ack */
        fence();
        ct_copy(o->buf, o->shm, o->count * o->ext);
        o->phase = 2;
        int rc = post_one(o, 1, 1);
        return rc == MPI_SUCCESS ? post_one(o, 2, 0) : rc;       /* wait for the release */
    }
    if (o->kind == NB_SHM_BCAST) {                               /* released */
        o->phase = -1;
        return MPI_SUCCESS;
    }
    if (root && o->phase == 1) {                                 /* all arrived: go */
        o->phase = 2;
        rc = post_all(o, 2 * m, 0);                              /* "done" receives */
        if (rc == MPI_SUCCESS) rc = post_all(o, m, 1);
        return rc == MPI_SUCCESS ? reduce_slice(o) : rc;
    }
    if (root) {                                                  /* all done: result, release */
        fence();
        ct_copy(o->buf, region(o, o->root), o->count * o->ext);
        o->phase = -1;
        return post_all(o, 3 * m, 1);
    }
    if (o->phase == 1) {                                         /* go: my slice, then done */
        o->phase = 2;
        rc = reduce_slice(o);
        if (rc == MPI_SUCCESS) rc = post_one(o, 2, 1);
        return rc == MPI_SUCCESS ? post_one(o, 3, 0) : rc;       /* wait for "free" */
    }
    o->phase = -1;                                               /* freed */
    return MPI_SUCCESS;
}
