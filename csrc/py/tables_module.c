/* The readers of tokenizer files as module functions: rank_file_tables (a
 * tiktoken rank file, rank_file.c), gpt2_tables and hf_tables (vocab_files.c)
 * and hf_model_spans. Each reads its bytes objects without the GIL (they are
 * immutable, and the call holds them) into memory of its own, then builds the
 * tables a Tokenizer takes: packed bytes, not a Python object per token. */
#include "common.h"

#include "ranks.h"
#include "vocab_files.h"

static PyObject *
bytes_of(const void *p, size_t n)
{
    return PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)n);
}

/* (blob, offsets, ranks, merges, byte_ids, special_ranks) of sorted r, as
 * rank_file_tables returns them (special_ranks: the rank of each bytes of
 * the tuple `specials` that is an entry, else -1), or NULL with an exception
 * set. */
static PyObject *
ranks_result(const Ranks *r, const uint32_t *merges, size_t n_merges,
             const uint32_t *byte_ids, PyObject *specials)
{
    PyObject *items[6] = {NULL};
    PyObject *result = NULL;
    int64_t *offsets = malloc((r->n + 1) * sizeof(int64_t));
    if (offsets == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t k = 0; k <= r->n; k++) {
        offsets[k] = (int64_t)r->off[k];
    }
    items[0] = bytes_of(r->blob, r->off[r->n]);
    items[1] = bytes_of(offsets, (r->n + 1) * sizeof(int64_t));
    items[2] = bytes_of(r->rank, r->n * sizeof(uint32_t));
    items[3] = bytes_of(merges, n_merges * 3 * sizeof(uint32_t));
    items[4] = PyTuple_New(256);
    items[5] = PyTuple_New(PyTuple_GET_SIZE(specials));
    for (int k = 0; k < 6; k++) {
        if (items[k] == NULL) {
            goto done;
        }
    }
    for (int b = 0; b < 256; b++) {
        PyObject *id = PyLong_FromUnsignedLong(byte_ids[b]);
        if (id == NULL) {
            goto done;
        }
        PyTuple_SET_ITEM(items[4], b, id);
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(specials); k++) {
        PyObject *special = PyTuple_GET_ITEM(specials, k);
        size_t len = (size_t)PyBytes_GET_SIZE(special);
        uint32_t e = len == 0 ? NOT_FOUND
                              : ranks_find(r, (const unsigned char *)PyBytes_AS_STRING(special), len);
        PyObject *rank = PyLong_FromLongLong(e == NOT_FOUND ? -1 : (long long)r->rank[e]);
        if (rank == NULL) {
            goto done;
        }
        PyTuple_SET_ITEM(items[5], k, rank);
    }
    result = PyTuple_Pack(6, items[0], items[1], items[2], items[3], items[4], items[5]);
done:
    for (int k = 0; k < 6; k++) {
        Py_XDECREF(items[k]);
    }
    free(offsets);
    return result;
}

/* rank_file_tables(data, specials) -> None, or (blob, offsets, ranks, merges,
 * byte_ids, special_ranks): the tokens' bytes back to back in rank order;
 * native int64 offsets of each token in blob (n + 1); native uint32 ranks,
 * ascending; native uint32 (left rank, right rank, merged rank) of each merge
 * in rank order; the rank of each byte 0..255; the rank of each of
 * `specials` (a sequence of bytes) that is a token, else -1. None: the file
 * is not of the plain form, or the Python path refuses it. */
