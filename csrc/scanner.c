/* The parts of the scanners that do not run in the counter's and the
 * encoder's inner loops (see scanner.h): the class table, the str view, the
 * UTF-8 data view and the pattern names. UTF-8 validation is in utf8.c, the
 * special tokens in specials.c. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "scan_blocks.h"
#include "scanner.h"

BPE_INTERNAL unsigned char *bpe_char_class = NULL;
BPE_INTERNAL int bpe_ascii_blocks = 0;

BPE_INTERNAL int
bpe_classes_ready(void)
{
    if (bpe_char_class == NULL) {
        PyErr_SetString(
            PyExc_RuntimeError,
            "bpe_impls._native: set_char_classes() was not called");
        return 0;
    }
    return 1;
}


BPE_INTERNAL int
bpe_text_open(Text *t, PyObject *obj)
{
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "expected str, got %.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(obj) < 0) {
        return -1;
    }
#endif
    t->kind = PyUnicode_KIND(obj);
    t->data = PyUnicode_DATA(obj);
    t->n = PyUnicode_GET_LENGTH(obj);
    t->ascii = PyUnicode_IS_ASCII(obj);
    t->scratch = NULL;
    t->scratch_cap = 0;
    t->bad = -1;
    return 0;
}

BPE_INTERNAL void
bpe_text_close(Text *t)
{
    free(t->scratch);
    t->scratch = NULL;
}

BPE_INTERNAL PyObject *
bpe_surrogate_error(const Text *t)
{
    char code[16]; /* PyErr_Format has no %04X */
    snprintf(code, sizeof(code), "U+%04X",
             (unsigned)PyUnicode_READ(t->kind, t->data, t->bad));
    return PyErr_Format(PyExc_ValueError,
                        "lone surrogate %s at position %zd cannot be encoded",
                        code, t->bad);
}


BPE_INTERNAL int
bpe_data_open(Utf8Data *d, PyObject *obj)
{
    memset(d, 0, sizeof(*d));
    if (PyBytes_Check(obj)) {
        d->obj = Py_NewRef(obj);
        d->buf = (const unsigned char *)PyBytes_AS_STRING(obj);
        d->len = (size_t)PyBytes_GET_SIZE(obj);
        return 0;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    /* Nothing runs between getting the buffer and copying it. */
    d->own = malloc(view.len ? (size_t)view.len : 1);
    if (d->own == NULL) {
        PyBuffer_Release(&view);
        PyErr_NoMemory();
        return -1;
    }
    if (view.len) {
        memcpy(d->own, view.buf, (size_t)view.len);
    }
    d->buf = d->own;
    d->len = (size_t)view.len;
    PyBuffer_Release(&view);
    return 0;
}

BPE_INTERNAL void
bpe_data_close(Utf8Data *d)
{
    free(d->own);
    Py_XDECREF(d->obj);
    memset(d, 0, sizeof(*d));
}

BPE_INTERNAL int
bpe_pattern_id(const char *name)
{
    static const char *names[N_PATTERNS] = {"gpt2", "cl100k", "o200k"};
    for (int k = 0; k < N_PATTERNS; k++) {
        if (strcmp(name, names[k]) == 0) {
            return k;
        }
    }
    PyErr_Format(PyExc_ValueError,
                 "no scanner for pattern '%.100s': expected 'gpt2', 'cl100k' "
                 "or 'o200k'",
                 name);
    return -1;
}
