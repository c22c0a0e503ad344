/* CPython's side of the scanners' inputs (py/common.h): str views, UTF-8
 * buffers, special tokens, and the exceptions for what the core reports. */
#include "common.h"

/* A str's kind is its code unit's width in bytes, as Text reads it. */
_Static_assert(PyUnicode_1BYTE_KIND == 1 && PyUnicode_2BYTE_KIND == 2 &&
                   PyUnicode_4BYTE_KIND == 4,
               "Text.kind is the unit width");

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
bpe_pattern_from_name(const char *name)
{
    int pattern = bpe_pattern_id(name);
    if (pattern < 0) {
        PyErr_Format(PyExc_ValueError,
                     "no scanner for pattern '%.100s': expected 'gpt2', "
                     "'cl100k' or 'o200k'",
                     name);
    }
    return pattern;
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
    bpe_text_init(t, PyUnicode_KIND(obj), PyUnicode_DATA(obj),
                  PyUnicode_GET_LENGTH(obj), PyUnicode_IS_ASCII(obj));
    return 0;
}

BPE_INTERNAL PyObject *
bpe_surrogate_error(const Text *t)
{
    char code[16]; /* PyErr_Format has no %04X */
    snprintf(code, sizeof(code), "U+%04X", (unsigned)bpe_text_at(t, t->bad));
    return PyErr_Format(PyExc_ValueError,
                        "lone surrogate %s at position %zd cannot be encoded",
                        code, (Py_ssize_t)t->bad);
}

BPE_INTERNAL int
bpe_specials_open(Specials *sp, PyObject *seq)
{
    bpe_specials_empty(sp);
    /* may run Python code (it iterates seq when it is not a list or tuple) */
    PyObject *held =
        PySequence_Fast(seq, "special tokens must be a sequence of bytes");
    if (held == NULL) {
        return -1;
    }
    /* From here on until Py_DECREF(held) no Python code runs: held's items
     * stay where they are while they are read and copied. */
    int result = -1;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(held);
    size_t total = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *item = PySequence_Fast_GET_ITEM(held, k);
        if (!PyBytes_Check(item) || PyBytes_GET_SIZE(item) == 0) {
            PyErr_Format(PyExc_TypeError,
                         "special token #%zd is not non-empty bytes", k);
            goto done;
        }
        total += (size_t)PyBytes_GET_SIZE(item); /* each < PY_SSIZE_T_MAX */
        if (total > PY_SSIZE_T_MAX) {
            PyErr_NoMemory();
            goto done;
        }
    }
    if (bpe_specials_reserve(sp, (size_t)count, total) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *item = PySequence_Fast_GET_ITEM(held, k);
        bpe_specials_add(sp, (const unsigned char *)PyBytes_AS_STRING(item),
                         (size_t)PyBytes_GET_SIZE(item));
    }
    result = 0;
done:
    Py_DECREF(held);
    return result;
}

BPE_INTERNAL PyObject *
bpe_specials_refuse(const Specials *sp)
{
    for (size_t k = 0; k < sp->count; k++) {
        if (sp->origin[k] == (size_t)sp->bad) {
            PyObject *token = PyBytes_FromStringAndSize(
                (const char *)sp->token[k], (Py_ssize_t)sp->len[k]);
            if (token != NULL) {
                PyErr_Format(PyExc_ValueError,
                             "special token #%zd %R is not valid UTF-8: "
                             "special tokens must be whole characters",
                             (Py_ssize_t)sp->bad, token);
                Py_DECREF(token);
            }
            return NULL;
        }
    }
    PyErr_SetString(PyExc_SystemError, "no bad special token to refuse");
    return NULL;
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
