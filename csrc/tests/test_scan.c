/* The scanners (scanner.h, scan_kind.h, scan_blocks.h), UTF-8 validation
 * (utf8.c) and the special tokens (specials.c): pre-token ends against the
 * Python path's (expected.h), over UTF-8, over 64-byte blocks and over code
 * points of each width. */
#include <stdlib.h>
#include <string.h>

#include "scan_blocks.h"
#include "scanner.h"
#include "test_core.h"

#include "expected.h"

#define COUNT(array) (sizeof(array) / sizeof((array)[0]))

void
test_classes(void)
{
    unsigned char *table = calloc(N_CODEPOINTS, 1);
    REQUIRE(table != NULL, "out of memory");
    for (size_t k = 0; k < COUNT(class_points); k++) {
        table[class_points[k][0]] = (unsigned char)class_points[k][1];
    }
    size_t bad = 0;
    CHECK(bpe_char_classes_set(table, N_CODEPOINTS - 1, &bad) ==
              BPE_CLASSES_BAD_SIZE,
          "a short table is refused");
    table[0x10000] = 7; /* no class */
    CHECK(bpe_char_classes_set(table, N_CODEPOINTS, &bad) ==
                  BPE_CLASSES_BAD_ENTRY &&
              bad == 0x10000,
          "entry 7 is refused, at %zu", bad);
    CHECK(bpe_char_class == NULL, "nothing installed yet");
    table[0x10000] = 0;
    CHECK(bpe_char_classes_set(table, N_CODEPOINTS, &bad) == BPE_CLASSES_SET,
          "installed");
    CHECK(bpe_char_class != NULL && bpe_char_class != table,
          "a copy is installed");
    CHECK(bpe_ascii_blocks == 1, "the ASCII classes are the blocks'");
    CHECK(bpe_char_classes_set(table, N_CODEPOINTS, &bad) == BPE_CLASSES_SET,
          "the same table again is accepted");
    table[0x10000] = CLS_SPACE;
    CHECK(bpe_char_classes_set(table, N_CODEPOINTS, &bad) ==
              BPE_CLASSES_OTHER,
          "another table is refused once one is set");
    CHECK(bpe_char_class[0x10000] == 0, "the installed table is unchanged");
    free(table);
}

void
test_utf8(void)
{
    static const struct {
        const char *s;
        int valid;
    } cases[] = {
        {"", 1},
        {"plain ASCII", 1},
        {"caf\303\251 \344\270\255 \360\237\230\200", 1},
        {"\300\200", 0},             /* overlong NUL */
        {"\340\200\200", 0},         /* overlong 3-byte */
        {"\355\240\200", 0},         /* a surrogate */
        {"\364\220\200\200", 0},     /* above U+10FFFF */
        {"\342\202", 0},             /* cut short */
        {"\200", 0},                 /* a lone continuation */
        {"\370\210\200\200\200", 0}, /* a 5-byte form */
    };
    /* each one alone, and after 37 bytes of ASCII and before 20 more, so
     * that the vector path sees it across a 16-byte boundary */
    for (size_t k = 0; k < COUNT(cases); k++) {
        const char *s = cases[k].s;
        CHECK(bpe_utf8_valid((const unsigned char *)s, strlen(s)) ==
                  cases[k].valid,
              "case %zu", k);
        char long_text[128];
        int n = snprintf(long_text, sizeof(long_text), "%37s%s%20s", "x", s,
                         "y");
        CHECK(bpe_utf8_valid((const unsigned char *)long_text, (size_t)n) ==
                  cases[k].valid,
              "case %zu inside ASCII", k);
    }
    for (size_t t = 0; t < COUNT(scan_texts); t++) {
        CHECK(bpe_utf8_valid((const unsigned char *)scan_texts[t],
                             strlen(scan_texts[t])),
              "scan text %zu", t);
    }
}

/* The code points of valid UTF-8 s[0:n] into cps (room for n); their
 * number. */
