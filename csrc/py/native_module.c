/* bpe_impls._native: the pre-tokenizers of the preset split patterns (GPT-2,
 * cl100k, o200k), a pre-token counter, a BPE encoder and the readers of
 * tokenizer files, in C.
 *
 * Each piece does exactly what the pure-Python path does (bpe_impls/corpus/
 * tally.py, bpe_impls/encoding/encoders.py, bpe_impls/encoding/formats/);
 * tests/test_native.py and the registry-wide suites prove it.
 *
 * The C core holds the algorithms, in plain C: it includes no Python.h, and
 * csrc/tests/ builds and runs it as a C program of its own. Its files, in
 * csrc/ itself:
 *
 *   bpe_util.h             the byte hash, growable arrays, symbol visibility
 *   scanner.h, scan_kind.h, scanner.c
 *                          the pre-tokenizers over code points and over UTF-8;
 *                          the class table, the pattern names
 *   scan_blocks.h          the presets over 64-byte blocks of ASCII
 *   utf8.c                 UTF-8 validation
 *   specials.c             special tokens (searched inline: scanner.h)
 *   counter.h, bytes_map.c, counter.c
 *                          the pre-token counter: its map; counting, merging
 *                          and packing
 *   packed.h               the packed word counts
 *   encoder_internal.h     the encoder: tables, cache, BPE, the loops
 *   encoder_tables.c, encoder_cache.c, encoder_bpe.c, encoder_loop.c,
 *   batch_runs.c           ... and a batch's runs
 *   u64_heap.h             a heap of integers (long pre-tokens, rank files)
 *   ranks.h, rank_file.c   tokens by bytes; a tiktoken rank file
 *   json_scan.h            JSON strings as Python reads them
 *   vocab_files.h, vocab_files.c
 *                          GPT-2's vocab files, an HF tokenizer.json's model
 *   jsonl.c                the documents of JSON Lines
 *   trainer_internal.h, trainer.c, trainer_load.c, trainer_words.c,
 *   trainer_pairs.c, trainer_heap.c, trainer_merge.c
 *                          the native trainer (trainer.c describes it)
 *
 * This folder, csrc/py/, is the core's CPython glue (arguments, objects,
 * exceptions, the GIL), kept apart so that the core can be built, tested and
 * reasoned about without an interpreter:
 *
 *   common.h, common.c     str views, UTF-8 buffers and special tokens from
 *                          Python objects; the core's failures as exceptions
 *   packed_py.h            the packed word counts' faults as ValueError
 *   counter_type.c         PretokenCounter
 *   encoder_py.h           what the Encoder's two glue files share
 *   encoder_type.c         Encoder: __init__, encode_utf8(_buffer), bpe, ...
 *   encoder_many.c         Encoder.encode_many_buffer, encode_many_lists
 *   tables_module.c        rank_file_tables, gpt2_tables, hf_tables,
 *                          hf_model_spans
 *   jsonl_module.c         jsonl_documents
 *   native_module.c        this module: set_char_classes, pretokenize,
 *                          batch_runs and PyInit__native
 *   trainer_module.c       bpe_impls._native_train, the other extension
 */
#include "common.h"

#include "encoder_internal.h" /* bpe_run_bounds */

static PyObject *
set_char_classes(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    size_t bad = 0;
    PyObject *result = NULL;
    switch (bpe_char_classes_set(view.buf, (size_t)view.len, &bad)) {
    case BPE_CLASSES_SET:
        result = Py_NewRef(Py_None);
        break;
    case BPE_CLASSES_BAD_SIZE:
        PyErr_Format(PyExc_ValueError,
                     "class table must have %d entries, got %zd", N_CODEPOINTS,
                     view.len);
        break;
    case BPE_CLASSES_BAD_ENTRY:
        PyErr_Format(PyExc_ValueError,
                     "class table entry %zd is %d, not one of 0, 2, 3, "
                     "5, 9, 12, 13",
                     (Py_ssize_t)bad,
                     (int)((const unsigned char *)view.buf)[bad]);
        break;
    case BPE_CLASSES_OTHER:
        PyErr_SetString(PyExc_ValueError,
                        "a different class table is already set");
        break;
    default:
        PyErr_NoMemory();
        break;
    }
    PyBuffer_Release(&view);
    return result;
}

/* pretokenize(data, pattern) of UTF-8 bytes: the pre-tokens as bytes, cut
 * by the UTF-8 scanners the counter and the encoder use. */
