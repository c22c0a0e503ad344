/* The encoder's core (encoder_internal.h): the tiny vocab's tables built as
 * the module builds them, then encode_text, encode_many and the settled cut,
 * with and without caches (one small enough to evict), against the ids the
 * Python encoder gives (expected.h). */
#include <stdlib.h>
#include <string.h>

#include "encoder_internal.h"
#include "test_core.h"

#include "expected.h"

#define COUNT(array) (sizeof(array) / sizeof((array)[0]))
#define N_MERGES COUNT(tiny_triples)

/* The tiny vocab's tables for `pattern`, read from packed triples as the
 * module reads a rank file's: 0, or -1. */
static int
tiny_tables(BpeTables *t, int pattern)
{
    memset(t, 0, sizeof(*t));
    memcpy(t->byte_ids, tiny_byte_ids, sizeof(t->byte_ids));
    uint32_t max_id = 0;
    size_t bad = 0;
    if (bpe_pairs_read_triples(&t->pairs, (const unsigned char *)tiny_triples,
                               N_MERGES, &max_id, &bad) != 0 ||
        bpe_tables_finish(t) < 0)
    {
        bpe_tables_clear(t);
        return -1;
    }
    t->pattern = pattern;
    return 0;
}

static void
tiny_specials(Specials *sp)
{
    size_t len = strlen(tiny_special);
    if (bpe_specials_reserve(sp, 1, len) == 0) {
        bpe_specials_add(sp, (const unsigned char *)tiny_special, len);
    }
}

static const uint32_t special_ids[] = {TINY_SPECIAL_ID};

static int
same_ids(const IdBuf *out, size_t from, const uint32_t *ids, size_t n)
{
    return out->len - from == n &&
           (n == 0 || memcmp(out->ids + from, ids, n * sizeof(uint32_t)) == 0);
}

/* Every case of `pattern` through cache c (NULL: none), twice (the second
 * time from the cache). */
static void
check_cases(const BpeTables *t, const Specials *sp, Cache *c, int pattern,
            const char *what)
{
    for (int round = 0; round < 2; round++) {
        for (size_t k = 0; k < COUNT(encode_cases); k++) {
            const EncodeCase *e = &encode_cases[k];
            if (e->pattern != pattern) {
                continue;
            }
            IdBuf out = {0};
            size_t cut = 0;
            int err = encode_text(t, c, sp, special_ids,
                                  (const unsigned char *)e->text,
                                  strlen(e->text), 0, &out, &cut);
            CHECK(err == 0 && same_ids(&out, 0, e->ids, e->n),
                  "pattern %d, %s, round %d: \"%.40s\" gives %zu ids, not %zu",
                  pattern, what, round, e->text, out.len, e->n);
            free(out.ids);
        }
    }
}

/* The settled cut: the ids of text[:cut], then those of text[cut:] alone,
 * are the ids of the whole (what encode_iterable relies on). */
static void
check_settled(const BpeTables *t, const Specials *sp, int pattern)
{
    for (size_t k = 0; k < COUNT(encode_cases); k++) {
        const EncodeCase *e = &encode_cases[k];
        if (e->pattern != pattern) {
            continue;
        }
        const unsigned char *s = (const unsigned char *)e->text;
        size_t n = strlen(e->text), cut = n + 1, unused;
        IdBuf out = {0};
        int err = encode_text(t, NULL, sp, special_ids, s, n, 1, &out, &cut);
        CHECK(err == 0 && cut <= n, "pattern %d: cut %zu of %zu", pattern,
              cut, n);
        err |= encode_text(t, NULL, sp, special_ids, s + cut, n - cut, 0,
                           &out, &unused);
        CHECK(err == 0 && same_ids(&out, 0, e->ids, e->n),
              "pattern %d: \"%.40s\" settled at %zu, then the rest", pattern,
              e->text, cut);
        free(out.ids);
    }
}

