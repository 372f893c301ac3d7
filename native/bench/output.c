/* Every record is flushed as soon as it is written, so a run that crashes keeps
 * the points it finished; the closing "done" record tells a complete run apart. */
#include "output.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "colls.h"

static FILE *json, *table;

int out_open(const options_t *o, char *err, size_t errlen)
{
    json = stdout;
    table = NULL;
    if (o->json_path && !(json = fopen(o->json_path, "w"))) {
        snprintf(err, errlen, "colltune-bench: cannot open --json file '%s' for writing", o->json_path);
        return -1;
    }
    if (o->table_path) {
        table = strcmp(o->table_path, "-") == 0 ? stdout : fopen(o->table_path, "w");
        if (!table) {
            snprintf(err, errlen, "colltune-bench: cannot open --table file '%s' for writing", o->table_path);
            return -1;
        }
    }
    return 0;
}

void out_close(void)
{
    if (json && json != stdout) fclose(json);
    if (table && table != stdout) fclose(table);
    json = table = NULL;
}

static void put_str(const char *s)
{
    if (!s) { fputs("null", json); return; }
    fputc('"', json);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(json, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", json);
        else if (*p == '\t') fputs("\\t", json);
        else if (*p < 0x20) fprintf(json, "\\u%04x", *p);
        else fputc(*p, json);
    }
    fputc('"', json);
}

/* times: %.9e; JSON has no inf/nan, so those become null */
static void put_time(const char *key, double v, int present)
{
    fprintf(json, ",\"%s\":", key);
    if (present && isfinite(v)) fprintf(json, "%.9e", v);
    else fputs("null", json);
}

static void put_num(const char *key, double v, int present)
{
    fprintf(json, ",\"%s\":", key);
    if (present && isfinite(v)) fprintf(json, "%.9g", v);
    else fputs("null", json);
}

void out_header(const options_t *o, const header_t *h)
{
    fputs("{\"type\":\"header\",\"bench_version\":1,\"mpi_library\":", json);
    put_str(h->mpi_library);
    fprintf(json, ",\"mpi_version\":\"%d.%d\",\"world_size\":%d,\"nodes\":%d,\"ppn_max\":%d,\"clock\":",
            h->mpi_major, h->mpi_minor, h->world_size, h->nodes, h->ppn_max);
    put_str(h->clock);
    put_time("max_clock_offset_s", h->max_clock_offset_s, 1);
    fputs(",\"argv\":", json);
    put_str(o->argv_joined);
    fputs("}\n", json);
    fflush(json);

    if (!table) return;
    fputs("# size ranks avg_us min_us max_us stddev_us median_us reps", table);
    if (o->scenario == SCEN_DELAYED) fputs(" delay_us", table);
    if (o->scenario == SCEN_OVERLAP) fputs(" tcalc_us overlap_pct", table);
    fputc('\n', table);
    fflush(table);
}

static void table_row(const options_t *o, const record_t *r)
{
    if (!r->timed) {
        const char *why = r->valid == 0           ? r->check_error
                          : o->check == CHECK_ONLY ? "check only, passed"
                                                   : "no valid repetition";
        fprintf(table, "# size %lld ranks %d not timed: %s\n", r->msg_size, r->participants, why);
        return;
    }
    const stats_t *t = &r->ttc;
    fprintf(table, "%lld %d %.2f %.2f %.2f %.2f %.2f %d", r->msg_size, r->participants, t->mean * 1e6,
            t->min * 1e6, t->max * 1e6, t->stddev * 1e6, t->median * 1e6, r->reps);
    if (r->has_delay) fprintf(table, " %.2f", r->delay_us);
    if (r->has_tcalc) fprintf(table, " %.2f %.2f", r->tcalc_us, r->has_pure ? r->overlap_pct : NAN);
    fputc('\n', table);
}

void out_record(const options_t *o, const record_t *r)
{
    const coll_desc_t *c = o->coll;
    fputs("{\"type\":\"measurement\",\"collective\":", json);
    put_str(c->name);
    fputs(",\"scenario\":", json);
    put_str(scenario_name(o->scenario));
    fprintf(json, ",\"participants\":%d,\"msg_size\":%lld,\"bytes\":%zu,\"count\":%d,\"dtype\":", r->participants,
            r->msg_size, r->bytes, r->count);
    put_str(dtype_name(o->dtype));
    fputs(",\"root\":", json);
    if (r->root >= 0) fprintf(json, "%d", r->root);
    else fputs("null", json);
    put_num("delay_us", r->delay_us, r->has_delay);
    fputs(",\"delayed_rank\":", json);
    put_str(r->has_delay ? (o->delayed_last ? "last" : "first") : NULL);
    put_num("tcalc_us", r->tcalc_us, r->has_tcalc);
    fprintf(json, ",\"warmup\":%d,\"reps\":%d,\"late_starts\":%d", o->warmup, r->reps, r->late_starts);
    fprintf(json, ",\"late_tolerance_us\":%g",
            o->late_tolerance_us > 0 ? o->late_tolerance_us : clock_late_tolerance() * 1e6);
    int t = r->timed;
    put_time("ttc_median_s", r->ttc.median, t);
    put_time("ttc_mean_s", r->ttc.mean, t);
    put_time("ttc_min_s", r->ttc.min, t);
    put_time("ttc_max_s", r->ttc.max, t);
    put_time("ttc_stddev_s", r->ttc.stddev, t);
    put_num("rse_median", r->ttc.rse_median, t);
    put_time("ttc_median_ci_lo_s", r->ttc.ci_lo, t);
    put_time("ttc_median_ci_hi_s", r->ttc.ci_hi, t);
    put_time("rank_max_mean_s", r->rank_max_mean_s, t);
    put_time("rank_mean_mean_s", r->rank_mean_mean_s, t);
    put_time("pure_median_s", r->pure_median_s, t && r->has_pure);
    put_num("overlap_pct", r->overlap_pct, t && r->has_pure);
    fprintf(json, ",\"valid\":%s,\"check_error\":", r->valid < 0 ? "null" : r->valid ? "true" : "false");
    put_str(r->check_error);
    fputs(",\"labels\":{", json);
    for (int i = 0; i < o->nlabels; i++) {
        if (i) fputc(',', json);
        put_str(o->label_keys[i]);
        fputc(':', json);
        put_str(o->label_vals[i]);
    }
    fputs("}}\n", json);
    fflush(json);
    if (table) {
        table_row(o, r);
        fflush(table);
    }
}

void out_done(int points, int failed_checks)
{
    fprintf(json, "{\"type\":\"done\",\"points\":%d,\"failed_checks\":%d}\n", points, failed_checks);
    fflush(json);
}
