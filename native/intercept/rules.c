/* Parser of colltune's rules file (grammar in docs/rules.md). Every problem is
 * reported as "FILE:LINE: what, with the offending value"; the caller decides
 * what to do (the interposer warns once and passes every call through). */
#include <ctype.h>
#include <limits.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rules.h"

static const char *const key_names[CT_NKEYS] = {"size", "nodes", "ppn", "bytes"};

typedef struct {
    const char *name;
    int line;
    char *err;
    size_t errlen;
} ctx;

static int fail(ctx *c, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(c->err, c->errlen, "%s:%d: ", c->name, c->line);
    if (n < 0 || (size_t)n >= c->errlen) return -1;
    va_start(ap, fmt);
    vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* Non-negative integer with an optional binary suffix k, m, g (KiB, MiB, GiB); -1: not
 * one, TOO_LARGE: one past 2^64 - 1. */
enum { TOO_LARGE = -2 };

static int parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0, mul = 1;
    const char *p = s;
    int big = 0;
    if (!isdigit((unsigned char)*p)) return -1;
    for (; isdigit((unsigned char)*p); p++) {
        if (v > (UINT64_MAX - 9) / 10) big = 1;
        else v = v * 10 + (uint64_t)(*p - '0');
    }
    switch (*p) {
    case 'k': case 'K': mul = 1ull << 10; p++; break;
    case 'm': case 'M': mul = 1ull << 20; p++; break;
    case 'g': case 'G': mul = 1ull << 30; p++; break;
    default: break;
    }
    if (*p != '\0') return -1;
    if (big || (v && mul > UINT64_MAX / v)) return TOO_LARGE;
    *out = v * mul;
    return 0;
}

/* "*", "N", "N..M", "N..", "..M" */
static int parse_range(ctx *c, const char *key, const char *s, ct_range *r, uint64_t min)
{
    const char *dots = strstr(s, "..");
    char lo[64] = "", hi[64] = "";
    if (strcmp(s, "*") == 0) {
        r->lo = 0, r->hi = UINT64_MAX;
        return 0;
    }
    if (strlen(s) >= sizeof lo) return fail(c, "%s: range '%s' is too long", key, s);
    if (!dots) {
        strcpy(lo, s), strcpy(hi, s);
    } else {
        memcpy(lo, s, (size_t)(dots - s)), lo[dots - s] = '\0';
        strcpy(hi, dots + 2);
    }
    r->lo = min, r->hi = UINT64_MAX;
    int e;
    if (*lo && (e = parse_u64(lo, &r->lo)) != 0)
        return fail(c, "%s: '%s' %s (range '%s')", key, lo, e == TOO_LARGE ?
                    "is too large" : "is not a non-negative integer", s);
    if (*hi && (e = parse_u64(hi, &r->hi)) != 0)
        return fail(c, "%s: '%s' %s (range '%s')", key, hi, e == TOO_LARGE ?
                    "is too large" : "is not a non-negative integer", s);
    if (!*lo && !*hi) return fail(c, "%s: empty range '%s'", key, s);
    if ((*lo && r->lo < min) || (*hi && r->hi < min))
        return fail(c, "%s: range '%s' must not go below %llu", key, s, (unsigned long long)min);
    if (r->lo > r->hi) return fail(c, "%s: empty range '%s' (start above end)", key, s);
    return 0;
}

static int known_algorithms(ct_coll coll, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < ct_count(); i++) {
        const ct_algorithm *a = ct_get(i);
        if (a->coll != coll) continue;
        int n = snprintf(buf + used, len - used, "%s, ", a->name);
        if (n < 0 || (size_t)n >= len - used) break;
        used += (size_t)n;
    }
    snprintf(buf + used, len - used, "library");
    return 0;
}

static int add_rule(ctx *c, ct_rules *out, const ct_rule *r)
{
    if (out->n == out->cap) {
        int cap = out->cap ? 2 * out->cap : 16;
        ct_rule *p = realloc(out->rules, (size_t)cap * sizeof *p);
        if (!p) return fail(c, "out of memory");
        out->rules = p, out->cap = cap;
    }
    out->rules[out->n++] = *r;
    return 0;
}