BPE_INTERNAL PyObject *
bpe_rank_file_tables(PyObject *module, PyObject *args)
{
    PyObject *data, *specials_arg;
    if (!PyArg_ParseTuple(args, "O!O:rank_file_tables", &PyBytes_Type, &data,
                          &specials_arg))
    {
        return NULL;
    }
    PyObject *specials = PySequence_Tuple(specials_arg);
    if (specials == NULL) {
        return NULL;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(specials); k++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(specials, k))) {
            PyErr_SetString(PyExc_TypeError, "specials must be bytes");
            Py_DECREF(specials);
            return NULL;
        }
    }
    RankFile rf;
    PyObject *result = NULL;
    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(data);
    size_t size = (size_t)PyBytes_GET_SIZE(data);
    int status;
    /* data is an immutable bytes object we hold a reference to; everything
     * else the read touches is its own memory. */
    Py_BEGIN_ALLOW_THREADS
    status = bpe_rank_file_read(&rf, buf, size);
    Py_END_ALLOW_THREADS
    if (status < 0) {
        PyErr_NoMemory();
    }
    else if (status > 0) {
        result = Py_NewRef(Py_None);
    }
    else {
        result = ranks_result(&rf.r, rf.merges, rf.n_merges, rf.byte_ids,
                              specials);
    }
    bpe_rank_file_free(&rf);
    Py_DECREF(specials);
    return result;
}

/* b's tables as Python objects: (blob, offsets, ids, merges, byte_ids,
 * special_ids, encoder_merges, keys, key_ids), or NULL with an exception. */
static PyObject *
build_result(const VocabBuild *b, PyObject *specials)
{
    PyObject *tables = ranks_result(&b->r, b->merges, b->n_merges, b->byte_ids, specials);
    PyObject *key_ids = PyTuple_New((Py_ssize_t)b->specials.n);
    PyObject *result = NULL;
    if (tables == NULL || key_ids == NULL) {
        goto done;
    }
    for (size_t k = 0; k < b->specials.n; k++) {
        PyObject *id = PyLong_FromLongLong(b->key_ids[k] == NOT_FOUND ? -1 : (long long)b->key_ids[k]);
        if (id == NULL) {
            goto done;
        }
        PyTuple_SET_ITEM(key_ids, (Py_ssize_t)k, id);
    }
    result = Py_BuildValue("OOOOOOy#nO", PyTuple_GET_ITEM(tables, 0), PyTuple_GET_ITEM(tables, 1),
                           PyTuple_GET_ITEM(tables, 2), PyTuple_GET_ITEM(tables, 3),
                           PyTuple_GET_ITEM(tables, 4), PyTuple_GET_ITEM(tables, 5),
                           (const char *)b->encoder, (Py_ssize_t)(b->n_encoder * 3 * sizeof(uint32_t)),
                           (Py_ssize_t)b->keys, key_ids);
done:
    Py_XDECREF(tables);
    Py_XDECREF(key_ids);
    return result;
}

/* Copy the special tokens (a tuple of bytes) and, for hf, their ids (a tuple
 * of ints) into b: 0, 1 if they are not as the caller promised (the result is
 * then None), -1 with an exception set. */
static int
build_specials(VocabBuild *b, PyObject *specials, PyObject *ids)
{
    Py_ssize_t n = PyTuple_GET_SIZE(specials), total = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *special = PyTuple_GET_ITEM(specials, k);
        if (!PyBytes_Check(special)) {
            PyErr_SetString(PyExc_TypeError, "specials must be bytes");
            return -1;
        }
        total += PyBytes_GET_SIZE(special);
    }
    if (bpe_vocab_specials_reserve(b, (size_t)n, (size_t)total) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *special = PyTuple_GET_ITEM(specials, k);
        if (bpe_vocab_special_add(b, (const unsigned char *)PyBytes_AS_STRING(special),
                                  (size_t)PyBytes_GET_SIZE(special)))
        {
            return 1;
        }
        if (ids != NULL) {
            /* (an int's own conversion: no __index__, no Python code) */
            unsigned long long id = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(ids, k));
            if (id == (unsigned long long)-1 && PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
                    return -1;
                }
                PyErr_Clear();
                return 1;
            }
            if (bpe_vocab_special_id(b, (size_t)k, id)) {
                return 1;
            }
        }
    }
    int status = bpe_vocab_specials_done(b);
    if (status < 0) {
        PyErr_NoMemory();
    }
    return status;
}

