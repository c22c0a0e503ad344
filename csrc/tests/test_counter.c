/* The pre-token counter's core (counter.h, counter.c, bytes_map.c) and the
 * packed word counts (packed.h): counts of a small text in first-seen order
 * against the Python path's (expected.h), from UTF-8 and from code points;
 * merged on threads, packed and read back. */
#include <stdlib.h>
#include <string.h>

#include "counter.h"
#include "packed.h"
#include "test_core.h"

#include "expected.h"

#define COUNT(array) (sizeof(array) / sizeof((array)[0]))

/* Whether m holds exactly words[0:n] in this order, each count times
 * `times`. */
static int
holds(const BytesMap *m, const WordCount *words, size_t n, int64_t times)
{
    if (m->used != n) {
        return 0;
    }
    for (size_t k = 0; k < n; k++) {
        const Entry *e = &m->entries[k];
        unsigned char buf[INLINE_KEY];
        if (e->len != words[k].len || e->value != words[k].count * times ||
            memcmp(bpe_entry_key(m, e, buf), words[k].word, e->len) != 0)
        {
            return 0;
        }
    }
    return 1;
}

void
test_counter(void)
{
    size_t special_len = strlen(tiny_special);
    Specials sp;
    REQUIRE(bpe_specials_reserve(&sp, 1, special_len) == 0, "out of memory");
    bpe_specials_add(&sp, (const unsigned char *)tiny_special, special_len);
    const unsigned char *s = (const unsigned char *)count_text;
    size_t n = strlen(count_text);
    const char *special_at = strstr(count_text, tiny_special);
    REQUIRE(special_at != NULL, "count_text holds the special token");
    size_t cut = (size_t)(special_at - count_text);
    for (size_t k = 0; k < COUNT(count_cases); k++) {
        const CountCase *c = &count_cases[k];
        BytesMap m, again, merged, empty;
        REQUIRE(bpe_bm_init(&m, 16) == 0 && bpe_bm_init(&again, 16) == 0 &&
                    bpe_bm_init(&merged, 16) == 0 &&
                    bpe_bm_init(&empty, 1024) == 0,
                "out of memory");
        /* from UTF-8, split on the special token (a map of 16 slots grows) */
        CHECK(bpe_count_utf8(&m, &sp, s, n, c->pattern) == 1,
              "pattern %d: counted", c->pattern);
        CHECK(holds(&m, c->words, c->n, 1), "pattern %d: %zu pre-tokens",
              c->pattern, m.used);
        /* from code points (ASCII: one byte each), the text around the
         * special token in two calls */
        Text t;
        bpe_text_init(&t, 1, s, (ptrdiff_t)cut, 1);
        int err = bpe_count_text(&again, &t, c->pattern);
        bpe_text_close(&t);
        bpe_text_init(&t, 1, s + cut + special_len,
                      (ptrdiff_t)(n - cut - special_len), 1);
        err |= bpe_count_text(&again, &t, c->pattern);
        bpe_text_close(&t);
        CHECK(err == 0 && holds(&again, c->words, c->n, 1),
              "pattern %d: from code points", c->pattern);
        /* merged, on threads: into an empty map, then into itself's twin */
        CHECK(bpe_bm_merge(&merged, &m, 3) == 0 &&
                  holds(&merged, c->words, c->n, 1),
              "pattern %d: merged into an empty map", c->pattern);
        CHECK(bpe_bm_merge(&merged, &again, 2) == 0 &&
                  holds(&merged, c->words, c->n, 2),
              "pattern %d: merged twice", c->pattern);
        /* invalid UTF-8: nothing counted */
        CHECK(bpe_count_utf8(&empty, &sp, (const unsigned char *)"ab \377",
                             4, c->pattern) == 0 &&
                  empty.used == 0,
              "pattern %d: not UTF-8", c->pattern);
        /* packed on threads, then read back */
        PackPlan plan;
        uint64_t size = 0;
        REQUIRE(bpe_pack_plan(&plan, &merged, 1, 4, &size) == 0,
                "out of memory");
        unsigned char *buf = malloc(size);
        REQUIRE(buf != NULL, "out of memory");
        bpe_pack_write(&plan, buf);
        bpe_pack_free(&plan);
        PackedView view;
        PackedError perr;
        CHECK(bpe_packed_open(&view, buf, size, &perr) == PACKED_OK &&
                  view.n == c->n && bpe_packed_first_bad_count(&view) == c->n,
              "pattern %d: packed", c->pattern);
        CHECK(bpe_add_packed(&empty, &view) == 0 &&
                  holds(&empty, c->words, c->n, 2),
              "pattern %d: read back", c->pattern);
        free(buf);
        /* only the counts of at least 3 */
        REQUIRE(bpe_pack_plan(&plan, &merged, 3, 1, &size) == 0,
                "out of memory");
        size_t kept = 0;
        for (size_t w = 0; w < c->n; w++) {
            kept += c->words[w].count * 2 >= 3;
        }
        CHECK(plan.n == kept, "pattern %d: %llu counts of 3 or more",
              c->pattern, (unsigned long long)plan.n);
        bpe_pack_free(&plan);
        bpe_bm_free(&m);
        bpe_bm_free(&again);
        bpe_bm_free(&merged);
        bpe_bm_free(&empty);
    }
    bpe_specials_close(&sp);
}

