/* state.txt of online mode (format in docs/online-native.md): parse, write
 * atomically, and the update rule both colltune's C and Python apply. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "online.h"

#define TAU 0.1
#define FLOOR 0.02
#define MIN_N 3       /* timed calls before an arm may be the block's choice */

void ct_online_state_free(ct_online_state *st)
{
    free(st->b);
    memset(st, 0, sizeof *st);
}

ct_online_block *ct_online_state_find(ct_online_state *st, int coll, int nodes, int ppn, int cls)
{
    for (int i = 0; i < st->n; i++) {
        ct_online_block *b = &st->b[i];
        if (b->coll == coll && b->nodes == nodes && b->ppn == ppn && b->cls == cls) return b;
    }
    return NULL;
}

ct_online_block *ct_online_state_add(ct_online_state *st, const ct_online_block *b)
{
    if (st->n == st->cap) {
        int cap = st->cap ? 2 * st->cap : 16;
        ct_online_block *p = realloc(st->b, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        st->b = p, st->cap = cap;
    }
    st->b[st->n] = *b;
    return &st->b[st->n++];
}

/* Chan et al.'s pairwise combination of two Welford summaries */
void ct_online_welford(double *n, double *mean, double *m2, double n2, double mean2, double m22)
{
    if (n2 <= 0) return;
    double tot = *n + n2, d = mean2 - *mean;
    *m2 += m22 + d * d * *n * n2 / tot;
    *mean += d * n2 / tot;
    *n = tot;
}

int ct_online_best(const ct_online_block *b)
{
    int best = -1;
    for (int i = 0; i < b->narms; i++)
        if (b->arm[i].n >= MIN_N && (best < 0 || b->arm[i].mean < b->arm[best].mean)) best = i;
    return best;
}

/* The arm a block exploits once its budget is spent: the lowest mean among arms with
 * n >= MIN_N and the library's arm once timed (it needs no more: it is the default, and
 * the update rule lets a slow library fade before it reaches MIN_N); none: -1, the block
 * keeps drawing. The library's default is left only on a measured comparison with it:
 * while the block's library arm (when it lists one) was never timed, the library. */
int ct_online_choice(const ct_online_block *b)
{
    int best = ct_online_best(b), lib = -1;
    for (int i = 0; i < b->narms; i++)
        if (CT_ONLINE_IS_LIBRARY(&b->arm[i])) lib = i;
    if (best < 0 || lib < 0) return best;
    if (b->arm[lib].n < 1) return lib;
    return b->arm[lib].mean < b->arm[best].mean ? lib : best;
}

double ct_online_g9(double x)
{
    char text[40];
    snprintf(text, sizeof text, "%.9g", x);
    return strtod(text, NULL);
}

/* Conservative exploration (after Wu et al., "Conservative Bandits", 2016): a run's
 * expected exploration must cost at most `risk` times its expected collective time.
 * Per measured block with a choice e (mean m_e): c = calls per run so far, s = the
 * calls drawn per run (min(c, budget)); drawing from p costs per draw
 * x = sum_i p_i (m_i - m_e), an untimed arm priced at the block's slowest timed mean
 * (pessimism), plus, when e is the library, the block's mean setup excess S (what a
 * call that built a communicator's state cost beyond what its arm learnt) once some
 * draw takes a colltune arm, probability 1 - (1 - q)^s with q their share of p.
 * Reference cost: c * m_lib (the library's mean once timed, else m_e). A block with
 * no choice yet leans on the library once timed. A communicator's setup serves all
 * its blocks, so S is the largest over the blocks of the same (nodes, ppn), and 0 when
 * one of them chose a colltune arm (the run pays it anyway). S is paid
 * whole or not at all, so a block whose own share of the risk, risk * c * m_lib, is
 * below S draws no colltune arm this run (`gated`: their p goes to e). Draws come
 * from p with probability lambda, else from e; lambda is the largest value in [0, 1]
 * (bisection: the excess grows with it) with sum over blocks of
 * s lambda x + (1 - (1 - lambda q)^s) S <= risk * sum of references. Every rank reads
 * the same state, so every rank computes the same lambda. */
typedef struct { double draws, x, q, setup; } explore_t;

static double excess_at(const explore_t *e, int n, double lambda)
{
    double sum = 0;
    for (int k = 0; k < n; k++)
        sum += e[k].draws * lambda * e[k].x + (1.0 - pow(1.0 - lambda * e[k].q, e[k].draws)) * e[k].setup;
    return sum;
}

double ct_online_conservative(ct_online_state *st, int budget, double risk)
{
    double reference = 0;
    int n = 0;
    explore_t *ex = malloc(((size_t)st->n + 1) * sizeof *ex);
    int *choice = malloc(((size_t)st->n + 1) * sizeof *choice);   /* each block's, once */
    if (!ex || !choice) {
        free(ex), free(choice);
        return 1.0;
    }
    for (int k = 0; k < st->n; k++)
        choice[k] = st->b[k].measured && st->b[k].runs > 0 ? ct_online_choice(&st->b[k]) : -1;
    for (int k = 0; k < st->n; k++) {
        ct_online_block *b = &st->b[k];
        int e = choice[k], lib = -1, untimed_lib = -1;
        b->safe = 0, b->gated = 0, b->hold = 0;
        double worst = 0, sum = 0, x = 0, q = 0, setup = 0;
        for (int i = 0; i < b->narms; i++) {
            if (b->arm[i].n >= 1 && b->arm[i].mean > worst) worst = b->arm[i].mean;
            if (CT_ONLINE_IS_LIBRARY(&b->arm[i])) *(b->arm[i].n >= 1 ? &lib : &untimed_lib) = i;
            sum += b->arm[i].p;
        }
        if (untimed_lib >= 0 && b->measured && b->runs > 0) {
            /* measured, but never against the library (a block called a few times per run
             * had drawn colltune's arms only, locked onto the first one and never met the
             * library): nothing to price the draws with, and the default is left only on a
             * measured comparison. This run runs, and times, the library only. */
            b->safe = untimed_lib + 1, b->hold = 1;
            continue;
        }
        if (e < 0 && b->measured && b->runs > 0) e = lib;   /* undecided: lean on the timed library */
        if (e < 0 || b->arm[e].n < 1) continue;
        double calls = (double)b->calls / (double)b->runs;
        double ref = calls * (lib >= 0 ? b->arm[lib].mean : b->arm[e].mean);
        int paid = b->arm[e].alg != NULL;
        for (int j = 0; j < st->n && !paid; j++) {  /* a communicator's setup serves all its */
            const ct_online_block *o = &st->b[j];   /* blocks: the shape's, unless one of them */
            if (o->nodes != b->nodes || o->ppn != b->ppn) continue;   /* runs colltune anyway */
            if (choice[j] >= 0 && o->arm[choice[j]].alg) paid = 1, setup = 0;
            else if (o->setups > 0) setup = fmax(setup, o->setup_s / (double)o->setups);
        }
        for (int i = 0; i < b->narms && sum > 0; i++) {
            if (setup > risk * ref && b->arm[i].alg) {
                b->gated += b->arm[i].p;
                continue;
            }
            x += b->arm[i].p / sum * ((b->arm[i].n >= 1 ? b->arm[i].mean : worst) - b->arm[e].mean);
            if (b->arm[i].alg) q += b->arm[i].p / sum;
        }
        b->safe = e + 1;
        ex[n++] = (explore_t){fmin(calls, budget), fmax(x, 0.0), q, b->gated > 0 ? 0 : setup};
        reference += ref;
    }
    double lo = 0, hi = 1, bound = risk * reference;
    if (excess_at(ex, n, 1.0) > bound)
        for (int it = 0; it < 50; it++) {
            double mid = 0.5 * (lo + hi);
            if (excess_at(ex, n, mid) > bound) hi = mid; else lo = mid;
        }
    else
        lo = 1.0;
    free(ex);
    free(choice);
    return lo;
}

/* With t = runs that timed the block (this one included), K arms:
 * timed arms (n >= 1) weigh exp(-(mean/best - 1) t / TAU) (the best weighs 1); an arm
 * never timed is presumed as good as the best (optimism): 1 whatever t, until it is
 * timed once (at t = 1, max(K p, 1): p is the prior's, or the forest's, the run drew
 * with; after, p is this rule's own, which max(K p, 1) would inflate run after run).
 * With a weight decaying in t, a block called a few times per run had locked onto its
 * first arms and never met the others; conservative draws bound what trying them costs;
 * then a floor of FLOOR/(K r t), r = mean/best (1 untimed): the floor's draws cost at
 * most FLOOR/t of the best's mean in expectation whatever the slow arms cost, and
 * exploration shrinks as 1/t yet sums to infinity over runs (docs/online.md). Same
 * operations, same order as update.py's probabilities(). */
void ct_online_update_rule(ct_online_block *b)
{
    int k = b->narms, best = -1;
    double t = b->runs > 1 ? (double)b->runs : 1.0, sum = 0, sum2 = 0, w[CT_ONLINE_MAX_ARMS];
    for (int i = 0; i < k; i++)
        if (b->arm[i].n >= 1 && (best < 0 || b->arm[i].mean < b->arm[best].mean)) best = i;
    if (best < 0 || !(b->arm[best].mean > 0)) return;      /* nothing timed: keep p */
    for (int i = 0; i < k; i++) {
        const ct_online_arm *a = &b->arm[i];
        w[i] = a->n >= 1 ? exp(-(a->mean / b->arm[best].mean - 1.0) * t / TAU)
                         : t > 1.0 ? 1.0 : fmax(k * a->p, 1.0);
        sum += w[i];
    }
    for (int i = 0; i < k; i++) {
        const ct_online_arm *a = &b->arm[i];
        double r = a->n >= 1 ? a->mean / b->arm[best].mean : 1.0;
        sum2 += b->arm[i].p = fmax(w[i] / sum, FLOOR / (k * r * t));
    }
    for (int i = 0; i < k; i++) b->arm[i].p /= sum2;
}

/* ---- parsing ---------------------------------------------------------------- */
#define FAIL(...) do { snprintf(err, errlen, "%s:%d: ", name, line); \
    size_t l_ = strlen(err); snprintf(err + l_, errlen - l_, __VA_ARGS__); goto bad; } while (0)

