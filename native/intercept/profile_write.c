/* rank-R.json and job.json (schemas colltune-profile-rank/1, colltune-profile-job/1;
 * docs/profile-counting.md), each written to NAME.tmp.RANK.PID and renamed, so a
 * reader sees a whole file or none. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "profile.h"

extern char **environ;

/* Length of the valid UTF-8 character at s, or 0 (a stray or cut byte; overlong and
 * surrogate forms are not told apart: Python's decoder refuses them too, so refused). */
static int utf8_len(const unsigned char *s)
{
    int n = s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3
          : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (n == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0))) return 0;
    if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90))) return 0;
    return n;
}

/* A JSON string; bytes that are no UTF-8 (a host name, argv[0] or region name in another
 * encoding) become U+FFFD, so the file stays readable. */
static void put_str(FILE *f, const char *s)
{
    fputc('"', f);
    while (s && *s) {
        unsigned char c = (unsigned char)*s;
        int n = c < 0x80 ? 1 : utf8_len((const unsigned char *)s);
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else if (n == 0) fputs("\\ufffd", f);
        else fwrite(s, 1, (size_t)n, f);
        s += n ? n : 1;
    }
    fputc('"', f);
}

typedef int (*body_fn)(FILE *f);

static int write_atomic(const char *name, body_fn body, char *err, size_t errlen)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/%s", ct_prof.dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d.%ld", path, ct_prof.rank, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "COLLTUNE_PROFILE: cannot write %s: %s", tmp, strerror(errno));
        return -1;
    }
    int bad = body(f) != 0;
    bad |= ferror(f) != 0;
    bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        snprintf(err, errlen, "COLLTUNE_PROFILE: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

static void put_counts(FILE *f)
{
    int first = 1;
    fputs(",\n \"counts\": [", f);
    for (int r = 0; r < ct_prof_nregions(); r++)
        for (int k = 0; k < K_NKINDS; k++)
            for (int s = 0; s < S_NSOURCES; s++) {
                const ct_peer *p = ct_prof_cells(r, k, s);
                int any = 0;
                if (!p) continue;
                for (int q = 0; q < ct_prof.size; q++) {
                    if (!p[q].msgs) continue;
                    if (!any++) {
                        fprintf(f, "%s\n  {\"region\": %d, \"kind\": \"%s\", \"source\": \"%s\", \"peers\": [",
                                first ? "" : ",", r, ct_prof_kind_name(k), ct_prof_source_name(s));
                        first = 0;
                    } else {
                        fputs(", ", f);
                    }
                    fprintf(f, "[%d, %llu, %llu]", q, (unsigned long long)p[q].bytes,
                            (unsigned long long)p[q].msgs);
                }
                if (any) fputs("]}", f);
            }
    fputs("]", f);
}

static void put_intervals(FILE *f, const char *key, const ct_interval *iv, int n, int with_region)
{
    fprintf(f, ",\n \"%s\": [", key);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s[", i ? ", " : "");
        if (with_region) fprintf(f, "%d, ", iv[i].region);
        fprintf(f, "%.9f, %.9f]", iv[i].t0, iv[i].t1);
    }
    fputs("]", f);
}

static int rank_body(FILE *f)
{
    int n, dropped, npause, ncalls;
    uint64_t calls_dropped;
    fprintf(f, "{\"schema\": \"colltune-profile-rank/1\", \"rank\": %d, \"size\": %d, \"host\": ",
            ct_prof.rank, ct_prof.size);
    put_str(f, ct_prof.host);
    if (ct_prof.slurm_node[0]) {
        fputs(", \"slurm_node\": ", f);
        put_str(f, ct_prof.slurm_node);
    }
    fputs(", \"job\": ", f);
    put_str(f, ct_prof.job);
    fputs(",\n \"regions\": [", f);
    for (int i = 0; i < ct_prof_nregions(); i++) {
        if (i) fputs(", ", f);
        put_str(f, ct_prof_region_name(i));
    }
    fputs("],\n \"parents\": [", f);         /* exact, where intervals may have been dropped */
    for (int i = 0; i < ct_prof_nregions(); i++) fprintf(f, "%s%d", i ? ", " : "", ct_prof_region_parent(i));
    fputs("]", f);
    const ct_interval *iv = ct_prof_intervals(&n, &dropped);
    put_intervals(f, "intervals", iv, n, 1);
    fprintf(f, ",\n \"intervals_dropped\": %d", dropped);
    iv = ct_prof_pauses(&npause);
    put_intervals(f, "paused", iv, npause, 0);
    iv = ct_prof_owns(&npause);
    put_intervals(f, "colltune_own", iv, npause, 0);
    put_counts(f);
    fputs(",\n \"comms\": [", f);
    for (int c = 0; c < ct_prof_ncomms(); c++) {
        const int *m = ct_prof_comm_members(c, &n);
        fputs(c ? ", [" : "[", f);
        for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? ", " : "", m[i]);
        fputs("]", f);
    }
    fputs("],\n \"library_calls\": [", f);
    const ct_libcall *lc = ct_prof_libcalls(&ncalls, &calls_dropped);
    for (int i = 0; i < ncalls; i++)
        fprintf(f, "%s\n  {\"region\": %d, \"kind\": \"%s\", \"comm\": %d, \"root\": %d, "
                "\"bytes\": %lld, \"type_size\": %d, \"calls\": %llu}", i ? "," : "", lc[i].region,
                ct_prof_kind_name(lc[i].kind), lc[i].comm, lc[i].root, lc[i].bytes, lc[i].type_size,
                (unsigned long long)lc[i].calls);
    fprintf(f, "],\n \"library_calls_dropped\": %llu", (unsigned long long)calls_dropped);
    const ct_uncounted *un = ct_prof_uncounted(&n);
    fputs(",\n \"uncounted\": [", f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s{\"region\": %d, \"call\": \"%s\", \"calls\": %llu}", i ? ", " : "",
                un[i].region, ct_prof_uncounted_name(un[i].call), (unsigned long long)un[i].calls);
    fputs("]", f);
    fprintf(f, ",\n \"dropped\": {\"bytes\": %llu, \"messages\": %llu, \"unknown_peer_messages\": %llu, "
            "\"regions_refused\": %llu}", (unsigned long long)ct_prof.dropped_bytes,
            (unsigned long long)ct_prof.dropped_msgs, (unsigned long long)ct_prof.unknown_peer_msgs,
            (unsigned long long)ct_prof_regions_refused());
    fprintf(f, ",\n \"memory_bytes\": %zu}\n", ct_prof.mem);
    return 0;
}

int ct_prof_write_rank(char *err, size_t errlen)
{
    char name[64];
    snprintf(name, sizeof name, "rank-%d.json", ct_prof.rank);
    return write_atomic(name, rank_body, err, errlen);
}

/* settings that say which algorithm the library ran */
static int is_setting(const char *e)
{
    static const char *const prefixes[] = {"MPIR_CVAR_", "OMPI_MCA_coll", "OMPI_MCA_pml",
                                           "COLLTUNE_RULES=", "COLLTUNE_FORCE="};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (!strncmp(e, prefixes[i], strlen(prefixes[i]))) return 1;
    return 0;
}

static int job_body(FILE *f)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING + 1] = "";
    const char *notes[16];
    int len = 0, first = 1;
    PMPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\n")] = '\0';
