/* bpe_impls._native: the pre-tokenizers of the preset split patterns (GPT-2,
 * cl100k, o200k), a pre-token counter and a BPE encoder, in C.
 *
 * Each piece does exactly what the pure-Python path does (bpe_impls/corpus/
 * tally.py and bpe_impls/encoding/encoders.py); tests/test_native.py and the
 * registry-wide suites prove it.
 *
 *   scanner.h, scan_kind.h, scanner.c  the pre-tokenizers, over str and over
 *                                      UTF-8
 *   counter.h, counter.c               PretokenCounter and its bytes map
 *   encoder.h, encoder.c               Encoder
 *   native_module.c                    this module: its functions and
 *                                      PyInit__native
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "bpe_util.h"
#include "counter.h"
#include "encoder.h"
#include "scan_blocks.h"
#include "scanner.h"

static PyObject *
set_char_classes(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    unsigned char *copy = NULL;
    if (view.len != N_CODEPOINTS) {
        PyErr_Format(PyExc_ValueError,
                     "class table must have %d entries, got %zd", N_CODEPOINTS,
                     view.len);
        goto done;
    }
    /* The entries the scanners rely on (scanner.h): a letter is in one or
     * both of o200k's sets, a mark (other) in both, nothing else in either. */
    static const unsigned char valid[256] = {
        [CLS_OTHER] = 1,
        [CLS_NUMBER] = 1,
        [CLS_SPACE] = 1,
        [CLS_LETTER | CLS_UP] = 1,
        [CLS_LETTER | CLS_LOW] = 1,
        [CLS_LETTER | CLS_UP | CLS_LOW] = 1,
        [CLS_OTHER | CLS_UP | CLS_LOW] = 1,
    };
    const unsigned char *classes = view.buf;
    for (Py_ssize_t k = 0; k < view.len; k++) {
        if (!valid[classes[k]]) {
            PyErr_Format(PyExc_ValueError,
                         "class table entry %zd is %d, not one of 0, 2, 3, "
                         "5, 9, 12, 13",
                         k, (int)classes[k]);
            goto done;
        }
    }
    /* The table in use is never freed or changed: scans in other threads read
     * it without the GIL. The first one set stays; a later call must bring the
     * same table. */
    if (bpe_char_class != NULL) {
        if (memcmp(bpe_char_class, classes, N_CODEPOINTS) != 0) {
            PyErr_SetString(PyExc_ValueError,
                            "a different class table is already set");
            goto done;
        }
        result = Py_NewRef(Py_None);
        goto done;
    }
    copy = malloc(N_CODEPOINTS);
    if (copy == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(copy, classes, N_CODEPOINTS);
    bpe_ascii_blocks = bpe_blocks_match_classes(copy);
    bpe_char_class = copy;
    result = Py_NewRef(Py_None);
done:
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
    int pattern = bpe_pattern_id(name);
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
        Py_ssize_t j = bpe_text_next_end(&t, i, pattern);
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

/* Append i to the list as an int: 0, or -1 with an exception set. */
static int
append_index(PyObject *list, Py_ssize_t i)
{
    PyObject *v = PyLong_FromSsize_t(i);
    int err = v == NULL ? -1 : PyList_Append(list, v);
    Py_XDECREF(v);
    return err;
}

/* batch_runs(items, kind, max_parts, min_parts, min_size): the bounds of
 * contiguous, non-empty runs of the list's items of about equal total size (a
 * str's length, a bytes' size), as tokenizer._batch_runs computes them in
 * Python: `parts` of them at most, total // min_size clamped to [min_parts,
 * max_parts], run k ending after the item whose cumulative size is nearest
 * k/parts of the total. Every item must be a `kind` (str or bytes): else
 * TypeError naming its index. One C pass, as a Python loop over a large batch
 * costs as much per item as encoding a short line does. */
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

/* The index of the item whose end is nearest target (the earlier one on a
 * tie), as the twin's bisect_left and comparison give it. Python's float
 * arithmetic, so the bounds are the twin's exactly (every integer here is
 * below 2**53, so exact as a double). */
static Py_ssize_t
nearest_end(const int64_t *ends, Py_ssize_t count, double target)
{
    Py_ssize_t lo = 0, hi = count; /* bisect_left(ends, target) */
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if ((double)ends[mid] < target) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    if (lo == count ||
        (lo > 0 && target - (double)ends[lo - 1] < (double)ends[lo] - target))
    {
        lo--;
    }
    return lo;
}

/* The bounds of `parts` runs over items of cumulative sizes ends[0:count]
 * (count > 0): a list of indices from 0 to count, a repeat dropped as the
 * twin's set drops it. */
static PyObject *
run_bounds(const int64_t *ends, Py_ssize_t count, int64_t total,
           Py_ssize_t parts)
{
    PyObject *out = PyList_New(0);
    if (out == NULL || append_index(out, 0) < 0) {
        Py_XDECREF(out);
        return NULL;
    }
    Py_ssize_t last = 0;
    for (Py_ssize_t k = 1; k < parts; k++) {
        double target = (double)(total * (int64_t)k) / (double)parts;
        Py_ssize_t i = nearest_end(ends, count, target);
        if (i + 1 > last && i + 1 < count) {
            if (append_index(out, i + 1) < 0) {
                Py_DECREF(out);
                return NULL;
            }
            last = i + 1;
        }
    }
    if (append_index(out, count) < 0) {
        Py_DECREF(out);
        return NULL;
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
    int64_t *ends = PyMem_Malloc(((size_t)count + 1) * sizeof(int64_t));
    if (ends == NULL) {
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
        out = run_bounds(ends, count, total, parts);
    }
    PyMem_Free(ends);
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
