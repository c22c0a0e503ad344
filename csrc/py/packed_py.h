/* The packed word counts' faults (packed.h) as the ValueError both extensions
 * raise: bpe_impls/corpus/tally.py's unpack_counts says the same. */
#ifndef BPE_PACKED_PY_H
#define BPE_PACKED_PY_H

#include <Python.h>

#include "packed.h"

/* Set the ValueError for what bpe_packed_open found in a buffer of len bytes;
 * returns -1. */
static inline int
bpe_packed_raise(const PackedError *err, size_t len)
{
    switch (err->what) {
    case PACKED_NO_HEADER:
        PyErr_SetString(PyExc_ValueError,
                        "not packed word counts (no BPEW header)");
        break;
    case PACKED_BAD_VERSION:
        PyErr_Format(PyExc_ValueError,
                     "packed word counts of version %u; this build reads "
                     "version %d",
                     (unsigned)err->value, PACKED_VERSION);
        break;
    case PACKED_TOO_MANY:
        PyErr_Format(PyExc_ValueError,
                     "packed word counts: %llu words do not fit in %zu bytes",
                     (unsigned long long)err->value, len);
        break;
    case PACKED_PAST_END:
        PyErr_Format(PyExc_ValueError,
                     "packed word counts: word %llu ends past the "
                     "buffer's %zu bytes",
                     (unsigned long long)err->value, len);
        break;
    default:
        PyErr_Format(PyExc_ValueError,
                     "packed word counts: %llu bytes after the last word",
                     (unsigned long long)err->value);
        break;
    }
    return -1;
}

/* Set the ValueError for word k's count (not positive); returns -1. */
static inline int
bpe_packed_raise_count(const PackedView *view, uint64_t k)
{
    PyErr_Format(PyExc_ValueError,
                 "packed word counts: word %llu has count %lld; counts must "
                 "be positive",
                 (unsigned long long)k, (long long)bpe_packed_count(view, k));
    return -1;
}

#endif /* BPE_PACKED_PY_H */
