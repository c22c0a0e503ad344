/* The packed word counts: the compact, serialisable form of a word -> count
 * table that the pre-token counter writes (PretokenCounter.to_packed, in
 * bpe_impls._native) and reads (add_packed), and the trainer reads
 * (bpe_impls._native_train.train); bpe_impls/corpus/tally.py has the
 * pure-Python twin (pack_counts, unpack_counts). */
#ifndef BPE_PACKED_H
#define BPE_PACKED_H

#include <Python.h>
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

/* Check buf[0:len] is a well-formed packed buffer and set *view to its parts:
 * 0, or -1 with a one-line ValueError saying what is wrong (counts are not
 * checked: the readers decide what a bad count is). */
static inline int
bpe_packed_open(PackedView *view, const unsigned char *buf, size_t len)
{
    uint32_t version;
    uint64_t n;
    if (len < PACKED_HEADER || memcmp(buf, PACKED_MAGIC, 4) != 0) {
        PyErr_SetString(PyExc_ValueError,
                        "not packed word counts (no BPEW header)");
        return -1;
    }
    memcpy(&version, buf + 4, 4);
    memcpy(&n, buf + 8, 8);
    if (version != PACKED_VERSION) {
        PyErr_Format(PyExc_ValueError,
                     "packed word counts of version %u; this build reads "
                     "version %d",
                     (unsigned)version, PACKED_VERSION);
        return -1;
    }
    if (n > (len - PACKED_HEADER) / 12) {
        PyErr_Format(PyExc_ValueError,
                     "packed word counts: %llu words do not fit in %zu bytes",
                     (unsigned long long)n, len);
        return -1;
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
            PyErr_Format(PyExc_ValueError,
                         "packed word counts: word %llu ends past the "
                         "buffer's %zu bytes",
                         (unsigned long long)k, len);
            return -1;
        }
    }
    if (total != room) {
        PyErr_Format(PyExc_ValueError,
                     "packed word counts: %llu bytes after the last word",
                     (unsigned long long)(room - total));
        return -1;
    }
    return 0;
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

#endif /* BPE_PACKED_H */