static PyObject *
pretokenize_utf8(PyObject *arg, int pattern)
{
    Utf8Data d;
    if (bpe_data_open(&d, arg) < 0) {
        bpe_data_close(&d);
        return NULL;
    }
    PyObject *out = NULL;
    if (!bpe_utf8_valid(d.buf, d.len)) {
        PyErr_SetString(PyExc_ValueError, "data is not valid UTF-8");
        goto done;
    }
    out = PyList_New(0);
    for (size_t i = 0; out != NULL && i < d.len;) {
        size_t j = bpe_next_end_utf8(d.buf, i, d.len, pattern);
        PyObject *piece = PyBytes_FromStringAndSize((const char *)d.buf + i,
                                                    (Py_ssize_t)(j - i));
        if (piece == NULL || PyList_Append(out, piece) < 0) {
            Py_CLEAR(out);
        }
        Py_XDECREF(piece);
        i = j;
    }
done:
    bpe_data_close(&d);
    return out;
}

static PyObject *
pretokenize(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"text", "pattern", NULL};
    PyObject *arg;
    const char *name = "gpt2";
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|s:pretokenize", kwlist,
                                     &arg, &name))
    {
        return NULL;
    }
    int pattern = bpe_pattern_from_name(name);
    if (pattern < 0 || !bpe_classes_ready()) {
        return NULL;
    }
    if (!PyUnicode_Check(arg) && PyObject_CheckBuffer(arg)) {
        return pretokenize_utf8(arg, pattern);
    }
    Text t;
    if (bpe_text_open(&t, arg) < 0) {
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < t.n;) {
        Py_ssize_t j = (Py_ssize_t)bpe_text_next_end(&t, i, pattern);
        PyObject *piece = PyUnicode_Substring(arg, i, j);
        if (piece == NULL || PyList_Append(out, piece) < 0) {
            Py_XDECREF(piece);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(piece);
        i = j;
    }
    return out;
}

/* batch_runs(items, kind, max_parts, min_parts, min_size): the bounds of
 * contiguous, non-empty runs of the list's items of about equal total size (a
 * str's length, a bytes' size), as tokenizer._batch_runs computes them in
 * Python: `parts` of them at most, total // min_size clamped to [min_parts,
 * max_parts], run k ending after the item whose cumulative size is nearest
 * k/parts of the total (bpe_run_bounds). Every item must be a `kind` (str or
 * bytes): else TypeError naming its index. One C pass, as a Python loop over
 * a large batch costs as much per item as encoding a short line does. */
/* The cumulative sizes of items (len of each str, or of each bytes) in ends;
 * their total, or -1 with TypeError naming the first item that is not a
 * `kind`. No Python code runs here: the list stays as it is. */
static int64_t
batch_sizes(PyObject *items, int want_str, int64_t *ends)
{
    int64_t total = 0;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(items); k++) {
        PyObject *item = PyList_GET_ITEM(items, k);
        if (want_str ? !PyUnicode_Check(item) : !PyBytes_Check(item)) {
            PyObject *name = PyType_GetName(Py_TYPE(item));
            if (name != NULL) {
                PyErr_Format(PyExc_TypeError,
                             "batch index %zd: expected %s, got %U", k,
                             want_str ? "str" : "bytes", name);
                Py_DECREF(name);
            }
            return -1;
        }
        total += want_str ? PyUnicode_GET_LENGTH(item) : PyBytes_GET_SIZE(item);
        ends[k] = total;
    }
    return total;
}

/* bounds[0:n] as a list of ints. */
static PyObject *
index_list(const size_t *bounds, size_t n)
{
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t k = 0; out != NULL && k < n; k++) {
        PyObject *v = PyLong_FromSize_t(bounds[k]);
        if (v == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)k, v);
    }
    return out;
}

