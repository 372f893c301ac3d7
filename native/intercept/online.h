/* Online tuning inside libcolltune (COLLTUNE_ONLINE=<state dir>, docs/online-native.md).
 *   online.c        set-up, per-communicator keys, the per-call draw, sampling, the budget
 *   online_arms.c   the compiled preset arms per collective, size classes, the fingerprint
 *   online_libarms.c  the library's own algorithms as arms (MPICH's algorithm CVARs, MPI_T)
 *   online_state.c  state.txt: parse, format, the update rule (shared with Python)
 *   online_final.c  MPI_Finalize: gather the timings, samples/<run>.json, state.txt under flock
 * intercept.c only calls the hooks below; with online mode off each costs one
 * load and one predictable branch. */
#ifndef CT_ONLINE_H
#define CT_ONLINE_H
#include <stdint.h>
#include <stdio.h>
#include "rules.h"

#define CT_ONLINE_FROM 2             /* intercept.c's `from` of an online decision */
#define CT_ONLINE_NCLASS 6           /* size classes: <=16, <=256, <=4096, <=65536, <=1 MiB, more */
#define CT_ONLINE_MAX_ARMS 16
#define CT_ONLINE_ARM_LEN 96

extern int ct_online_on;

/* ---- hooks used by intercept.c ---- */
/* info_of, once per communicator (collective there): its agreed key and sampler index */
#define CT_ONLINE_COMM(comm, slot, lrank, before, ci) \
    do { if (__builtin_expect(ct_online_on, 0)) (slot) = ct_online_comm_init(comm, lrank, before, \
                                                         (ci)->size, (ci)->nodes, (ci)->ppn); } while (0)
/* choose_bytes: every decided call of a tracked communicator is online's (NULL: the
 * library, also when it is the block's best arm after the budget: no run() then) */
#define CT_ONLINE_CHOOSE(coll, slot, bytes, from) \
    do { if (__builtin_expect(ct_online_on, 0)) return *(from) = CT_ONLINE_FROM, ct_online_rule(coll, slot, bytes); } while (0)
/* run: the drawn arm instead of the rule's algorithm */
#define CT_ONLINE_CALL(coll, r, a, slot, bytes, from, ran) ((from) == CT_ONLINE_FROM \
    ? ct_online_call(coll, a, slot, bytes, ran) : ct_call(coll, (r)->alg->name, (r)->params, a, ran))

/* before: node leaders with a lower comm rank (-1: not known, an exscan counts them) */
void *ct_online_comm_init(MPI_Comm comm, int lrank, int before, int size, int nodes, int ppn);
/* MPI_Comm_free, collective there: the communicator's samples reduced, its slot reused */
void ct_online_comm_retire(void *slot, MPI_Comm comm);
const ct_rule *ct_online_rule(ct_coll coll, void *slot, long long bytes);
int ct_online_call(ct_coll coll, const ct_args *a, void *slot, long long bytes, const char **ran);
/* after colltune's set-up: reads the state (collective on MPI_COMM_WORLD); 1 when on */
int ct_online_init(int world_rank, int thread_multiple, int other_sources);
void ct_online_finalize(void);       /* before PMPI_Finalize: samples file and state update */

/* ---- shared between the online files ---- */
typedef struct {
    char id[CT_ONLINE_ARM_LEN];      /* "library", "ring", "han:imod=2,fs=65536" */
    const ct_algorithm *alg;         /* NULL: library (lib 0) or the library's algorithm lib */
    int lib;                         /* "mpich:<name>": its MPICH control variable value + 1 */
    int params[CT_MAX_PARAMS];
    double p, n, mean, m2, min;      /* min: this run only (samples file) */
} ct_online_arm;

typedef struct {
    int coll, nodes, ppn, cls, measured;
    long long calls, runs;           /* runs: runs that timed the block, the rule's t */
    long long setups;                /* sampled calls that built per-communicator state */
    double setup_s;                  /* what they cost beyond what their arms learnt */
    int safe;                        /* 1 + the arm conservative draws lean on (0: none) */
    int hold;                        /* this run draws only the safe arm: the library, never timed */
    double gated;                    /* p of colltune arms not drawn this run (setup too dear) */
    int narms;
    ct_online_arm arm[CT_ONLINE_MAX_ARMS];
} ct_online_block;

typedef struct {
    char fingerprint[17];
    long long runs;
    int n, cap;
    ct_online_block *b;
} ct_online_state;

/* online_arms.c */
extern const long long ct_online_edges[CT_ONLINE_NCLASS - 1];
int ct_online_class(long long bytes);
void ct_online_class_range(int cls, long long *lo, long long *hi);   /* hi -1: no bound */
int ct_online_parse_arm(int coll, const char *id, ct_online_arm *arm, char *err, size_t errlen);
/* a block of coll with the compiled presets, uniform p */
void ct_online_default_block(int coll, int nodes, int ppn, int cls, ct_online_block *b);
int ct_online_npresets(int coll);
const char *ct_online_preset(int coll, int i);
void ct_online_fingerprint(char out[17]);
void ct_online_print_arms(FILE *f);                                 /* colltune-rules online-arms */

/* the library itself, as configured (not one of its algorithms) */
#define CT_ONLINE_IS_LIBRARY(arm) (!(arm)->alg && !(arm)->lib)

/* online_libarms.c: the library's own algorithms as arms (MPICH: "mpich:<name>" through
 * MPI_T; elsewhere none). Found at first use (MPI_T_init_thread: also before MPI_Init). */
