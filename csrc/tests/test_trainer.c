/* The native trainer's core (trainer_internal.h): the tiny vocab's word
 * counts laid out as the module lays out a mapping's, and as packed counts,
 * then trained; the merges must be the naive trainer's (expected.h), with the
 * heap's limit large and as small as it goes. */
#include "trainer_internal.h"

#include "test_core.h"

#include "expected.h"

#define COUNT(array) (sizeof(array) / sizeof((array)[0]))

/* Run the merges of a loaded s (at most `merges`), checked against the naive
 * trainer's. */
static void
check_run(State *s, int64_t merges, const char *what)
{
    REQUIRE(train_prepare(s, merges) == 0, "%s: out of memory", what);
    int64_t batch = 1;
    int32_t made;
    while ((made = train_batch(s, batch++)) == BATCH) {
    }
    REQUIRE(made >= 0, "%s: out of memory", what);
    CHECK(s->num_merges == (int32_t)COUNT(train_merges), "%s: %d merges",
          what, (int)s->num_merges);
    for (int32_t i = 0; i < s->num_merges && i < (int32_t)COUNT(train_merges);
         i++)
    {
        const MergeCase *m = &train_merges[i];
        size_t left_len, right_len;
        const uint8_t *left = token_bytes(&s->tok, s->merge_left[i], &left_len);
        const uint8_t *right =
            token_bytes(&s->tok, s->merge_right[i], &right_len);
        CHECK(left_len == m->left_len && right_len == m->right_len &&
                  memcmp(left, m->left, left_len) == 0 &&
                  memcmp(right, m->right, right_len) == 0,
              "%s: merge %d is (%.*s, %.*s), not (%s, %s)", what, (int)i,
              (int)left_len, (const char *)left, (int)right_len,
              (const char *)right, m->left, m->right);
    }
    TrainStat stats[TRAIN_STATS];
    train_stats(s, stats);
    CHECK(strcmp(stats[0].name, "words") == 0 &&
              stats[0].value == s->num_words,
          "%s: statistics", what);
}

/* The word counts as a mapping's are laid out (py/trainer_module.c). */
static int
load_words(State *s)
{
    Sizes sizes = {.cells = 1};
    for (size_t k = 0; k < COUNT(train_words); k++) {
        if (train_size_word(&sizes, (int64_t)train_words[k].len,
                            train_words[k].count) != TRAIN_OK)
        {
            return -1;
        }
    }
    if (train_alloc_cells(s, &sizes) != TRAIN_OK) {
        return -1;
    }
    int32_t n = 0, w = 0;
    for (size_t k = 0; k < COUNT(train_words); k++) {
        if (train_words[k].len < 2) {
            continue;
        }
        if (train_lay_word(s, &n, train_words[k].count,
                           (const unsigned char *)train_words[k].word,
                           train_words[k].len) != TRAIN_OK)
        {
            return -1;
        }
        w++;
    }
    return train_end_words(s, n, w) == TRAIN_OK ? 0 : -1;
}

/* The word counts packed (packed.h), into a new buffer of *size bytes. */
static unsigned char *
packed_words(size_t *size)
{
    uint64_t n = COUNT(train_words);
    size_t bytes = 0;
    for (size_t k = 0; k < n; k++) {
        bytes += train_words[k].len;
    }
    *size = PACKED_HEADER + 12 * n + bytes;
    unsigned char *buf = malloc(*size);
    if (buf == NULL) {
        return NULL;
    }
    uint32_t version = PACKED_VERSION;
    memcpy(buf, PACKED_MAGIC, 4);
    memcpy(buf + 4, &version, 4);
    memcpy(buf + 8, &n, 8);
    unsigned char *counts = buf + PACKED_HEADER, *lens = counts + 8 * n,
                  *words = lens + 4 * n;
    for (size_t k = 0; k < n; k++) {
        uint32_t len = (uint32_t)train_words[k].len;
        memcpy(counts + 8 * k, &train_words[k].count, 8);
        memcpy(lens + 4 * k, &len, 4);
        memcpy(words, train_words[k].word, len);
        words += len;
    }
    return buf;
}

void
test_trainer(void)
{
    /* room for more merges than the words allow: the run ends when no pair
     * is left, or at the naive trainer's count */
    int64_t budget = (int64_t)COUNT(train_merges);
    static const size_t limits[] = {HEAP_LIMIT, 4};
    for (size_t l = 0; l < COUNT(limits); l++) {
        State s = {0};
        s.heap_limit = limits[l];
        if (load_words(&s) == 0) {
            check_run(&s, budget, limits[l] == 4 ? "mapping, heap of 4"
                                                 : "mapping");
        }
        else {
            CHECK(0, "the words are laid out");
        }
        state_free(&s);
    }
    size_t size;
    unsigned char *buf = packed_words(&size);
    REQUIRE(buf != NULL, "out of memory");
    PackedView view;
    PackedError err;
    REQUIRE(bpe_packed_open(&view, buf, size, &err) == PACKED_OK,
            "packed words");
    State s = {0};
    s.heap_limit = HEAP_LIMIT;
    uint64_t bad = 0;
    CHECK(train_load_packed(&s, &view, &bad) == TRAIN_OK, "packed loaded");
    check_run(&s, budget, "packed");
    state_free(&s);
    /* a word counted 0 is refused, by its index */
    int64_t zero = 0;
    memcpy(buf + PACKED_HEADER + 8 * 2, &zero, 8);
    State z = {0};
    z.heap_limit = HEAP_LIMIT;
    CHECK(train_load_packed(&z, &view, &bad) == TRAIN_BAD_COUNT && bad == 2,
          "word 2's count 0");
    state_free(&z);
    free(buf);
    /* sizes past the 64-bit counts */
    Sizes sizes = {.cells = 1};
    CHECK(train_size_word(&sizes, 3, INT64_MAX / 2) == TRAIN_OK &&
              train_size_word(&sizes, 3, 2) == TRAIN_TOO_MANY_OCCURRENCES,
          "occurrences past 2**63 - 1");
}