static PyObject *
batch_runs(PyObject *module, PyObject *args)
{
    PyObject *items, *kind;
    Py_ssize_t max_parts, min_parts, min_size;
    if (!PyArg_ParseTuple(args, "O!Onnn:batch_runs", &PyList_Type, &items,
                          &kind, &max_parts, &min_parts, &min_size))
    {
        return NULL;
    }
    int want_str = kind == (PyObject *)&PyUnicode_Type;
    if (!want_str && kind != (PyObject *)&PyBytes_Type) {
        PyErr_SetString(PyExc_ValueError, "kind must be str or bytes");
        return NULL;
    }
    if (max_parts < 1 || min_parts < 1 || min_size < 1) {
        PyErr_SetString(PyExc_ValueError,
                        "max_parts, min_parts and min_size must be >= 1");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(items);
    /* ends[0:count + 1] and then at most count + 1 distinct bounds */
    int64_t *ends = PyMem_Malloc(((size_t)count + 1) * sizeof(int64_t));
    size_t *bounds = PyMem_Malloc(((size_t)count + 2) * sizeof(size_t));
    if (ends == NULL || bounds == NULL) {
        PyMem_Free(ends);
        PyMem_Free(bounds);
        return PyErr_NoMemory();
    }
    PyObject *out = NULL;
    int64_t total = batch_sizes(items, want_str, ends);
    if (total >= 0 && count == 0) {
        out = PyList_New(0);
    }
    else if (total >= 0) {
        /* as many parts as the sizes allow, between min_parts and max_parts */
        Py_ssize_t parts = (Py_ssize_t)(total / min_size);
        parts = parts < min_parts ? min_parts : parts;
        parts = parts > max_parts ? max_parts : parts;
        out = index_list(bounds, bpe_run_bounds(ends, (size_t)count, total,
                                                (size_t)parts, bounds));
    }
    PyMem_Free(ends);
    PyMem_Free(bounds);
    return out;
}

static PyMethodDef module_methods[] = {
    {"set_char_classes", set_char_classes, METH_O,
     "set_char_classes(table)\n--\n\nThe class of every code point, "
     "0x110000 bytes: 0 other, 2 number, 3 whitespace, 5 Lu or Lt, 9 Ll, 13 "
     "Lm or Lo, 12 mark (bit 4: in o200k's upper letter set, bit 8: in its "
     "lower set)."},
    {"pretokenize", (PyCFunction)(void (*)(void))pretokenize,
     METH_VARARGS | METH_KEYWORDS,
     "pretokenize(text, pattern='gpt2')\n--\n\nThe pre-tokens of text by a "
     "preset split pattern ('gpt2', 'cl100k' or 'o200k'): a list of str; "
     "of bytes (or any buffer) holding valid UTF-8, a list of bytes (the "
     "scanners the counter and the encoder run)."},
    {"batch_runs", batch_runs, METH_VARARGS,
     "batch_runs(items, kind, max_parts, min_parts, min_size)\n--\n\nThe "
     "bounds of contiguous runs of the list's items (each a kind: str or "
     "bytes) of about equal total size: total size // min_size of them, "
     "clamped to [min_parts, max_parts]."},
    {"rank_file_tables", bpe_rank_file_tables, METH_VARARGS,
     "rank_file_tables(data, specials)\n--\n\nA tiktoken rank file's "
     "bytes read into (blob, offsets, ranks, merges, byte_ids, "
     "special_ranks), the merges rebuilt from the ranks; None if the file "
     "is not of the plain form or has a fault (see csrc/rank_file.c)."},
    {"gpt2_tables", bpe_gpt2_tables, METH_VARARGS,
     "gpt2_tables(vocab_json, merges_txt, specials)\n--\n\nA GPT-2 "
     "vocab.json and merges.txt (bytes) with the special tokens (bytes) "
     "read into (blob, offsets, ids, merges, byte_ids, special_ids, "
     "encoder_merges, keys, key_ids); None where the Python path would "
     "refuse them or read them otherwise (see csrc/vocab_files.c)."},
    {"hf_tables", bpe_hf_tables, METH_VARARGS,
     "hf_tables(vocab, merges, specials, special_ids)\n--\n\nA "
     "tokenizer.json's model vocab object and merges list (bytes), with its "
     "special tokens (bytes) and their ids, read as gpt2_tables reads its "
     "files; keys is the number of vocab keys, key_ids the id of the key "
     "equal to each special token (-1: none)."},
    {"hf_model_spans", bpe_hf_model_spans, METH_O,
     "hf_model_spans(document)\n--\n\nThe (start, end) byte offsets of "
     "the values of model.vocab and model.merges in a tokenizer.json's "
     "bytes, as (vocab_start, vocab_end, merges_start, merges_end); None if "
     "the document is not of that shape."},
    {"jsonl_documents", bpe_jsonl_documents_py, METH_VARARGS,
     "jsonl_documents(block, field, start, end, bom)\n--\n\nThe documents "
     "(field `field`, bytes) of the JSON Lines in block[start:end] (bytes), "
     "without the GIL: (data, offsets, stop, stop_end, lines), their UTF-8 "
     "back to back and native int64 offsets; stop < end where a line is left "
     "to Python, stop_end its end, lines the lines before it (see "
     "csrc/jsonl.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "bpe_impls._native",
    .m_doc =
        "The preset pre-tokenizers, a pre-token counter and a BPE encoder in "
        "C.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    if (PyType_Ready(&bpe_CounterType) < 0 ||
        PyType_Ready(&bpe_EncoderType) < 0)
    {
        return NULL;
    }
    PyObject *m = PyModule_Create(&native_module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "PretokenCounter",
                              (PyObject *)&bpe_CounterType) < 0 ||
        PyModule_AddObjectRef(m, "Encoder", (PyObject *)&bpe_EncoderType) < 0)
    {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
