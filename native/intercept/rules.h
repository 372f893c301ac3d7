/* colltune's rules file (docs/rules.md): parsed into a table the interposer
 * searches on every intercepted call. Parsing needs no MPI run-time (only the
 * algorithm catalogue, to check names and parameters), so the same code serves
 * the interposer and the `colltune-rules` checker. */
#ifndef COLLTUNE_RULES_H
#define COLLTUNE_RULES_H

#include <stdint.h>
#include "colltune/algorithms.h"

#define CT_RULES_VERSION 1
#define CT_RULES_MAXLINE 4096

/* Inclusive range; hi = UINT64_MAX means "no upper bound". */
typedef struct { uint64_t lo, hi; } ct_range;

enum { CT_KEY_SIZE, CT_KEY_NODES, CT_KEY_PPN, CT_KEY_BYTES, CT_NKEYS };

typedef struct {
    ct_coll coll;
    ct_range key[CT_NKEYS];              /* communicator size, nodes, ppn, bytes per rank */
    const ct_algorithm *alg;             /* NULL: the library's own collective */
    int params[CT_MAX_PARAMS];           /* all nparams values (defaults filled in) */
    int line;                            /* where it came from, for logs */
} ct_rule;

typedef struct {
    ct_rule *rules;
    int n, cap;
    int first[CT_NCOLLS], count[CT_NCOLLS];  /* rules of each collective, in file order */
} ct_rules;

/* What to look up: every field agrees on all ranks of the communicator. */
typedef struct { uint64_t v[CT_NKEYS]; } ct_point;

/* Parse `path` into *out (zeroed first). Returns 0, or -1 with `err` holding
 * "PATH:LINE: problem" (LINE 0 when the file cannot be read). */
int ct_rules_load(const char *path, ct_rules *out, char *err, size_t errlen);
/* Same on text already in memory; `name` is used in messages. */
int ct_rules_parse(const char *text, const char *name, ct_rules *out, char *err, size_t errlen);
void ct_rules_free(ct_rules *r);

/* First rule of coll matching p, or NULL (then the library runs). */
const ct_rule *ct_rules_match(const ct_rules *r, ct_coll coll, const ct_point *p);

/* COLLTUNE_FORCE syntax "coll:alg[:k=v,...]" (several separated by ';'):
 * each becomes a rule matching every call of that collective. Same errors. */
int ct_force_parse(const char *spec, ct_rules *out, char *err, size_t errlen);

/* Write a rule's algorithm and parameters as "name k=v ..." into buf. */
void ct_rule_format(const ct_rule *r, char *buf, size_t len);

#endif