#ifdef COLLTUNE_SMPI
    const char *hint = "smpi";
#else
    const char *hint = strstr(lib, "Open MPI") ? "openmpi" : strstr(lib, "MPICH") ? "mpich" : "other";
#endif
    fprintf(f, "{\"schema\": \"colltune-profile-job/1\", \"size\": %d, \"job\": ", ct_prof.size);
    put_str(f, ct_prof.job);
    fputs(", \"library\": ", f);
    put_str(f, lib);
    fprintf(f, ",\n \"backend_hint\": \"%s\", \"started\": \"%s\", \"argv0\": ", hint, ct_prof.started);
    put_str(f, ct_prof.argv0);
    fputs(",\n \"monitoring\": ", f);
    put_str(f, ct_prof_mon_status());
    fputs(",\n \"notes\": [", f);
    int n = ct_prof_mon_notes(notes, 16);
    for (int i = 0; i < n; i++) {
        if (i) fputs(", ", f);
        put_str(f, notes[i]);
    }
    fputs("],\n \"settings\": {", f);
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || !is_setting(*e)) continue;
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(eq - *e) < 255 ? (int)(eq - *e) : 255, *e);
        fputs(first ? "" : ", ", f);
        first = 0;
        put_str(f, key);
        fputs(": ", f);
        put_str(f, eq + 1);
    }
    fputs("}}\n", f);
    return 0;
}

int ct_prof_write_job(char *err, size_t errlen) { return write_atomic("job.json", job_body, err, errlen); }
