/* Laying the words out in the cell array (trainer.c describes it): sized in a
 * first pass, then filled; from packed word counts here, from a mapping by
 * the module (py/trainer_module.c) with the same steps. */
#include "trainer_internal.h"

BPE_INTERNAL int
train_size_word(Sizes *sizes, int64_t len, int64_t count)
{
    /* A word of one byte has no pair and never changes: not laid out. */
    if (len < 2) {
        return TRAIN_OK;
    }
    /* Bound every pair count the run can reach: each is a sum over distinct
     * (word, position) occurrences, so none exceeds the total over all of
     * them. */
    if (count > (INT64_MAX - sizes->pairs_weight) / (len - 1)) {
        return TRAIN_TOO_MANY_OCCURRENCES;
    }
    sizes->pairs_weight += count * (len - 1);
    sizes->cells += len + 1;
    sizes->words++;
    sizes->max_len = len > sizes->max_len ? len : sizes->max_len;
    /* cell, token and merge ids all stay below 2**31 */
    if (sizes->cells > INT32_MAX - 512) {
        return TRAIN_TOO_MANY_CELLS;
    }
    return TRAIN_OK;
}

/* The cells for `words` words of up to max_len bytes filling `cells` cells
 * (their bytes, a boundary before each and one at the end), and the
 * boundaries' code. */
BPE_INTERNAL int
train_alloc_cells(State *s, const Sizes *sizes)
{
    int64_t cells = sizes->cells, words = sizes->words,
            max_len = sizes->max_len;
    s->num_cells = (int32_t)cells;
    s->val = malloc((size_t)cells * sizeof *s->val);
    if (!s->val) {
        return TRAIN_NO_MEMORY;
    }
    /* Boundaries take the codes 0 .. room - 2, so each lies below
     * -(max_len) and every dead cell's offset; count_limit + words <= room - 1
     * codes, and count_limit is >= 512, as cells >= max_len + words + 1. */
    int64_t room = ((int64_t)1 << 31) - (max_len < 2 ? 2 : max_len);
    s->last_boundary = (int32_t)(BOUNDARY + room - 1);
    s->count_limit = room - words - 1;
    s->max_len = max_len;
    return TRAIN_OK;
}

BPE_INTERNAL int
train_lay_word(State *s, int32_t *n, int64_t count, const unsigned char *bytes,
               size_t len)
{
    /* (and room for the last boundary) */
    if ((int64_t)len > s->max_len || *n + (int64_t)len + 2 > s->num_cells) {
        return TRAIN_CHANGED;
    }
    int64_t code = count;
    if (count >= s->count_limit) {
        if (bpe_reserve(&s->big_counts, &s->big_cap, s->num_big + 1,
                        sizeof *s->big_counts, 16) < 0)
        {
            return TRAIN_NO_MEMORY;
        }
        code = s->count_limit + (int64_t)s->num_big;
        s->big_counts[s->num_big++] = count;
    }
    if (len >= WALK_LIMIT) {
        if (bpe_reserve(&s->long_starts, &s->long_cap, s->num_long + 1,
                        sizeof *s->long_starts, 16) < 0)
        {
            return TRAIN_NO_MEMORY;
        }
        s->long_starts[s->num_long++] = *n;
    }
    int32_t *val = s->val + *n;
    val[0] = (int32_t)(BOUNDARY + code);
    for (size_t i = 0; i < len; i++) {
        val[1 + i] = bytes[i];
    }
    *n += (int32_t)len + 1;
    return TRAIN_OK;
}

BPE_INTERNAL int
train_end_words(State *s, int32_t n, int32_t w)
{
    if (n + 1 != s->num_cells) {
        return TRAIN_CHANGED;
    }
    s->val[n] = BOUNDARY; /* after the last word */
    s->num_words = w;
    return TRAIN_OK;
}

BPE_INTERNAL int
train_load_packed(State *s, const PackedView *p, uint64_t *bad)
{
    Sizes sizes = {.cells = 1};
    for (uint64_t k = 0; k < p->n; k++) {
        int64_t count = bpe_packed_count(p, k);
        if (count <= 0) {
            *bad = k;
            return TRAIN_BAD_COUNT;
        }
        int status = train_size_word(&sizes, bpe_packed_len(p, k), count);
        if (status != TRAIN_OK) {
            return status;
        }
    }
    if (train_alloc_cells(s, &sizes) != TRAIN_OK) {
        return TRAIN_NO_MEMORY;
    }
    int32_t n = 0, w = 0;
    const unsigned char *bytes = p->bytes;
    for (uint64_t k = 0; k < p->n; k++) {
        uint32_t len = bpe_packed_len(p, k);
        if (len >= 2) {
            int status = train_lay_word(s, &n, bpe_packed_count(p, k), bytes,
                                        len);
            if (status != TRAIN_OK) {
                return status;
            }
            w++;
        }
        bytes += len;
    }
    return train_end_words(s, n, w);
}