void
test_packed(void)
{
    /* "BPEW", version 1, two words: "ab" x 3 and "c" x 1 */
    unsigned char buf[16 + 16 + 8 + 3 + 1];
    uint32_t version = 1, lens[2] = {2, 1};
    uint64_t n = 2;
    int64_t counts[2] = {3, 1};
    memcpy(buf, "BPEW", 4);
    memcpy(buf + 4, &version, 4);
    memcpy(buf + 8, &n, 8);
    memcpy(buf + 16, counts, 16);
    memcpy(buf + 32, lens, 8);
    memcpy(buf + 40, "abc", 3);
    size_t size = 43;
    PackedView view;
    PackedError err;
    CHECK(bpe_packed_open(&view, buf, size, &err) == PACKED_OK &&
              view.n == 2 && bpe_packed_len(&view, 0) == 2 &&
              bpe_packed_count(&view, 0) == 3,
          "two words");
    CHECK(bpe_packed_open(&view, buf, 15, &err) == PACKED_NO_HEADER,
          "too short");
    CHECK(bpe_packed_open(&view, buf, size + 1, &err) == PACKED_TRAILING &&
              err.value == 1,
          "a byte after the last word");
    CHECK(bpe_packed_open(&view, buf, size - 1, &err) == PACKED_PAST_END &&
              err.value == 1,
          "word 1 past the end");
    lens[0] = 1;
    memcpy(buf + 32, lens, 4);
    CHECK(bpe_packed_open(&view, buf, size, &err) == PACKED_TRAILING, "short");
    lens[0] = 2;
    memcpy(buf + 32, lens, 4);
    n = 1000;
    memcpy(buf + 8, &n, 8);
    CHECK(bpe_packed_open(&view, buf, size, &err) == PACKED_TOO_MANY &&
              err.value == 1000,
          "1000 words");
    n = 2;
    memcpy(buf + 8, &n, 8);
    version = 2;
    memcpy(buf + 4, &version, 4);
    CHECK(bpe_packed_open(&view, buf, size, &err) == PACKED_BAD_VERSION &&
              err.value == 2,
          "version 2");
    version = 1;
    memcpy(buf + 4, &version, 4);
    counts[1] = 0;
    memcpy(buf + 16, counts, 16);
    CHECK(bpe_packed_open(&view, buf, size, &err) == PACKED_OK &&
              bpe_packed_first_bad_count(&view) == 1,
          "word 1's count 0");
}