/* Algorithm name and parameters: tok[0] = name, tok[1..] = "k=v". */
static int parse_choice(ctx *c, ct_rule *r, char **tok, int ntok)
{
    char known[1024];
    int given[CT_MAX_PARAMS] = {0};
    if (ntok == 0) return fail(c, "no algorithm after '->'");
    if (strcmp(tok[0], "library") == 0) {
        r->alg = NULL;
        if (ntok > 1) return fail(c, "'library' takes no parameters, got '%s'", tok[1]);
        return 0;
    }
    r->alg = ct_find(r->coll, tok[0]);
    if (!r->alg) {
        known_algorithms(r->coll, known, sizeof known);
        return fail(c, "unknown %s algorithm '%s' (known: %s)", ct_coll_name(r->coll), tok[0],
                    known);
    }
    ct_params_default(r->alg, r->params);
    for (int t = 1; t < ntok; t++) {
        char *eq = strchr(tok[t], '=');
        uint64_t v;
        int i;
        if (!eq) return fail(c, "expected PARAMETER=VALUE after the algorithm, got '%s'", tok[t]);
        *eq = '\0';
        for (i = 0; i < r->alg->nparams; i++)
            if (strcmp(r->alg->params[i].name, tok[t]) == 0) break;
        if (i == r->alg->nparams) {
            size_t used = 0;
            known[0] = '\0';
            for (int j = 0; j < r->alg->nparams; j++)
                used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", j ? ", " : "",
                                         r->alg->params[j].name);
            return fail(c, "%s %s has no parameter '%s' (parameters: %s)", ct_coll_name(r->coll),
                        r->alg->name, tok[t], r->alg->nparams ? known : "none");
        }
        if (given[i]++) return fail(c, "parameter '%s' given twice", tok[t]);
        const ct_param *p = &r->alg->params[i];
        /* a parameter may go below 0 (logp_tree's lf=-1: the model's choice) */
        int neg = eq[1] == '-';
        if (parse_u64(eq + 1 + neg, &v) != 0 || v > (uint64_t)INT_MAX ||
            (neg ? -(int64_t)v : (int64_t)v) < p->min || (neg ? -(int64_t)v : (int64_t)v) > p->max)
            return fail(c, "%s %s: %s=%s is not an integer in [%d, %d]", ct_coll_name(r->coll),
                        r->alg->name, tok[t], eq + 1, p->min, p->max);
        r->params[i] = neg ? -(int)v : (int)v;
    }
    return 0;
}

