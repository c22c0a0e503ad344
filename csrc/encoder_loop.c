/* Encoding a text: each pre-token through the cache or BPE, special tokens,
 * the settled cut of encode_iterable, and a batch's texts in turn. Reads the
 * tables and the inputs, writes only the call's cache and output: the Python
 * type runs it without the GIL. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "encoder_internal.h"

BPE_INTERNAL int
encode_pretoken(const BpeTables *t, const unsigned char *key, size_t len,
                IdBuf *out)
{
    if (len > SCAN_LIMIT) {
        uint32_t *ids = malloc(len * sizeof(uint32_t));
        if (ids == NULL) {
            return -1;
        }
        for (size_t k = 0; k < len; k++) {
            ids[k] = t->byte_ids[key[k]];
        }
        size_t n = bpe_heap(&t->pairs, ids, len);
        if (n != (size_t)-1) {
            memcpy(out->ids + out->len, ids, n * sizeof(uint32_t));
            out->len += n;
        }
        free(ids);
        return n == (size_t)-1 ? -1 : 0;
    }
    uint32_t ranks[SCAN_LIMIT], merged[SCAN_LIMIT];
    uint32_t *ids = out->ids + out->len;
    for (size_t k = 0; k < len; k++) {
        ids[k] = t->byte_ids[key[k]];
    }
    out->len += t->merged.slots != NULL
                    ? bpe_scan_merged(&t->merged, t->byte_merged, key, ids,
                                      len, merged)
                    : bpe_scan(&t->pairs, t->byte_pairs, key, ids, len,
                               ranks, merged);
    return 0;
}

/* A cached entry's ids (n > CACHE_INLINE_IDS) from the id arena to dst, in
 * 16-byte chunks (no call to memcpy for a few ids): up to 3 ids more are read
 * (ID_ARENA_SLACK) and written (encode_token's room). */
BPE_ALWAYS_INLINE void
copy_ids(uint32_t *dst, const uint32_t *src, size_t n)
{
    /* (typed copies, not memcpy: a memcpy may alias anything, so the
     * compiler would reload the encode loop's state after each one) */
    for (size_t k = 0; k < n; k += 4) {
        dst[k] = src[k];
        dst[k + 1] = src[k + 1];
        dst[k + 2] = src[k + 2];
        dst[k + 3] = src[k + 3];
    }
}

/* A hit: the slot's ids written at dst (which has room for a whole inline
 * copy, or n rounded up to 4), the slot marked hit; returns their number. */
BPE_ALWAYS_INLINE size_t
emit_hit(const Cache *c, CacheSlot *slot, uint32_t *dst)
{
    size_t n = slot->n & ~HOT;
    if (!(slot->n & HOT)) { /* (no store, so no dirty line, on most hits) */
        slot->n |= HOT;
    }
    if (n <= CACHE_INLINE_IDS) { /* a fixed-size copy: no loop */
        dst[0] = slot->ids[0];
        dst[1] = slot->ids[1];
        dst[2] = slot->ids[2];
    }
    else {
        copy_ids(dst, c->id_arena + slot->ids[0], n);
    }
    return n;
}

/* The cached slot of pre-token s[0:len] (len <= MAX_CACHED_BYTES; `room` the
 * bytes readable from s on), or NULL if it is not cached. */
BPE_ALWAYS_INLINE CacheSlot *
cache_lookup(const Cache *c, const unsigned char *s, size_t len, size_t room)
{
    CacheSlot *slot;
    if (len <= INLINE_KEY_BYTES) {
        uint64_t k0, k1;
        cache_pack(s, len, room, &k0, &k1);
        slot = cache_find_short(c, k0, k1, cache_hash_short(k0, k1));
    }
    else {
        slot = cache_find_long(c, s, len, bpe_hash_bytes(s, len));
    }
    return slot->k1 ? slot : NULL;
}

/* A pre-token missed by the cache (or with none): its ids by BPE appended to
 * out (which has room for len ids), then cached; -1 when out of memory. */
static int
encode_miss(const BpeTables *t, Cache *c, const unsigned char *s, size_t len,
            size_t room, IdBuf *out)
{
    size_t before = out->len;
    if (encode_pretoken(t, s, len, out) < 0) {
        return -1;
    }
    if (c != NULL && cache_store(c, s, len, room, out->ids + before,
                                 out->len - before) < 0)
    {
        return -1;
    }
    return 0;
}

/* A short pre-token (k0, k1) that missed the cache at the free slot `slot`:
 * its ids by BPE appended to out (which has room for len ids), then cached,
 * in that slot when no slot has to move (no second probe); -1 when out of
 * memory. */
