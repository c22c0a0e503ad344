/* Reading word_counts (a mapping, or packed counts) into the cell array,
 * with the GIL held. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "trainer_internal.h"

/* ---- reading word_counts (GIL held) ------------------------------------- */

static int
iter_start(ItemIter *it, PyObject *mapping)
{
    it->pos = 0;
    it->dict = PyDict_Check(mapping) ? mapping : NULL;
    it->items = NULL;
    if (it->dict == NULL) {
        PyObject *items = PyMapping_Items(mapping);
        if (items == NULL) {
            return -1;
        }
        it->items =
            PySequence_Fast(items, "word_counts.items() must be iterable");
        Py_DECREF(items);
        if (it->items == NULL) {
            return -1;
        }
    }
    return 0;
}

/* 1 and a borrowed (key, value), 0 at the end, -1 on error. */
static int
iter_next(ItemIter *it, PyObject **key, PyObject **value)
{
    if (it->dict != NULL) {
        return PyDict_Next(it->dict, &it->pos, key, value);
    }
    if (it->pos >= PySequence_Fast_GET_SIZE(it->items)) {
        return 0;
    }
    PyObject *item = PySequence_Fast_GET_ITEM(it->items, it->pos++);
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
        PyErr_SetString(PyExc_TypeError,
                        "word_counts.items() must yield (bytes, int) pairs");
        return -1;
    }
    *key = PyTuple_GET_ITEM(item, 0);
    *value = PyTuple_GET_ITEM(item, 1);
    return 1;
}

/* The count of `word` as int64 (check_word_counts has vetted it; this guards
 * the C side). A word of one byte (or none) has no pair, so no count of it is
 * too large: it only has to be positive, and *out is then left unset. */
static int
read_count(PyObject *word, PyObject *value, int64_t *out)
{
    if (!PyBytes_Check(word) || !PyLong_Check(value) || PyBool_Check(value)) {
        PyErr_Format(PyExc_TypeError,
                     "word counts must map bytes to int, got %R: %R", word,
                     value);
        return -1;
    }
    int overflow;
    long long count = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (count == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow > 0 && PyBytes_GET_SIZE(word) < 2) {
        return 0;
    }
    if (overflow > 0) {
        PyErr_Format(PyExc_OverflowError,
                     "word %R has count %R; the native trainer takes counts "
                     "up to 2**63 - 1",
                     word, value);
        return -1;
    }
    if (overflow < 0 || count <= 0) {
        PyErr_Format(PyExc_ValueError,
                     "word %R has count %R; counts must be positive", word,
                     value);
        return -1;
    }
    *out = (int64_t)count;
    return 0;
}

/* The cells for `words` words of up to max_len bytes filling `cells` cells
 * (their bytes, a boundary before each and one at the end), and the
 * boundaries' code. */
static int
alloc_cells(State *s, int64_t cells, int64_t words, int64_t max_len)
{
    s->num_cells = (int32_t)cells;
    s->val = malloc((size_t)cells * sizeof *s->val);
    if (!s->val) {
        PyErr_NoMemory();
        return -1;
    }
    /* Boundaries take the codes 0 .. room - 2, so each lies below
     * -(max_len) and every dead cell's offset; count_limit + words <= room - 1
     * codes, and count_limit is >= 512, as cells >= max_len + words + 1. */
    int64_t room = ((int64_t)1 << 31) - (max_len < 2 ? 2 : max_len);
    s->last_boundary = (int32_t)(BOUNDARY + room - 1);
    s->count_limit = room - words - 1;
    s->max_len = max_len;
    return 0;
}

/* Lay out a word (its boundary, then its bytes) from cell *n on. */
static int
lay_word(State *s, int32_t *n, int64_t count, const unsigned char *bytes,
         size_t len)
{
    if ((int64_t)len > s->max_len) {
        PyErr_SetString(PyExc_RuntimeError,
                        "word_counts changed while it was being read");
        return -1;
    }
    int64_t code = count;
    if (count >= s->count_limit) {
        if (bpe_reserve(&s->big_counts, &s->big_cap, s->num_big + 1,
                        sizeof *s->big_counts, 16) < 0)
        {
            PyErr_NoMemory();
            return -1;
        }
        code = s->count_limit + (int64_t)s->num_big;
        s->big_counts[s->num_big++] = count;
    }
    if (len >= WALK_LIMIT) {
        if (bpe_reserve(&s->long_starts, &s->long_cap, s->num_long + 1,
                        sizeof *s->long_starts, 16) < 0)
        {
            PyErr_NoMemory();
            return -1;
        }
        s->long_starts[s->num_long++] = *n;
    }
    int32_t *val = s->val + *n;
    val[0] = (int32_t)(BOUNDARY + code);
    for (size_t i = 0; i < len; i++) {
        val[1 + i] = bytes[i];
    }
    *n += (int32_t)len + 1;
    return 0;
}

/* Add one word of `len` bytes seen `count` times to the sizes; -1 (with
 * OverflowError) when the run could outgrow its 64-bit counts or 32-bit
 * cells. A word of one byte has no pair and never changes: not laid out. */
