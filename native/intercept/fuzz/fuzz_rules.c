/* libFuzzer target: the rules-file parser (ct_rules_parse, docs/rules.md).
 * The input is the file's text, so every corpus file is a rules file that
 * `colltune-rules check` reads too. Per input: parse; on success check the
 * table (fuzz_common.h), look up points with ct_rules_match against a naive
 * reference, format every rule with ct_rule_format, free; on failure check
 * the "fuzz.rules:LINE: problem" message, then parse again with short error
 * buffers. Build and run: docs/fuzzing.md (make -C native fuzz). */
#include "fuzz_common.h"

#define NAME "fuzz.rules"

static int parse(const char *text, ct_rules *out, char *err, size_t errlen)
{
    return ct_rules_parse(text, NAME, out, err, errlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size), err[1024];
    ct_rules r;
    int rc;
    memset(&r, 0xa5, sizeof r);                   /* the parser zeroes *out itself */
    memset(err, 'x', sizeof err);
    rc = parse(text, &r, err, sizeof err);
    if (rc == 0) {
        CHECK(err[0] == '\0');
        check_rules(&r);
        for (int c = 0; c < CT_NCOLLS; c++)       /* the file's floors: size, nodes, ppn >= 1 */
            for (int i = r.first[c]; i < r.first[c] + r.count[c]; i++)
                for (int k = 0; k < CT_KEY_BYTES; k++)
                    CHECK(r.rules[i].key[k].lo >= 1 ||
                          (r.rules[i].key[k].lo == 0 && r.rules[i].key[k].hi == UINT64_MAX));
        exercise(&r);
    }
    finish_input(parse, text, &r, rc, err, sizeof err, NAME);
    return 0;
}