static int num(const char *tok, const char *key, double *out)
{
    size_t k = strlen(key);
    char *end;
    if (strncmp(tok, key, k) || tok[k] != '=') return 0;
    errno = 0;
    *out = strtod(tok + k + 1, &end);
    return !errno && end != tok + k + 1 && !*end && isfinite(*out) && *out >= 0;
}

static int range_class(const char *tok)
{
    long long lo, hi = -1;
    char tail[8];
    if (sscanf(tok, "bytes=%lld..%lld%7s", &lo, &hi, tail) == 2 ||
        (sscanf(tok, "bytes=%lld..%7s", &lo, tail) == 1 && tok[strlen(tok) - 1] == '.')) {
        for (int c = 0; c < CT_ONLINE_NCLASS; c++) {
            long long l, h;
            ct_online_class_range(c, &l, &h);
            if (l == lo && h == hi) return c;
        }
    }
    return -1;
}

int ct_online_state_parse(const char *text, const char *name, ct_online_state *st, char *err,
                          size_t errlen)
{
    char *copy = strdup(text ? text : ""), *ln;
    int line = 0, header = 0;
    ct_online_block *cur = NULL;
    memset(st, 0, sizeof *st);
    if (!copy) { snprintf(err, errlen, "%s:0: out of memory", name); return -1; }
    for (char *p = copy; p; p = ln) {
        char *tok[16], *ts = NULL;
        int nt = 0;
        line++;
        ln = strchr(p, '\n');
        if (ln) *ln++ = '\0';
        char *hash = strchr(p, '#');
        if (hash) *hash = '\0';
        for (char *t = strtok_r(p, " \t\r", &ts); t && nt < 16; t = strtok_r(NULL, " \t\r", &ts)) tok[nt++] = t;
        if (!nt) continue;
        if (!header) {
            if (nt != 2 || strcmp(tok[0], "colltune-online-state") || strcmp(tok[1], "1"))
                FAIL("not a colltune online state (want 'colltune-online-state 1')");
            header = 1;
        } else if (!strcmp(tok[0], "fingerprint") && nt == 2 && strlen(tok[1]) == 16) {
            strcpy(st->fingerprint, tok[1]);
        } else if (!strcmp(tok[0], "run-count") && nt == 2) {
            st->runs = atoll(tok[1]);
        } else if (!strcmp(tok[0], "block")) {
            ct_online_block b = {0};
            double v[4] = {0};
            double su[2] = {0};
            int rn = nt >= 8;              /* runs= is absent from states of the earlier rule */
            if ((nt != 7 && nt != 8 && nt != 10) || (b.coll = ct_coll_from_name(tok[1])) < 0 ||
                !num(tok[2], "nodes", &v[0]) || !num(tok[3], "ppn", &v[1]) ||
                (b.cls = range_class(tok[4])) < 0 || !num(tok[5], "calls", &v[2]) ||
                (rn && !num(tok[6], "runs", &v[3])) ||
                (strcmp(tok[6 + rn], "source=measured") && strcmp(tok[6 + rn], "source=prior")) ||
                (nt == 10 && (!num(tok[8], "setups", &su[0]) || !num(tok[9], "setup_s", &su[1]))))
                FAIL("block: want 'block COLL nodes=N ppn=P bytes=LO..HI calls=C runs=R source=measured|prior"
                     " [setups=K setup_s=SECONDS]'");
            b.nodes = (int)v[0], b.ppn = (int)v[1], b.calls = (long long)v[2], b.runs = (long long)v[3];
            b.setups = (long long)su[0], b.setup_s = su[1];
            b.measured = !strcmp(tok[6 + rn], "source=measured");
            if (ct_online_state_find(st, b.coll, b.nodes, b.ppn, b.cls)) FAIL("block listed twice");
            if (!(cur = ct_online_state_add(st, &b))) FAIL("out of memory");
        } else if (!strcmp(tok[0], "arm") && nt >= 3) {
            char why[512];
            if (!cur) FAIL("arm before any block");
            if (cur->narms == CT_ONLINE_MAX_ARMS) FAIL("more than %d arms in a block", CT_ONLINE_MAX_ARMS);
            ct_online_arm *a = &cur->arm[cur->narms];
            if (ct_online_parse_arm(cur->coll, tok[1], a, why, sizeof why)) FAIL("%s", why);
            for (int i = 0; i < cur->narms; i++)
                if (!strcmp(cur->arm[i].id, a->id)) FAIL("arm %s listed twice", a->id);
            int have_p = 0;
            for (int i = 2; i < nt; i++) {
                int ok = num(tok[i], "p", &a->p) ? (have_p = 1) : num(tok[i], "n", &a->n) ||
                         num(tok[i], "mean", &a->mean) || num(tok[i], "m2", &a->m2);
                if (!ok) FAIL("arm %s: '%s' is not p=, n=, mean= or m2= with a number >= 0", a->id, tok[i]);
            }
            if (!have_p) FAIL("arm %s has no p=", a->id);
            cur->narms++;
        } else {
            FAIL("unknown line '%s'", tok[0]);
        }
    }
    if (!header) { line = 1; FAIL("empty state"); }
    if (!st->fingerprint[0]) { line = 2; FAIL("no fingerprint line"); }
    for (int i = 0; i < st->n; i++) {
        double sum = 0;
        for (int j = 0; j < st->b[i].narms; j++) sum += st->b[i].arm[j].p;
        if (!(sum > 0)) {
            snprintf(err, errlen, "%s:%d: block %d (%s) has no arm with p > 0", name, line, i + 1,
                     ct_coll_name((ct_coll)st->b[i].coll));
            goto bad;
        }
    }
    free(copy);
    return 0;
bad:
    free(copy);
    ct_online_state_free(st);
    return -1;
}

