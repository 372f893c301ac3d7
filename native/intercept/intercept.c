/* libcolltune: PMPI interposition of MPI_Bcast, MPI_Reduce, MPI_Allreduce and
 * MPI_Allgather (docs/interposer.md).
 *
 * At MPI_Init every rank reads COLLTUNE_RULES (a rules file, docs/rules.md)
 * and COLLTUNE_FORCE; the ranks then agree, with one reduction, on whether
 * each is usable (a rank-dependent failure or a file that differs between
 * ranks disables it everywhere, with one warning on rank 0), so every rank
 * always takes the same decision. A call then looks up (collective,
 * communicator size, nodes, ppn, bytes per rank) and runs the chosen algorithm
 * through ct_call, which itself falls back to the library when the algorithm
 * declines. Anything colltune cannot run identically on every rank (inter-
 * communicators, derived datatypes, nested calls) goes to the library.
 * A collective without any rule costs one load and one branch (three with
 * the hooks of profile.h, COLLTUNE_PROFILE, and times.h, COLLTUNE_TIMES). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "rules.h"
#include "colltune/hier.h"                 /* ct_hier_release at MPI_Finalize */

#ifdef COLLTUNE_SMPI
/* SMPI privatizes globals per simulated rank, but not thread-locals, and
 * its ranks share one OS thread: a plain global is per rank there. */
#define CT_TLS
#else
/* initial-exec: no __tls_get_addr call per access (fine for a preloaded library) */
#define CT_TLS _Thread_local __attribute__((tls_model("initial-exec")))
#include <pthread.h>
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
#define LOCK() pthread_mutex_lock(&log_lock)
#define UNLOCK() pthread_mutex_unlock(&log_lock)
#endif
#ifndef LOCK
#define LOCK() ((void)0)
#define UNLOCK() ((void)0)
#endif
#include "profile.h"                        /* COLLTUNE_PROFILE: traffic counting hooks */
#include "online.h"                         /* COLLTUNE_ONLINE: online tuning hooks */
#include "guard.h"                          /* COLLTUNE_GUARD: rules vs the library, measured */
#include "times.h"                          /* COLLTUNE_TIMES: time in the collectives */
#include "topo.h"                           /* every world rank's node, from MPI_Init */

enum { FROM_RULES, FROM_FORCE };
static ct_rules sources[2];                 /* rules file, COLLTUNE_FORCE */
static int active[CT_NCOLLS];               /* the only thing a pass-through call reads */
static int keyval = MPI_KEYVAL_INVALID;
static int world_rank, verbose;
static FILE *report;
static const char *rules_path;
static CT_TLS int inside;                   /* > 0 inside colltune's own MPI calls */

/* ---- per-communicator topology, cached as an attribute -------------------- */
typedef struct {
    int inter, size, nodes, ppn;
    /* last decision per collective (same bytes -> same rule): applications
     * repeat sizes; MPI forbids concurrent collectives on one communicator */
    long long memo_bytes[CT_NCOLLS];
    const ct_rule *memo_rule[CT_NCOLLS];
    int memo_from[CT_NCOLLS];
    void *online;                           /* online.c's per-communicator state */
    void *guard;                            /* guard.c's */
} comm_info;

/* One-entry caches in front of the attribute lookup and the datatype query
 * (each costs tens of ns in the libraries). The communicator cache is dropped
 * by the delete callback, so a freed handle reused by a new communicator never
 * hits; it is off under MPI_THREAD_MULTIPLE. Only predefined datatypes are
 * cached: they are never freed. */
static int cache_on;
static MPI_Comm last_comm;
static comm_info *last_info;
static MPI_Datatype last_type;
static int last_type_size, last_type_dense;

static int delete_info(MPI_Comm comm, int kv, void *value, void *extra)
{
    (void)comm, (void)kv, (void)extra;
    if (value == last_info) last_info = NULL;
    ct_guard_free(((comm_info *)value)->guard);
    free(value);
    return MPI_SUCCESS;
}

/* Out of memory in a decided call: this rank cannot follow its peers (whether they
 * run colltune's algorithm or the library was decided on agreed values, its memory
 * is not), and going its own way would leave them waiting: the job ends, as under
 * MPI_ERRORS_ARE_FATAL, with a word of why. */
static void no_memory(MPI_Comm comm)
{
    fprintf(stderr, "colltune: out of memory in a collective on rank %d; aborting (the other "
            "ranks cannot be told to take the library's path instead)\n", world_rank);
    PMPI_Abort(comm, MPI_ERR_NO_MEM);
}

/* Collective on comm the first time: every rank of comm reaches it in the same
 * call, because whether a call needs it depends only on agreed values. */
