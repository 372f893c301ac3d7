/* Open MPI's pml monitoring through MPI_T (docs/profile-counting.md): the
 * performance variables pml_monitoring_messages_count / _size, bound to
 * MPI_COMM_WORLD, hold per-peer totals of everything this process sent through
 * the pml. MPI_T_pvar_reset does not clear them, so each library collective
 * reads them before and after and keeps the difference (source "monitoring").
 * They exist when the job runs with --mca pml_monitoring_enable 1; with 2
 * (filtered) collective messages are kept out of them. Shared-memory collective
 * components move data without the pml: enabled ones are named in job.json's
 * notes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "profile.h"

enum { MAX_NOTES = 8 };
static char status[256] = "off";
static char notes[MAX_NOTES][512];
static int nnotes;

int ct_prof_mon_notes(const char **out, int max)
{
    int n = 0;
    for (; n < nnotes && n < max; n++) out[n] = notes[n];
    return n;
}
const char *ct_prof_mon_status(void) { return status; }

#ifdef COLLTUNE_SMPI
void ct_prof_mon_init(void)
{
    snprintf(status, sizeof status, "unavailable (SMPI: the simulator's message trace records "
             "the library's collectives)");
}
void ct_prof_mon_snap(void) {}
void ct_prof_mon_skip_begin(void) {}
void ct_prof_mon_skip_end(void) {}
void ct_prof_mon_delta(int kind, int colltune_ran) { (void)kind, (void)colltune_ran; }
void ct_prof_mon_finalize(void) {}
int ct_prof_mon_on(void) { return 0; }
#else
static int mon_on, t_inited;
static MPI_T_pvar_session session;
static MPI_T_pvar_handle handle[2];           /* messages_count, messages_size */
static unsigned long long *before[2], *after[2], *skip_at[2];
static ct_peer *colltune_before;              /* colltune's counted sends at the snapshot */

/* an MCA variable's value as text ("" when it does not exist) */
static void cvar_text(const char *name, char *out, size_t len)
{
    int idx, count = 0, verb, bind, scope;
    char nm[256], desc[64];
    int nlen = sizeof nm, dlen = sizeof desc;
    MPI_Datatype dt;
    MPI_T_enum en;
    MPI_T_cvar_handle h;
    out[0] = '\0';
    if (MPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS ||
        MPI_T_cvar_get_info(idx, nm, &nlen, &verb, &dt, &en, desc, &dlen, &bind, &scope) != MPI_SUCCESS ||
        MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS)
        return;
    if (dt == MPI_INT && count == 1) {
        int v = 0;
        if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) snprintf(out, len, "%d", v);
    } else if (dt == MPI_CHAR && count > 0) {
        char *buf = calloc((size_t)count + 1, 1);
        if (buf && MPI_T_cvar_read(h, buf) == MPI_SUCCESS) snprintf(out, len, "%s", buf);
        free(buf);
    }
    MPI_T_cvar_handle_free(&h);
}

static void note(const char *fmt, const char *a, const char *b)
{
    if (nnotes < MAX_NOTES) snprintf(notes[nnotes++], sizeof notes[0], fmt, a, b);
}

/* Shared-memory collective components that are enabled (priority > 0 and not
 * excluded by --mca coll) and so may carry collectives past the pml. */
static void shared_memory_notes(void)
{
    static const char *const comps[] = {"sm", "xhc", "acoll"};
    static const char *const han_colls[] = {"bcast", "reduce", "allreduce", "allgather", "gather", "scatter"};
    char sel[256], v[256], name[96], lows[256] = "";
    cvar_text("coll", sel, sizeof sel);
    for (size_t i = 0; i < sizeof comps / sizeof *comps; i++) {
        snprintf(name, sizeof name, "coll_%s_priority", comps[i]);
        cvar_text(name, v, sizeof v);
        if (v[0] && atoi(v) > 0 && (!sel[0] || (sel[0] != '^' && strstr(sel, comps[i])) ||
                                    (sel[0] == '^' && !strstr(sel, comps[i]))))
            note("coll/%s is enabled (priority %s): collectives it runs move data through shared "
                 "memory, which pml monitoring does not see", comps[i], v);
    }
    cvar_text("coll_han_priority", v, sizeof v);
    if (!v[0] || atoi(v) <= 0 || (sel[0] == '^' && strstr(sel, "han"))) return;
    for (size_t i = 0; i < sizeof han_colls / sizeof *han_colls; i++) {
        char low[64];
        snprintf(name, sizeof name, "coll_han_%s_low_module", han_colls[i]);
        cvar_text(name, low, sizeof low);
        if (strstr(low, "sm") || strstr(low, "xhc") || strstr(low, "acoll"))
            snprintf(lows + strlen(lows), sizeof lows - strlen(lows), "%s%s=%s", lows[0] ? ", " : "",
                     han_colls[i], low);
    }
    if (lows[0])
        note("coll/han's intra-node steps use a shared-memory module (%s)%s: on communicators "
             "spanning several nodes that traffic bypasses pml monitoring", lows, "");
}