static size_t
decode(const unsigned char *s, size_t n, uint32_t *cps)
{
    size_t count = 0;
    for (size_t i = 0; i < n;) {
        size_t len;
        cps[count++] = bpe_utf8_at(s, i, &len);
        i += len;
    }
    return count;
}

/* The pre-token ends of text t (code points cps[0:count], of the widest
 * width `kind`) by bpe_text_next_end, checked against c, and each
 * pre-token's UTF-8 (bpe_text_utf8) against the text's bytes. */
static void
check_text_scan(const ScanCase *c, const uint32_t *cps, size_t count,
                int kind)
{
    void *units = malloc(count * (size_t)kind + 1);
    REQUIRE(units != NULL, "out of memory");
    int ascii = kind == 1; /* (a str of another kind is never ASCII) */
    for (size_t k = 0; k < count; k++) {
        ascii &= cps[k] < 0x80;
        if (kind == 1) {
            ((uint8_t *)units)[k] = (uint8_t)cps[k];
        }
        else if (kind == 2) {
            ((uint16_t *)units)[k] = (uint16_t)cps[k];
        }
        else {
            ((uint32_t *)units)[k] = cps[k];
        }
    }
    const unsigned char *s = (const unsigned char *)scan_texts[c->text];
    Text t;
    bpe_text_init(&t, kind, units, (ptrdiff_t)count, ascii);
    size_t k = 0, byte = 0;
    for (ptrdiff_t i = 0; i < t.n; k++) {
        ptrdiff_t j = bpe_text_next_end(&t, i, c->pattern);
        CHECK(k < c->n && (size_t)j == c->chars[k],
              "pattern %d, text %zu, kind %d: pre-token %zu ends at %td",
              c->pattern, c->text, kind, k, j);
        ptrdiff_t len;
        const unsigned char *utf8 = bpe_text_utf8(&t, i, j, &len);
        CHECK(utf8 != NULL && k < c->n && byte + (size_t)len == c->bytes[k] &&
                  memcmp(utf8, s + byte, (size_t)len) == 0,
              "pattern %d, text %zu, kind %d: pre-token %zu's UTF-8",
              c->pattern, c->text, kind, k);
        if (k >= c->n || utf8 == NULL) {
            break;
        }
        byte += (size_t)len;
        i = j;
    }
    CHECK(k == c->n, "pattern %d, text %zu, kind %d: %zu pre-tokens, not %zu",
          c->pattern, c->text, kind, k, c->n);
    bpe_text_close(&t);
    free(units);
}

void
test_scanners(void)
{
    for (size_t k = 0; k < COUNT(scan_cases); k++) {
        const ScanCase *c = &scan_cases[k];
        const unsigned char *s = (const unsigned char *)scan_texts[c->text];
        size_t n = strlen(scan_texts[c->text]);
        /* over UTF-8, one pre-token a call */
        size_t m = 0;
        for (size_t i = 0; i < n; m++) {
            size_t j = bpe_next_end_utf8(s, i, n, c->pattern);
            CHECK(m < c->n && j == c->bytes[m],
                  "pattern %d, text %zu: pre-token %zu ends at byte %zu",
                  c->pattern, c->text, m, j);
            if (m >= c->n) {
                break;
            }
            i = j;
        }
        CHECK(m == c->n, "pattern %d, text %zu: %zu pre-tokens over UTF-8",
              c->pattern, c->text, m);
        /* over 64-byte blocks of ASCII where the text has them (the
         * counter's and the encoder's path) */
        Spans spans;
        bpe_spans_init(&spans, c->pattern);
        m = 0;
        for (size_t i = 0; i < n; m++) {
            size_t j = bpe_spans_next(&spans, s, i, n, c->pattern);
            CHECK(m < c->n && j == c->bytes[m],
                  "pattern %d, text %zu: span %zu ends at byte %zu",
                  c->pattern, c->text, m, j);
            if (m >= c->n) {
                break;
            }
            i = j;
        }
        CHECK(m == c->n, "pattern %d, text %zu: %zu spans", c->pattern,
              c->text, m);
        /* over code points, in every width that holds them */
        uint32_t *cps = malloc((n + 1) * sizeof(uint32_t));
        REQUIRE(cps != NULL, "out of memory");
        size_t count = decode(s, n, cps);
        uint32_t widest = 0;
        for (size_t i = 0; i < count; i++) {
            widest = cps[i] > widest ? cps[i] : widest;
        }
        check_text_scan(c, cps, count, 4);
        if (widest < 0x10000) {
            check_text_scan(c, cps, count, 2);
        }
        if (widest < 0x100) {
            check_text_scan(c, cps, count, 1);
        }
        free(cps);
    }
    /* a lone surrogate (a str may hold one) has no UTF-8 */
    static const uint16_t surrogate[] = {'a', 'b', 0xD800, 'c'};
    Text t;
    bpe_text_init(&t, 2, surrogate, 4, 0);
    ptrdiff_t len;
    CHECK(bpe_text_utf8(&t, 0, 4, &len) == NULL && len == -1 && t.bad == 2 &&
              bpe_text_at(&t, t.bad) == 0xD800,
          "the surrogate at 2 (len %td, bad %td)", len, t.bad);
    bpe_text_close(&t);
    CHECK(bpe_pattern_id("o200k") == PAT_O200K && bpe_pattern_id("r50k") < 0,
          "pattern names");
}