/* tmp file + rename: a reader sees the old or the new file, never half */
FILE *ct_online_create(const char *path, char *tmp, size_t tmplen, char *err, size_t errlen)
{
    snprintf(tmp, tmplen, "%s.tmp-%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) snprintf(err, errlen, "%s: cannot write: %s", tmp, strerror(errno));
    return f;
}

int ct_online_commit(FILE *f, const char *tmp, const char *path, char *err, size_t errlen)
{
    int bad = ferror(f) | (fflush(f) != 0) | (fsync(fileno(f)) != 0);
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int ct_online_state_write(const ct_online_state *st, const char *path, char *err, size_t errlen)
{
    char tmp[4500];
    FILE *f = ct_online_create(path, tmp, sizeof tmp, err, errlen);
    if (!f) return -1;
    fprintf(f, "colltune-online-state 1\nfingerprint %s\nrun-count %lld\n", st->fingerprint, st->runs);
    for (int i = 0; i < st->n; i++) {
        const ct_online_block *b = &st->b[i];
        long long lo, hi;
        ct_online_class_range(b->cls, &lo, &hi);
        fprintf(f, "block %s nodes=%d ppn=%d bytes=%lld..", ct_coll_name((ct_coll)b->coll), b->nodes,
                b->ppn, lo);
        if (hi >= 0) fprintf(f, "%lld", hi);
        fprintf(f, " calls=%lld runs=%lld source=%s", b->calls, b->runs,
                b->measured ? "measured" : "prior");
        if (b->setups > 0) fprintf(f, " setups=%lld setup_s=%.9g", b->setups, b->setup_s);
        fputc('\n', f);
        for (int j = 0; j < b->narms; j++) {
            const ct_online_arm *a = &b->arm[j];
            fprintf(f, "arm %s p=%.9g n=%.0f", a->id, a->p, a->n);
            if (a->n > 0) fprintf(f, " mean=%.9g m2=%.9g", a->mean, a->m2);
            fputc('\n', f);
        }
    }
    return ct_online_commit(f, tmp, path, err, errlen);
}