static comm_info *info_of(MPI_Comm comm)
{
    comm_info *ci;
    int flag = 0;
    if (cache_on && last_info && comm == last_comm) return last_info;
    if (PMPI_Comm_get_attr(comm, keyval, &ci, &flag) == MPI_SUCCESS && flag) {
        if (cache_on) last_comm = comm, last_info = ci;
        return ci;
    }
    /* no memory: abort, as a rank that went to the library alone would leave its
     * peers in the set-up's allreduce below, or in colltune's algorithm */
    if (!(ci = calloc(1, sizeof *ci))) no_memory(comm);
    for (int c = 0; c < CT_NCOLLS; c++) ci->memo_bytes[c] = -1;
    inside++;
    ct_own_begin();
    PMPI_Comm_test_inter(comm, &ci->inter);
    if (!ci->inter) {
        ct_topo t;
        PMPI_Comm_size(comm, &ci->size);
        ct_topo_of(comm, ci->size, &t);   /* from the node map, else collective (topo.c) */
        ci->nodes = t.nodes, ci->ppn = t.ppn;
        CT_ONLINE_COMM(comm, ci->online, t.lrank, t.leaders_before, ci);
    }
    inside--;
    ct_own_end();                         /* not the collective's traffic */
    if (PMPI_Comm_set_attr(comm, keyval, ci) == MPI_SUCCESS && cache_on)
        last_comm = comm, last_info = ci;
    return ci;
}

/* ---- what ran: COLLTUNE_VERBOSE / COLLTUNE_REPORT, once per distinct case --- */
#define MAX_SEEN 4096
typedef struct { int coll, size, rule, from; long long bytes; const char *ran; } seen_t;
static seen_t seen[MAX_SEEN];
static int nseen;

/* bytes < 0: the call went to the library before any lookup, for the reason
 * `why` (or an intercommunicator / derived datatype when why is NULL) */
static void note(ct_coll coll, const comm_info *ci, long long bytes, const ct_rule *r, int from,
                 const char *ran, const char *why, const char *declined)
{
    /* the guard's phase (CT_GUARD_*), also a field of the report */
    static const char *const guard_phase[] = {"trying", "kept", "library"};
    static const char *const guard_says[] = {"guard trying", "guard kept it", "guard: library faster"};
    seen_t s = {coll, ci ? ci->size : -1, r ? r->line : 0, from, bytes, why ? why : ran};
    char choice[256], origin[96], guard[32] = "", because[160] = "", field[176] = "";
    int g = from - CT_GUARD_TRY;
    LOCK();
    for (int i = 0; i < nseen; i++)
        if (!memcmp(&seen[i], &s, sizeof s)) { UNLOCK(); return; }
    if (nseen < MAX_SEEN) seen[nseen++] = s;
    UNLOCK();
    ct_rule_format(r, choice, sizeof choice);
    if (why) snprintf(origin, sizeof origin, "invalid arguments (%s)", why);
    else if (bytes < 0) snprintf(origin, sizeof origin, "intercommunicator or derived datatype");
    else if (!r) snprintf(origin, sizeof origin, "no rule");
    else if (from == FROM_FORCE) snprintf(origin, sizeof origin, "COLLTUNE_FORCE");
    else if (from == CT_ONLINE_FROM) snprintf(origin, sizeof origin, "online"), snprintf(choice, sizeof choice, "drawn");
    else if (g >= 0 && g <= CT_GUARD_LIB - CT_GUARD_TRY) {
        snprintf(origin, sizeof origin, "rules line %d, %s", r->line, guard_says[g]);
        snprintf(guard, sizeof guard, ",\"guard\":\"%s\"", guard_phase[g]);
    } else snprintf(origin, sizeof origin, "rules line %d", r->line);
    if (declined) {                       /* the requested algorithm's own reason */
        snprintf(because, sizeof because, ": %s declines: %s", r->alg->name, declined);
        snprintf(field, sizeof field, ",\"declined\":\"%s\"", declined);
    }
    if (verbose)
        fprintf(stderr, "colltune: %s size=%d nodes=%d ppn=%d bytes=%lld: %s -> %s (ran %s%s)\n",
                ct_coll_name(coll), s.size, ci ? ci->nodes : -1, ci ? ci->ppn : -1, bytes, origin,
                choice, ran, because);
    if (report) {
        fprintf(report, "{\"collective\":\"%s\",\"comm_size\":%d,\"nodes\":%d,\"ppn\":%d,"
                "\"bytes\":%lld,\"origin\":\"%s\",\"requested\":\"%s\",\"ran\":\"%s\"%s%s}\n",
                ct_coll_name(coll), s.size, ci ? ci->nodes : -1, ci ? ci->ppn : -1, bytes,
                origin, choice, ran, guard, field);
        fflush(report);
    }
}
#define LOGGING (verbose || report)

