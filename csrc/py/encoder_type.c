/* Encoder: the Python type over the core's BPE (encoder_internal.h): an
 * __init__ builds the tables (BpeTables) from Python's ids, each encode call
 * reads its inputs into memory of its own, takes a reference to the tables
 * and a cache from their pool, and runs encode_text without the GIL when the
 * text is long; then the ids become a list or a bytearray. Batches are
 * py/encoder_many.c.
 *
 * The encoding itself (encode_text) touches no Python object: it reads only
 * the call's own copies of the inputs, the tables (held by a reference taken
 * with the GIL, so a concurrent __init__ cannot free them) and a cache that
 * the call owns for its duration (see Tables.pool). */
#include "encoder_py.h"

static void
tables_free(Tables *t)
{
    if (t == NULL) {
        return;
    }
    bpe_tables_clear(&t->bpe);
    free(t->spare.ids);
    for (size_t k = 0; k < t->pool_len; k++) {
        cache_free(t->pool[k]);
    }
    free(t->pool);
    if (t->id_objects != NULL) {
        for (size_t k = 0; k < t->id_objects_len; k++) {
            Py_XDECREF(t->id_objects[k]);
        }
        free(t->id_objects);
    }
    free(t);
}

static void
tables_decref(Tables *t)
{
    if (t != NULL && --t->refs == 0) {
        tables_free(t);
    }
}

/* A cache for one call (NULL: caching is off); *failed set when out of
 * memory. With the GIL. */
static Cache *
tables_take_cache(Tables *t, int *failed)
{
    *failed = 0;
    if (t->cache_size == 0) {
        return NULL;
    }
    if (t->pool_len) {
        return t->pool[--t->pool_len];
    }
    Cache *c = cache_new(t->cache_size);
    if (c == NULL) {
        *failed = 1;
    }
    return c;
}

/* Give a cache back (with the GIL); one that cannot be kept is freed. */
static void
tables_give_cache(Tables *t, Cache *c)
{
    if (c == NULL) {
        return;
    }
    if (bpe_reserve(&t->pool, &t->pool_cap, t->pool_len + 1, sizeof(Cache *),
                    4) < 0)
    {
        cache_free(c);
        return;
    }
    t->pool[t->pool_len++] = c;
}

/* ids_to_list (encoder_py.h). */
BPE_INTERNAL PyObject *
ids_to_list(Tables *t, const uint32_t *ids, size_t n)
{
    PyObject *out = PyList_New((Py_ssize_t)n);
    if (out == NULL) {
        return NULL;
    }
    for (size_t k = 0; k < n; k++) {
        PyObject *v = tables_id_object(t, ids[k]);
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)k, v);
    }
    return out;
}

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

/* The merges (left, right, merged) in rank order into a new pm; a repeated
 * pair keeps its first rank. merges is a tuple the caller owns: the ids'
 * __index__ may run any Python code, but cannot change it. The largest id
 * seen goes to *max_id. */
