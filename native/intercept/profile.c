/* Traffic counting: state, regions, per-peer counters, set-up and the files at
 * MPI_Finalize (docs/profile-counting.md).
 *
 * Counters: one dense array of world-size (bytes, messages) per (region, kind,
 * source) that saw traffic, allocated on its first send and charged against
 * COLLTUNE_PROFILE_MAX_MB (traffic that finds no room is summed in "dropped").
 * A send counts in the innermost open region only; readers sum nested regions
 * into their parents and everything into region 0, "run".
 *
 * Regions, MPI_Pcontrol(level, ...): mpiP's levels keep their meaning and never
 * read a name: 0 pauses counting, 1 resumes it, 2..4 (mpiP's reset / reports)
 * are ignored. 100 opens and -100 closes the region named by the second
 * argument (a const char *). Any other level L (|L| >= 5, Intel APS's numbered
 * regions) opens / closes the region "pcontrol-|L|" without reading a name. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifndef COLLTUNE_SMPI
#include <pthread.h>
#endif
#include "colltune/algorithms.h"               /* ct_setup_hook */
#include "profile.h"

enum { MAX_REGIONS = 64, MAX_DEPTH = 32, MAX_INTERVALS = 1 << 16, NAME_LEN = 64 };
enum { PCONTROL_REGION = 100 };

ct_prof_state ct_prof;
int ct_prof_on;
CT_TLS int ct_prof_depth, ct_prof_alg, ct_prof_ran;

static char names[MAX_REGIONS][NAME_LEN];
static int nregions;
static int stack[MAX_DEPTH];
static double stack_t0[MAX_DEPTH];
static int depth;                         /* stack[0] is "run" */
static uint64_t regions_refused;          /* opens past MAX_REGIONS / MAX_DEPTH */
static ct_peer **cells;                   /* [region][kind][source] -> world-size array */
static ct_interval *intervals, *pauses, *own;
static int nintervals, npauses, nown, intervals_dropped;
static double pause_t0;

static const char *const KIND_NAMES[K_NKINDS] = {
    "p2p", "bcast", "reduce", "allreduce", "allgather", "alltoall", "gather", "scatter",
    "barrier", "scan", "exscan", "reduce_scatter", "reduce_scatter_block", "allgatherv",
    "alltoallv", "gatherv", "scatterv", "other"};
static const char *const SOURCE_NAMES[S_NSOURCES] = {"interposer", "colltune", "monitoring"};

const char *ct_prof_kind_name(int kind) { return KIND_NAMES[kind]; }
const char *ct_prof_source_name(int source) { return SOURCE_NAMES[source]; }

int ct_prof_kind_of(int coll)
{
    /* colltune's ct_coll order: CT_BCAST, CT_REDUCE, CT_ALLREDUCE, CT_ALLGATHER */
    static const int map[] = {K_BCAST, K_REDUCE, K_ALLREDUCE, K_ALLGATHER};
    return coll >= 0 && coll < (int)(sizeof map / sizeof *map) ? map[coll] : K_OTHER;
}

#ifndef COLLTUNE_SMPI
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
void ct_prof_lock(void) { if (ct_prof.mt) pthread_mutex_lock(&lock); }
void ct_prof_unlock(void) { if (ct_prof.mt) pthread_mutex_unlock(&lock); }
#else
void ct_prof_lock(void) {}
void ct_prof_unlock(void) {}
#endif

void *ct_prof_alloc(size_t bytes)
{
    if (ct_prof.mem + bytes > ct_prof.mem_cap) return NULL;
    void *p = calloc(1, bytes);
    if (p) ct_prof.mem += bytes;
    return p;
}

/* ---- counters ---------------------------------------------------------------- */
static size_t cell_index(int region, int kind, int source)
{
    return ((size_t)region * K_NKINDS + (size_t)kind) * S_NSOURCES + (size_t)source;
}

ct_peer *ct_prof_cells(int region, int kind, int source)
{
    return cells ? cells[cell_index(region, kind, source)] : NULL;
}