static int
encode_miss_short(const BpeTables *t, Cache *c, CacheSlot *slot, uint64_t k0,
                  uint64_t k1, const unsigned char *s, size_t len, size_t room,
                  IdBuf *out)
{
    size_t before = out->len;
    if (encode_pretoken(t, s, len, out) < 0) {
        return -1;
    }
    size_t n = out->len - before;
    if (cache_has_room(c, n)) {
        return cache_fill(c, slot, k0, k1, len, out->ids + before, n);
    }
    return cache_store(c, s, len, room, out->ids + before, n);
}

/* One pre-token's ids (from the cache, else by BPE, then cached), appended to
 * out; -1 when out of memory. s[0:len] is the pre-token, `room` the bytes
 * readable from s on. */
BPE_ALWAYS_INLINE int
encode_token(const BpeTables *t, Cache *c, const unsigned char *s, size_t len,
             size_t room, IdBuf *out)
{
    /* room for the ids (at most one a byte) and for a whole inline copy */
    if (out->len + len + CACHE_INLINE_IDS > out->cap &&
        idbuf_reserve(out, len + CACHE_INLINE_IDS) < 0)
    {
        return -1;
    }
    CacheSlot *slot;
    if (c != NULL && len <= MAX_CACHED_BYTES &&
        (slot = cache_lookup(c, s, len, room)) != NULL)
    {
        out->len += emit_hit(c, slot, out->ids + out->len);
        return 0;
    }
    return encode_miss(t, c, s, len, room, out);
}

/* ---- encoding a text ----------------------------------------------------- */

/* The pre-tokens of s[*i:to] one at a time, while the cache is small enough
 * to stay in L2 (or is off): the hit path works on local copies of the cache's
 * and the output's fields. Returns at `to`, or as soon as a miss grows the
 * cache past PREFETCH_MIN_SLOTS; *i is where it stopped. 0, or -1 if out of
 * memory. */
BPE_ALWAYS_INLINE int
encode_one_by_one(const BpeTables *t, Cache *c, const unsigned char *s,
                  size_t *i, size_t to, size_t n, IdBuf *out, Spans *spans,
                  int pattern)
{
    CacheSlot *slots = c ? c->slots : NULL;
    uint32_t *ids = out->ids;
    size_t at = *i, len_out = out->len, cap = out->cap, mask = c ? c->mask : 0;
    unsigned shift = c ? c->shift : 0;
    int status = 0;
    while (at < to) {
        size_t j = bpe_spans_next(spans, s, at, to, pattern), len = j - at;
        if (c != NULL && len <= INLINE_KEY_BYTES &&
            len_out + INLINE_KEY_BYTES + CACHE_INLINE_IDS <= cap)
        {
            uint64_t k0, k1;
            cache_pack(s + at, len, n - at, &k0, &k1);
            CacheSlot *slot = slots_find_short(slots, mask, shift, k0, k1,
                                               cache_hash_short(k0, k1));
            if (slot->k1) {
                len_out += emit_hit(c, slot, ids + len_out);
                at = j;
                continue;
            }
            out->len = len_out;
            status = encode_miss_short(t, c, slot, k0, k1, s + at, len, n - at,
                                       out);
        }
        else {
            out->len = len_out;
            status = encode_token(t, c, s + at, len, n - at, out);
        }
        if (status < 0) {
            break;
        }
        at = j;
        ids = out->ids;
        len_out = out->len;
        cap = out->cap;
        if (c != NULL) {
            if (c->mask >= PREFETCH_MIN_SLOTS) {
                break;
            }
            slots = c->slots;
            mask = c->mask;
            shift = c->shift;
        }
    }
    if (status == 0) {
        out->len = len_out;
    }
    *i = at;
    return status;
}

/* Up to SPAN_BATCH pre-tokens from s[*i:to] in a cache larger than L2: the
 * scan computes each one's key and hash and prefetches its slot, so that by
 * the time the batch is looked up the slots are on their way. *i moves past
 * the batch. 0, or -1 if out of memory. */
