/* The parts of the scanners that do not run in the counter's and the
 * encoder's inner loops (see scanner.h): the class table, UTF-8 validation,
 * the str view and reading the special tokens. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "scanner.h"

BPE_INTERNAL unsigned char *bpe_char_class = NULL;

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
bpe_utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t v;
            memcpy(&v, s + i, 8);
            if (!(v & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        /* allowed range of the second byte */
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        }
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) {
                lo = 0xA0;
            }
            else if (c == 0xED) {
                hi = 0x9F;
            }
        }
        else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) {
                lo = 0x90;
            }
            else if (c == 0xF4) {
                hi = 0x8F;
            }
        }
        else {
            return 0;
        }
        if (i + need >= n) {
            return 0; /* truncated */
        }
        if (s[i + 1] < lo || s[i + 1] > hi) {
            return 0;
        }
        for (size_t k = 2; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return 0;
            }
        }
        i += need + 1;
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
bpe_specials_open(Specials *sp, PyObject *seq)
{
    memset(sp, 0, sizeof(*sp));
    sp->bad = -1;
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
    sp->token = PyMem_Calloc((size_t)count + 1, sizeof(*sp->token));
    sp->len = PyMem_Calloc((size_t)count + 1, sizeof(*sp->len));
    sp->origin = PyMem_Calloc((size_t)count + 1, sizeof(*sp->origin));
    sp->bytes = PyMem_Malloc(total + 1);
    if (sp->token == NULL || sp->len == NULL || sp->origin == NULL ||
        sp->bytes == NULL)
    {
        PyErr_NoMemory();
        goto done;
    }
    size_t used = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *item = PySequence_Fast_GET_ITEM(held, k);
        size_t len = (size_t)PyBytes_GET_SIZE(item), at = sp->count;
        unsigned char *token = sp->bytes + used;
        memcpy(token, PyBytes_AS_STRING(item), len);
        used += len;
        if (sp->bad < 0 && !bpe_utf8_valid(token, len)) {
            sp->bad = k;
        }
        /* insertion sort, longest first, stable */
        while (at > 0 && sp->len[at - 1] < len) {
            sp->token[at] = sp->token[at - 1];
            sp->len[at] = sp->len[at - 1];
            sp->origin[at] = sp->origin[at - 1];
            at--;
        }
        sp->token[at] = token;
        sp->len[at] = len;
        sp->origin[at] = (size_t)k;
        sp->count++;
        if (!sp->first[token[0]]) {
            sp->first[token[0]] = 1;
            sp->first_byte = token[0];
            sp->n_first++;
        }
    }
    result = 0;
done:
    Py_DECREF(held);
    return result;
}

BPE_INTERNAL void
bpe_specials_close(Specials *sp)
{
    PyMem_Free(sp->token);
    PyMem_Free(sp->len);
    PyMem_Free(sp->origin);
    PyMem_Free(sp->bytes);
    memset(sp, 0, sizeof(*sp));
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
                             sp->bad, token);
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