static int
size_word(Sizes *sizes, int64_t len, int64_t count)
{
    if (len < 2) {
        return 0;
    }
    /* Bound every pair count the run can reach: each is a sum over distinct
     * (word, position) occurrences, so none exceeds the total over all of
     * them. */
    if (count > (INT64_MAX - sizes->pairs_weight) / (len - 1)) {
        PyErr_SetString(
            PyExc_OverflowError,
            "the word counts sum to more than 2**63 - 1 pair occurrences, "
            "beyond the native trainer's 64-bit counts");
        return -1;
    }
    sizes->pairs_weight += count * (len - 1);
    sizes->cells += len + 1;
    sizes->words++;
    sizes->max_len = len > sizes->max_len ? len : sizes->max_len;
    /* cell, token and merge ids all stay below 2**31 */
    if (sizes->cells > INT32_MAX - 512) {
        PyErr_SetString(PyExc_OverflowError,
                        "the distinct words hold about 2**31 bytes or more, "
                        "beyond the native trainer's 32-bit cell indices");
        return -1;
    }
    return 0;
}

/* Lay out every word of two or more bytes in s->val. Two passes: size, then
 * fill. */
BPE_INTERNAL int
load_words(State *s, PyObject *word_counts)
{
    ItemIter it;
    PyObject *word, *value;
    Sizes sizes = {.cells = 1};
    int r;
    if (iter_start(&it, word_counts) < 0) {
        return -1;
    }
    while ((r = iter_next(&it, &word, &value)) > 0) {
        int64_t count = 0;
        if (read_count(word, value, &count) < 0) {
            goto fail;
        }
        if (size_word(&sizes, PyBytes_GET_SIZE(word), count) < 0) {
            goto fail;
        }
    }
    if (r < 0) {
        goto fail;
    }

    if (alloc_cells(s, sizes.cells, sizes.words, sizes.max_len) < 0) {
        goto fail;
    }
    int32_t n = 0, w = 0;
    /* nothing ran between the passes that could change the mapping */
    it.pos = 0;
    while ((r = iter_next(&it, &word, &value)) > 0) {
        Py_ssize_t len = PyBytes_GET_SIZE(word);
        if (len < 2) {
            continue;
        }
        if (n + len + 2 > s->num_cells || /* and the last boundary */
            w >= sizes.words) { /* only if the mapping changed under us */
            PyErr_SetString(PyExc_RuntimeError,
                            "word_counts changed while it was being read");
            goto fail;
        }
        const unsigned char *bytes =
            (const unsigned char *)PyBytes_AS_STRING(word);
        int64_t count = 0;
        if (read_count(word, value, &count) < 0 ||
            lay_word(s, &n, count, bytes, (size_t)len) < 0)
        {
            goto fail;
        }
        w++;
    }
    if (r < 0) {
        goto fail;
    }
    s->val[n++] = BOUNDARY; /* after the last word */
    if (n != s->num_cells) {
        PyErr_SetString(PyExc_RuntimeError,
                        "word_counts changed while it was being read");
        goto fail;
    }
    s->num_words = w;
    Py_XDECREF(it.items);
    return 0;
fail:
    Py_XDECREF(it.items);
    return -1;
}

/* Lay out the words of packed word counts (see counter.h) as load_words does
 * those of a mapping. The buffer is exported for the whole read (a bytearray
 * cannot resize) and no Python code runs meanwhile. */
BPE_INTERNAL int
load_packed(State *s, PyObject *packed)
{
    Py_buffer view;
    if (PyObject_GetBuffer(packed, &view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    PackedView p;
    Sizes sizes = {.cells = 1};
    if (bpe_packed_open(&p, view.buf, (size_t)view.len) < 0) {
        goto fail;
    }
    for (uint64_t k = 0; k < p.n; k++) {
        int64_t count = bpe_packed_count(&p, k);
        int64_t len = bpe_packed_len(&p, k);
        if (count <= 0) {
            PyErr_Format(PyExc_ValueError,
                         "packed word counts: word %llu has count %lld; "
                         "counts must be positive",
                         (unsigned long long)k, (long long)count);
            goto fail;
        }
        if (size_word(&sizes, len, count) < 0) {
            goto fail;
        }
    }
    if (alloc_cells(s, sizes.cells, sizes.words, sizes.max_len) < 0) {
        goto fail;
    }
    int32_t n = 0, w = 0;
    const unsigned char *bytes = p.bytes;
    for (uint64_t k = 0; k < p.n; k++) {
        uint32_t len = bpe_packed_len(&p, k);
        if (len >= 2) {
            if (lay_word(s, &n, bpe_packed_count(&p, k), bytes, len) < 0) {
                goto fail;
            }
            w++;
        }
        bytes += len;
    }
    s->val[n++] = BOUNDARY; /* after the last word */
    s->num_words = w;
    PyBuffer_Release(&view);
    return 0;
fail:
    PyBuffer_Release(&view);
    return -1;
}
