/* libFuzzer target: the COLLTUNE_FORCE parser (ct_force_parse, "coll:alg[:k=v,...]"
 * items separated by ';', docs/interposer.md). The input is the variable's
 * value. Per input: parse; on success check the table (fuzz_common.h) — one
 * rule per item, matching every call — look up points with ct_rules_match,
 * format every rule, free; on failure check the "COLLTUNE_FORCE:ITEM: problem"
 * message, then parse again with short error buffers. Build and run:
 * docs/fuzzing.md (make -C native fuzz). */
#include "fuzz_common.h"

#define NAME "COLLTUNE_FORCE"

static int parse(const char *text, ct_rules *out, char *err, size_t errlen)
{
    return ct_force_parse(text, out, err, errlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size), err[1024];
    ct_rules r;
    int rc;
    memset(&r, 0xa5, sizeof r);
    memset(err, 'x', sizeof err);
    rc = parse(text, &r, err, sizeof err);
    if (rc == 0) {
        CHECK(err[0] == '\0');
        check_rules(&r);
        CHECK(r.n >= 1);
        for (int i = 0; i < r.n; i++)              /* a forced rule matches every call */
            for (int k = 0; k < CT_NKEYS; k++)
                CHECK(r.rules[i].key[k].lo == 0 && r.rules[i].key[k].hi == UINT64_MAX);
        for (int c = 0; c < CT_NCOLLS; c++) {      /* what the interposer takes: the first */
            ct_point p = {{7, 3, 3, 12345}};
            CHECK(ct_rules_match(&r, (ct_coll)c, &p) ==
                  (r.count[c] ? &r.rules[r.first[c]] : NULL));
        }
        exercise(&r);
    }
    finish_input(parse, text, &r, rc, err, sizeof err, NAME);
    return 0;
}