/* ---- the decision ---------------------------------------------------------- */
/* The rule for this call, or NULL for the library. Depends only on values all
 * ranks agree on; derived datatypes go to the library because ranks may use
 * different ones with the same type signature, which colltune's element-wise
 * segmentation would not match. */
/* Size of a predefined datatype and whether it is dense; 0 for a derived one.
 * Predefined types are cached: they are never freed. */
static int named_type(MPI_Datatype dt, int *tsize, int *dense)
{
    int ni, na, nd, comb;
    if (cache_on && dt == last_type && last_type != MPI_DATATYPE_NULL) {
        *tsize = last_type_size, *dense = last_type_dense;
        return 1;
    }
    if (PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) != MPI_SUCCESS ||
        comb != MPI_COMBINER_NAMED || PMPI_Type_size(dt, tsize) != MPI_SUCCESS)
        return 0;
    *dense = ct_type_dense(dt);
    if (cache_on) last_type = dt, last_type_size = *tsize, last_type_dense = *dense;
    return 1;
}

/* The rule for `bytes` per rank of coll on comm (see choose), before the guard. */
static const ct_rule *rule_for(ct_coll coll, MPI_Comm comm, long long nbytes, comm_info **cip,
                               long long *bytes, int *from)
{
    comm_info *ci = info_of(comm);
    *cip = ci;
    *bytes = -1;
    if (!ci || ci->inter) return NULL;
    *bytes = nbytes;
    CT_ONLINE_CHOOSE(coll, ci->online, *bytes, from);
    if (ci->memo_bytes[coll] == *bytes) {
        *from = ci->memo_from[coll];
        return ci->memo_rule[coll];
    }
    const ct_rule *r;
    if (sources[FROM_FORCE].count[coll]) {
        *from = FROM_FORCE;
        r = &sources[FROM_FORCE].rules[sources[FROM_FORCE].first[coll]];
    } else {
        ct_point p = {{(uint64_t)ci->size, (uint64_t)ci->nodes, (uint64_t)ci->ppn,
                       (uint64_t)(*bytes < 0 ? 0 : *bytes)}};
        *from = FROM_RULES;
        r = ct_rules_match(&sources[FROM_RULES], coll, &p);
    }
    if (*bytes >= 0) {
        ci->memo_bytes[coll] = *bytes, ci->memo_rule[coll] = r, ci->memo_from[coll] = *from;
    }
    return r;
}

static const ct_rule *choose_bytes(ct_coll coll, MPI_Comm comm, long long nbytes,
                                   const comm_info **cip, long long *bytes, int *from)
{
    comm_info *ci = NULL;
    const ct_rule *r = rule_for(coll, comm, nbytes, &ci, bytes, from);
    *cip = ci;
    if (__builtin_expect(ct_guard_calls > 0, 0)) {
        ct_guard_timing = NULL;             /* a call that returned early left it set */
        if (*from == FROM_RULES && r && r->alg) {
            inside++;
            ct_own_begin();                 /* the deciding allreduce is not the call's */
            r = ct_guard_pick(&ci->guard, comm, coll, *bytes, r, from);
            ct_own_end();
            inside--;
        }
    }
    return r;
}

static const ct_rule *choose(ct_coll coll, MPI_Comm comm, int count, MPI_Datatype dt,
                             const comm_info **cip, long long *bytes, int *from)
{
    int tsize, dense;
    if (!named_type(dt, &tsize, &dense)) {
        *cip = NULL, *bytes = -1;
        return NULL;
    }
    return choose_bytes(coll, comm, (long long)count * tsize, cip, bytes, from);
}

static int run(ct_coll coll, const ct_rule *r, const ct_args *a, const comm_info *ci,
               long long bytes, int from)
{
    const char *ran = NULL;
    int rc;
    inside++;
    CT_PROF_ALG_ENTER(coll);
    CT_GUARD_TIMED(CT_ONLINE_CALL(coll, r, a, ci->online, bytes, from, &ran), rc);
    CT_PROF_ALG_LEAVE(ran);
    inside--;
    if (LOGGING) {
        /* the requested algorithm handed the call on: say why (a user's review: a
         * forced ring "ran library" for MPI_DOUBLE_INT, with no word of the reason) */
        const char *declined = r && r->alg && r->alg->supports && ran && strcmp(ran, r->alg->name)
                                   ? r->alg->supports(a) : NULL;
        note(coll, ci, bytes, r, from, ran ? ran : "error", NULL, declined);
    }
    return rc;
}