BPE_ALWAYS_INLINE int
encode_prefetched_batch(const BpeTables *t, Cache *c, const unsigned char *s,
                        size_t *i, size_t to, size_t n, IdBuf *out,
                        Spans *spans, int pattern)
{
    size_t ends[SPAN_BATCH + 1];
    uint64_t k0s[SPAN_BATCH], k1s[SPAN_BATCH], hashes[SPAN_BATCH];
    size_t count = 0, at = *i;
    ends[0] = at;
    do {
        size_t j = bpe_spans_next(spans, s, at, to, pattern), len = j - at;
        if (len <= INLINE_KEY_BYTES) {
            cache_pack(s + at, len, n - at, &k0s[count], &k1s[count]);
            hashes[count] = cache_hash_short(k0s[count], k1s[count]);
        }
        else {
            hashes[count] =
                len <= MAX_CACHED_BYTES ? bpe_hash_bytes(s + at, len) : 0;
        }
        __builtin_prefetch(&c->slots[cache_home(c, hashes[count])]);
        ends[++count] = at = j;
    } while (count < SPAN_BATCH && at < to);
    *i = at;
    /* room for every id of the batch (at most one a byte) and for a whole
     * inline copy past the last */
    size_t bytes = at - ends[0];
    if (out->len + bytes + CACHE_INLINE_IDS > out->cap &&
        idbuf_reserve(out, bytes + CACHE_INLINE_IDS) < 0)
    {
        return -1;
    }
    for (size_t k = 0; k < count; k++) {
        size_t start = ends[k], len = ends[k + 1] - start;
        CacheSlot *slot = NULL;
        if (len <= INLINE_KEY_BYTES) {
            slot = cache_find_short(c, k0s[k], k1s[k], hashes[k]);
            if (!slot->k1) {
                if (encode_miss_short(t, c, slot, k0s[k], k1s[k], s + start,
                                      len, n - start, out) < 0)
                {
                    return -1;
                }
                continue;
            }
        }
        else if (len <= MAX_CACHED_BYTES) {
            slot = cache_find_long(c, s + start, len, hashes[k]);
        }
        if (slot != NULL && slot->k1) {
            out->len += emit_hit(c, slot, out->ids + out->len);
        }
        else if (encode_miss(t, c, s + start, len, n - start, out) < 0) {
            return -1;
        }
    }
    return 0;
}

/* The pre-tokens of the ordinary text s[from:to] (of data s[0:n]), encoded
 * into out. Inlined once per pattern (encode_ordinary), so each copy calls
 * its own scanner inline. */
BPE_ALWAYS_INLINE int
encode_range(const BpeTables *t, Cache *c, const unsigned char *s, size_t from,
             size_t to, size_t n, IdBuf *out, int pattern)
{
    Spans spans;
    bpe_spans_init(&spans, pattern);
    for (size_t i = from; i < to;) {
        int status = c == NULL || c->mask < PREFETCH_MIN_SLOTS
            ? encode_one_by_one(t, c, s, &i, to, n, out, &spans, pattern)
            : encode_prefetched_batch(t, c, s, &i, to, n, out, &spans,
                                      pattern);
        if (status < 0) {
            return -1;
        }
    }
    return 0;
}

static int
encode_ordinary(const BpeTables *t, Cache *c, const unsigned char *s,
                size_t from, size_t to, size_t n, IdBuf *out)
{
    switch (t->pattern) {
    case PAT_CL100K:
        return encode_range(t, c, s, from, to, n, out, PAT_CL100K);
    case PAT_O200K:
        return encode_range(t, c, s, from, to, n, out, PAT_O200K);
    default:
        return encode_range(t, c, s, from, to, n, out, PAT_GPT2);
    }
}

/* The number of characters in valid UTF-8. */
static size_t
count_chars(const unsigned char *s, size_t n)
{
    size_t chars = 0;
    for (size_t i = 0; i < n; i++) {
        chars += (s[i] & 0xC0) != 0x80;
    }
    return chars;
}

/* The byte offset of character number c (0-based) of valid UTF-8 s[0:n]; n +
 * 1 if there are no more than c characters. */
static size_t
byte_of_char(const unsigned char *s, size_t n, size_t c)
{
    for (size_t i = 0; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80 && c-- == 0) {
            return i;
        }
    }
    return c == 0 ? n : n + 1;
}

/* The settled rule of each pattern (SplitPattern.settle_margin and
 * settle_run, as PythonEncoder._settled applies them): a pre-token ending at
 * j, of text known up to `end` (a character boundary), is final once the first
 * non-whitespace character at or after j (GPT-2: the character at j, whatever
 * it is; o200k: after the run of letters and marks at j, which a run of
 * capitals followed by a lower-case letter would join) is known with
 * margin - 1 whole characters after it. */
static const struct {
    int skip_letters;
    int skip_space;
    int margin;
} settle_rule[N_PATTERNS] = {
    [PAT_GPT2] = {0, 0, 2},
    [PAT_CL100K] = {0, 1, 2},
    [PAT_O200K] = {1, 1, 4},
};

