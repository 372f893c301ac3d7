/* colltune-bench: times one MPI collective over a grid of points
 * (participants x message sizes x delay or computation time) and writes one
 * JSON record per point. See docs/bench.md. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "colls.h"
#include "ctl.h"
#include "measure.h"
#include "options.h"
#include "output.h"

static int cmp_str(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* Rank 0 learns the number of distinct hosts and the most ranks on one host. */
static void host_layout(int *nodes, int *ppn_max)
{
    int rank, size;
    char name[MPI_MAX_PROCESSOR_NAME + 1];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    memset(name, 0, sizeof name);
    int len;
    MPI_Get_processor_name(name, &len);
    char *all = rank == 0 ? malloc((size_t)size * sizeof name) : NULL;
    ctl_gather(name, all, (int)sizeof name, MPI_CHAR, MPI_COMM_WORLD);
    if (rank != 0) return;
    qsort(all, (size_t)size, sizeof name, cmp_str);
    *nodes = 0;
    *ppn_max = 0;
    for (int i = 0, run = 0; i < size; i++) {
        run = i > 0 && !strcmp(all + (size_t)i * sizeof name, all + (size_t)(i - 1) * sizeof name) ? run + 1 : 1;
        if (run == 1) ++*nodes;
        if (run > *ppn_max) *ppn_max = run;
    }
    free(all);
}

static void write_header(const options_t *o, double max_offset)
{
    static char lib[MPI_MAX_LIBRARY_VERSION_STRING + 1];
    int len, rank;
    header_t h;
    memset(&h, 0, sizeof h);
    MPI_Get_library_version(lib, &len);
    lib[len < (int)sizeof lib ? len : (int)sizeof lib - 1] = '\0';
    lib[strcspn(lib, "\r\n")] = '\0';
    for (len = (int)strlen(lib); len > 0 && (lib[len - 1] == ' ' || lib[len - 1] == ','); len--) lib[len - 1] = '\0';
    h.mpi_library = lib;
    MPI_Get_version(&h.mpi_major, &h.mpi_minor);
    MPI_Comm_size(MPI_COMM_WORLD, &h.world_size);
    host_layout(&h.nodes, &h.ppn_max);
    h.clock = clock_is_global() ? "global" : "offset-estimate";
    h.max_clock_offset_s = max_offset;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) out_header(o, &h);
}

/* Test hook (--hang-at-size): does this point hang? */
static int hangs_at(const options_t *o, long long size)
{
    for (int k = 0; k < o->nhang; k++)
        if (o->hang_sizes[k] == size) return 1;
    return 0;
}

/* Blocks forever in pause(): a real hang that neither the MPI library nor SimGrid
 * can end (under SMPI every rank shares one process, so the whole simulation
 * stops in real time; a deadlock inside MPI would be detected by SimGrid and end
 * the run as a crash). The other ranks wait for rank 0 in the next message.
 * Only a signal (the launcher's timeout) ends it. */
static void hang_forever(long long size)
{
    fprintf(stderr, "colltune-bench: --hang-at-size: rank 0 blocks forever before the "
                    "point of %lld bytes (test hook)\n", size);
    fflush(stderr);
    fflush(stdout);
    for (;;) pause();
}

/* Runs every point of one communicator; returns the number of failed checks. */
static int run_points(const options_t *o, MPI_Comm comm, int *points)
{
    const coll_desc_t *c = o->coll;
    int rank, size, failed = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int nparams = o->scenario == SCEN_DELAYED ? o->ndelays : o->scenario == SCEN_OVERLAP ? o->ntcalc : 1;
    for (int si = 0; si < o->nsizes; si++) {
        for (int pi = 0; pi < nparams; pi++) {
            point_t pt = { o, comm, rank, size, 0, 0.0, -1, 0.0 };
            record_t rec;
            memset(&rec, 0, sizeof rec);
            pt.count = c->has_data ? (int)(o->sizes[si] / (long long)dtype_size(o->dtype)) : 0;
            if (o->scenario == SCEN_DELAYED) {
                pt.delay_s = o->delays_us[pi] * 1e-6;
                pt.delayed_rank = o->delayed_last ? size - 1 : 0;
                rec.has_delay = 1;
                rec.delay_us = o->delays_us[pi];
            } else if (o->scenario == SCEN_OVERLAP) {
                pt.tcalc_s = o->tcalc_us[pi] * 1e-6;
                rec.has_tcalc = 1;
                rec.tcalc_us = o->tcalc_us[pi];
            }
            rec.participants = size;
            rec.msg_size = o->sizes[si];
            rec.count = pt.count;
            rec.bytes = (size_t)pt.count * dtype_size(o->dtype);
            rec.root = c->rooted ? o->root : -1;
            rec.valid = -1;
            if (rank == 0 && pi == 0 && hangs_at(o, o->sizes[si])) hang_forever(o->sizes[si]);

            char msg[256] = "";
            if (o->check != CHECK_NONE) {
                rec.valid = point_check(&pt, msg, sizeof msg);
                if (!rec.valid) {
                    failed++;
                    rec.check_error = msg;
                }
            }
            if (o->check != CHECK_ONLY && rec.valid != 0) {
                clock_sync(comm); /* re-estimate offsets: clocks drift between points */
                point_time(&pt, &rec);
            }
            if (rank == 0) out_record(o, &rec);
            ++*points;
        }
    }
    return failed;
}

int main(int argc, char **argv)
{
    int wrank, wsize;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);

    /* Every rank parses the same argv and reaches the same verdict, so all can
     * leave cleanly (MPI_Abort's exit code is lost under smpirun). */
    options_t o;
    char err[2048];
    int rc = options_parse(argc, argv, &o, err, sizeof err);
    if (rc == 0) rc = options_validate_world(&o, wsize, err, sizeof err);
    if (rc == 0 && wrank == 0 && out_open(&o, err, sizeof err) != 0) rc = 2;
    ctl_bcast(&rc, 1, MPI_INT, MPI_COMM_WORLD);
    if (rc != 0) {
        if (wrank == 0) fprintf(rc == 1 ? stdout : stderr, "%s%s", err, rc == 1 ? "" : "\n");
        options_free(&o);
        MPI_Finalize();
        return rc == 1 ? 0 : 2;
    }

    double max_offset = clock_sync(MPI_COMM_WORLD);
    write_header(&o, max_offset);

    int points = 0, failed = 0;
    for (int k = 0; k < o.nprocs; k++) {
        /* participants are the first P ranks; the others go on to the next split */
        MPI_Comm comm;
        MPI_Comm_split(MPI_COMM_WORLD, wrank < o.procs[k] ? 0 : MPI_UNDEFINED, wrank, &comm);
        if (comm == MPI_COMM_NULL) continue;
        failed += run_points(&o, comm, &points);
        MPI_Comm_free(&comm);
    }
    if (wrank == 0) {
        out_done(points, failed);
        out_close();
    }
    /* every rank exits with the same code: rank 0 knows all failures */
    ctl_bcast(&failed, 1, MPI_INT, MPI_COMM_WORLD);
    options_free(&o);
    reduction_free();
    MPI_Finalize();
    return failed ? 3 : 0;
}
