/* Online mode at MPI_Finalize: the timings go to world rank 0 in one gather
 * (a communicator's sampler 0 sends the reduced times of a block whose budget
 * was spent; for the others every timed rank sends its own); rank 0 turns
 * them into per-call costs (latest end - latest start over a call's ranks),
 * writes samples/<run id>.json atomically and merges the run into state.txt with the
 * update rule, both under flock(<dir>/.lock) (`colltune online update` takes it too). */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE                 /* syscall, gmtime_r, flock */
#endif
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "online.h"

typedef struct {
    uint64_t key;
    int32_t coll, cls, nodes, ppn, size, arm;
    int32_t reduced;                  /* t0, t1: the max over the communicator's timed ranks */
    int64_t idx;                      /* sampled call number; -1: the block's summary */
    int64_t bytes;                    /* summary: calls */
    double t0, t1;                    /* summary: t0 = sampled calls */
} rec_t;

static int by_call(const void *pa, const void *pb)
{
    const rec_t *a = pa, *b = pb;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    if (a->coll != b->coll) return a->coll - b->coll;
    if (a->cls != b->cls) return a->cls - b->cls;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

/* this rank's records: samples if it timed (reduced ones: sampler 0 only),
 * summaries if it is a communicator's sampler 0 */
static rec_t *collect(int *n)
{
    size_t cap = 0, k = 0;
    rec_t *out = NULL;
    for (int i = 0; i < ct_online_ncomms(); i++) {
        ct_online_comm *c = ct_online_get_comm(i);
        for (int coll = 0; coll < CT_NCOLLS; coll++)
            for (int cls = 0; cls < CT_ONLINE_NCLASS; cls++) {
                ct_online_cell *x = c->cell[coll][cls];
                if (!x || !ct_online_cell_gathered(c, x)) continue;
                ct_online_seconds(x);
                int send = x->t != NULL;          /* else sampler 0's summary alone */
                size_t need = k + 1 + (send ? x->sampled : 0);
                if (need > cap) {
                    rec_t *p = realloc(out, (cap = 2 * need) * sizeof *p);
                    if (!p) { *n = (int)k; return out; }
                    out = p;
                }
                rec_t base = {c->key, coll, cls, c->nodes, c->ppn, c->size, 0, x->reduced, -1, 0, 0, 0};
                if (c->sampler == 0) {
                    out[k] = base, out[k].bytes = x->calls, out[k].t0 = x->sampled;
                    k++;
                }
                for (uint32_t s = 0; send && s < x->sampled; s++) {
                    out[k] = base;
                    out[k].idx = s, out[k].arm = x->arm_of[s], out[k].bytes = x->bytes ? x->bytes[s] : 0;
                    out[k].t0 = x->t[2 * s], out[k].t1 = x->t[2 * s + 1];
                    k++;
                }
            }
    }
    *n = (int)k;
    return out;
}

/* ---- rank 0: per (block, arm) statistics of this run ---------------------------- */
typedef struct {
    ct_online_block b;
    long long sampled;               /* b.setups, b.setup_s: this run's */
    double prior[CT_ONLINE_MAX_ARMS];              /* the state's mean (0: none) */
    double clean_sum[CT_ONLINE_MAX_ARMS], clean_n[CT_ONLINE_MAX_ARMS];   /* calls without setup */
    long long outliers[CT_ONLINE_MAX_ARMS];
    double outlier_s;                /* what the block's outliers cost */
} agg_t;

/* Outliers: a call 5x its arm's median in this run (an OS hiccup, a page fault storm,
 * a rank descheduled mid-call) would move the arm's mean by 5/n of the median and
 * more; the state's choice follows the mean. A clean call (no setup) is left out of its
 * arm's statistics when it costs more than OUTLIER_FACTOR x the median of the arm's
 * clean calls of the block in this run, the arm has at least OUTLIER_MIN_N of them and
 * at most OUTLIER_MAX_SHARE of them are that far: more often is the arm's own cost. */
#define OUTLIER_FACTOR 5.0
#define OUTLIER_MIN_N 8
#define OUTLIER_MAX_SHARE 0.1

/* One sampled call (or a cell's summary, idx < 0): its records r[first..end), its
 * cost (latest end - latest start over the samplers), whether some rank built
 * per-communicator state in it, the cost its arm learns from (amortise), and the
 * index of its block's statistics (aggregate). */
typedef struct { int first, end, setup, agg, outlier; double cost, learn; } call_t;

static agg_t *agg_of(agg_t **aggs, int *n, const rec_t *r)
{
    for (int i = 0; i < *n; i++) {
        ct_online_block *b = &(*aggs)[i].b;
        if (b->coll == r->coll && b->nodes == r->nodes && b->ppn == r->ppn && b->cls == r->cls)
            return &(*aggs)[i];
    }
    agg_t *p = realloc(*aggs, (size_t)(*n + 1) * sizeof *p);
    if (!p) return NULL;
    *aggs = p;
    agg_t *a = &p[(*n)++];
    memset(a, 0, sizeof *a);
    a->b = *ct_online_block_of(r->coll, r->nodes, r->ppn, r->cls);
    a->b.nodes = r->nodes, a->b.ppn = r->ppn, a->b.calls = 0, a->b.setups = 0, a->b.setup_s = 0;
    for (int i = 0; i < a->b.narms; i++) {
        a->prior[i] = a->b.arm[i].n > 0 ? a->b.arm[i].mean : 0;
        a->b.arm[i].n = a->b.arm[i].mean = a->b.arm[i].m2 = 0, a->b.arm[i].min = INFINITY;
    }
    return a;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++)
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", (unsigned char)*s);
        else fputc(*s, f);
    fputc('"', f);
}