int ct_prof_region(void) { return stack[depth]; }
uint64_t ct_prof_regions_refused(void) { return regions_refused; }

/* caller holds the lock */
void ct_prof_add(int kind, int source, int peer, uint64_t bytes, uint64_t msgs)
{
    if (peer < 0 || peer >= ct_prof.size) {
        ct_prof.unknown_peer_msgs += msgs;
        return;
    }
    ct_peer **slot = &cells[cell_index(stack[depth], kind, source)];
    if (!*slot && !(*slot = ct_prof_alloc((size_t)ct_prof.size * sizeof **slot))) {
        ct_prof.dropped_bytes += bytes, ct_prof.dropped_msgs += msgs;
        return;
    }
    (*slot)[peer].bytes += bytes;
    (*slot)[peer].msgs += msgs;
}

/* ---- regions ------------------------------------------------------------------- */
int ct_prof_nregions(void) { return nregions; }
const char *ct_prof_region_name(int i) { return names[i]; }
static int parent_of[MAX_REGIONS];          /* region_index: a region is a name under a parent */
int ct_prof_region_parent(int i) { return parent_of[i]; }

static void push_interval(ct_interval **arr, int *n, int region, double t0, double t1)
{
    if (*n >= MAX_INTERVALS) {
        intervals_dropped++;
        return;
    }
    if ((*n & (*n - 1)) == 0) {                /* grow at powers of two */
        size_t cap = *n ? 2 * (size_t)*n : 64;
        ct_interval *p = realloc(*arr, cap * sizeof *p);
        if (!p) {
            intervals_dropped++;
            return;
        }
        ct_prof.mem += (cap - (*n ? (size_t)*n : 0)) * sizeof *p;
        *arr = p;
    }
    (*arr)[(*n)++] = (ct_interval){region, t0, t1};
}

const ct_interval *ct_prof_intervals(int *n, int *dropped)
{
    *n = nintervals, *dropped = intervals_dropped;
    return intervals;
}

static double own_t0;
static int own_open;                      /* a span begun while profiling was on */

/* ct_setup_hook: called for the outermost of nested spans only (ct_own_begin) */
static void own_begin(void)
{
    if (!ct_prof_on) return;
    own_open = 1, own_t0 = PMPI_Wtime();
    ct_prof_mon_skip_begin();
}

static void own_end(void)
{
    if (!own_open) return;
    own_open = 0;
    push_interval(&own, &nown, -1, own_t0, PMPI_Wtime());
    ct_prof_mon_skip_end();
}

const ct_interval *ct_prof_owns(int *n)
{
    *n = nown;
    return own;
}

const ct_interval *ct_prof_pauses(int *n)
{
    *n = npauses;
    return pauses;
}

/* A region is a name under a parent: the same name opened inside two different regions
 * is two entries of "regions" (one name), so each one's counts also go to its own parent.
 * Keyed by the name alone, the counts of X opened inside A and inside B went to X and the
 * run only: the parent shared by every interval of X (the reader's rule), and A lost them
 * (an analyst's review). */
/* How much of a name is kept: at most NAME_LEN - 1 bytes, cut before a UTF-8 character
 * that would not fit whole (a cut inside one made the rank file invalid UTF-8, which
 * the reader refused). */
static size_t kept(const char *name)
{
    size_t n = strnlen(name, NAME_LEN);
    if (n < NAME_LEN) return n;
    n = NAME_LEN - 1;
    while (n > 0 && ((unsigned char)name[n] & 0xC0) == 0x80) n--;   /* name[n]: first cut off */
    return n;
}

static int same_name(const char *stored, const char *name)
{
    size_t n = kept(name);
    return !strncmp(stored, name, n) && stored[n] == '\0';
}