static int
read_merges(PairMap *pm, PyObject *merges, uint32_t *max_id)
{
    Py_ssize_t n = PyTuple_GET_SIZE(merges);
    if (bpe_pairs_init(pm, (size_t)n) < 0) {
        PyErr_NoMemory();
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
        bpe_pairs_add(pm, a, b, merged, (uint32_t)rank);
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
    size_t bad = 0;
    switch (bpe_pairs_read_triples(
        pm, (const unsigned char *)PyBytes_AS_STRING(packed),
        (size_t)size / (3 * sizeof(uint32_t)), max_id, &bad))
    {
    case 0:
        return 0;
    case 1:
        PyErr_Format(PyExc_ValueError,
                     "merge #%zu: id %u is not a token id in 0..2**32-2", bad,
                     (unsigned)UINT32_MAX);
        return -1;
    default:
        PyErr_NoMemory();
        return -1;
    }
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
        if (as_id(PyTuple_GET_ITEM(byte_seq, b), &t->bpe.byte_ids[b],
                  "byte id") < 0)
        {
            goto fail;
        }
        max_id = t->bpe.byte_ids[b] > max_id ? t->bpe.byte_ids[b] : max_id;
    }
    if (PyBytes_Check(merges_arg)) {
        if (read_packed_merges(&t->bpe.pairs, merges_arg, &max_id) < 0) {
            goto fail;
        }
    }
    else {
        merges = PySequence_Tuple(merges_arg);
        if (merges == NULL || read_merges(&t->bpe.pairs, merges, &max_id) < 0) {
            goto fail;
        }
    }
    if (bpe_tables_finish(&t->bpe) < 0) {
        PyErr_NoMemory();
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
    t->bpe.pattern = pattern;
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
        int pattern = bpe_pattern_from_name(name);
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
BPE_INTERNAL Tables *
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

/* The special tokens and their ids, read (and checked) in PythonEncoder's
 * order around the data's own checks: call_open_specials first, then the
 * data, then call_start. call_close must follow either way. */
BPE_INTERNAL int
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
BPE_INTERNAL int
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
BPE_INTERNAL void
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
        err = encode_text(&call->tables->bpe, call->cache, &call->sp,
                          call->special_ids, d->buf, d->len, settled, out,
                          cut);
        Py_END_ALLOW_THREADS
    }
    else {
        err = encode_text(&call->tables->bpe, call->cache, &call->sp,
                          call->special_ids, d->buf, d->len, settled, out,
                          cut);
    }
    if (err < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* The ids as native-endian unsigned integers of `itemsize` bytes (2 or 4), in
 * a new bytearray; ValueError naming the first id that 2 bytes cannot hold.
 * With the GIL; a long copy runs without it (the new bytearray is no other
 * code's yet), so a batch's threads do not take turns copying out. */
BPE_INTERNAL PyObject *
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
    char *dst = PyByteArray_AS_STRING(out); /* (malloc'd: aligned) */
    int fits;
    if (n * (size_t)itemsize >= NOGIL_MIN_BYTES * 16) {
        Py_BEGIN_ALLOW_THREADS
        fits = bpe_ids_narrow(dst, ids, n, itemsize);
        Py_END_ALLOW_THREADS
    }
    else {
        fits = bpe_ids_narrow(dst, ids, n, itemsize);
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

BPE_INTERNAL int
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
 * encode_iterable: (ids, cut), the ids of what more data could not change
 * and its length in bytes (encode_text says which).
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
                 encode_pretoken(&t->bpe, view.buf, (size_t)view.len, &out) < 0;
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
    int pattern = t->bpe.pattern;
    bpe_spans_init(&spans, pattern);
    for (size_t i = 0; ends != NULL && i < n;) {
        i = bpe_spans_next(&spans, s, i, n, pattern);
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

/* The most memory one cache holds, in bytes (each thread encoding at a time
 * has its own). */
static PyObject *
Encoder_cache_memory(EncoderObject *self, PyObject *unused)
{
    size_t most = 0;
    Tables *t = self->tables;
    for (size_t k = 0; t != NULL && k < t->pool_len; k++) {
        size_t bytes = cache_memory(t->pool[k]);
        most = bytes > most ? bytes : most;
    }
    return PyLong_FromSize_t(most);
}

/* Whether BPE's scan reads the merges by merged id (MergedMap: the ids allow
 * it), not by rank. */
static PyObject *
Encoder_scans_merged_ids(EncoderObject *self, PyObject *unused)
{
    Tables *t = self->tables;
    return PyBool_FromLong(t != NULL && t->bpe.merged.slots != NULL);
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
    {"encode_packed_buffer", (PyCFunction)(void (*)(void))Encoder_encode_packed_buffer,
     METH_VARARGS | METH_KEYWORDS,
     "encode_packed_buffer(data, offsets, special_tokens, special_ids, "
     "itemsize=4, start=0, stop=len(offsets) // 8 - 1, separator=-1)\n--\n\n"
     "Texts start..stop-1 of data (bytes), text k being "
     "data[offsets[k]:offsets[k + 1]] (native int64 offsets), encoded as "
     "encode_many_buffer encodes them, each followed by the id separator "
     "when it is not negative: (ids, offsets)."},
    {"bpe", (PyCFunction)Encoder_bpe, METH_O,
     "bpe(token_bytes)\n--\n\nThe ids BPE gives one pre-token's bytes (no "
     "cache)."},
    {"split_utf8", (PyCFunction)Encoder_split_utf8, METH_O,
     "split_utf8(data)\n--\n\nThe end of each pre-token of UTF-8 text "
     "(no special tokens) as the encoder splits it."},
    {"cache_memory", (PyCFunction)Encoder_cache_memory, METH_NOARGS,
     "cache_memory()\n--\n\nThe bytes a cache holds, slots and arenas (the "
     "fullest: each thread encoding at a time has its own)."},
    {"scans_merged_ids", (PyCFunction)Encoder_scans_merged_ids, METH_NOARGS,
     "scans_merged_ids()\n--\n\nWhether BPE finds each merge by the merged "
     "id (where merged ids increase with rank and every id is below 2**21 - "
     "1), not by rank."},
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