static void argv0(char *out, size_t len)
{
    FILE *f = fopen("/proc/self/cmdline", "rb");
    size_t n = f ? fread(out, 1, len - 1, f) : 0;
    out[n] = '\0';
    if (f) fclose(f);
}

static int write_samples(const char *path, const char *run_id, agg_t *aggs, int nagg,
                         const rec_t *r, const call_t *c, int ncalls, char *err, size_t errlen)
{
    char tmp[4500], a0[512];
    FILE *f = ct_online_create(path, tmp, sizeof tmp, err, errlen);
    if (!f) return -1;
    argv0(a0, sizeof a0);
    fprintf(f, "{\"schema\": \"colltune-online-samples/1\", \"fingerprint\": \"%s\", \"run_id\": \"%s\",\n"
            " \"job\": {\"size\": %d, \"library\": ", ct_online.fingerprint, run_id, ct_online.size);
    json_str(f, ct_online.library);
    fprintf(f, ", \"platform\": ");
    json_str(f, ct_online.platform);
    fprintf(f, ", \"started\": \"%s\", \"argv0\": ", ct_online.started);
    json_str(f, a0);
    fprintf(f, ", \"budget\": %d, \"max_samplers\": %d, \"seed\": %llu},\n \"blocks\": [",
            ct_online.budget, ct_online.max_samplers, (unsigned long long)ct_online.seed);
    for (int i = 0; i < nagg; i++) {
        const ct_online_block *b = &aggs[i].b;
        long long lo, hi;
        ct_online_class_range(b->cls, &lo, &hi);
        fprintf(f, "%s\n  {\"collective\": \"%s\", \"nodes\": %d, \"ppn\": %d, \"bytes_lo\": %lld, "
                "\"bytes_hi\": ", i ? "," : "", ct_coll_name((ct_coll)b->coll), b->nodes, b->ppn, lo);
        if (hi >= 0) fprintf(f, "%lld", hi); else fprintf(f, "null");
        fprintf(f, ", \"calls\": %lld, \"sampled\": %lld, \"setup_calls\": %lld, \"setup_s\": %.9g, "
                "\"outlier_s\": %.9g, \"arms\": [", b->calls, aggs[i].sampled, b->setups, b->setup_s,
                aggs[i].outlier_s);
        for (int j = 0; j < b->narms; j++) {
            const ct_online_arm *a = &b->arm[j];
            fprintf(f, "%s{\"arm\": \"%s\", \"p\": %.9g, \"n\": %.0f, \"mean\": %.9g, \"m2\": %.9g, "
                    "\"outliers\": %lld, \"min\": ", j ? ", " : "", a->id, a->p, a->n, a->mean, a->m2,
                    aggs[i].outliers[j]);
            if (a->n > 0) fprintf(f, "%.9g}", a->min); else fprintf(f, "null}");
        }
        fprintf(f, "]}");
    }
    fprintf(f, "],\n \"records\": [");
    int first = 1;
    for (int i = 0; i < ncalls; i++) {    /* one record per sampled call */
        const rec_t *x = &r[c[i].first];
        long long by = 0;                 /* sampler 0's (agreed bytes; the others send 0) */
        if (x->idx < 0) continue;
        for (int j = c[i].first; j < c[i].end; j++) by = r[j].bytes > by ? r[j].bytes : by;
        const ct_online_block *b = ct_online_block_of(x->coll, x->nodes, x->ppn, x->cls);
        fprintf(f, "%s\n  [\"%s\", %d, %d, %d, %lld, \"%s\", %.9g, ", first ? "" : ",",
                ct_coll_name((ct_coll)x->coll), x->nodes, x->ppn, x->size, by,
                b->arm[x->arm & ~CT_ONLINE_SETUP].id, c[i].learn);
        /* how many ranks' clocks the cost came from (null: reduced before, not known here) */
        if (x->reduced) fprintf(f, "null]"); else fprintf(f, "%d]", c[i].end - c[i].first);
        first = 0;
    }
    fprintf(f, "\n]}\n");
    return ct_online_commit(f, tmp, path, err, errlen);
}

