/* JSON-lines records and the classic table. Only rank 0 calls these. */
#ifndef COLLTUNE_OUTPUT_H
#define COLLTUNE_OUTPUT_H

#include <stddef.h>

#include "options.h"
#include "stats.h"

typedef struct {
    const char *mpi_library; /* first line of MPI_Get_library_version */
    int mpi_major, mpi_minor;
    int world_size, nodes, ppn_max;
    const char *clock;       /* "global" or "offset-estimate" */
    double max_clock_offset_s;
} header_t;

typedef struct {
    int participants, count, root; /* root < 0: not a rooted collective */
    long long msg_size;            /* requested bytes per rank */
    size_t bytes;                  /* count * dtype size */
    int has_delay, has_tcalc;
    double delay_us, tcalc_us;
    int reps, late_starts;
    int timed;                     /* 0: time fields are null */
    stats_t ttc;
    double rank_max_mean_s, rank_mean_mean_s;
    int has_pure;                  /* overlap scenario */
    double pure_median_s, overlap_pct;
    int valid;                     /* -1 not checked, 0 failed, 1 passed */
    const char *check_error;
} record_t;

/* Opens the outputs named by the options; 0 on success, else a message in err. */
int out_open(const options_t *o, char *err, size_t errlen);
void out_header(const options_t *o, const header_t *h);
void out_record(const options_t *o, const record_t *r);
void out_done(int points, int failed_checks);
void out_close(void);

#endif