/* Split a line (modified in place) into whitespace-separated tokens. */
static int tokenize(char *s, char **tok, int max)
{
    int n = 0;
    for (char *save = NULL, *t = strtok_r(s, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
        if (n == max) return -1;
        tok[n++] = t;
    }
    return n;
}

static int parse_rule(ctx *c, ct_rules *out, char **tok, int ntok)
{
    ct_rule r;
    int arrow = -1, seen[CT_NKEYS] = {0}, coll = ct_coll_from_name(tok[0]);
    memset(&r, 0, sizeof r);
    r.line = c->line;
    if (coll < 0)
        return fail(c, "unknown collective '%s' (known: bcast, reduce, allreduce, allgather)",
                    tok[0]);
    r.coll = (ct_coll)coll;
    for (int k = 0; k < CT_NKEYS; k++) r.key[k].lo = 0, r.key[k].hi = UINT64_MAX;
    for (int t = 1; t < ntok; t++)
        if (strcmp(tok[t], "->") == 0) { arrow = t; break; }
    if (arrow < 0) return fail(c, "missing '->' between the conditions and the algorithm");
    for (int t = 1; t < arrow; t++) {
        char *eq = strchr(tok[t], '=');
        int k;
        if (!eq) return fail(c, "expected KEY=RANGE (size, nodes, ppn, bytes), got '%s'", tok[t]);
        *eq = '\0';
        for (k = 0; k < CT_NKEYS; k++)
            if (strcmp(key_names[k], tok[t]) == 0) break;
        if (k == CT_NKEYS)
            return fail(c, "unknown key '%s' (known: size, nodes, ppn, bytes)", tok[t]);
        if (seen[k]++) return fail(c, "key '%s' given twice", tok[t]);
        if (parse_range(c, tok[t], eq + 1, &r.key[k], k == CT_KEY_BYTES ? 0 : 1) != 0) return -1;
    }
    if (parse_choice(c, &r, tok + arrow + 1, ntok - arrow - 1) != 0) return -1;
    return add_rule(c, out, &r);
}

/* Stable regroup by collective so a lookup scans only its own rules. */
static int group(ct_rules *out, ctx *c)
{
    ct_rule *sorted = malloc((size_t)(out->n ? out->n : 1) * sizeof *sorted);
    int n = 0;
    if (!sorted) return fail(c, "out of memory");
    for (int k = 0; k < CT_NCOLLS; k++) {
        out->first[k] = n;
        for (int i = 0; i < out->n; i++)
            if (out->rules[i].coll == (ct_coll)k) sorted[n++] = out->rules[i];
        out->count[k] = n - out->first[k];
    }
    free(out->rules);
    out->rules = sorted, out->cap = out->n;
    return 0;
}

int ct_rules_parse(const char *text, const char *name, ct_rules *out, char *err, size_t errlen)
{
    ctx c = {name, 0, err, errlen};
    const char *p = text;
    int header = 0;
    memset(out, 0, sizeof *out);
    err[0] = '\0';
    while (*p) {
        char line[CT_RULES_MAXLINE + 2], *tok[64];
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        c.line++;
        if (len > CT_RULES_MAXLINE) {
            fail(&c, "line longer than %d characters", CT_RULES_MAXLINE);
            goto bad;
        }
        memcpy(line, p, len), line[len] = '\0';
        p += len + (nl ? 1 : 0);
        /* words are printable ASCII; a comment may also hold UTF-8 (a "µs" in a
         * comment had switched every rule off) */
        const char *cmt = memchr(line, '#', len);
        size_t words_end = cmt ? (size_t)(cmt - line) : len;
        for (size_t i = 0; i < len; i++) {
            unsigned char b = (unsigned char)line[i];
            if (b == '\0' || (!isprint(b) && !isspace(b) && (i < words_end || b < 0x80))) {
                int bom = c.line == 1 && i == 0 && len >= 3 && !memcmp(line, "\xef\xbb\xbf", 3);
                fail(&c, "not a text line (byte 0x%02x at column %zu)%s", b, i + 1,
                     bom ? ": a UTF-8 byte-order mark, save the file without it" : "");
                goto bad;
            }
        }
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        int ntok = tokenize(line, tok, 64);
        if (ntok < 0) {
            fail(&c, "more than 64 words");
            goto bad;
        }
        if (ntok == 0) continue;
        if (!header) {
            uint64_t v;
            if (strcmp(tok[0], "colltune-rules") != 0) {
                /* a library's own file given for colltune's (deploy writes all three) */
                const char *whose = !strncmp(tok[0], "rule-file-version", 17) || isdigit((unsigned char)tok[0][0])
                    ? ": this looks like Open MPI's coll/tuned rules file, which Open MPI reads "
                      "(coll_tuned_dynamic_rules_filename); colltune's is colltune.rules"
                    : tok[0][0] == '{' ? ": this looks like MPICH's JSON selection file, which MPICH "
                      "reads (MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE); colltune's is colltune.rules" : "";
                fail(&c, "expected the header 'colltune-rules %d' before any rule, got '%s'%s",
                     CT_RULES_VERSION, tok[0], whose);
                goto bad;
            }
            if (ntok > 2) {
                fail(&c, "the header is 'colltune-rules %d' alone, got '%s' after it",
                     CT_RULES_VERSION, tok[2]);
                goto bad;
            }
            if (ntok != 2 || parse_u64(tok[1], &v) != 0 || v != CT_RULES_VERSION) {
                fail(&c, "unsupported rules version '%s' (this interposer reads version %d)",
                     ntok > 1 ? tok[1] : "", CT_RULES_VERSION);
                goto bad;
            }
            header = 1;
            continue;
        }
        if (parse_rule(&c, out, tok, ntok) != 0) goto bad;
    }
    if (!header) {
        c.line = c.line ? c.line : 1;
        fail(&c, "no 'colltune-rules %d' header (empty file?)", CT_RULES_VERSION);
        goto bad;
    }
    if (group(out, &c) == 0) return 0;
bad:
    ct_rules_free(out);
    return -1;
}

int ct_rules_load(const char *path, ct_rules *out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long size;
    int rc;
    memset(out, 0, sizeof *out);
    if (!f) {
        snprintf(err, errlen, "%s:0: cannot open: %s", path, strerror(errno));
        return -1;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
        !(buf = malloc((size_t)size + 1)) || fread(buf, 1, (size_t)size, f) != (size_t)size) {
        snprintf(err, errlen, "%s:0: cannot read: %s", path, strerror(errno ? errno : EIO));
        fclose(f);
        free(buf);
        return -1;
    }
    fclose(f);
    buf[size] = '\0';
    if (strlen(buf) != (size_t)size) {      /* a NUL byte: not a text file */
        int line = 1;
        for (char *q = buf; *q; q++) line += *q == '\n';
        snprintf(err, errlen, "%s:%d: not a text line (byte 0x00)", path, line);
        free(buf);
        return -1;
    }
    rc = ct_rules_parse(buf, path, out, err, errlen);
    free(buf);
    return rc;
}

void ct_rules_free(ct_rules *r)
{
    free(r->rules);
    memset(r, 0, sizeof *r);
}

const ct_rule *ct_rules_match(const ct_rules *r, ct_coll coll, const ct_point *p)
{
    /* no pointer arithmetic before the count check: an empty table (never
     * loaded, or freed after a failed parse) has rules == NULL */
    for (int i = 0; i < r->count[coll]; i++) {
        const ct_rule *x = &r->rules[r->first[coll] + i];
        int k = 0;
        while (k < CT_NKEYS && p->v[k] >= x->key[k].lo && p->v[k] <= x->key[k].hi) k++;
        if (k == CT_NKEYS) return x;
    }
    return NULL;
}

int ct_force_parse(const char *spec, ct_rules *out, char *err, size_t errlen)
{
    ctx c = {"COLLTUNE_FORCE", 0, err, errlen};
    char buf[CT_RULES_MAXLINE + 1], *save = NULL;
    memset(out, 0, sizeof *out);
    err[0] = '\0';
    if (strlen(spec) > CT_RULES_MAXLINE) {
        fail(&c, "longer than %d characters", CT_RULES_MAXLINE);
        return -1;
    }
    strcpy(buf, spec);
    int given[CT_NCOLLS] = {0};           /* the item that named each collective */
    for (char *item = strtok_r(buf, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        char *tok[CT_MAX_PARAMS + 2], *f[3] = {item, NULL, NULL};
        ct_rule r;
        int coll, ntok = 1;
        c.line++;
        memset(&r, 0, sizeof r);
        r.line = c.line;
        for (int i = 1; i < 3; i++) {
            char *colon = strchr(f[i - 1], ':');
            if (!colon) break;
            *colon = '\0', f[i] = colon + 1;
        }
        while (isspace((unsigned char)*f[0])) f[0]++;
        if (!f[1] || !*f[1]) {
            fail(&c, "expected COLL:ALGORITHM[:PARAM=VALUE,...], got '%s'", item);
            goto bad;
        }
        if ((coll = ct_coll_from_name(f[0])) < 0) {
            fail(&c, "unknown collective '%s' (known: bcast, reduce, allreduce, allgather)", f[0]);
            goto bad;
        }
        if (given[coll]) {                /* the first would win, the second be ignored */
            fail(&c, "%s given twice (item %d too): one algorithm per collective", f[0], given[coll]);
            goto bad;
        }
        given[coll] = c.line;
        r.coll = (ct_coll)coll;
        for (int k = 0; k < CT_NKEYS; k++) r.key[k].lo = 0, r.key[k].hi = UINT64_MAX;
        tok[0] = f[1];
        for (char *s2 = NULL, *t = f[2] ? strtok_r(f[2], ",", &s2) : NULL; t;
             t = strtok_r(NULL, ",", &s2)) {
            if (ntok == CT_MAX_PARAMS + 2) {
                fail(&c, "too many parameters");
                goto bad;
            }
            tok[ntok++] = t;
        }
        if (parse_choice(&c, &r, tok, ntok) != 0 || add_rule(&c, out, &r) != 0) goto bad;
    }
    if (c.line == 0) {
        c.line = 1;
        fail(&c, "empty");
        goto bad;
    }
    if (group(out, &c) == 0) return 0;
bad:
    ct_rules_free(out);
    return -1;
}

void ct_rule_format(const ct_rule *r, char *buf, size_t len)
{
    size_t used;
    if (!r || !r->alg) {
        snprintf(buf, len, "library");
        return;
    }
    used = (size_t)snprintf(buf, len, "%s", r->alg->name);
    for (int i = 0; i < r->alg->nparams && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, " %s=%d", r->alg->params[i].name,
                                 r->params[i]);
}