static call_t *calls_of(const rec_t *r, int nrec, int *ncalls)
{
    call_t *c = malloc(((size_t)nrec + 1) * sizeof *c);
    int k = 0;
    for (int i = 0; c && i < nrec;) {
        int j = i, setup = 0;
        double t0 = -1e300, t1 = -1e300;
        for (; j < nrec && !by_call(&r[i], &r[j]); j++)
            t0 = fmax(t0, r[j].t0), t1 = fmax(t1, r[j].t1), setup |= r[j].arm & CT_ONLINE_SETUP;
        c[k++] = (call_t){i, j, setup != 0, -1, 0, t1 - t0, t1 - t0};
        i = j;
    }
    *ncalls = k;
    return c;
}

static int same_cell(const rec_t *a, const rec_t *b)
{
    return a->key == b->key && a->coll == b->coll && a->cls == b->cls;
}

/* A call that built state costs the arm's steady cost m plus a one-time S that the
 * communicator pays once for all its calls of the block: its arm learns
 * ct_online_amortised (n: the arm's samples in that cell, c: the cell's calls), its
 * cost per call there. m: the arm's calls of the block without setup in this run,
 * else its mean in the state. What the call cost beyond that goes to the block's
 * setup_s. */
static void amortise(const rec_t *r, call_t *c, int ncalls, agg_t *aggs)
{
    for (int lo = 0, hi; lo < ncalls; lo = hi) {
        double calls = 0, n[CT_ONLINE_MAX_ARMS] = {0};
        for (hi = lo; hi < ncalls && same_cell(&r[c[lo].first], &r[c[hi].first]); hi++) {
            const rec_t *x = &r[c[hi].first];
            if (x->idx < 0) calls = (double)x->bytes;
            else if ((x->arm & ~CT_ONLINE_SETUP) < CT_ONLINE_MAX_ARMS) n[x->arm & ~CT_ONLINE_SETUP]++;
        }
        for (int i = lo; i < hi; i++) {
            const rec_t *x = &r[c[i].first];
            int arm = x->arm & ~CT_ONLINE_SETUP;
            if (x->idx < 0 || !c[i].setup || arm >= CT_ONLINE_MAX_ARMS || calls < n[arm]) continue;
            agg_t *a = &aggs[c[i].agg];
            double m = a->clean_n[arm] > 0 ? a->clean_sum[arm] / a->clean_n[arm] : a->prior[arm];
            c[i].learn = ct_online_amortised(c[i].cost, m, n[arm], calls);
            a->b.setup_s += c[i].cost - c[i].learn;
        }
    }
}