static int region_index(const char *name, int parent)
{
    for (int i = 0; i < nregions; i++)
        if (parent_of[i] == parent && same_name(names[i], name)) return i;
    if (nregions == MAX_REGIONS) return -1;
    size_t n = kept(name);
    memcpy(names[nregions], name, n);
    names[nregions][n] = '\0';
    parent_of[nregions] = parent;
    return nregions++;
}

static void enter(const char *name)
{
    int r;
    if (depth + 1 >= MAX_DEPTH || (r = region_index(name, stack[depth])) < 0) {
        regions_refused++;
        return;
    }
    stack[++depth] = r;
    stack_t0[depth] = PMPI_Wtime();
}

/* Closes the innermost open region of that name, and any opened inside it. */
static void leave(const char *name)
{
    double t = PMPI_Wtime();
    int d = depth;
    while (d > 0 && !same_name(names[stack[d]], name)) d--;
    if (d == 0) {
        static int warned;
        if (ct_prof.rank == 0 && !warned++)
            fprintf(stderr, "colltune: warning: MPI_Pcontrol: closing region '%s' that is not "
                    "open; ignored\n", name);
        return;
    }
    for (; depth >= d; depth--) push_interval(&intervals, &nintervals, stack[depth], stack_t0[depth], t);
}

/* Passed on to PMPI_Pcontrol (a tool below libcolltune sees the same calls); a
 * name only where one was given. SMPI 3.32 aborts in PMPI_Pcontrol ("Not yet
 * implemented"): nothing is passed on there. */
#ifdef COLLTUNE_SMPI
#define PASS_ON(...) MPI_SUCCESS
#else
#define PASS_ON(...) PMPI_Pcontrol(__VA_ARGS__)
#endif
int MPI_Pcontrol(const int level, ...)
{
    char num[NAME_LEN];
    const char *name = NULL, *given = NULL;
    if (level == PCONTROL_REGION || level == -PCONTROL_REGION) {
        va_list ap;
        va_start(ap, level);
        given = va_arg(ap, const char *);
        va_end(ap);
    }
    if (!ct_prof.enabled) return given ? PASS_ON(level, given) : PASS_ON(level);
    ct_prof_lock();
    if (level == 0 && !ct_prof.paused) {
        ct_prof.paused = 1, ct_prof_on = 0, pause_t0 = PMPI_Wtime();
    } else if (level == 1 && ct_prof.paused) {
        ct_prof.paused = 0, ct_prof_on = 1;
        push_interval(&pauses, &npauses, -1, pause_t0, PMPI_Wtime());
    } else if (level == PCONTROL_REGION || level == -PCONTROL_REGION) {
        name = given && *given ? given : "(unnamed)";
    } else if (level >= 5 || level <= -5) {
        snprintf(num, sizeof num, "pcontrol-%d", level < 0 ? -level : level);
        name = num;
    }
    if (name) {
        if (level > 0) enter(name);
        else leave(name);
    }
    ct_prof_unlock();
    return given ? PASS_ON(level, given) : PASS_ON(level);
}

/* ---- set-up ------------------------------------------------------------------- */
static void argv0_of(int *argc, char ***argv)
{
    if (argc && argv && *argv && *argc > 0 && (*argv)[0]) {
        snprintf(ct_prof.argv0, sizeof ct_prof.argv0, "%s", (*argv)[0]);
        return;
    }
    FILE *f = fopen("/proc/self/cmdline", "rb");     /* MPI_Init(NULL, NULL) */
    if (f) {
        size_t n = fread(ct_prof.argv0, 1, sizeof ct_prof.argv0 - 1, f);
        ct_prof.argv0[n] = '\0';
        fclose(f);
    }
}

/* Rank 0 leaves a marker file in the folder and every rank looks for it: a folder that
 * is local to each host (/tmp on a cluster) keeps each host's rank files apart, which the
 * reader could only report as ranks missing. The first rank that does not see the marker
 * says so, once; counting goes on (the files can be gathered by hand). Where no rank has
 * a job id from its environment, rank 0 draws one for all with the same message (two
 * runs launched by hand into one folder had left files that looked like one job's). */
