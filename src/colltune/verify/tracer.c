/* colltune verify tracer, LD_PRELOADed into the ranks. Between
 * colltune_trace_point(i, rank) and colltune_trace_point(-1, rank) it records
 *  - calls of the library's own collective algorithm functions (Open MPI exports
 *    ompi_coll_base_<coll>_intra_*; the wrappers are generated into
 *    tracer_wrappers.h from libmpi's dynamic symbols), and
 *  - messages handed to UCX (ucp_*_send_nbx: every message of MPICH's UCX netmod,
 *    collective-internal ones included),
 * and writes them at exit to $COLLTUNE_TRACE_DIR/trace.<pid>:
 *   C <rank> <point> <function> <a6> <a7> <a8> <a9>
 *   M <rank> <point> <endpoint> <bytes>
 * a6..a9: the call's arguments 6 to 9 as 32-bit integers, where Open MPI's algorithm
 * functions take their segment size and fan-out (probe.py TUNING_ARGS says which). 
 * The wrappers forward sixteen integer/pointer arguments unchanged: the algorithm
 * functions take only integers and pointers (at most 11 in 5.0: reduce chain's
 * max_outstanding_reqs is the 11th; forwarding ten passed stack garbage there and
 * made MPI_Reduce fail at random under verify), and extra arguments are ignored by
 * the callee (x86-64 / aarch64 calling conventions). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define MAXEV (1 << 16)
static struct { int point, rank, fn; const void *ep; size_t bytes; int arg[4]; } ev[MAXEV];
static int nev, cur_point = -1, cur_rank = -1;

void colltune_trace_point(int point, int rank) { cur_point = point; cur_rank = rank; }

static void note(int fn, const void *ep, size_t bytes, const long *args) {
    if (cur_point < 0 || nev >= MAXEV) return;
    ev[nev].point = cur_point; ev[nev].rank = cur_rank; ev[nev].fn = fn;
    ev[nev].ep = ep; ev[nev].bytes = bytes;
    for (int i = 0; i < 4; i++) ev[nev].arg[i] = args ? (int)args[i] : 0;
    nev++;
}

typedef long (*fwd_t)(long, long, long, long, long, long, long, long, long, long, long, long,
                      long, long, long, long);
#define WRAP(idx, fname)                                                                   \
    long fname(long a0, long a1, long a2, long a3, long a4, long a5, long a6, long a7,     \
               long a8, long a9, long a10, long a11, long a12, long a13, long a14,         \
               long a15) {                                                                 \
        static fwd_t real;                                                                 \
        if (!real) real = (fwd_t)dlsym(RTLD_NEXT, #fname);                                 \
        const long tail[4] = {a6, a7, a8, a9};                                             \
        note(idx, NULL, 0, tail);                                                          \
        return real(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15);  \
    }
#include "tracer_wrappers.h"   /* static const char *fn_names[]; WRAP(i, name) lines */

typedef void *(*tag_send_t)(void *, const void *, size_t, uint64_t, const void *);
typedef void *(*am_send_t)(void *, unsigned, const void *, size_t, const void *, size_t,
                           const void *);
void *ucp_tag_send_nbx(void *ep, const void *buf, size_t count, uint64_t tag, const void *p) {
    static tag_send_t real;
    if (!real) real = (tag_send_t)dlsym(RTLD_NEXT, "ucp_tag_send_nbx");
    note(-1, ep, count, NULL);
    return real(ep, buf, count, tag, p);
}
void *ucp_tag_send_sync_nbx(void *ep, const void *buf, size_t count, uint64_t tag,
                            const void *p) {
    static tag_send_t real;
    if (!real) real = (tag_send_t)dlsym(RTLD_NEXT, "ucp_tag_send_sync_nbx");
    note(-1, ep, count, NULL);
    return real(ep, buf, count, tag, p);
}
void *ucp_am_send_nbx(void *ep, unsigned id, const void *hdr, size_t hlen, const void *buf,
                      size_t count, const void *p) {
    static am_send_t real;
    if (!real) real = (am_send_t)dlsym(RTLD_NEXT, "ucp_am_send_nbx");
    note(-1, ep, count, NULL);
    return real(ep, id, hdr, hlen, buf, count, p);
}

__attribute__((destructor)) static void flush(void) {
    const char *dir = getenv("COLLTUNE_TRACE_DIR");
    char path[4096];
    if (!dir || !nev) return;
    snprintf(path, sizeof path, "%s/trace.%d", dir, (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f) return;
    for (int i = 0; i < nev; i++) {
        if (ev[i].fn >= 0)
            fprintf(f, "C %d %d %s %d %d %d %d\n", ev[i].rank, ev[i].point, fn_names[ev[i].fn],
                    ev[i].arg[0], ev[i].arg[1], ev[i].arg[2], ev[i].arg[3]);
        else
            fprintf(f, "M %d %d %p %zu\n", ev[i].rank, ev[i].point, ev[i].ep, ev[i].bytes);
    }
    fclose(f);
}