static int clean_arm(const rec_t *r, const call_t *c, const agg_t *aggs)
{
    const rec_t *x = &r[c->first];
    int arm = x->arm & ~CT_ONLINE_SETUP;
    return x->idx < 0 || c->setup || arm >= aggs[c->agg].b.narms ? -1 : arm;
}

typedef struct { int key, call; double cost; } keyed_t;   /* key: block x CT_ONLINE_MAX_ARMS + arm */

static int by_key_cost(const void *a, const void *b)
{
    const keyed_t *x = a, *y = b;
    return x->key != y->key ? (x->key > y->key) - (x->key < y->key) : (x->cost > y->cost) - (x->cost < y->cost);
}

/* per (block, arm), its clean calls sorted by cost: those above OUTLIER_FACTOR x their
 * median flagged and counted where the rule applies. One sort. */
static void outliers_of(const rec_t *r, call_t *c, int ncalls, agg_t *aggs)
{
    keyed_t *v = malloc(((size_t)ncalls + 1) * sizeof *v);
    if (!v) return;                 /* without memory no call is an outlier: the plain mean */
    int n = 0;
    for (int i = 0; i < ncalls; i++) {
        int arm = clean_arm(r, &c[i], aggs);
        if (arm >= 0) v[n++] = (keyed_t){c[i].agg * CT_ONLINE_MAX_ARMS + arm, i, c[i].cost};
    }
    qsort(v, (size_t)n, sizeof *v, by_key_cost);
    for (int lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo; hi < n && v[hi].key == v[lo].key; hi++) {}
        int m = hi - lo, far = 0;
        if (m < OUTLIER_MIN_N) continue;
        const keyed_t *g = &v[lo];
        double cut = OUTLIER_FACTOR * (m % 2 ? g[m / 2].cost : 0.5 * (g[m / 2 - 1].cost + g[m / 2].cost));
        for (int i = 0; i < m; i++) far += g[i].cost > cut;
        if (far > OUTLIER_MAX_SHARE * m) continue;
        agg_t *a = &aggs[g->key / CT_ONLINE_MAX_ARMS];
        for (int i = m - far; i < m; i++)   /* sorted: the far ones are the last */
            c[g[i].call].outlier = 1, a->outliers[g->key % CT_ONLINE_MAX_ARMS]++, a->outlier_s += g[i].cost;
    }
    free(v);
}

/* per-call costs into the per-(block, arm) statistics: the clean calls first (they
 * price the setup calls), then every call at the cost its arm learns; outliers are
 * counted, not learnt */
static agg_t *aggregate(const rec_t *r, call_t *c, int ncalls, int *nagg)
{
    agg_t *aggs = NULL;
    *nagg = 0;
    for (int i = 0; i < ncalls; i++) {
        const rec_t *x = &r[c[i].first];
        agg_t *a = agg_of(&aggs, nagg, x);
        if (!a) return aggs;
        c[i].agg = (int)(a - aggs);
        if (x->idx < 0) a->b.calls += x->bytes, a->sampled += (long long)x->t0;
        else if (c[i].setup) a->b.setups++;
    }
    outliers_of(r, c, ncalls, aggs);
    for (int i = 0; i < ncalls; i++) {
        int arm = clean_arm(r, &c[i], aggs);
        if (arm >= 0 && !c[i].outlier)
            aggs[c[i].agg].clean_sum[arm] += c[i].cost, aggs[c[i].agg].clean_n[arm]++;
    }
    amortise(r, c, ncalls, aggs);
    for (int i = 0; i < ncalls; i++) {
        const rec_t *x = &r[c[i].first];
        agg_t *a = &aggs[c[i].agg];
        int arm = x->arm & ~CT_ONLINE_SETUP;
        if (x->idx < 0 || arm >= a->b.narms || c[i].outlier) continue;
        ct_online_arm *y = &a->b.arm[arm];
        ct_online_welford(&y->n, &y->mean, &y->m2, 1, c[i].learn, 0);
        y->min = fmin(y->min, c[i].learn);
    }
    return aggs;
}