#define LIBRARY(coll, call)                                                   \
    do {                                                                      \
        int rc_;                                                              \
        if (LOGGING) note(coll, ci, bytes, r, from, "library", NULL, NULL);   \
        CT_GUARD_TIMED(call, rc_);                                            \
        return rc_;                                                           \
    } while (0)

/* Arguments the library must see (ct_check_args: it reports them as errors
 * before communicating, colltune's algorithms would fail half-way): checked
 * before anything collective such as the first call's topology query, since
 * an erroneous call may be made by some ranks only. */
static int to_library(ct_coll coll, const char *why)
{
    if (why && LOGGING) note(coll, NULL, -1, NULL, FROM_RULES, "library", why, NULL);
    return why != NULL;
}

/* Bcast and allgather move bytes, and MPI lets ranks describe the same bytes
 * with different types (MPI_INT x 4 on one rank, contiguous(4, MPI_INT) x 1 or
 * a vector with holes on another): a decision by datatype would split the
 * ranks between two collectives that never match. So every rank decides on,
 * and colltune moves, count x size bytes as MPI_BYTE: in place when this
 * rank's type is dense, else through a packed copy. *nbytes < 0: too many
 * bytes for an int count (agreed on all ranks: the library runs). */
typedef struct { char *buf, *tmp; int n; } byte_view;

/* PMPI_Pack / PMPI_Unpack, also from/to MPI_BOTTOM: MPICH refuses a null inbuf or
 * outbuf ("Null pointer in parameter inbuf"), and MPI_BOTTOM is a null pointer there,
 * which a type of absolute addresses legally goes with. Such data is packed from
 * address 1 through the same elements shifted by -1 byte (one hindexed element). */
static int pack_io(int unpack, void *buf, int count, MPI_Datatype dt, void *packed, int size,
                   int *pos, MPI_Comm comm)
{
    MPI_Datatype shifted = MPI_DATATYPE_NULL;
    if (buf == NULL && count > 0) {
        MPI_Aint disp = -1;
        if (PMPI_Type_create_hindexed(1, &count, &disp, dt, &shifted) != MPI_SUCCESS ||
            PMPI_Type_commit(&shifted) != MPI_SUCCESS)
            return MPI_ERR_TYPE;
        buf = (char *)1, count = 1, dt = shifted;
    }
    int rc = unpack ? PMPI_Unpack(packed, size, pos, buf, count, dt, comm)
                    : PMPI_Pack(buf, count, dt, packed, size, pos, comm);
    if (shifted != MPI_DATATYPE_NULL) PMPI_Type_free(&shifted);
    return rc;
}

/* A view of `count` elements of dt at buf (times `blocks` for allgather) as
 * bytes: the buffer itself for a dense predefined type, else a packed copy.
 * Every rank with a derived type packs (whatever its role), so a type the
 * library would refuse (not committed) fails here, before any communication,
 * on every rank that passes it; the call then goes to the library. */
static int view_bytes(void *buf, int count, MPI_Datatype dt, int blocks, MPI_Comm comm, byte_view *v)
{
    int tsize = 0, pos = 0, dense = 0, named = named_type(dt, &tsize, &dense);
    if (!named) PMPI_Type_size(dt, &tsize);
    long long n = (long long)count * tsize;
    *v = (byte_view){buf, NULL, n * blocks > 0x7fffffff ? -1 : (int)n};
    if (v->n <= 0 || (named && dense)) return MPI_SUCCESS;
    if (!(v->tmp = malloc((size_t)n * (size_t)blocks))) no_memory(comm);   /* not a per-rank fallback */
    v->buf = v->tmp;
    int rc = pack_io(0, buf, count * blocks, dt, v->tmp, (int)(n * blocks), &pos, comm);
    if (rc != MPI_SUCCESS) free(v->tmp);
    return rc;
}

/* Writes a packed copy back to the caller's buffer and frees it. */
static int unview_bytes(byte_view *v, void *buf, int count, MPI_Datatype dt, int blocks, int rc,
                        MPI_Comm comm)
{
    int pos = 0;
    if (v->tmp && rc == MPI_SUCCESS)
        rc = pack_io(1, buf, count * blocks, dt, v->tmp, v->n * blocks, &pos, comm);
    free(v->tmp);
    return rc;
}

