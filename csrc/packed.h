/* The packed word counts: the compact, serialisable form of a word -> count
 * table that the pre-token counter writes (PretokenCounter.to_packed, in
 * bpe_impls._native) and reads (add_packed), and the trainer reads
 * (bpe_impls._native_train.train); bpe_impls/corpus/tally.py has the
 * pure-Python twin (pack_counts, unpack_counts). */
#ifndef BPE_PACKED_H
#define BPE_PACKED_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The packed word counts (PretokenCounter.to_packed, read by add_packed and by
 * the trainer, bpe_impls._native_train): one flat buffer, native byte order,
 *
 *     "BPEW" | uint32 version (1) | uint64 n
 *     | int64 counts[n] | uint32 lengths[n] | the n words' bytes back to back
 *
 * so a table of millions of words crosses threads, processes and the two
 * extensions as one object of about 13 bytes + its length per word, never as
 * a Python object per word. The counts come first, 8-byte aligned. */
#define PACKED_MAGIC "BPEW"
#define PACKED_VERSION 1
#define PACKED_HEADER 16

typedef struct {
    /* int64s and uint32s, possibly unaligned (any buffer): read by memcpy */
    const unsigned char *counts;
    const unsigned char *lengths;
    const unsigned char *bytes;
    uint64_t n;
} PackedView;

/* What is wrong with a buffer that bpe_packed_open refuses; `value` is the
 * version read (PACKED_BAD_VERSION), the word count (PACKED_TOO_MANY), the
 * word that ends past the buffer (PACKED_PAST_END) or the bytes left after
 * the last word (PACKED_TRAILING). py/packed_py.h turns it into the
 * ValueError's one line. */
enum {
    PACKED_OK = 0,
    PACKED_NO_HEADER,
    PACKED_BAD_VERSION,
    PACKED_TOO_MANY,
    PACKED_PAST_END,
    PACKED_TRAILING,
};

typedef struct {
    int what;
    uint64_t value;
} PackedError;

/* Check buf[0:len] is a well-formed packed buffer and set *view to its parts:
 * PACKED_OK, or what is wrong (also in *err). Counts are not checked: the
 * readers decide what a bad count is. */
static inline int
bpe_packed_open(PackedView *view, const unsigned char *buf, size_t len,
                PackedError *err)
{
    uint32_t version;
    uint64_t n;
    err->value = 0;
    if (len < PACKED_HEADER || memcmp(buf, PACKED_MAGIC, 4) != 0) {
        return err->what = PACKED_NO_HEADER;
    }
    memcpy(&version, buf + 4, 4);
    memcpy(&n, buf + 8, 8);
    if (version != PACKED_VERSION) {
        err->value = version;
        return err->what = PACKED_BAD_VERSION;
    }
    if (n > (len - PACKED_HEADER) / 12) {
        err->value = n;
        return err->what = PACKED_TOO_MANY;
    }
    view->n = n;
    view->counts = buf + PACKED_HEADER;
    view->lengths = buf + PACKED_HEADER + 8 * n;
    view->bytes = view->lengths + 4 * n;
    uint64_t total = 0, room = len - PACKED_HEADER - 12 * n;
    for (uint64_t k = 0; k < n; k++) {
        uint32_t l;
        memcpy(&l, view->lengths + 4 * k, 4);
        total += l;
        if (total > room) {
            err->value = k;
            return err->what = PACKED_PAST_END;
        }
    }
    if (total != room) {
        err->value = room - total;
        return err->what = PACKED_TRAILING;
    }
    return err->what = PACKED_OK;
}

/* Word k's length (words are read in order: the caller keeps the offset). */
static inline uint32_t
bpe_packed_len(const PackedView *view, uint64_t k)
{
    uint32_t l;
    memcpy(&l, view->lengths + 4 * k, 4);
    return l;
}

static inline int64_t
bpe_packed_count(const PackedView *view, uint64_t k)
{
    int64_t c;
    memcpy(&c, view->counts + 8 * k, 8);
    return c;
}

/* The first word whose count is not positive (which the readers refuse), or
 * view->n if there is none. */
static inline uint64_t
bpe_packed_first_bad_count(const PackedView *view)
{
    for (uint64_t k = 0; k < view->n; k++) {
        if (bpe_packed_count(view, k) <= 0) {
            return k;
        }
    }
    return view->n;
}

#endif /* BPE_PACKED_H */