/* ---- state.txt under the lock ------------------------------------------------------- */
static void merge_block(ct_online_state *st, const ct_online_block *run)
{
    ct_online_block *b = ct_online_state_find(st, run->coll, run->nodes, run->ppn, run->cls);
    if (!b) {
        ct_online_block fresh = *run;
        for (int i = 0; i < fresh.narms; i++) fresh.arm[i].n = fresh.arm[i].mean = fresh.arm[i].m2 = 0;
        fresh.calls = fresh.runs = fresh.setups = 0, fresh.setup_s = 0;
        if (!(b = ct_online_state_add(st, &fresh))) return;
    }
    int timed = 0;
    for (int i = 0; i < run->narms; i++) {
        const ct_online_arm *ra = &run->arm[i];
        int k = 0;
        while (k < b->narms && strcmp(b->arm[k].id, ra->id)) k++;
        if (k == b->narms) {              /* the list changed since this run read it */
            if (k == CT_ONLINE_MAX_ARMS) continue;
            b->arm[b->narms++] = *ra, b->arm[k].n = b->arm[k].mean = b->arm[k].m2 = 0;
        }
        ct_online_welford(&b->arm[k].n, &b->arm[k].mean, &b->arm[k].m2, ra->n, ra->mean, ra->m2);
        timed |= ra->n > 0;
    }
    b->calls += run->calls;
    b->setups += run->setups;             /* at the samples file's %.9g, as Python merges it */
    b->setup_s = ct_online_g9(b->setup_s + ct_online_g9(run->setup_s));
    b->runs += timed;
    b->measured = 1;
    ct_online_update_rule(b);
}

/* flock(<dir>/.lock): held while the samples file is written and state.txt merged, so
 * that `colltune online update` (which re-derives state.txt from the samples files under
 * the same lock) sees a run either in both or in neither: with the samples file written
 * before the lock, an update in between counted the run, and this merge counted it
 * again. -1: cannot (err says why). */