static int pvar(const char *name, int which)
{
    int idx, count = 0, verb, varclass, bind, readonly, continuous, atomic;
    char nm[256], desc[64];
    int nlen = sizeof nm, dlen = sizeof desc;
    MPI_Datatype dt;
    MPI_T_enum en;
    if (MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_SIZE, &idx) != MPI_SUCCESS) return 0;
    if (MPI_T_pvar_get_info(idx, nm, &nlen, &verb, &varclass, &dt, &en, desc, &dlen, &bind,
                            &readonly, &continuous, &atomic) != MPI_SUCCESS ||
        dt != MPI_UNSIGNED_LONG_LONG ||
        MPI_T_pvar_handle_alloc(session, idx, &ct_prof.world, &handle[which], &count) != MPI_SUCCESS)
        return 0;
    if (count != ct_prof.size || (!continuous && MPI_T_pvar_start(session, handle[which]) != MPI_SUCCESS))
        return 0;
    before[which] = ct_prof_alloc((size_t)count * sizeof **before);
    after[which] = ct_prof_alloc((size_t)count * sizeof **after);
    skip_at[which] = ct_prof_alloc((size_t)count * sizeof **skip_at);
    return before[which] && after[which] && skip_at[which] &&
           (colltune_before || (colltune_before = ct_prof_alloc((size_t)count * sizeof *colltune_before)));
}

void ct_prof_mon_init(void)
{
    int provided;
    char enable[32];
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
        snprintf(status, sizeof status, "unavailable (MPI_T_init_thread failed)");
        return;
    }
    t_inited = 1;
    shared_memory_notes();
    cvar_text("pml_monitoring_enable", enable, sizeof enable);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    PMPI_Get_library_version(lib, &len);
    if (!enable[0] && !strstr(lib, "Open MPI")) {
        snprintf(status, sizeof status, "unavailable (this MPI has no pml monitoring: only Open "
                 "MPI's pml/monitoring component counts the library's collectives)");
        return;
    }
    if (atoi(enable) == 0) {                   /* absent: the component was not loaded */
        snprintf(status, sizeof status, "off (pml_monitoring_enable=%s: run with --mca "
                 "pml_monitoring_enable 1)", enable[0] ? enable : "0, not loaded");
        return;
    }
    if (atoi(enable) >= 2) {
        snprintf(status, sizeof status, "unavailable (pml_monitoring_enable=%s keeps collective "
                 "messages out of the performance variables: use 1)", enable);
        return;
    }
    if (MPI_T_pvar_session_create(&session) != MPI_SUCCESS ||
        !pvar("pml_monitoring_messages_count", 0) || !pvar("pml_monitoring_messages_size", 1)) {
        snprintf(status, sizeof status, "unavailable (pml_monitoring_messages_count/_size cannot "
                 "be read through MPI_T)");
        return;
    }
    mon_on = 1;
    snprintf(status, sizeof status, "on");
}

int ct_prof_mon_on(void) { return mon_on; }

void ct_prof_mon_snap(void)
{
    if (!mon_on) return;
    const ct_peer *c = ct_prof_cells(ct_prof_region(), ct_prof_depth, S_COLLTUNE);
    if (c) memcpy(colltune_before, c, (size_t)ct_prof.size * sizeof *c);
    else memset(colltune_before, 0, (size_t)ct_prof.size * sizeof *colltune_before);
    MPI_T_pvar_read(session, handle[0], before[0]);
    MPI_T_pvar_read(session, handle[1], before[1]);
}

/* colltune's own traffic inside a collective's window (a communicator's set-up): what the
 * pml sends meanwhile is moved out of the window by advancing its start counters */
void ct_prof_mon_skip_begin(void)
{
    if (!mon_on || !ct_prof_depth) return;
    MPI_T_pvar_read(session, handle[0], skip_at[0]);
    MPI_T_pvar_read(session, handle[1], skip_at[1]);
}

void ct_prof_mon_skip_end(void)
{
    if (!mon_on || !ct_prof_depth) return;
    MPI_T_pvar_read(session, handle[0], after[0]);
    MPI_T_pvar_read(session, handle[1], after[1]);
    for (int i = 0; i < 2; i++)
        for (int p = 0; p < ct_prof.size; p++) before[i][p] += after[i][p] - skip_at[i][p];
}

/* What the pml sent during the call. When colltune's algorithm ran, its own
 * sends (counted exactly) are taken off: what is left is the library's
 * collectives that the algorithm called (HAN's intra-node steps, its set-up). */
void ct_prof_mon_delta(int kind, int colltune_ran)
{
    if (!mon_on) return;
    MPI_T_pvar_read(session, handle[0], after[0]);
    MPI_T_pvar_read(session, handle[1], after[1]);
    const ct_peer *c = colltune_ran ? ct_prof_cells(ct_prof_region(), kind, S_COLLTUNE) : NULL;
    for (int p = 0; p < ct_prof.size; p++) {
        long long msgs = (long long)(after[0][p] - before[0][p]);
        long long bytes = (long long)(after[1][p] - before[1][p]);
        if (c) {
            msgs -= (long long)(c[p].msgs - colltune_before[p].msgs);
            bytes -= (long long)(c[p].bytes - colltune_before[p].bytes);
        }
        if (msgs > 0) ct_prof_add(kind, S_MONITORING, p, bytes > 0 ? (uint64_t)bytes : 0, (uint64_t)msgs);
    }
}

void ct_prof_mon_finalize(void)
{
    if (mon_on) {
        MPI_T_pvar_handle_free(session, &handle[0]);
        MPI_T_pvar_handle_free(session, &handle[1]);
        MPI_T_pvar_session_free(&session);
        mon_on = 0;
    }
    if (t_inited) MPI_T_finalize(), t_inited = 0;
}
#endif