static void shared_check(const char *dir, int draw_job)
{
    struct { char token[40], job[sizeof ct_prof.job]; } msg;
    char marker[4300];
    memset(&msg, 0, sizeof msg);
    if (ct_prof.rank == 0) {
        unsigned long long r[2] = {0, 0};
        FILE *f = fopen("/dev/urandom", "rb");
        if (!f || fread(r, sizeof r, 1, f) != 1)
            r[0] = (unsigned long long)time(NULL), r[1] = (unsigned long long)getpid();
        if (f) fclose(f);
        snprintf(msg.token, sizeof msg.token, "%016llx%016llx", r[0], r[1]);
        if (draw_job) snprintf(msg.job, sizeof msg.job, "drawn:%s", msg.token);
        snprintf(marker, sizeof marker, "%s/.colltune-shared-%s", dir, msg.token);
        FILE *m = fopen(marker, "w");
        if (m) fclose(m);
        else msg.token[0] = '\0';                   /* no marker: nothing to look for */
    }
    PMPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, ct_prof.world);
    if (draw_job) memcpy(ct_prof.job, msg.job, sizeof ct_prof.job);
    if (!msg.token[0]) return;
    snprintf(marker, sizeof marker, "%s/.colltune-shared-%s", dir, msg.token);
    int first = access(marker, F_OK) == 0 ? ct_prof.size : ct_prof.rank, blind;
    PMPI_Allreduce(&first, &blind, 1, MPI_INT, MPI_MIN, ct_prof.world);
    if (ct_prof.rank == 0) unlink(marker);
    if (blind == ct_prof.rank) {
        char host[MPI_MAX_PROCESSOR_NAME + 1];
        int len = 0;
        PMPI_Get_processor_name(host, &len);
        host[len] = '\0';
        fprintf(stderr, "colltune: warning: COLLTUNE_PROFILE=%s: rank %d (host %s) does not see "
                "the files rank 0 writes there: a folder local to each host? Each host keeps its "
                "own ranks' files; gather them into one folder before reading the profile, or "
                "give a shared folder\n", dir, ct_prof.rank, host);
    }
}

/* The folder must be writable on every rank; else profiling is off everywhere
 * and rank 0 says why, once. */
static int usable_dir(const char *dir)
{
    char err[512] = "";
    struct stat st;
    int ok, all, first;
    if (dir[0] != '/') snprintf(err, sizeof err, "not an absolute path");
    else if (strlen(dir) >= sizeof ct_prof.dir - 64) snprintf(err, sizeof err, "path too long");
    else if (mkdir(dir, 0777) != 0 && errno != EEXIST) snprintf(err, sizeof err, "cannot create it: %s", strerror(errno));
    else if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) snprintf(err, sizeof err, "not a folder");
    else if (access(dir, W_OK | X_OK) != 0) snprintf(err, sizeof err, "cannot write: %s", strerror(errno));
    ok = err[0] == '\0';
    first = ok ? ct_prof.size : ct_prof.rank;
    /* with it, whether any rank has a job id (job_of_env): -1 where one has */
    int mine[2] = {first, ct_prof.job[0] ? -1 : 0}, min[2];
    PMPI_Allreduce(mine, min, 2, MPI_INT, MPI_MIN, ct_prof.world);
    all = min[0];
    if (all == ct_prof.size) {
        shared_check(dir, min[1] == 0);
        return 1;
    }
    if (all != ct_prof.rank) err[0] = '\0';
    PMPI_Bcast(err, (int)sizeof err, MPI_CHAR, all, ct_prof.world);
    err[sizeof err - 1] = '\0';
    if (ct_prof.rank == 0) {
        char where[48] = "";
        if (all) snprintf(where, sizeof where, " (on rank %d)", all);
        fprintf(stderr, "colltune: warning: COLLTUNE_PROFILE=%s%s: %s; no traffic profile is "
                "written\n", dir, where, err);
    }
    return 0;
}