int ct_online_nlibarms(int coll);
const char *ct_online_libarm(int coll, int i);
int ct_online_libarm_parse(int coll, const char *id);                /* lib (> 0), 0: unknown */
/* writes the algorithm's value, calls the library, writes the initial value back */
int ct_online_libarm_run(ct_coll coll, int lib, const ct_args *a);
const char *ct_online_libarms_note(void);                           /* why some have none */
const char *ct_online_libarms_problem(void);       /* the note on MPICH (worth a warning), else "" */
void ct_online_libarms_signature(char *out, size_t len);             /* for the fingerprint */
void ct_online_libarms_print(FILE *f);                              /* a JSON member */
void ct_online_libarms_finalize(void);                              /* before PMPI_Finalize */

/* online_state.c */
int ct_online_state_parse(const char *text, const char *name, ct_online_state *st, char *err,
                          size_t errlen);
int ct_online_state_write(const ct_online_state *st, const char *path, char *err, size_t errlen);
/* atomic files: create PATH.tmp-<pid>, then flush, fsync, close and rename it to PATH */
FILE *ct_online_create(const char *path, char *tmp, size_t tmplen, char *err, size_t errlen);
int ct_online_commit(FILE *f, const char *tmp, const char *path, char *err, size_t errlen);
ct_online_block *ct_online_state_find(ct_online_state *st, int coll, int nodes, int ppn, int cls);
ct_online_block *ct_online_state_add(ct_online_state *st, const ct_online_block *b);
void ct_online_state_free(ct_online_state *st);
void ct_online_welford(double *n, double *mean, double *m2, double n2, double mean2, double m22);
void ct_online_update_rule(ct_online_block *b);
int ct_online_best(const ct_online_block *b);                       /* lowest mean with n >= 3, or -1 */
/* what a block exploits after its budget: ct_online_best or the timed library arm if faster;
 * the library while its arm was never timed */
int ct_online_choice(const ct_online_block *b);
/* x as written with %.9g and read back: what state.txt and samples files keep */
double ct_online_g9(double x);
/* conservative exploration: sets each measured block's `safe` arm and returns the
 * share lambda of draws taken from p (the rest go to the safe arm) */
double ct_online_conservative(ct_online_state *st, int budget, double risk);

/* online.c -> online_final.c: what the set-up learnt */
typedef struct {
    int rank, size, budget, max_samplers, state_problem;   /* state_problem: 1 corrupt, 2 foreign */
    uint64_t seed;
    double risk, lambda;             /* COLLTUNE_ONLINE_RISK; the share of draws from p */
    char dir[4096], started[32], argv0[512], library[256], platform[128], fingerprint[17];
    ct_online_state state;           /* agreed on every rank */
    FILE *log;
} ct_online_job;
extern ct_online_job ct_online;

/* arm_of flag: the call also built per-communicator state (ct_setup_events), a
 * one-time cost of the communicator that its arm learns amortised over the
 * communicator's calls. Agreed by MAX over the communicator (decide) or over the
 * samplers (MPI_Finalize), so every rank prices it alike. */
#define CT_ONLINE_SETUP 0x80

/* The cost a setup call's arm learns: its steady cost m plus the one-time excess
 * spread over the communicator's calls of the block (n of them the arm's samples),
 * so the arm's samples there average m + excess/calls. Without m, or no excess: the
 * whole cost (pessimism). Used at the budget (decide) and at MPI_Finalize alike. */
static inline double ct_online_amortised(double cost, double m, double n, double calls)
{
    return m > 0 && cost > m && calls > 0 ? m + (cost - m) * n / calls : cost;
}

/* per-(communicator, block) sampling, read by online_final.c */
typedef struct {
    int coll, cls;
    uint32_t calls, sampled;
    int best;                        /* arm after the budget; -1 drawing and sampling; -2 drawing */
    int lib_first;                   /* the library's arm, never timed: the next sampled call's (-1: none) */
    int in_seconds;                  /* t holds seconds (else raw stamps: ct_online_seconds) */
    int reduced;                     /* t holds the allreduce(MAX) over the communicator (decide) */
    const ct_online_block *blk;      /* arms and p (state block or compiled presets) */
    uint8_t *arm_of;                 /* [budget] arm of each sampled call, | CT_ONLINE_SETUP */
    double *t;                       /* samplers: [2 budget] start, end */
    long long *bytes;                /* sampler 0: [budget] (bytes are agreed) */
} ct_online_cell;

typedef struct {
    uint64_t key;
    int size, nodes, ppn, sampler;   /* sampler: index among the timed ranks (comm rank when all are), -1 none */
    ct_online_cell *cell[CT_NCOLLS][CT_ONLINE_NCLASS];
} ct_online_comm;
/* whether MPI_Finalize gathers anything of the cell from this rank: a communicator's
 * sampler 0 its summary and times, another timing rank its times not yet reduced */
static inline int ct_online_cell_gathered(const ct_online_comm *c, const ct_online_cell *x)
{
    return c->sampler == 0 || (c->sampler > 0 && x->t && !x->reduced);
}
int ct_online_ncomms(void);
ct_online_comm *ct_online_get_comm(int i);
const ct_online_block *ct_online_block_of(int coll, int nodes, int ppn, int cls);
void ct_online_seconds(ct_online_cell *x);        /* raw stamps -> synchronised seconds */
#endif