static int lock_dir(char *err, size_t errlen)
{
    char lock[4200];
    snprintf(lock, sizeof lock, "%s/.lock", ct_online.dir);
    int fd = open(lock, O_RDWR | O_CREAT, 0666), first = errno;
    if (fd < 0 && first == EACCES) fd = open(lock, O_RDONLY);  /* another user's: flock needs no write */
    if (fd < 0 || flock(fd, LOCK_EX) != 0) {   /* the first open's reason when both failed */
        snprintf(err, errlen, "%s: cannot lock: %s", lock, strerror(fd < 0 ? first : errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* under lock_dir's lock */
static int update_state(agg_t *aggs, int nagg, const char *stamp, char *err, size_t errlen)
{
    char path[4200], aside[4400];
    snprintf(path, sizeof path, "%s/state.txt", ct_online.dir);
    ct_online_state st;
    char perr[8192];
    FILE *f = fopen(path, "rb");
    int rc = 0, problem = 0;
    if (f) {                              /* re-read: another job may have merged since MPI_Init */
        char *text = NULL;
        size_t cap = 0, n = 0, got;
        do {
            if (n + 4097 > cap) {
                char *p = realloc(text, cap = 2 * cap + 8192);
                if (!p) break;
                text = p;
            }
            n += got = fread(text + n, 1, cap - n - 1, f);
        } while (got > 0);
        fclose(f);
        if (text) text[n] = '\0';
        if (!text || strlen(text) != n || ct_online_state_parse(text, path, &st, perr, sizeof perr))
            problem = 1;
        else if (strcmp(st.fingerprint, ct_online.fingerprint))
            problem = 2, ct_online_state_free(&st);
        free(text);
    }
    if (problem) {                        /* kept under another name, never overwritten */
        snprintf(aside, sizeof aside, "%s.%s-%s", path, problem == 1 ? "bad" : "foreign", stamp);
        if (rename(path, aside) != 0) {
            snprintf(err, errlen, "%s: cannot set it aside: %s", path, strerror(errno));
            rc = -1;
        }
    }
    if (!f || problem) {
        memset(&st, 0, sizeof st);
        strcpy(st.fingerprint, ct_online.fingerprint);
    }
    if (rc == 0) {
        for (int i = 0; i < nagg; i++) merge_block(&st, &aggs[i].b);
        st.runs++;
        rc = ct_online_state_write(&st, path, err, errlen);
    }
    ct_online_state_free(&st);
    return rc;
}

void ct_online_finalize(void)
{
    if (!ct_online_on) return;
    ct_online_on = 0;
    if (ct_online.log) fclose(ct_online.log), ct_online.log = NULL;
    int n = 0, bytes, *counts = NULL, *displs = NULL, total = 0;
    rec_t *mine = collect(&n), *all = NULL;
    bytes = n * (int)sizeof(rec_t);
    if (ct_online.rank == 0 && !(counts = calloc(2 * (size_t)ct_online.size, sizeof *counts)))
        PMPI_Abort(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
    PMPI_Gather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (ct_online.rank == 0) {
        displs = counts + ct_online.size;
        for (int i = 0; i < ct_online.size; i++) displs[i] = total, total += counts[i];
        if (!(all = malloc((size_t)total + 1))) PMPI_Abort(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
    }
    PMPI_Gatherv(mine, bytes, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
    free(mine);
    if (ct_online.rank == 0) {
        int nrec = total / (int)sizeof(rec_t), nagg;
        char dir[4200], path[4400], run_id[96], stamp[64], err[8192] = "";
        /* unique per run without libc's generator: wall time, pid and 4 bytes of
         * /dev/urandom, through raw system calls (SMPI simulates time and pid) */
        struct timespec ts;
        struct tm tm;
        unsigned rnd = 0;
        long pid = syscall(SYS_getpid);
        syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
        FILE *ur = fopen("/dev/urandom", "rb");
        if (!ur || fread(&rnd, sizeof rnd, 1, ur) != 1) rnd = (unsigned)(ts.tv_nsec ^ pid << 16);
        if (ur) fclose(ur);
        snprintf(run_id, sizeof run_id, "%s-%ld-%08x", stamp, pid, rnd);
        qsort(all, (size_t)nrec, sizeof *all, by_call);
        int ncalls = 0;
        call_t *calls = calls_of(all, nrec, &ncalls);
        agg_t *aggs = calls ? aggregate(all, calls, ncalls, &nagg) : NULL;
        if (!calls) nagg = 0;
        snprintf(dir, sizeof dir, "%s/samples", ct_online.dir);
        snprintf(path, sizeof path, "%s/%s.json", dir, run_id);
        int rc = mkdir(ct_online.dir, 0777) != 0 && errno != EEXIST ? -1 : 0;
        if (!calls) {
            snprintf(err, sizeof err, "no memory for the costs of %d records", nrec);
            rc = -1;
        } else if (rc || (mkdir(dir, 0777) != 0 && errno != EEXIST)) {
            snprintf(err, sizeof err, "%s: cannot create it: %s", rc ? ct_online.dir : dir, strerror(errno));
            rc = -1;
        }
        char lerr[4400] = "";
        int lock = rc ? -1 : lock_dir(lerr, sizeof lerr);
        if (!rc) rc = write_samples(path, run_id, aggs, nagg, all, calls, ncalls, err, sizeof err);
        if (rc)
            fprintf(stderr, "colltune: warning: COLLTUNE_ONLINE: %s; this run's samples are not "
                    "saved, the earlier state is unchanged\n", err);
        else if (lock < 0 || update_state(aggs, nagg, run_id, err, sizeof err))
            fprintf(stderr, "colltune: warning: COLLTUNE_ONLINE: %s; the state is unchanged, this "
                    "run's samples are in %s (colltune online update merges them)\n",
                    lock < 0 ? lerr : err, path);
        if (lock >= 0) flock(lock, LOCK_UN), close(lock);
        free(aggs);
        free(calls);
        free(all);
        free(counts);
    }
    ct_online_state_free(&ct_online.state);
    ct_online_libarms_finalize();          /* MPICH's variables back, MPI_T_finalize */
}