/* One id for every rank of the job, from the environment: `colltune run --profile` sets
 * COLLTUNE_PROFILE_JOB; a job started otherwise has its launcher's (PMIx namespace, Slurm
 * job.step), or, where no rank has one (MPICH's hydra, SMPI), one rank 0 draws
 * (shared_check). The reader refuses a folder whose files name two jobs (another run's
 * rank file had been merged silently, an analyst's review). */
static void job_of_env(void)
{
    const char *own = getenv("COLLTUNE_PROFILE_JOB"), *ns = getenv("PMIX_NAMESPACE");
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    if (own && *own) snprintf(ct_prof.job, sizeof ct_prof.job, "%s", own);
    else if (ns && *ns) snprintf(ct_prof.job, sizeof ct_prof.job, "pmix:%s", ns);
    else if (job && *job) snprintf(ct_prof.job, sizeof ct_prof.job, "slurm:%s.%s", job, step ? step : "");
}

void ct_prof_init(int *argc, char ***argv)
{
    const char *dir = getenv("COLLTUNE_PROFILE"), *cap = getenv("COLLTUNE_PROFILE_MAX_MB");
    int level = MPI_THREAD_SINGLE, len = 0;
    if (!dir || !*dir) return;
    ct_prof.world = MPI_COMM_WORLD;
    PMPI_Comm_rank(ct_prof.world, &ct_prof.rank);
    PMPI_Comm_size(ct_prof.world, &ct_prof.size);
    job_of_env();
    if (!usable_dir(dir)) return;
    snprintf(ct_prof.dir, sizeof ct_prof.dir, "%s", dir);
    PMPI_Query_thread(&level);
    ct_prof.mt = level == MPI_THREAD_MULTIPLE;
    char *end = NULL;
    long mb = cap && *cap ? strtol(cap, &end, 10) : 256;
    if (cap && *cap && (*end || mb <= 0)) {     /* said, not silently the default */
        if (ct_prof.rank == 0)
            fprintf(stderr, "colltune: warning: COLLTUNE_PROFILE_MAX_MB=%s: not a number of "
                    "megabytes > 0; 256 used\n", cap);
        mb = 256;
    }
    ct_prof.mem_cap = (size_t)mb << 20;
    PMPI_Get_processor_name(ct_prof.host, &len);
    ct_prof.host[len] = '\0';
    /* Slurm's topology.conf names nodes by NodeName, which may differ from the host name */
    const char *node = getenv("SLURMD_NODENAME");
    snprintf(ct_prof.slurm_node, sizeof ct_prof.slurm_node, "%s", node ? node : "");
    argv0_of(argc, argv);
    time_t now = time(NULL);
    struct tm tm;
    strftime(ct_prof.started, sizeof ct_prof.started, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    size_t ncells = (size_t)MAX_REGIONS * K_NKINDS * S_NSOURCES;
    if (!(cells = ct_prof_alloc(ncells * sizeof *cells))) return;
    region_index("run", -1);
    stack[0] = 0, stack_t0[0] = PMPI_Wtime();
    ct_prof_mon_init();
    ct_setup_hook = (ct_setup_hooks){own_begin, own_end};
    ct_prof.enabled = ct_prof_on = 1;
}

void ct_prof_finalize(void)
{
    char err[1024];
    if (!ct_prof.enabled) return;
    ct_prof_on = 0;
    double t = PMPI_Wtime();
    if (ct_prof.paused) push_interval(&pauses, &npauses, -1, pause_t0, t);
    for (; depth >= 0; depth--) push_interval(&intervals, &nintervals, stack[depth], stack_t0[depth], t);
    ct_prof_mon_finalize();
    if (ct_prof_write_rank(err, sizeof err) != 0 ||
        (ct_prof.rank == 0 && ct_prof_write_job(err, sizeof err) != 0))
        fprintf(stderr, "colltune: warning: rank %d: %s\n", ct_prof.rank, err);
    ct_prof.enabled = 0;
}
