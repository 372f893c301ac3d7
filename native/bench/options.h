/* Command-line options of colltune-bench. */
#ifndef COLLTUNE_OPTIONS_H
#define COLLTUNE_OPTIONS_H

#include <stddef.h>

#include "colls.h"
#include "reduction.h"

typedef enum { SCEN_PLAIN, SCEN_DELAYED, SCEN_OVERLAP } scenario_t;
typedef enum { CHECK_NONE, CHECK_FIRST, CHECK_ONLY } check_mode_t;

typedef struct {
    const coll_desc_t *coll;
    scenario_t scenario;
    long long *sizes;  int nsizes;      /* requested bytes per rank */
    int *procs;        int nprocs;      /* participant counts; empty = world */
    double *delays_us; int ndelays;     /* delayed scenario */
    int delayed_last;                   /* 1: last rank of the sub-comm is late */
    double *tcalc_us;  int ntcalc;      /* overlap scenario */
    int warmup, min_reps, max_reps;
    double rse, max_seconds, sync_window_us;
    double late_tolerance_us;           /* < 0: the clock's default */
    check_mode_t check;
    int shared_buffers;
    dtype_kind_t dtype;
    op_kind_t op;                       /* reducing collectives */
    int root;
    const char *json_path;              /* NULL = stdout */
    const char *table_path;             /* NULL = none, "-" = stdout */
    const char **label_keys, **label_vals; int nlabels;
    long long *hang_sizes; int nhang;   /* test hook: rank 0 blocks forever at these sizes */
    char *argv_joined;                  /* for the header record */
} options_t;

/* Parses argv into o. On error writes one line naming the option and value into
 * err and returns 2; returns 1 after --help (usage written into err), 0 on success.
 * Every rank parses the same argv, so all ranks reach the same verdict. */
int options_parse(int argc, char **argv, options_t *o, char *err, size_t errlen);

/* Checks the options that depend on the world size (procs, root). */
int options_validate_world(options_t *o, int world_size, char *err, size_t errlen);

void options_free(options_t *o);

extern const char options_usage[];

static inline const char *scenario_name(scenario_t s)
{
    return s == SCEN_DELAYED ? "delayed" : s == SCEN_OVERLAP ? "overlap" : "plain";
}

#endif
