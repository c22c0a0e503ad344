/* Special tokens: reading them from Python into memory the Specials own
 * (longest first), and refusing the ones that are not whole UTF-8. The search
 * itself (bpe_next_special) is inline in scanner.h, in the callers' loops. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "scanner.h"

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