void
test_specials(void)
{
    static const char *const tokens[] = {"<|a|>", "<|ab|>", "<|a", "\303\251!"};
    Specials sp;
    size_t total = 0;
    for (size_t k = 0; k < COUNT(tokens); k++) {
        total += strlen(tokens[k]);
    }
    REQUIRE(bpe_specials_reserve(&sp, COUNT(tokens), total) == 0,
            "out of memory");
    for (size_t k = 0; k < COUNT(tokens); k++) {
        bpe_specials_add(&sp, (const unsigned char *)tokens[k],
                         strlen(tokens[k]));
    }
    CHECK(sp.count == 4 && sp.bad == -1 && sp.n_first == 2, "4 tokens");
    /* longest first, stable among equals */
    CHECK(sp.origin[0] == 1 && sp.origin[1] == 0 && sp.origin[2] == 2 &&
              sp.origin[3] == 3,
          "the order by length");
    const unsigned char *s =
        (const unsigned char *)"x<|ab|>y<|a|><|a \303\251!<|b|>";
    size_t n = strlen((const char *)s), len, which, pos = 0;
    static const size_t at[] = {1, 8, 13, 17}, lens[] = {6, 5, 3, 3},
                        which_of[] = {1, 0, 2, 3};
    for (size_t k = 0; k < 4; k++) {
        size_t found = bpe_next_special(&sp, s, pos, n, &len, &which);
        CHECK(found == at[k] && len == lens[k] && which == which_of[k],
              "special %zu at %zu (len %zu, token %zu)", k, found, len, which);
        pos = found + len;
    }
    CHECK(bpe_next_special(&sp, s, pos, n, &len, &which) == n && len == 0,
          "no more");
    bpe_specials_close(&sp);
    /* a token that is not whole UTF-8 is recorded, not added silently */
    REQUIRE(bpe_specials_reserve(&sp, 2, 3) == 0, "out of memory");
    bpe_specials_add(&sp, (const unsigned char *)"ok", 2);
    bpe_specials_add(&sp, (const unsigned char *)"\303", 1);
    CHECK(sp.bad == 1, "token 1 is not UTF-8 (bad %td)", sp.bad);
    bpe_specials_close(&sp);
    /* none: nothing allocated, nothing found */
    REQUIRE(bpe_specials_reserve(&sp, 0, 0) == 0, "no tokens");
    CHECK(bpe_next_special(&sp, s, 0, n, &len, &which) == n && len == 0,
          "none found");
    bpe_specials_close(&sp);
}
