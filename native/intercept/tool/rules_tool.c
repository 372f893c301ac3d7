/* colltune-rules: the interposer's own parser and catalogue, without MPI_Init.
 *   colltune-rules list                      the algorithm catalogue as JSON
 *   colltune-rules check FILE                parse; print the rules as JSON lines
 *   colltune-rules force SPEC                parse a COLLTUNE_FORCE value the same way
 *   colltune-rules match FILE COLL SIZE NODES PPN BYTES   the choice for one call
 *   colltune-rules online-arms               online mode's compiled preset arms, size
 *                                            classes and fingerprint as JSON (online_arms.c)
 * Problems go to stderr as "FILE:LINE: problem", exit status 1. Under SMPI run
 * it with smpirun -np 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rules.h"
#include "online.h"

/* s as a JSON string, quoted */
static void put_string(const char *s)
{
    putchar('"');
    for (const char *c = s ? s : ""; *c; c++)
        if (*c == '"' || *c == '\\') printf("\\%c", *c);
        else if ((unsigned char)*c >= 0x20) putchar(*c);
    putchar('"');
}

static void list(void)
{
    printf("{\"format\":\"colltune.catalogue\",\"version\":1,\"algorithms\":[");
    for (int i = 0; i < ct_count(); i++) {
        const ct_algorithm *a = ct_get(i);
        printf("%s\n {\"collective\":\"%s\",\"name\":\"%s\",\"id\":%d,\"description\":",
               i ? "," : "", ct_coll_name(a->coll), a->name, a->id);
        put_string(a->description);
        printf(",\"params\":[");
        for (int j = 0; j < a->nparams; j++) {
            const ct_param *p = &a->params[j];
            printf("%s{\"name\":\"%s\",\"unit\":\"%s\",\"default\":%d,\"min\":%d,\"max\":%d,\"help\":",
                   j ? "," : "", p->name, p->unit ? p->unit : "", p->def, p->min, p->max);
            put_string(p->help);
            putchar('}');
        }
        printf("],\"tune\":[");
        for (int t = 0; t < CT_MAX_TUNE && a->tune[t]; t++) printf(t ? ",\"%s\"" : "\"%s\"", a->tune[t]);
        printf("]}");
    }
    printf("\n]}\n");
}

static void dump(const ct_rules *r)
{
    static const char *const keys[CT_NKEYS] = {"size", "nodes", "ppn", "bytes"};
    for (int i = 0; i < r->n; i++) {
        const ct_rule *x = &r->rules[i];
        printf("{\"line\":%d,\"collective\":\"%s\"", x->line, ct_coll_name(x->coll));
        for (int k = 0; k < CT_NKEYS; k++) {
            printf(",\"%s\":[%llu,", keys[k], (unsigned long long)x->key[k].lo);
            if (x->key[k].hi == UINT64_MAX) printf("null]");
            else printf("%llu]", (unsigned long long)x->key[k].hi);
        }
        printf(",\"algorithm\":\"%s\",\"params\":{", x->alg ? x->alg->name : "library");
        for (int j = 0; x->alg && j < x->alg->nparams; j++)
            printf("%s\"%s\":%d", j ? "," : "", x->alg->params[j].name, x->params[j]);
        printf("}}\n");
    }
}

int main(int argc, char **argv)
{
    char err[1024], choice[256];
    ct_rules r;
    if (argc == 2 && !strcmp(argv[1], "list")) {
        const char *bad = ct_catalog_problem();
        if (bad) {
            fprintf(stderr, "colltune-rules: %s\n", bad);
            return 1;
        }
        list();
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "online-arms")) {
        ct_online_print_arms(stdout);
        return 0;
    }
    if (argc == 3 && (!strcmp(argv[1], "check") || !strcmp(argv[1], "force"))) {
        int rc = !strcmp(argv[1], "check") ? ct_rules_load(argv[2], &r, err, sizeof err)
                                           : ct_force_parse(argv[2], &r, err, sizeof err);
        if (rc != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        dump(&r);
        ct_rules_free(&r);
        return 0;
    }
    if (argc == 8 && !strcmp(argv[1], "match")) {
        ct_point p;
        int coll = ct_coll_from_name(argv[3]);
        if (coll < 0) {
            fprintf(stderr, "unknown collective %s\n", argv[3]);
            return 1;
        }
        for (int k = 0; k < CT_NKEYS; k++) p.v[k] = strtoull(argv[4 + k], NULL, 10);
        if (ct_rules_load(argv[2], &r, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        const ct_rule *x = ct_rules_match(&r, (ct_coll)coll, &p);
        ct_rule_format(x, choice, sizeof choice);
        printf("%s%s%d\n", choice, x ? " @line " : " @line ", x ? x->line : 0);
        ct_rules_free(&r);
        return 0;
    }
    fprintf(stderr, "usage: colltune-rules list | check FILE | force SPEC | "
                    "match FILE COLL SIZE NODES PPN BYTES\n");
    return 2;
}