int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
    const comm_info *ci;
    long long bytes;
    int from = FROM_RULES, rank, rc;
    byte_view v;
    CT_TIMES_COLL(CT_BCAST, inside, MPI_Bcast(buf, count, dt, root, comm));
    CT_PROF_COLL(ct_prof_bcast(buf, count, dt, root, comm));
    if (!active[CT_BCAST] || inside) return PMPI_Bcast(buf, count, dt, root, comm);
    ct_args a = {NULL, buf, count, dt, MPI_OP_NULL, root, comm};
    if (to_library(CT_BCAST, ct_check_args(CT_BCAST, &a))) return PMPI_Bcast(buf, count, dt, root, comm);
    PMPI_Comm_rank(comm, &rank);
    if (view_bytes(buf, count, dt, 1, comm, &v) != MPI_SUCCESS && to_library(CT_BCAST, "datatype not usable"))
        return PMPI_Bcast(buf, count, dt, root, comm);
    const ct_rule *r = NULL;
    ci = NULL, bytes = -1;
    if (v.n >= 0) r = choose_bytes(CT_BCAST, comm, v.n, &ci, &bytes, &from);
    if (!r || !r->alg) {
        free(v.tmp);
        LIBRARY(CT_BCAST, PMPI_Bcast(buf, count, dt, root, comm));
    }
    a.recvbuf = v.buf, a.count = v.n, a.dtype = MPI_BYTE;
    rc = run(CT_BCAST, r, &a, ci, bytes, from);
    if (rank == root) {                       /* nothing to write back */
        free(v.tmp);
        return rc;
    }
    return unview_bytes(&v, buf, count, dt, 1, rc, comm);
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
               MPI_Comm comm)
{
    const comm_info *ci;
    long long bytes;
    int from = FROM_RULES;
    CT_TIMES_COLL(CT_REDUCE, inside, MPI_Reduce(sbuf, rbuf, count, dt, op, root, comm));
    CT_PROF_COLL(ct_prof_reduce(sbuf, rbuf, count, dt, op, root, comm));
    if (!active[CT_REDUCE] || inside) return PMPI_Reduce(sbuf, rbuf, count, dt, op, root, comm);
    ct_args a = {sbuf, rbuf, count, dt, op, root, comm};
    if (to_library(CT_REDUCE, ct_check_args(CT_REDUCE, &a))) return PMPI_Reduce(sbuf, rbuf, count, dt, op, root, comm);
    const ct_rule *r = choose(CT_REDUCE, comm, count, dt, &ci, &bytes, &from);
    if (!r || !r->alg) LIBRARY(CT_REDUCE, PMPI_Reduce(sbuf, rbuf, count, dt, op, root, comm));
    return run(CT_REDUCE, r, &a, ci, bytes, from);
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                  MPI_Comm comm)
{
    const comm_info *ci;
    long long bytes;
    int from = FROM_RULES;
    CT_TIMES_COLL(CT_ALLREDUCE, inside, MPI_Allreduce(sbuf, rbuf, count, dt, op, comm));
    CT_PROF_COLL(ct_prof_allreduce(sbuf, rbuf, count, dt, op, comm));
    if (!active[CT_ALLREDUCE] || inside) return PMPI_Allreduce(sbuf, rbuf, count, dt, op, comm);
    ct_args a = {sbuf, rbuf, count, dt, op, 0, comm};
    if (to_library(CT_ALLREDUCE, ct_check_args(CT_ALLREDUCE, &a))) return PMPI_Allreduce(sbuf, rbuf, count, dt, op, comm);
    const ct_rule *r = choose(CT_ALLREDUCE, comm, count, dt, &ci, &bytes, &from);
    if (!r || !r->alg) LIBRARY(CT_ALLREDUCE, PMPI_Allreduce(sbuf, rbuf, count, dt, op, comm));
    return run(CT_ALLREDUCE, r, &a, ci, bytes, from);
}

/* colltune's allgather takes one count and type for both sides: the decision
 * uses the receive side (agreed on all ranks); a send side that differs is
 * first copied into this rank's own block, then the call runs in place. */
