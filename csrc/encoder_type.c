/* Encoder: BPE over a rank table, with a bounded cache of pre-token -> ids.
 * Encodes whole UTF-8 texts (split on special tokens and pre-tokenized by the
 * scanner, scanner.h) without creating a Python object per pre-token.
 *
 * The encoding itself (encode_text) touches no Python object and runs with the
 * GIL released: it reads only its own copies of the inputs, the tables (held
 * by a reference taken with the GIL, so a concurrent __init__ cannot free
 * them) and a cache that the call owns for its duration (see CachePool). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "encoder_internal.h"

/* ---- the Python type ------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    /* NULL until an __init__ succeeds, and after one fails */
    Tables *tables;
} EncoderObject;

static void
Encoder_dealloc(EncoderObject *self)
{
    tables_decref(self->tables);
    self->tables = NULL;
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
as_id(PyObject *obj, uint32_t *out, const char *what)
{
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v < 0 || v >= (long long)UINT32_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "%s %lld is not a token id in 0..2**32-2", what, v);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* A new, empty pm with room for n merges: 0, or -1 with MemoryError. */
static int
pairs_alloc(PairMap *pm, size_t n)
{
    size_t capacity = 16;
    while (capacity < n * 2 + 2) {
        capacity *= 2;
    }
    pm->slots = malloc(capacity * sizeof(PairSlot));
    if (pm->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(pm->slots, 0xFF, capacity * sizeof(PairSlot));
    pm->mask = capacity - 1;
    return 0;
}

/* Merge (a, b) -> merged with this rank, unless the pair has a rank already. */
static void
pairs_add(PairMap *pm, uint32_t a, uint32_t b, uint32_t merged, uint32_t rank)
{
    uint64_t key = pair_key(a, b);
    size_t at = pair_slot(key, pm->mask);
    while (pm->slots[at].key != EMPTY_PAIR && pm->slots[at].key != key) {
        at = (at + 1) & pm->mask;
    }
    if (pm->slots[at].key == EMPTY_PAIR) {
        pm->slots[at].key = key;
        pm->slots[at].rank = rank;
        pm->slots[at].merged = merged;
    }
}

/* The merges (left, right, merged) in rank order into a new pm; a repeated
 * pair keeps its first rank. merges is a tuple the caller owns: the ids'
 * __index__ may run any Python code, but cannot change it. The largest id
 * seen goes to *max_id. */
static int
read_merges(PairMap *pm, PyObject *merges, uint32_t *max_id)
{
    Py_ssize_t n = PyTuple_GET_SIZE(merges);
    if (pairs_alloc(pm, (size_t)n) < 0) {
        return -1;
    }
    for (Py_ssize_t rank = 0; rank < n; rank++) {
        PyObject *item = PyTuple_GET_ITEM(merges, rank);
        uint32_t a, b, merged;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
            PyErr_Format(PyExc_ValueError,
                         "merge #%zd is not a (left, right, merged) tuple",
                         rank);
            return -1;
        }
        if (as_id(PyTuple_GET_ITEM(item, 0), &a, "left id") < 0 ||
            as_id(PyTuple_GET_ITEM(item, 1), &b, "right id") < 0 ||
            as_id(PyTuple_GET_ITEM(item, 2), &merged, "merged id") < 0)
        {
            return -1;
        }
        *max_id = merged > *max_id ? merged : *max_id;
        pairs_add(pm, a, b, merged, (uint32_t)rank);
    }
    return 0;
}

/* read_merges for the merges packed as native uint32 (left, right, merged)
 * triples in a bytes object (rank_file_tables' output): no Python object per
 * merge. */
static int
read_packed_merges(PairMap *pm, PyObject *packed, uint32_t *max_id)
{
    Py_ssize_t size = PyBytes_GET_SIZE(packed);
    if (size % (3 * sizeof(uint32_t)) != 0) {
        PyErr_SetString(PyExc_ValueError,
                        "packed merges must be whole uint32 triples");
        return -1;
    }
    size_t n = (size_t)size / (3 * sizeof(uint32_t));
    if (pairs_alloc(pm, n) < 0) {
        return -1;
    }
    const char *p = PyBytes_AS_STRING(packed);
    for (size_t rank = 0; rank < n; rank++) {
        uint32_t t[3];
        memcpy(t, p + rank * sizeof(t), sizeof(t));
        for (int k = 0; k < 3; k++) {
            if (t[k] == UINT32_MAX) {
                PyErr_Format(PyExc_ValueError,
                             "merge #%zu: id %u is not a token id in "
                             "0..2**32-2", rank, (unsigned)t[k]);
                return -1;
            }
        }
        *max_id = t[2] > *max_id ? t[2] : *max_id;
        pairs_add(pm, t[0], t[1], t[2], (uint32_t)rank);
    }
    return 0;
}

/* BPE's first round reads byte_pairs[x << 8 | y] (the rank and merged id of
 * the pair of byte ids of bytes x and y) instead of probing the pair map.
 * 0, or -1 with MemoryError. */
static int
tables_fill_byte_pairs(Tables *t)
{
    t->byte_pairs = malloc(65536 * sizeof(uint64_t));
    if (t->byte_pairs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t x = 0; x < 256; x++) {
        for (size_t y = 0; y < 256; y++) {
            uint32_t merged = 0;
            uint32_t rank = pair_rank(&t->pairs, t->byte_ids[x],
                                      t->byte_ids[y], &merged);
            t->byte_pairs[x << 8 | y] = (uint64_t)rank << 32 | merged;
        }
    }
    return 0;
}

/* New tables from __init__'s arguments (one reference), or NULL with an
 * exception set. Tuples of our own are read: a list passed in could change
 * under an id's __index__. */
static Tables *
tables_build(PyObject *byte_ids_arg, PyObject *merges_arg,
             Py_ssize_t cache_size, int pattern)
{
    PyObject *byte_seq = NULL, *merges = NULL;
    Tables *t = calloc(1, sizeof(Tables));
    if (t == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    t->refs = 1;
    byte_seq = PySequence_Tuple(byte_ids_arg);
    if (byte_seq == NULL) {
        goto fail;
    }
    if (PyTuple_GET_SIZE(byte_seq) != 256) {
        PyErr_SetString(PyExc_ValueError, "byte_ids must hold 256 ids");
        goto fail;
    }
    uint32_t max_id = 0;
    for (int b = 0; b < 256; b++) {
        if (as_id(PyTuple_GET_ITEM(byte_seq, b), &t->byte_ids[b],
                  "byte id") < 0)
        {
            goto fail;
        }
        max_id = t->byte_ids[b] > max_id ? t->byte_ids[b] : max_id;
    }
    if (PyBytes_Check(merges_arg)) {
        if (read_packed_merges(&t->pairs, merges_arg, &max_id) < 0) {
            goto fail;
        }
    }
    else {
        merges = PySequence_Tuple(merges_arg);
        if (merges == NULL || read_merges(&t->pairs, merges, &max_id) < 0) {
            goto fail;
        }
    }
    if (tables_fill_byte_pairs(t) < 0) {
        goto fail;
    }
    t->id_objects_len =
        max_id < MAX_ID_OBJECTS ? (size_t)max_id + 1 : MAX_ID_OBJECTS;
    t->id_objects = calloc(t->id_objects_len, sizeof(PyObject *));
    if (t->id_objects == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    t->cache_size = (size_t)cache_size;
    t->pattern = pattern;
    Py_DECREF(byte_seq);
    Py_XDECREF(merges);
    return t;
fail:
    tables_free(t);
    Py_XDECREF(byte_seq);
    Py_XDECREF(merges);
    return NULL;
}

/* The new tables are built aside (the ids' __index__ may run Python code that
 * uses this very encoder: encodes with it, or re-initialises it) and swapped
 * in at the end, when nothing can run in between. A re-init drops the old
 * tables (freed once no call uses them); a failed (re-)init leaves the
 * encoder not initialised, so it raises RuntimeError until an __init__
 * succeeds. */
static int
Encoder_init(EncoderObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"byte_ids", "merges", "cache_size", "pattern",
                             NULL};
    PyObject *byte_ids_arg, *merges_arg;
    const char *name = "gpt2";
    Py_ssize_t cache_size = 1 << 16;
    Tables *t = NULL;
    if (PyArg_ParseTupleAndKeywords(args, kwds, "OO|ns:Encoder", kwlist,
                                    &byte_ids_arg, &merges_arg, &cache_size,
                                    &name))
    {
        int pattern = bpe_pattern_id(name);
        if (pattern >= 0 && cache_size < 0) {
            PyErr_SetString(PyExc_ValueError,
                            "cache_size must be non-negative");
        }
        else if (pattern >= 0) {
            t = tables_build(byte_ids_arg, merges_arg, cache_size, pattern);
        }
    }
    /* No Python code from here to the end. */
    Tables *old = self->tables;
    self->tables = t;
    tables_decref(old);
    return t == NULL ? -1 : 0;
}

/* The tables of an initialised encoder, or NULL with RuntimeError set. */
static Tables *
encoder_tables(EncoderObject *self)
{
    if (self->tables == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Encoder is not initialised (never, or its last "
                        "__init__ failed)");
        return NULL;
    }
    return bpe_classes_ready() ? self->tables : NULL;
}

/* What one encode call holds: its copies of the special tokens and their
 * ids, a reference to the tables and a cache of its own. */
typedef struct {
    Specials sp;
    PyObject *ids_seq;
    uint32_t *special_ids;
    Tables *tables;
    Cache *cache;
    IdBuf out; /* the ids */
} Call;

/* The special tokens and their ids, read (and checked) in PythonEncoder's
 * order around the data's own checks: call_open_specials first, then the
 * data, then call_start. call_close must follow either way. */
static int
call_open_specials(Call *call, PyObject *specials_arg, PyObject *ids_arg)
{
    memset(call, 0, sizeof(*call));
    if (bpe_specials_open(&call->sp, specials_arg) < 0) {
        return -1;
    }
    call->ids_seq = PySequence_Tuple(ids_arg);
    return call->ids_seq == NULL ? -1 : 0;
}

/* The special ids checked and converted (an __index__ may run any Python
 * code: the data and the tokens are copies by now), then the tables and a
 * cache taken. No Python code runs after this until call_close. */
static int
call_start(Call *call, EncoderObject *self)
{
    Specials *sp = &call->sp;
    if ((size_t)PyTuple_GET_SIZE(call->ids_seq) != sp->count) {
        PyErr_SetString(PyExc_ValueError,
                        "one id is needed per special token");
        return -1;
    }
    if (sp->bad >= 0) {
        bpe_specials_refuse(sp);
        return -1;
    }
    call->special_ids = PyMem_Calloc(sp->count + 1, sizeof(uint32_t));
    if (call->special_ids == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t k = 0; k < sp->count; k++) {
        if (as_id(PyTuple_GET_ITEM(call->ids_seq, (Py_ssize_t)k),
                  &call->special_ids[k], "special id") < 0)
        {
            return -1;
        }
    }
    /* (an __index__ may have re-initialised the encoder) */
    Tables *t = encoder_tables(self);
    if (t == NULL) {
        return -1;
    }
    int failed;
    call->cache = tables_take_cache(t, &failed);
    if (failed) {
        PyErr_NoMemory();
        return -1;
    }
    call->tables = t;
    t->refs++;
    call->out = t->spare;
    call->out.len = 0;
    memset(&t->spare, 0, sizeof(t->spare));
    return 0;
}

/* Give back the cache (the call's results are built by then, or abandoned),
 * drop the tables. */
static void
call_close(Call *call)
{
    if (call->tables != NULL) {
        tables_give_cache(call->tables, call->cache);
        if (call->tables->spare.ids == NULL &&
            call->out.cap <= MAX_SPARE_IDS)
        {
            call->tables->spare = call->out;
            memset(&call->out, 0, sizeof(call->out));
        }
        tables_decref(call->tables);
    }
    free(call->out.ids);
    PyMem_Free(call->special_ids);
    Py_XDECREF(call->ids_seq);
    bpe_specials_close(&call->sp);
    memset(call, 0, sizeof(*call));
}

/* The data's bytes (a snapshot: see Utf8Data) checked as valid UTF-8, the
 * GIL released for a long one. A str gives its UTF-8 as CPython keeps it
 * (the str's own bytes when it is ASCII; else made once and kept with the
 * str), valid by construction, with no copy: a str is immutable, and d holds
 * a reference. A lone surrogate raises UnicodeEncodeError. */
static int
open_utf8(Utf8Data *d, PyObject *data_arg)
{
    if (PyUnicode_Check(data_arg)) {
        Py_ssize_t len;
        const char *utf8 = PyUnicode_AsUTF8AndSize(data_arg, &len);
        if (utf8 == NULL) {
            return -1;
        }
        memset(d, 0, sizeof(*d));
        d->obj = Py_NewRef(data_arg);
        d->buf = (const unsigned char *)utf8;
        d->len = (size_t)len;
        return 0;
    }
    if (bpe_data_open(d, data_arg) < 0) {
        return -1;
    }
    int valid;
    if (d->len >= NOGIL_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        valid = bpe_utf8_valid(d->buf, d->len);
        Py_END_ALLOW_THREADS
    }
    else {
        /* the scanner reads whole characters: never past a bad one */
        valid = bpe_utf8_valid(d->buf, d->len);
    }
    if (!valid) {
        PyErr_SetString(PyExc_ValueError, "data is not valid UTF-8");
        return -1;
    }
    return 0;
}

/* encode_text for one call, without the GIL when the data is long; -1 with
 * MemoryError set. */
static int
call_encode(Call *call, const Utf8Data *d, int settled, IdBuf *out,
            size_t *cut)
{
    int err;
    if (d->len >= NOGIL_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        err = encode_text(call->tables, call->cache, &call->sp,
                          call->special_ids, d->buf, d->len, settled, out,
                          cut);
        Py_END_ALLOW_THREADS
    }
    else {
        err = encode_text(call->tables, call->cache, &call->sp,
                          call->special_ids, d->buf, d->len, settled, out,
                          cut);
    }
    if (err < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* ids[0:n] into dst as native-endian unsigned integers of `itemsize` bytes
 * (2 or 4); for 2, whether every id fits (else dst is left part-written). */
static int
narrow_ids(char *dst, const uint32_t *ids, size_t n, int itemsize)
{
    if (itemsize == 4) {
        if (n) {
            memcpy(dst, ids, n * sizeof(uint32_t));
        }
        return 1;
    }
    uint16_t *half = (uint16_t *)(void *)dst; /* bytearray: malloc'd */
    uint32_t high = 0;
    for (size_t k = 0; k < n; k++) {
        high |= ids[k];
        half[k] = (uint16_t)ids[k];
    }
    return high <= UINT16_MAX;
}

/* The ids as native-endian unsigned integers of `itemsize` bytes (2 or 4), in
 * a new bytearray; ValueError naming the first id that 2 bytes cannot hold.
 * With the GIL; a long copy runs without it (the new bytearray is no other
 * code's yet), so a batch's threads do not take turns copying out. */
static PyObject *
ids_to_bytearray(const uint32_t *ids, size_t n, int itemsize)
{
    if (n > (size_t)PY_SSIZE_T_MAX / 4) {
        return PyErr_NoMemory();
    }
    PyObject *out =
        PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n * itemsize));
    if (out == NULL) {
        return NULL;
    }
    char *dst = PyByteArray_AS_STRING(out);
    int fits;
    if (n * (size_t)itemsize >= NOGIL_MIN_BYTES * 16) {
        Py_BEGIN_ALLOW_THREADS
        fits = narrow_ids(dst, ids, n, itemsize);
        Py_END_ALLOW_THREADS
    }
    else {
        fits = narrow_ids(dst, ids, n, itemsize);
    }
    if (!fits) {
        size_t k = 0;
        while (ids[k] <= UINT16_MAX) {
            k++;
        }
        Py_DECREF(out);
        return PyErr_Format(PyExc_ValueError,
                            "id %u (at %zu) does not fit in itemsize 2 (ids "
                            "below 65536)",
                            (unsigned)ids[k], k);
    }
    return out;
}

static int
check_itemsize(int itemsize)
{
    if (itemsize != 2 && itemsize != 4) {
        PyErr_Format(PyExc_ValueError, "itemsize must be 2 or 4, not %d",
                     itemsize);
        return -1;
    }
    return 0;
}

/* encode_utf8 and encode_utf8_buffer: as_buffer 0 for a list, else the
 * itemsize. */
static PyObject *
encode_one(EncoderObject *self, PyObject *data_arg, PyObject *specials_arg,
           PyObject *ids_arg, int settled, int as_buffer)
{
    if (encoder_tables(self) == NULL) {
        return NULL;
    }
    /* Everything the call reads is copied (or, for bytes, immutable) before
     * Python code can run: the special ids' __index__ may change the data,
     * the special tokens or this encoder. The checks come in
     * PythonEncoder.encode_utf8's order. */
    Call call;
    Utf8Data d = {0};
    PyObject *result = NULL;
    size_t cut = 0;
    if (call_open_specials(&call, specials_arg, ids_arg) < 0 ||
        open_utf8(&d, data_arg) < 0 || call_start(&call, self) < 0 ||
        call_encode(&call, &d, settled, &call.out, &cut) < 0)
    {
        goto done;
    }
    const IdBuf out = call.out;
    /* A list's ints come from the tables: they stay until call_close. */
    PyObject *ids = as_buffer ? ids_to_bytearray(out.ids, out.len, as_buffer)
                              : ids_to_list(call.tables, out.ids, out.len);
    if (ids != NULL) {
        result = settled ? Py_BuildValue("(Nn)", ids, (Py_ssize_t)cut) : ids;
    }
done:
    call_close(&call);
    bpe_data_close(&d);
    return result;
}

/* encode_utf8(data, special_tokens, special_ids, settled=False): the whole of
 * Tokenizer.encode over UTF-8 bytes: split on the special tokens (bytes,
 * longest first) in C, each one becoming its id, and the text between them
 * encoded straight from the bytes (no str slices, no per-token UTF-8
 * encoding). With settled, Tokenizer._encode_settled in bytes, for
 * encode_iterable: encode only what more data could not change and return
 * (ids, cut), cut a byte offset: special tokens that start where the longest
 * one still fits, then the pre-tokens after the last of them that end before
 * the unsettled region and are settled by their pattern's rule (is_settled).
 */
static PyObject *
Encoder_encode_utf8(EncoderObject *self, PyObject *args)
{
    PyObject *data_arg, *specials_arg, *ids_arg;
    int settled = 0;
    if (!PyArg_ParseTuple(args, "OOO|p:encode_utf8", &data_arg, &specials_arg,
                          &ids_arg, &settled))
    {
        return NULL;
    }
    return encode_one(self, data_arg, specials_arg, ids_arg, settled, 0);
}

static PyObject *
Encoder_encode_utf8_buffer(EncoderObject *self, PyObject *args,
                           PyObject *kwds)
{
    static char *kwlist[] = {"data",    "special_tokens", "special_ids",
                             "settled", "itemsize",       NULL};
    PyObject *data_arg, *specials_arg, *ids_arg;
    int settled = 0, itemsize = 4;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|pi:encode_utf8_buffer",
                                     kwlist, &data_arg, &specials_arg,
                                     &ids_arg, &settled, &itemsize) ||
        check_itemsize(itemsize) < 0)
    {
        return NULL;
    }
    return encode_one(self, data_arg, specials_arg, ids_arg, settled,
                      itemsize);
}