static int
is_settled(const unsigned char *s, size_t j, size_t end, int pattern)
{
    const unsigned char *char_class = bpe_char_class;
    size_t len;
    if (settle_rule[pattern].skip_letters) {
        while (j < end) {
            unsigned char c = char_class[bpe_utf8_at(s, j, &len)];
            if ((c & CLS_BASE) != CLS_LETTER && !(c & (CLS_UP | CLS_LOW))) {
                break; /* \p{M} is in both of o200k's letter sets */
            }
            j += len;
        }
    }
    if (settle_rule[pattern].skip_space) {
        while (j < end &&
               (char_class[bpe_utf8_at(s, j, &len)] & CLS_BASE) == CLS_SPACE)
        {
            j += len;
        }
    }
    for (int k = 0; k < settle_rule[pattern].margin; k++) {
        if (j >= end) {
            return 0;
        }
        bpe_utf8_at(s, j, &len);
        j += len;
    }
    return j <= end;
}

/* The whole of encode_utf8 over valid UTF-8 s[0:n], into out: split on the
 * special tokens (longest first), each one becoming its id, the text between
 * them encoded. With settled, Tokenizer._encode_settled in bytes, for
 * encode_iterable: only what more data could not change, its length in bytes
 * into *cut: special tokens that start where the longest one still fits, then
 * the pre-tokens after the last of them that end before the unsettled region
 * and are settled by their pattern's rule (is_settled). 0, or -1 when out of
 * memory. */
BPE_INTERNAL int
encode_text(const BpeTables *t, Cache *c, const Specials *sp,
            const uint32_t *special_ids, const unsigned char *s, size_t n,
            int settled, IdBuf *out, size_t *cut)
{
    /* settled: a special token starting before `settle` is whole in data
     * (every one fits). Counted in characters, as PythonEncoder._settled
     * counts them (in bytes the cut could differ), then turned into the byte
     * offset of that character (n + 1: none). */
    size_t settle = n + 1;
    if (settled && sp->count) {
        size_t longest = 0, chars = count_chars(s, n);
        for (size_t k = 0; k < sp->count; k++) {
            size_t ch = count_chars(sp->token[k], sp->len[k]);
            longest = ch > longest ? ch : longest;
        }
        settle = chars + 1 > longest ? byte_of_char(s, n, chars + 1 - longest)
                                     : 0;
    }
    for (size_t pos = 0; pos <= n;) {
        size_t len, which = 0;
        size_t at = bpe_next_special(sp, s, pos, n, &len, &which);
        if (settled &&
            (len == 0 || at >= settle)) { /* no settled special token left */
            /* The ordinary text from pos is known up to settle (a character
             * boundary). */
            size_t known = settle < n ? settle : n;
            *cut = pos;
            for (size_t i = pos; i < known;) {
                size_t j = bpe_next_end_utf8(s, i, known, t->pattern);
                if (!is_settled(s, j, known, t->pattern)) {
                    break;
                }
                if (encode_token(t, c, s + i, j - i, n - i, out) < 0) {
                    return -1;
                }
                *cut = i = j;
            }
            return 0;
        }
        if (encode_ordinary(t, c, s, pos, at, n, out) < 0) {
            return -1;
        }
        if (len) {
            if (idbuf_reserve(out, 1) < 0) {
                return -1;
            }
            out->ids[out->len++] = special_ids[which];
        }
        pos = at + (len ? len : 1);
    }
    return 0;
}

BPE_INTERNAL int
encode_many(const BpeTables *t, Cache *c, const Specials *sp,
            const uint32_t *special_ids, const Utf8Text *texts, size_t count,
            int64_t separator, int64_t *offsets, IdBuf *out, size_t *bad)
{
    for (size_t k = 0; k < count; k++) {
        const unsigned char *s = texts[k].s;
        size_t n = texts[k].n, cut;
        if (!texts[k].valid && !bpe_utf8_valid(s, n)) {
            *bad = k;
            return 1;
        }
        if (encode_text(t, c, sp, special_ids, s, n, 0, out, &cut) < 0) {
            return -1;
        }
        if (separator >= 0) {
            if (idbuf_reserve(out, 1) < 0) {
                return -1;
            }
            out->ids[out->len++] = (uint32_t)separator;
        }
        offsets[k + 1] = (int64_t)out->len;
    }
    return 0;
}

BPE_INTERNAL int
bpe_ids_narrow(void *dst, const uint32_t *ids, size_t n, int itemsize)
{
    if (itemsize == 4) {
        if (n) {
            memcpy(dst, ids, n * sizeof(uint32_t));
        }
        return 1;
    }
    uint16_t *half = dst;
    uint32_t high = 0;
    for (size_t k = 0; k < n; k++) {
        high |= ids[k];
        half[k] = (uint16_t)ids[k];
    }
    return high <= UINT16_MAX;
}
