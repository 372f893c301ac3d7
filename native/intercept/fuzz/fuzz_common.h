/* Shared checks of the libFuzzer harnesses fuzz_rules.c and fuzz_force.c
 * (docs/fuzzing.md). Besides what AddressSanitizer, LeakSanitizer and
 * UndefinedBehaviorSanitizer catch, every parse result is checked against the
 * contract of rules.h; a broken invariant aborts, which libFuzzer reports as
 * a crash with the input that caused it. */
#ifndef COLLTUNE_FUZZ_COMMON_H
#define COLLTUNE_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rules.h"

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "fuzz: invariant broken at %s:%d: %s\n", __FILE__, __LINE__, \
                    #cond);                                                              \
            abort();                                                                     \
        }                                                                                \
    } while (0)

/* The input as a C string (a NUL byte in it ends the text, as it would for a
 * getenv() value; the file loaders refuse such files before parsing). */
static char *fuzz_text(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    CHECK(s != NULL);
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* A failed parse: "NAME:LINE: problem", NUL-terminated inside errlen, and
 * *out left empty (ct_rules_free'd). */
static void check_failure(const ct_rules *r, const char *err, size_t errlen, const char *name)
{
    size_t n = strnlen(err, errlen), nl = strlen(name);
    const char *p = err + nl;
    CHECK(n < errlen);
    CHECK(n > nl + 3 && memcmp(err, name, nl) == 0 && *p == ':');
    for (p++; *p >= '0' && *p <= '9'; p++) {}
    CHECK(p > err + nl + 1 && p[0] == ':' && p[1] == ' ' && p[2] != '\0');
    CHECK(r->n == 0 && r->cap == 0 && r->rules == NULL);
    for (int k = 0; k < CT_NCOLLS; k++) CHECK(r->first[k] == 0 && r->count[k] == 0);
}

/* The same failure with a short, exactly sized heap buffer for the message:
 * the parser must write a NUL-terminated prefix of the full message and not
 * a byte more (ASan reports any overflow). */
typedef int (*parse_fn)(const char *text, ct_rules *out, char *err, size_t errlen);
static void check_short_error(parse_fn parse, const char *text, const char *full)
{
    size_t n = strlen(full), lens[2] = {1, n / 2 + 1};
    for (int i = 0; i < 2; i++) {
        char *small = malloc(lens[i]);
        ct_rules r;
        CHECK(small != NULL);
        CHECK(parse(text, &r, small, lens[i]) == -1);
        CHECK(strnlen(small, lens[i]) == (n < lens[i] - 1 ? n : lens[i] - 1));
        CHECK(memcmp(small, full, strlen(small)) == 0);
        CHECK(r.rules == NULL && r.n == 0);
        ct_rules_free(&r);
        free(small);
    }
}

/* A successful parse: grouped by collective in file order, ranges non-empty,
 * algorithms from the catalogue with every parameter inside its range. */
static void check_rules(const ct_rules *r)
{
    int total = 0;
    CHECK(r->rules != NULL && r->n >= 0 && r->n <= r->cap);
    for (int k = 0; k < CT_NCOLLS; k++) {
        CHECK(r->first[k] == total && r->count[k] >= 0);
        total += r->count[k];
        for (int i = r->first[k]; i < r->first[k] + r->count[k]; i++) {
            const ct_rule *x = &r->rules[i];
            CHECK(x->coll == (ct_coll)k);
            CHECK(x->line >= 1 && (i == r->first[k] || x[-1].line < x->line));
            for (int key = 0; key < CT_NKEYS; key++) CHECK(x->key[key].lo <= x->key[key].hi);
            if (x->alg) {
                CHECK(x->alg->coll == x->coll && ct_find(x->coll, x->alg->name) == x->alg);
                for (int j = 0; j < x->alg->nparams; j++)
                    CHECK(x->params[j] >= x->alg->params[j].min &&
                          x->params[j] <= x->alg->params[j].max);
            }
        }
    }
    CHECK(total == r->n);
}

/* Reference for ct_rules_match, independent of the grouping: the rule of
 * `coll` with the smallest line whose every range holds p. */
static const ct_rule *naive_match(const ct_rules *r, ct_coll coll, const ct_point *p)
{
    const ct_rule *best = NULL;
    for (int i = 0; i < r->n; i++) {
        const ct_rule *x = &r->rules[i];
        int k = 0;
        if (x->coll != coll || (best && best->line <= x->line)) continue;
        while (k < CT_NKEYS && p->v[k] >= x->key[k].lo && p->v[k] <= x->key[k].hi) k++;
        if (k == CT_NKEYS) best = x;
    }
    return best;
}

/* ct_rule_format into buffers of the exact length and shorter (heap, so ASan
 * sees a one-byte overflow): always a NUL-terminated prefix of the full text. */
static void check_format(const ct_rule *x)
{
    char full[2048], *b;
    size_t n, lens[3];
    ct_rule_format(x, full, sizeof full);
    n = strnlen(full, sizeof full);
    CHECK(n > 0 && n < sizeof full);
    if (x && x->alg) CHECK(strncmp(full, x->alg->name, strlen(x->alg->name)) == 0);
    else CHECK(strcmp(full, "library") == 0);
    lens[0] = n + 1, lens[1] = n / 2 + 1, lens[2] = 1;
    for (int i = 0; i < 3; i++) {
        CHECK((b = malloc(lens[i])) != NULL);
        ct_rule_format(x, b, lens[i]);
        CHECK(strnlen(b, lens[i]) == (n < lens[i] - 1 ? n : lens[i] - 1));
        CHECK(memcmp(b, full, strlen(b)) == 0);
        free(b);
    }
    CHECK((b = malloc(1)) != NULL);           /* len 0: nothing written */
    b[0] = 'x';
    ct_rule_format(x, b, 0);
    CHECK(b[0] == 'x');
    free(b);
}

/* Look up a few points per collective: fixed corners, and each rule's range
 * ends and their neighbours (where first-match decisions change); compare
 * with naive_match and format what matched. */
static void exercise(const ct_rules *r)
{
    ct_point pts[4 + 4 * 8];
    int np = 0;
    static const uint64_t fixed[4][CT_NKEYS] = {
        {0, 0, 0, 0}, {1, 1, 1, 0}, {64, 4, 16, 65536}, {UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX}};
    for (int i = 0; i < 4; i++) memcpy(pts[np++].v, fixed[i], sizeof fixed[i]);
    for (int i = 0; i < r->n && i < 8; i++) {
        const ct_rule *x = &r->rules[i];
        for (int k = 0; k < CT_NKEYS; k++) {     /* unsigned wrap at 0 / max is intended */
            pts[np].v[k] = x->key[k].lo;
            pts[np + 1].v[k] = x->key[k].hi;
            pts[np + 2].v[k] = x->key[k].lo - 1;
            pts[np + 3].v[k] = x->key[k].hi + 1;
        }
        np += 4;
    }
    for (int c = 0; c < CT_NCOLLS; c++)
        for (int i = 0; i < np; i++) {
            const ct_rule *m = ct_rules_match(r, (ct_coll)c, &pts[i]);
            CHECK(m == naive_match(r, (ct_coll)c, &pts[i]));
            if (i < 4) check_format(m);
        }
    for (int i = 0; i < r->n; i++) check_format(&r->rules[i]);
}

/* What the interposer may do with a source that failed to load: it is left
 * empty, and a lookup in it finds nothing. */
static void exercise_empty(const ct_rules *r)
{
    ct_point p = {{4, 2, 2, 1024}};
    for (int c = 0; c < CT_NCOLLS; c++) CHECK(ct_rules_match(r, (ct_coll)c, &p) == NULL);
}

/* What every input gets after its target's own success checks: a failure's
 * state and messages, then the table freed (twice: harmless) and the text. */
static void finish_input(parse_fn parse, char *text, ct_rules *r, int rc, const char *err,
                         size_t errlen, const char *name)
{
    if (rc != 0) {
        CHECK(rc == -1);
        check_failure(r, err, errlen, name);
        exercise_empty(r);
        check_short_error(parse, text, err);
    }
    ct_rules_free(r);
    CHECK(r->rules == NULL && r->n == 0);
    ct_rules_free(r);
    free(text);
}

#endif