/* One text of encode_many_buffer: its UTF-8, and whether it is known valid
 * (a str's). */
typedef struct {
    const unsigned char *s;
    size_t n;
    int valid;
} Utf8Text;

/* encode_many_buffer(datas, special_tokens, special_ids, itemsize=4, start=0,
 * stop=len(datas)): each of datas[start:stop] (bytes of valid UTF-8, or str)
 * encoded as encode_utf8 would, all with the GIL released once; (ids,
 * offsets): the ids back to back as in encode_utf8_buffer, and stop - start +
 * 1 native int64 offsets, datas[start + i]'s ids being ids[offsets[i]:offsets[i
 * + 1]]. (A range, not a slice: a batch's runs are ranges of one list, and
 * slicing it would touch every item's reference count once more.) */
/* Each of held[start:start + count] as UTF-8 in texts, with a reference of
 * our own in items. No Python code runs here (nor in making a str's UTF-8):
 * the sequence stays as it is. A str gives the UTF-8 CPython keeps with it
 * (valid by construction). The number of items taken; *failed set with an
 * exception when an item is neither bytes nor str (or a str has a lone
 * surrogate). */
static Py_ssize_t
many_take(PyObject *held, Py_ssize_t start, Py_ssize_t count,
          PyObject **items, Utf8Text *texts, int *failed)
{
    Py_ssize_t taken = 0;
    *failed = 0;
    for (; taken < count; taken++) {
        PyObject *item = PySequence_Fast_GET_ITEM(held, start + taken);
        Utf8Text *text = &texts[taken];
        if (PyBytes_Check(item)) {
            text->s = (const unsigned char *)PyBytes_AS_STRING(item);
            text->n = (size_t)PyBytes_GET_SIZE(item);
        }
        else if (PyUnicode_Check(item)) {
            Py_ssize_t len;
            const char *utf8 = PyUnicode_AsUTF8AndSize(item, &len);
            if (utf8 == NULL) {
                *failed = 1; /* (a lone surrogate: UnicodeEncodeError) */
                break;
            }
            text->s = (const unsigned char *)utf8;
            text->n = (size_t)len;
            text->valid = 1;
        }
        else {
            PyErr_Format(PyExc_TypeError,
                         "datas[%zd] is %.100s, not bytes or str",
                         start + taken, Py_TYPE(item)->tp_name);
            *failed = 1;
            break;
        }
        items[taken] = Py_NewRef(item);
    }
    return taken;
}