/* The shared part of gpt2_tables and hf_tables. */
static PyObject *
vocab_tables(PyObject *vocab, PyObject *merges, PyObject *specials_arg, PyObject *ids_arg)
{
    int hf = ids_arg != NULL;
    PyObject *specials = PySequence_Tuple(specials_arg);
    PyObject *ids = hf ? PySequence_Tuple(ids_arg) : NULL;
    PyObject *result = NULL;
    VocabBuild b;
    memset(&b, 0, sizeof(b));
    if (specials == NULL || (hf && ids == NULL)) {
        goto done;
    }
    if (hf && PyTuple_GET_SIZE(ids) != PyTuple_GET_SIZE(specials)) {
        PyErr_SetString(PyExc_ValueError, "specials and special_ids differ in length");
        goto done;
    }
    int status = build_specials(&b, specials, ids);
    if (status < 0) {
        goto done;
    }
    const unsigned char *vocab_data = (const unsigned char *)PyBytes_AS_STRING(vocab);
    const unsigned char *merges_data = (const unsigned char *)PyBytes_AS_STRING(merges);
    size_t vocab_size = (size_t)PyBytes_GET_SIZE(vocab), merges_size = (size_t)PyBytes_GET_SIZE(merges);
    /* vocab and merges are immutable bytes objects we hold references to;
     * everything else the read touches is its own memory. */
    if (status == 0) {
        Py_BEGIN_ALLOW_THREADS
        status = bpe_vocab_read(&b, hf, vocab_data, vocab_size, merges_data, merges_size);
        Py_END_ALLOW_THREADS
    }
    if (status < 0) {
        PyErr_NoMemory();
    }
    else if (status > 0) {
        result = Py_NewRef(Py_None);
    }
    else {
        result = build_result(&b, specials);
    }
done:
    bpe_vocab_free(&b);
    Py_XDECREF(specials);
    Py_XDECREF(ids);
    return result;
}

/* gpt2_tables(vocab_json, merges_txt, specials): see native_module.c. */
BPE_INTERNAL PyObject *
bpe_gpt2_tables(PyObject *module, PyObject *args)
{
    PyObject *vocab, *merges, *specials;
    if (!PyArg_ParseTuple(args, "O!O!O:gpt2_tables", &PyBytes_Type, &vocab, &PyBytes_Type, &merges, &specials)) {
        return NULL;
    }
    return vocab_tables(vocab, merges, specials, NULL);
}

/* hf_tables(vocab, merges, specials, special_ids): see native_module.c. */
BPE_INTERNAL PyObject *
bpe_hf_tables(PyObject *module, PyObject *args)
{
    PyObject *vocab, *merges, *specials, *ids;
    if (!PyArg_ParseTuple(args, "O!O!OO:hf_tables", &PyBytes_Type, &vocab, &PyBytes_Type, &merges, &specials,
                          &ids))
    {
        return NULL;
    }
    return vocab_tables(vocab, merges, specials, ids);
}

/* hf_model_spans(document): see native_module.c. */
BPE_INTERNAL PyObject *
bpe_hf_model_spans(PyObject *module, PyObject *arg)
{
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "hf_model_spans takes bytes");
        return NULL;
    }
    size_t at[4];
    int status;
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(arg);
    size_t size = (size_t)PyBytes_GET_SIZE(arg);
    Py_BEGIN_ALLOW_THREADS
    status = bpe_vocab_hf_spans(data, size, at);
    Py_END_ALLOW_THREADS
    if (status) {
        Py_RETURN_NONE;
    }
    return Py_BuildValue("nnnn", (Py_ssize_t)at[0], (Py_ssize_t)at[1], (Py_ssize_t)at[2], (Py_ssize_t)at[3]);
}