/* encode_many over every text of `pattern`, and a bad one. */
static void
check_many(const BpeTables *t, const Specials *sp, int pattern)
{
    Utf8Text texts[COUNT(encode_cases) + 1];
    const EncodeCase *cases[COUNT(encode_cases)];
    size_t count = 0;
    for (size_t k = 0; k < COUNT(encode_cases); k++) {
        if (encode_cases[k].pattern == pattern) {
            cases[count] = &encode_cases[k];
            texts[count].s = (const unsigned char *)encode_cases[k].text;
            texts[count].n = strlen(encode_cases[k].text);
            texts[count].valid = count % 2; /* checked or known valid */
            count++;
        }
    }
    int64_t offsets[COUNT(encode_cases) + 2] = {0};
    IdBuf out = {0};
    size_t bad = 0;
    Cache *c = cache_new(64);
    int err = encode_many(t, c, sp, special_ids, texts, count, -1, offsets,
                          &out, &bad);
    CHECK(err == 0, "encode_many: %d", err);
    for (size_t k = 0; err == 0 && k < count; k++) {
        size_t from = (size_t)offsets[k], to = (size_t)offsets[k + 1];
        IdBuf part = {out.ids + from, to - from, to - from};
        CHECK(same_ids(&part, 0, cases[k]->ids, cases[k]->n),
              "pattern %d: batch text %zu", pattern, k);
    }
    /* With a separator: each text's ids, then the separator, in its span. */
    const uint32_t separator = 70000;
    out.len = 0;
    err = encode_many(t, c, sp, special_ids, texts, count, separator, offsets,
                      &out, &bad);
    CHECK(err == 0, "encode_many with a separator: %d", err);
    for (size_t k = 0; err == 0 && k < count; k++) {
        size_t from = (size_t)offsets[k], to = (size_t)offsets[k + 1];
        IdBuf part = {out.ids + from, to - from - 1, to - from - 1};
        CHECK(to > from && out.ids[to - 1] == separator &&
                  same_ids(&part, 0, cases[k]->ids, cases[k]->n),
              "pattern %d: batch text %zu with a separator", pattern, k);
    }
    texts[count].s = (const unsigned char *)"ok \377";
    texts[count].n = 4;
    texts[count].valid = 0;
    out.len = 0;
    err = encode_many(t, c, sp, special_ids, texts, count + 1, -1, offsets,
                      &out, &bad);
    CHECK(err == 1 && bad == count, "the bad text is named (%d, %zu)", err,
          bad);
    cache_free(c);
    free(out.ids);
}

void
test_encoder(void)
{
    for (int pattern = 0; pattern < N_PATTERNS; pattern++) {
        BpeTables t;
        Specials sp;
        REQUIRE(tiny_tables(&t, pattern) == 0, "out of memory");
        tiny_specials(&sp);
        CHECK(sp.count == 1, "the special token");
        check_cases(&t, &sp, NULL, pattern, "no cache");
        Cache *small = cache_new(4), *large = cache_new(1 << 16);
        REQUIRE(small != NULL && large != NULL, "out of memory");
        check_cases(&t, &sp, small, pattern, "a cache of 4");
        check_cases(&t, &sp, large, pattern, "a cache of 65536");
        CHECK(small->used <= 4 && large->used > 4, "the caches hold %zu, %zu",
              small->used, large->used);
        check_settled(&t, &sp, pattern);
        check_many(&t, &sp, pattern);
        cache_free(small);
        cache_free(large);
        bpe_specials_close(&sp);
        bpe_tables_clear(&t);
    }
    /* the same pair map by bpe_pairs_add, one merge at a time (the module's
     * path for a list of merges); and an id that is no token id refused */
    PairMap pm;
    REQUIRE(bpe_pairs_init(&pm, N_MERGES) == 0, "out of memory");
    for (size_t k = 0; k < N_MERGES; k++) {
        bpe_pairs_add(&pm, tiny_triples[k][0], tiny_triples[k][1],
                      tiny_triples[k][2], (uint32_t)k);
    }
    for (size_t k = 0; k < N_MERGES; k++) {
        uint32_t merged = 0;
        uint32_t rank =
            pair_rank(&pm, tiny_triples[k][0], tiny_triples[k][1], &merged);
        /* a pair given twice keeps its first rank */
        CHECK(rank <= k && (rank < k || merged == tiny_triples[k][2]),
              "merge %zu", k);
    }
    free(pm.slots);
    uint32_t triple[3] = {1, UINT32_MAX, 2}, max_id = 0;
    size_t bad = 99;
    CHECK(bpe_pairs_read_triples(&pm, (const unsigned char *)triple, 1,
                                 &max_id, &bad) == 1 &&
              bad == 0,
          "UINT32_MAX is no id");
    free(pm.slots);
    /* ids narrowed to 2 bytes, and one that does not fit */
    uint32_t ids[3] = {1, 65535, 7};
    uint16_t half[3];
    CHECK(bpe_ids_narrow(half, ids, 3, 2) && half[1] == 65535 && half[2] == 7,
          "narrowed");
    ids[2] = 65536;
    CHECK(!bpe_ids_narrow(half, ids, 3, 2), "65536 does not fit");
    /* a batch's runs: bounds near each k/parts of the total */
    for (size_t k = 0; k < COUNT(batch_cases); k++) {
        const BatchCase *b = &batch_cases[k];
        size_t bounds[16];
        size_t n = bpe_run_bounds(b->ends, b->count, b->ends[b->count - 1],
                                  b->parts, bounds);
        CHECK(n == b->n && memcmp(bounds, b->bounds, n * sizeof(size_t)) == 0,
              "batch %zu: %zu bounds", k, n);
    }
}