/* Encodes texts[0:count] into call->out without the GIL, offsets[k + 1] the
 * end of text k's ids. 0; -1 with an exception set (MemoryError, or
 * ValueError naming datas[start + k] that is not valid UTF-8). */
static int
many_encode(Call *call, const Utf8Text *texts, Py_ssize_t count,
            int64_t *offsets, Py_ssize_t start)
{
    Py_ssize_t bad = -1;
    int err = 0;
    IdBuf out = call->out;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < count; k++) {
        const unsigned char *s = texts[k].s;
        size_t n = texts[k].n;
        if (!texts[k].valid && !bpe_utf8_valid(s, n)) {
            bad = k;
            break;
        }
        size_t cut;
        err = encode_text(call->tables, call->cache, &call->sp,
                          call->special_ids, s, n, 0, &out, &cut);
        if (err < 0) {
            break;
        }
        offsets[k + 1] = (int64_t)out.len;
    }
    Py_END_ALLOW_THREADS
    call->out = out; /* (grown: call_close frees or keeps it) */
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "datas[%zd] is not valid UTF-8",
                     start + bad);
        return -1;
    }
    if (err < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* (ids bytearray of itemsize-byte ids, int64 offsets bytearray). */
static PyObject *
many_result(const IdBuf *out, const int64_t *offsets, Py_ssize_t count,
            int itemsize)
{
    PyObject *ids = ids_to_bytearray(out->ids, out->len, itemsize);
    if (ids == NULL) {
        return NULL;
    }
    PyObject *offs = PyByteArray_FromStringAndSize(
        (const char *)offsets, (Py_ssize_t)((size_t)(count + 1) * 8));
    if (offs == NULL) {
        Py_DECREF(ids);
        return NULL;
    }
    PyObject *result = PyTuple_Pack(2, ids, offs);
    Py_DECREF(ids);
    Py_DECREF(offs);
    return result;
}

/* From this many ids a run's lists are filled without the GIL (below it the
 * GIL round trips would cost more than the fill). */
#define LISTS_NOGIL_MIN_IDS 8192

/* many_lists with the GIL all along: a load and an incref per id. */
static PyObject *
many_lists_gil(Tables *t, const IdBuf *out, const int64_t *offsets,
               Py_ssize_t count)
{
    PyObject *lists = PyList_New(count);
    if (lists == NULL) {
        return NULL;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *one = ids_to_list(t, out->ids + offsets[k],
                                    (size_t)(offsets[k + 1] - offsets[k]));
        if (one == NULL) {
            Py_DECREF(lists); /* (its items not yet set are NULL) */
            return NULL;
        }
        PyList_SET_ITEM(lists, k, one);
    }
    return lists;
}

/* Every id's int object in the table, made once (with the GIL; no Python
 * code runs: an int is not tracked by the collector). 0, or -1 with
 * MemoryError set. */
static int
tables_fill_id_objects(Tables *t)
{
    for (size_t id = 0; !t->id_objects_full && id < t->id_objects_len; id++) {
        if (t->id_objects[id] == NULL) {
            t->id_objects[id] = PyLong_FromSize_t(id);
            if (t->id_objects[id] == NULL) {
                return -1;
            }
        }
    }
    t->id_objects_full = 1;
    return 0;
}

/* A slot fill_lists left NULL: its id is beyond the table (a special
 * token's, typically). */
typedef struct {
    Py_ssize_t list, at;
} Miss;

/* What fill_lists reads and writes: the run's ids, its new lists (each
 * untracked by the collector and referenced only here, so no other code can
 * see them) and the arrays below, all the call's own; and the table, which
 * no code changes once full. */
typedef struct {
    const IdBuf *out;
    const int64_t *offsets;
    Py_ssize_t count;
    PyObject **lists;
    PyObject *const *objects;
    size_t objects_len;
    uint32_t *uses; /* per id, the slots given its int: references to count */
    Miss *misses;
    size_t misses_len, misses_cap;
} Fill;

/* Notes slot `at` of list `list` as missed. 0, or -1 if out of memory. */
static int
fill_miss(Fill *f, Py_ssize_t list, Py_ssize_t at)
{
    if (bpe_reserve(&f->misses, &f->misses_cap, f->misses_len + 1,
                    sizeof(Miss), 16) < 0)
    {
        return -1;
    }
    f->misses[f->misses_len++] = (Miss){list, at};
    return 0;
}

/* Without the GIL: each list's slots get the table's int of their id,
 * borrowed (the table holds them; their references are counted after, with
 * the GIL, from uses). 0, or -1 if out of memory. */
static int
fill_lists(Fill *f)
{
    /* (locals: the loop keeps them in registers) */
    PyObject *const *objects = f->objects;
    const size_t objects_len = f->objects_len;
    uint32_t *uses = f->uses;
    for (Py_ssize_t k = 0; k < f->count; k++) {
        PyObject **slots = ((PyListObject *)f->lists[k])->ob_item;
        const uint32_t *ids = f->out->ids + f->offsets[k];
        const Py_ssize_t n = (Py_ssize_t)(f->offsets[k + 1] - f->offsets[k]);
        for (Py_ssize_t i = 0; i < n; i++) {
            const uint32_t id = ids[i];
            if (id < objects_len) {
                slots[i] = objects[id];
                uses[id]++;
            }
            else if (fill_miss(f, k, i) < 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* After fill_lists, with the GIL: each slot's reference counted, the missed
 * slots made, the lists tracked again and gathered in one list. NULL with
 * an exception set if out of memory (the lists are freed). */
static PyObject *
fill_finish(Tables *t, Fill *f)
{
    for (size_t id = 0; id < f->objects_len; id++) {
        PyObject *v = f->objects[id];
        for (uint32_t c = f->uses[id]; c; c--) {
            Py_INCREF(v);
        }
    }
    int failed = 0;
    for (size_t m = 0; m < f->misses_len && !failed; m++) {
        Miss miss = f->misses[m];
        uint32_t id = f->out->ids[f->offsets[miss.list] + miss.at];
        PyObject *v = tables_id_object(t, id);
        failed = v == NULL;
        PyList_SET_ITEM(f->lists[miss.list], miss.at, v);
    }
    /* (complete before the collector may see them: creating the outer list
     * may run a collection) */
    for (Py_ssize_t k = 0; k < f->count && !failed; k++) {
        PyObject_GC_Track(f->lists[k]);
    }
    PyObject *lists = failed ? NULL : PyList_New(f->count);
    for (Py_ssize_t k = 0; k < f->count; k++) {
        if (lists != NULL) {
            PyList_SET_ITEM(lists, k, f->lists[k]);
        }
        else {
            Py_DECREF(f->lists[k]); /* (a slot still NULL is skipped) */
        }
    }
    return lists;
}

/* A list of one list of ids per text (text k's ids are
 * out[offsets[k]:offsets[k + 1]]). The ints are the tables' shared objects,
 * so a token costs a store and a reference, not an allocation. A long run's
 * lists are made with the GIL (the allocations), filled without it, and
 * their references counted with it, id by id: the part that holds the GIL,
 * while a batch's other threads wait for it, is a small share of the work. */
static PyObject *
many_lists(Tables *t, const IdBuf *out, const int64_t *offsets,
           Py_ssize_t count)
{
    if (out->len < LISTS_NOGIL_MIN_IDS || out->len > UINT32_MAX) {
        return many_lists_gil(t, out, offsets, count);
    }
    if (tables_fill_id_objects(t) < 0) {
        return NULL;
    }
    Fill f = {.out = out, .offsets = offsets, .count = count,
              .objects = t->id_objects, .objects_len = t->id_objects_len};
    PyObject *result = NULL;
    Py_ssize_t made = 0;
    f.lists = PyMem_Calloc((size_t)count + 1, sizeof(PyObject *));
    f.uses = PyMem_Calloc(f.objects_len, sizeof(uint32_t));
    if (f.lists == NULL || f.uses == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; made < count; made++) {
        f.lists[made] = PyList_New(offsets[made + 1] - offsets[made]);
        if (f.lists[made] == NULL) {
            goto done;
        }
        PyObject_GC_UnTrack(f.lists[made]);
    }
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = fill_lists(&f);
    Py_END_ALLOW_THREADS
    if (err < 0) {
        PyErr_NoMemory();
        for (Py_ssize_t k = 0; k < count; k++) { /* (none is counted yet) */
            Py_ssize_t n = (Py_ssize_t)(offsets[k + 1] - offsets[k]);
            if (n) {
                memset(((PyListObject *)f.lists[k])->ob_item, 0,
                       (size_t)n * sizeof(PyObject *));
            }
        }
        goto done;
    }
    result = fill_finish(t, &f);
    made = 0; /* (fill_finish gave them to result, or freed them) */
done:
    for (Py_ssize_t k = 0; k < made; k++) {
        Py_DECREF(f.lists[k]);
    }
    free(f.misses);
    PyMem_Free(f.lists);
    PyMem_Free(f.uses);
    return result;
}

/* encode_many_buffer and encode_many_lists: itemsize 0 for lists. */
static PyObject *
encode_many(EncoderObject *self, PyObject *datas_arg, PyObject *specials_arg,
            PyObject *ids_arg, int itemsize, Py_ssize_t start, Py_ssize_t stop)
{
    int failed = 0;
    Call call;
    PyObject *result = NULL, *held = NULL;
    PyObject **items = NULL; /* our own references: the list may change */
    Utf8Text *texts = NULL;  /* each item's UTF-8 */
    int64_t *offsets = NULL;
    Py_ssize_t count = 0, taken = 0;
    if (call_open_specials(&call, specials_arg, ids_arg) < 0) {
        goto done;
    }
    held = PySequence_Fast(datas_arg, "datas must be a list of bytes");
    if (held == NULL) {
        goto done;
    }
    Py_ssize_t size = PySequence_Fast_GET_SIZE(held);
    stop = stop == PY_SSIZE_T_MAX ? size : stop;
    if (start < 0 || start > stop || stop > size) {
        PyErr_Format(PyExc_ValueError,
                     "start %zd and stop %zd are not a range of datas' %zd "
                     "items",
                     start, stop, size);
        goto done;
    }
    count = stop - start;
    items = PyMem_Calloc((size_t)count + 1, sizeof(PyObject *));
    offsets = PyMem_Calloc((size_t)count + 1, sizeof(int64_t));
    texts = PyMem_Calloc((size_t)count + 1, sizeof(Utf8Text));
    if (items == NULL || offsets == NULL || texts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    taken = many_take(held, start, count, items, texts, &failed);
    if (!failed && call_start(&call, self) == 0 &&
        many_encode(&call, texts, count, offsets, start) == 0)
    {
        /* (the lists' ints come from the tables: they stay until
         * call_close) */
        result = itemsize ? many_result(&call.out, offsets, count, itemsize)
                          : many_lists(call.tables, &call.out, offsets, count);
    }
done:
    call_close(&call);
    for (Py_ssize_t k = 0; k < taken; k++) {
        Py_DECREF(items[k]);
    }
    PyMem_Free(items);
    PyMem_Free(texts);
    PyMem_Free(offsets);
    Py_XDECREF(held);
    return result;
}

static PyObject *
Encoder_encode_many_buffer(EncoderObject *self, PyObject *args,
                           PyObject *kwds)
{
    static char *kwlist[] = {"datas", "special_tokens", "special_ids",
                             "itemsize", "start", "stop", NULL};
    PyObject *datas_arg, *specials_arg, *ids_arg;
    int itemsize = 4;
    Py_ssize_t start = 0, stop = PY_SSIZE_T_MAX;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|inn:encode_many_buffer",
                                     kwlist, &datas_arg, &specials_arg,
                                     &ids_arg, &itemsize, &start, &stop) ||
        check_itemsize(itemsize) < 0 || encoder_tables(self) == NULL)
    {
        return NULL;
    }
    return encode_many(self, datas_arg, specials_arg, ids_arg, itemsize,
                       start, stop);
}

/* encode_many_lists(datas, special_tokens, special_ids, start=0,
 * stop=len(datas)): encode_many_buffer's encoding (one GIL-free pass over
 * the range), then a list of ids per text, as encode_utf8 gives it. A
 * batch's threads each call it on their runs: one builds its lists with the
 * GIL while the others encode. */
static PyObject *
Encoder_encode_many_lists(EncoderObject *self, PyObject *args,
                          PyObject *kwds)
{
    static char *kwlist[] = {"datas", "special_tokens", "special_ids",
                             "start", "stop", NULL};
    PyObject *datas_arg, *specials_arg, *ids_arg;
    Py_ssize_t start = 0, stop = PY_SSIZE_T_MAX;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|nn:encode_many_lists",
                                     kwlist, &datas_arg, &specials_arg,
                                     &ids_arg, &start, &stop) ||
        encoder_tables(self) == NULL)
    {
        return NULL;
    }
    return encode_many(self, datas_arg, specials_arg, ids_arg, 0, start,
                       stop);
}

static PyObject *
Encoder_bpe(EncoderObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    /* (getting a buffer may run Python code: the state is checked after) */
    Tables *t = encoder_tables(self);
    if (t == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    IdBuf out = {0};
    int failed = idbuf_reserve(&out, (size_t)view.len + 1) < 0 ||
                 encode_pretoken(t, view.buf, (size_t)view.len, &out) < 0;
    PyBuffer_Release(&view);
    PyObject *result =
        failed ? PyErr_NoMemory() : ids_to_list(t, out.ids, out.len);
    free(out.ids);
    return result;
}

/* split_utf8(data): the end of each pre-token of the ordinary text data (no
 * special tokens), as the encoder splits it: from blocks of ASCII text
 * (scan_blocks.h) where it can, from the scanner elsewhere. For tests, which
 * compare it with the regex. */
static PyObject *
Encoder_split_utf8(EncoderObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    /* (getting a buffer may run Python code: the state is checked after) */
    Tables *t = encoder_tables(self);
    const unsigned char *s = view.buf;
    size_t n = (size_t)view.len;
    PyObject *ends = NULL;
    if (t == NULL || !bpe_classes_ready()) {
        goto done;
    }
    if (!bpe_utf8_valid(s, n)) {
        PyErr_SetString(PyExc_ValueError, "split_utf8: data is not UTF-8");
        goto done;
    }
    ends = PyList_New(0);
    Spans spans;
    bpe_spans_init(&spans, t->pattern);
    for (size_t i = 0; ends != NULL && i < n;) {
        i = bpe_spans_next(&spans, s, i, n, t->pattern);
        PyObject *end = PyLong_FromSize_t(i);
        if (end == NULL || PyList_Append(ends, end) < 0) {
            Py_CLEAR(ends);
        }
        Py_XDECREF(end);
    }
done:
    PyBuffer_Release(&view);
    return ends;
}

/* The most pre-tokens one cache holds: each thread encoding at a time has its
 * own, of at most cache_size. */
static PyObject *
Encoder_cache_len(EncoderObject *self, PyObject *unused)
{
    size_t most = 0;
    Tables *t = self->tables;
    for (size_t k = 0; t != NULL && k < t->pool_len; k++) {
        most = t->pool[k]->used > most ? t->pool[k]->used : most;
    }
    return PyLong_FromSize_t(most);
}

static PyMethodDef Encoder_methods[] = {
    {"encode_utf8", (PyCFunction)Encoder_encode_utf8, METH_VARARGS,
     "encode_utf8(data, special_tokens, special_ids, "
     "settled=False)\n--\n\nThe ids of UTF-8 text: each special token (bytes, "
     "longest first) becomes its id, the text between them is encoded.\nWith "
     "settled: (ids, cut), the ids of data[:cut], all that more data could "
     "not change."},
    {"encode_utf8_buffer", (PyCFunction)(void (*)(void))Encoder_encode_utf8_buffer,
     METH_VARARGS | METH_KEYWORDS,
     "encode_utf8_buffer(data, special_tokens, special_ids, settled=False, "
     "itemsize=4)\n--\n\nencode_utf8's ids as a bytearray of native unsigned "
     "integers of itemsize bytes (2 or 4), encoded without the GIL.\nWith "
     "settled: (ids, cut)."},
    {"encode_many_buffer", (PyCFunction)(void (*)(void))Encoder_encode_many_buffer,
     METH_VARARGS | METH_KEYWORDS,
     "encode_many_buffer(datas, special_tokens, special_ids, itemsize=4, "
     "start=0, stop=len(datas))\n--"
     "\n\nEach bytes (or str) of datas[start:stop] encoded as encode_utf8 "
     "would, without the GIL: "
     "(ids, offsets), ids as encode_utf8_buffer gives them back to back, and "
     "stop - start + 1 native int64 offsets (datas[start + i]'s ids are "
     "ids[offsets[i]:offsets[i + 1]])."},
    {"encode_many_lists", (PyCFunction)(void (*)(void))Encoder_encode_many_lists,
     METH_VARARGS | METH_KEYWORDS,
     "encode_many_lists(datas, special_tokens, special_ids, start=0, "
     "stop=len(datas))\n--\n\nEach bytes (or str) of datas[start:stop] "
     "encoded as encode_utf8 would, without the GIL, then a list of its ids "
     "(one list per item)."},
    {"bpe", (PyCFunction)Encoder_bpe, METH_O,
     "bpe(token_bytes)\n--\n\nThe ids BPE gives one pre-token's bytes (no "
     "cache)."},
    {"split_utf8", (PyCFunction)Encoder_split_utf8, METH_O,
     "split_utf8(data)\n--\n\nThe end of each pre-token of UTF-8 text "
     "(no special tokens) as the encoder splits it."},
    {"cache_len", (PyCFunction)Encoder_cache_len, METH_NOARGS,
     "cache_len()\n--\n\nHow many pre-tokens a cache holds (the fullest: each "
     "thread encoding at a time has its own)."},
    {NULL, NULL, 0, NULL},
};

BPE_INTERNAL PyTypeObject bpe_EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bpe_impls._native.Encoder",
    .tp_doc = "Encoder(byte_ids, merges, cache_size=65536, pattern='gpt2'): "
              "BPE with a rank table and a cache.\n\nbyte_ids: the id of each "
              "byte 0..255; merges: (left, right, merged) ids in rank order (or "
              "a bytes of native uint32 triples); "
              "pattern: the split pattern of the text, 'gpt2', 'cl100k' or "
              "'o200k'.",
    .tp_basicsize = sizeof(EncoderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Encoder_init,
    .tp_dealloc = (destructor)Encoder_dealloc,
    .tp_methods = Encoder_methods,
};