int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm)
{
    const comm_info *ci;
    long long bytes;
    int from = FROM_RULES;
    CT_TIMES_COLL(CT_ALLGATHER, inside, MPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
    CT_PROF_COLL(ct_prof_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
    if (!active[CT_ALLGATHER] || inside)
        return PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
    /* the receive side's checks (ct_check_args); the send side has a type of its
     * own: it must carry what the receive side expects (else the library reports
     * it), and its overlap with the receive buffer is measured with its own type
     * (with the receive type's extent, a send buffer just before a receive buffer
     * whose type has gaps was "overlapping" on that rank alone: it called the
     * library while the others ran colltune's algorithm, and the job hung) */
    ct_args chk = {MPI_IN_PLACE, rbuf, rcount, rtype, MPI_OP_NULL, 0, comm};
    int ssize = 0, rsize = 0, nranks = 0;
    const char *why = ct_check_args(CT_ALLGATHER, &chk);
    if (!why && sbuf != MPI_IN_PLACE
        && (scount < 0 || stype == MPI_DATATYPE_NULL || PMPI_Type_size(stype, &ssize) != MPI_SUCCESS
            || PMPI_Type_size(rtype, &rsize) != MPI_SUCCESS
            || (long long)scount * ssize != (long long)rcount * rsize))
        why = "send side differs from the receive side";
    if (!why && sbuf != MPI_IN_PLACE && rcount > 0) {
        PMPI_Comm_size(comm, &nranks);
        if (ct_null_data(sbuf, scount, stype)) why = "null buffer";   /* MPI_BOTTOM: legal */
        else if (ct_spans_overlap(sbuf, scount, stype, rbuf, (long long)rcount * nranks, rtype))
            why = "send and receive buffers overlap";
    }
    if (to_library(CT_ALLGATHER, why))
        return PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
    /* the decision on bytes per rank (see view_bytes); this rank's own block
     * goes into its place first, so the call runs in place */
    int size, rank, rc;
    MPI_Aint lb, ext;
    byte_view v;
    PMPI_Comm_size(comm, &size);
    PMPI_Comm_rank(comm, &rank);
    PMPI_Type_get_extent(rtype, &lb, &ext);
    char *own = (char *)rbuf + (MPI_Aint)rank * rcount * ext;
    if (view_bytes(rbuf, rcount, rtype, size, comm, &v) != MPI_SUCCESS &&
        to_library(CT_ALLGATHER, "datatype not usable"))
        return PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
    const ct_rule *r = NULL;
    ci = NULL, bytes = -1;
    if (v.n >= 0) r = choose_bytes(CT_ALLGATHER, comm, v.n, &ci, &bytes, &from);
    if (!r || !r->alg) {
        free(v.tmp);
        LIBRARY(CT_ALLGATHER, PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
    }
    rc = MPI_SUCCESS;
    if (v.tmp && sbuf != MPI_IN_PLACE) {      /* this rank's block into the packed copy */
        int pos = 0;
        rc = pack_io(0, (void *)sbuf, scount, stype, v.tmp + (MPI_Aint)rank * v.n, v.n, &pos, comm);
    } else if (sbuf != MPI_IN_PLACE) {
        rc = PMPI_Sendrecv(sbuf, scount, stype, 0, 0, own, rcount, rtype, 0, 0, MPI_COMM_SELF,
                           MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS) {
        free(v.tmp);
        return rc;
    }
    ct_args a = {MPI_IN_PLACE, v.buf, v.n, MPI_BYTE, MPI_OP_NULL, 0, comm};
    rc = run(CT_ALLGATHER, r, &a, ci, bytes, from);
    return unview_bytes(&v, rbuf, rcount, rtype, size, rc, comm);
}

/* ---- set-up at MPI_Init ------------------------------------------------------ */
static unsigned hash_text(const char *s)
{
    unsigned h = 2166136261u;           /* FNV-1a */
    for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h & 0x7fffffff;
}

/* A rules file is small text: anything else (a FIFO, a device, a huge file) is refused
 * before it can block MPI_Init or exhaust the rank's memory. */
enum { RULES_MAX_BYTES = 16 << 20 };

static char *slurp(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    char *buf = NULL;
    size_t n = 0;
    if (fd < 0) {
        snprintf(err, errlen, "%s:0: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s:0: not a regular file (a text file is expected)", path);
        close(fd);
        return NULL;
    }
    if (st.st_size == 0) {                /* empty, or a special file that says no size */
        char c;
        ssize_t got = read(fd, &c, 1);
        if (got < 0)
            snprintf(err, errlen, "%s:0: cannot read: %s", path, strerror(errno));
        else if (got > 0)
            snprintf(err, errlen, "%s:0: a special file that reports no size (/proc?), not a "
                     "rules file", path);
        if (got != 0) {
            close(fd);
            return NULL;
        }
    }
    if (st.st_size > RULES_MAX_BYTES) {
        snprintf(err, errlen, "%s:0: %lld bytes, more than a rules file's %d MiB", path,
                 (long long)st.st_size, RULES_MAX_BYTES >> 20);
        close(fd);
        return NULL;
    }
    if (!(buf = malloc((size_t)st.st_size + 1))) {
        snprintf(err, errlen, "%s:0: cannot read it (out of memory)", path);
        close(fd);
        return NULL;
    }
    for (ssize_t got; n < (size_t)st.st_size; n += (size_t)got) {
        got = read(fd, buf + n, (size_t)st.st_size - n);
        if (got < 0 && errno == EINTR) { got = 0; continue; }
        if (got <= 0) break;                 /* shrank while read: what was there */
    }
    close(fd);
    buf[n] = '\0';
    if (strlen(buf) != n) {
        int line = 1;
        for (char *q = buf; *q; q++) line += *q == '\n';
        snprintf(err, errlen, "%s:%d: not a text line (byte 0x00)", path, line);
        free(buf);
        return NULL;
    }
    return buf;
}

/* Load one source on every rank, then agree: usable only if it loaded on every
 * rank and is the same text everywhere; otherwise one warning from rank 0,
 * naming the first rank that failed and its FILE:LINE: problem. */
static void load_agreed(int which, const char *var, const char *value)
{
    char err[1024] = "";
    int nranks, ok = 0, in[3], out[3];
    ct_rules *r = &sources[which];
    PMPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (value && *value) {
        if (which == FROM_FORCE) {
            ok = ct_force_parse(value, r, err, sizeof err) == 0;
        } else {
            char *text = slurp(value, err, sizeof err);
            ok = text && ct_rules_parse(text, value, r, err, sizeof err) == 0;
            in[1] = (int)hash_text(text);
            free(text);
        }
    } else {
        ok = 1;                                       /* unset here: nothing to load */
    }
    if (which == FROM_FORCE || !(value && *value)) in[1] = (int)hash_text(value);
    in[0] = ok ? nranks : world_rank;                 /* lowest failing rank */
    in[2] = -in[1];
    PMPI_Allreduce(in, out, 3, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (out[0] == nranks && out[1] == -out[2]) return; /* usable everywhere */
    ct_rules_free(r);
    if (out[0] < nranks) {
        PMPI_Bcast(err, (int)sizeof err, MPI_CHAR, out[0], MPI_COMM_WORLD);
        err[sizeof err - 1] = '\0';
        if (world_rank == 0) {
            char where[48] = "";
            if (out[0]) snprintf(where, sizeof where, " (on rank %d)", out[0]);
            fprintf(stderr, "colltune: warning: %s%s: %s; %s ignored, collectives go to the MPI "
                    "library\n", var, where, err, var);
        }
    } else if (world_rank == 0) {
        fprintf(stderr, "colltune: warning: %s=%s differs between ranks; %s ignored, those "
                "collectives go to the MPI library\n", var, value ? value : "", var);
    }
}

/* colltune's algorithms share per-process state (the schedule engine's request lists,
 * the hierarchy caches): two threads in collectives at once crashed or hung them (a
 * user's review: two threads, each on its own communicator). Under MPI_THREAD_MULTIPLE
 * they are off, every collective goes to the library, unless the job says its
 * collectives never overlap (COLLTUNE_SERIAL_COLLECTIVES=1, on every rank: one
 * allreduce makes the choice the same everywhere, as a rank deciding alone would
 * run another algorithm than its peers). */
static int threads_off(void)
{
    const char *serial = getenv("COLLTUNE_SERIAL_COLLECTIVES");
    int flags[2] = {!cache_on && (sources[FROM_RULES].n + sources[FROM_FORCE].n > 0),
                    !(serial && !strcmp(serial, "1"))};
    PMPI_Allreduce(MPI_IN_PLACE, flags, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!flags[0] || !flags[1]) return 0;
    if (world_rank == 0)
        fprintf(stderr, "colltune: warning: MPI_THREAD_MULTIPLE: colltune's algorithms are not "
                "thread-safe, so every collective goes to the MPI library (COLLTUNE_RULES and "
                "COLLTUNE_FORCE ignored); if this job never runs two collectives at once, "
                "COLLTUNE_SERIAL_COLLECTIVES=1 keeps them (docs/interposer.md)\n");
    return 1;
}

static void setup(void)
{
    const char *rules = getenv("COLLTUNE_RULES"), *force = getenv("COLLTUNE_FORCE");
    const char *rep = getenv("COLLTUNE_REPORT"), *verb = getenv("COLLTUNE_VERBOSE");
    const char *expect = getenv("COLLTUNE_WORLD");
    int level = MPI_THREAD_SINGLE, world_size = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (expect && *expect && atoi(expect) != world_size) {
        /* the launcher started N processes that did not find each other (srun with a
         * --mpi plugin that does not bootstrap this library: N singletons); the job
         * would run N times over, each alone, and end "successfully" */
        fprintf(stderr, "colltune: the job was started as %s ranks, but MPI_COMM_WORLD has "
                "%d: the launcher did not bootstrap the MPI library (under srun: its --mpi "
                "plugin, setting slurm_mpi)\n", expect, world_size);
        PMPI_Abort(MPI_COMM_WORLD, 70);
    }
    PMPI_Query_thread(&level);
    cache_on = level != MPI_THREAD_MULTIPLE;
    last_comm = MPI_COMM_NULL, last_type = MPI_DATATYPE_NULL;
    inside++;
    load_agreed(FROM_RULES, "COLLTUNE_RULES", rules);
    load_agreed(FROM_FORCE, "COLLTUNE_FORCE", force);
    ct_times_init(world_rank);                      /* collective: before any early return */
    int no_threads = threads_off();                 /* collective too */
    inside--;
    rules_path = rules;
    verbose = world_rank == 0 && verb && *verb && strcmp(verb, "0") != 0;
    if (world_rank == 0 && rep && *rep && !(report = fopen(rep, "a")))
        fprintf(stderr, "colltune: warning: COLLTUNE_REPORT=%s: cannot write: %s\n", rep,
                strerror(errno));
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_info, &keyval, NULL) != MPI_SUCCESS)
        return;                                     /* stays inactive: pure pass-through */
    for (int c = 0; c < CT_NCOLLS; c++)
        active[c] = sources[FROM_RULES].count[c] > 0 || sources[FROM_FORCE].count[c] > 0;
    if (no_threads) memset(active, 0, sizeof active);
    int online = ct_online_init(world_rank, !cache_on, sources[FROM_RULES].n + sources[FROM_FORCE].n);
    if (online)
        for (int c = 0; c < CT_NCOLLS; c++) active[c] = 1;    /* online mode decides them all */
    ct_guard_init(world_rank, !cache_on, online);
    int any = 0;                                    /* agreed: rules, force, online */
    for (int c = 0; c < CT_NCOLLS; c++) any |= active[c];
    if (any) {
        inside++;
        ct_topo_init(world_rank, world_size);       /* collective */
        inside--;
    }
    ct_validity_init();                             /* before any thread can call */
    if (verbose && !no_threads)           /* else the warning said they are ignored */
        fprintf(stderr, "colltune: interposer active: rules %s (%d rules), COLLTUNE_FORCE %s, "
                "communicators' nodes %s\n", rules_path ? rules_path : "none", sources[FROM_RULES].n,
                sources[FROM_FORCE].n ? force : "none",
                ct_topo_mapped() ? "from the node map" : "asked of their members");
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) setup(), ct_prof_init(argc, argv);
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) setup(), ct_prof_init(argc, argv);
    return rc;
}

#ifdef COLLTUNE_SMPI
/* smpirun exits 0 when a rank calls MPI_Abort; colltune run (COLLTUNE_ABORT_STATUS)
 * takes the error code from this file and exits with it, as mpirun does. */
int MPI_Abort(MPI_Comm comm, int errorcode)
{
    const char *path = getenv("COLLTUNE_ABORT_STATUS");
    FILE *f = path && *path ? fopen(path, "w") : NULL;
    if (f) fprintf(f, "%d\n", errorcode), fclose(f);
    return PMPI_Abort(comm, errorcode);
}
#endif

/* Online mode: a tracked communicator's samples are reduced while its members are
 * all here (MPI_Comm_free is collective), then its slot is reused (ct_online_comm_retire) */
int MPI_Comm_free(MPI_Comm *comm)
{
    comm_info *ci;
    int flag = 0;
    if (ct_online_on && !inside && comm && *comm != MPI_COMM_NULL &&
        PMPI_Comm_get_attr(*comm, keyval, &ci, &flag) == MPI_SUCCESS && flag && ci->online) {
        inside++;
        ct_own_begin();                   /* colltune's traffic, not the application's */
        ct_online_comm_retire(ci->online, *comm);
        ci->online = NULL;
        ct_own_end();
        inside--;
    }
    return PMPI_Comm_free(comm);
}

int MPI_Finalize(void)
{
    /* the profile's run ends here, before colltune's own collectives of MPI_Finalize */
    ct_prof_finalize();                             /* writes COLLTUNE_PROFILE's files */
    ct_times_finalize();                            /* COLLTUNE_TIMES: rank 0 writes it */
    ct_online_finalize();                           /* COLLTUNE_ONLINE: samples and state */
    inside++;                                       /* the frees' collectives: the library's */
    ct_hier_release(MPI_COMM_WORLD);                /* HAN's node comms and window, on every rank */
    inside--;
    for (int c = 0; c < CT_NCOLLS; c++) active[c] = 0;
    cache_on = 0;
    if (report) fclose(report), report = NULL;
    ct_rules_free(&sources[FROM_RULES]);
    ct_rules_free(&sources[FROM_FORCE]);
    ct_topo_free();
    return PMPI_Finalize();
}
