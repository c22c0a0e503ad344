/* PretokenCounter: counts the pre-tokens of many texts by their UTF-8 bytes,
 * in a BytesMap (see counter.h) whose keys live in one arena: counting creates
 * a Python object per *distinct* pre-token, not per occurrence. add() and
 * add_utf8() drop the GIL. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "bpe_util.h"
#include "counter.h"
#include "scanner.h"

/* ---- BytesMap ----------------------------------------------------------- */

BPE_INTERNAL int
bpe_bm_init(BytesMap *m, size_t capacity)
{
    memset(m, 0, sizeof(*m));
    m->index = malloc(capacity * sizeof(uint32_t));
    m->entries = malloc(capacity / 2 * sizeof(Entry));
    if (m->index == NULL || m->entries == NULL) {
        free(m->index);
        free(m->entries);
        memset(m, 0, sizeof(*m));
        return -1;
    }
    memset(m->index, 0xFF, capacity * sizeof(uint32_t));
    m->mask = capacity - 1;
    m->entries_cap = capacity / 2;
    return 0;
}

BPE_INTERNAL void
bpe_bm_free(BytesMap *m)
{
    free(m->index);
    free(m->entries);
    free(m->arena);
    memset(m, 0, sizeof(*m));
}

BPE_INTERNAL void
bpe_bm_clear(BytesMap *m)
{
    memset(m->index, 0xFF, (m->mask + 1) * sizeof(uint32_t));
    m->used = 0;
    m->arena_len = 0;
}

/* Double the index (the entries stay where they are). */
static int
bm_grow(BytesMap *m)
{
    size_t capacity = (m->mask + 1) * 2;
    uint32_t *index = malloc(capacity * sizeof(uint32_t));
    if (index == NULL) {
        return -1;
    }
    memset(index, 0xFF, capacity * sizeof(uint32_t));
    for (size_t k = 0; k < m->used; k++) {
        size_t at = m->entries[k].hash & (capacity - 1);
        while (index[at] != NO_ENTRY) {
            at = (at + 1) & (capacity - 1);
        }
        index[at] = (uint32_t)k;
    }
    free(m->index);
    m->index = index;
    m->mask = capacity - 1;
    return 0;
}

BPE_INTERNAL Entry *
bpe_bm_insert(BytesMap *m, const unsigned char *key, size_t len, uint64_t h,
              int64_t value, uint32_t aux)
{
    if (len >= UINT32_MAX || m->used >= NO_ENTRY - 1) {
        return NULL;
    }
    /* the index at most half full: short probe sequences matter more than its
     * size */
    if ((m->used + 1) * 2 > m->mask + 1 && bm_grow(m) < 0) {
        return NULL;
    }
    if (bpe_reserve(&m->entries, &m->entries_cap, m->used + 1, sizeof(Entry),
                    512) < 0)
    {
        return NULL;
    }
    uint64_t off;
    if (len <= INLINE_KEY) {
        off = bpe_pack_key(key, len);
    }
    else {
        if (bpe_reserve(&m->arena, &m->arena_cap, m->arena_len + len, 1,
                        4096) < 0)
        {
            return NULL;
        }
        memcpy(m->arena + m->arena_len, key, len);
        off = m->arena_len;
        m->arena_len += len;
    }
    size_t at = h & m->mask;
    while (m->index[at] != NO_ENTRY) {
        at = (at + 1) & m->mask;
    }
    m->index[at] = (uint32_t)m->used;
    Entry *e = &m->entries[m->used++];
    e->hash = h;
    e->off = off;
    e->len = (uint32_t)len;
    e->value = value;
    e->aux = aux;
    return e;
}

/* ---- PretokenCounter ---------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    BytesMap counts;
    /* add() running without the GIL: a second thread must not touch the table
     */
    int busy;
} CounterObject;

static int
Counter_init(CounterObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, ":PretokenCounter", kwlist)) {
        return -1;
    }
    bpe_bm_free(&self->counts);
    if (bpe_bm_init(&self->counts, 1024) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void
Counter_dealloc(CounterObject *self)
{
    bpe_bm_free(&self->counts);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Counter_add(CounterObject *self, PyObject *arg)
{
    if (!bpe_classes_ready()) {
        return NULL;
    }
    if (self->counts.index == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "PretokenCounter was not initialised");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "PretokenCounter is in use by another thread");
        return NULL;
    }
    Text t;
    if (bpe_text_open(&t, arg) < 0) {
        return NULL;
    }
    int failed = 0; /* -1: lone surrogate, -2: out of memory */
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < t.n;) {
        Py_ssize_t j = bpe_text_next_end(&t, i);
        Py_ssize_t len;
        const unsigned char *key = bpe_text_utf8(&t, i, j, &len);
        if (key == NULL) {
            failed = (int)len;
            break;
        }
        uint64_t h = bpe_hash_bytes(key, (size_t)len);
        Entry *s = bpe_bm_get(&self->counts, key, (size_t)len, h);
        if (s != NULL) {
            s->value++;
        }
        else if (bpe_bm_insert(&self->counts, key, (size_t)len, h, 1, 0) ==
                 NULL)
        {
            failed = -2;
            break;
        }
        i = j;
    }
    Py_END_ALLOW_THREADS
    self->busy = 0;
    PyObject *result = NULL;
    if (failed == -1) {
        bpe_surrogate_error(&t);
    }
    else if (failed == -2) {
        PyErr_NoMemory();
    }
    else {
        result = Py_NewRef(Py_None);
    }
    bpe_text_close(&t);
    return result;
}

static PyObject *
Counter_to_dict(CounterObject *self, PyObject *unused)
{
    PyObject *out = PyDict_New();
    if (out == NULL) {
        return NULL;
    }
    const BytesMap *m = &self->counts;
    for (size_t k = 0; k < m->used; k++) { /* in first-seen order */
        const Entry *s = &m->entries[k];
        unsigned char buf[INLINE_KEY];
        PyObject *key = PyBytes_FromStringAndSize(
            (const char *)bpe_entry_key(m, s, buf), (Py_ssize_t)s->len);
        PyObject *value = key ? PyLong_FromLongLong(s->value) : NULL;
        if (value == NULL || PyDict_SetItem(out, key, value) < 0) {
            Py_XDECREF(key);
            Py_XDECREF(value);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(key);
        Py_DECREF(value);
    }
    return out;
}

static PyObject *
Counter_merge(CounterObject *self, PyObject *arg)
{
    if (!PyObject_TypeCheck(arg, Py_TYPE(self))) {
        PyErr_Format(PyExc_TypeError,
                     "can only merge a PretokenCounter, not %.100s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    CounterObject *other = (CounterObject *)arg;
    if (self->busy || other->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "PretokenCounter is in use by another thread");
        return NULL;
    }
    if (self->counts.index == NULL || other == self) {
        PyErr_SetString(
            PyExc_ValueError,
            "cannot merge an uninitialised counter or a counter into itself");
        return NULL;
    }
    const BytesMap *m = &other->counts;
    for (size_t k = 0; k < m->used; k++) {
        const Entry *o = &m->entries[k];
        unsigned char buf[INLINE_KEY];
        const unsigned char *key = bpe_entry_key(m, o, buf);
        Entry *s = bpe_bm_get(&self->counts, key, o->len, o->hash);
        if (s != NULL) {
            s->value += o->value;
        }
        else if (bpe_bm_insert(&self->counts, key, o->len, o->hash, o->value,
                               0) == NULL)
        {
            return PyErr_NoMemory();
        }
    }
    Py_RETURN_NONE;
}

/* Count the pre-tokens of s[0:n] (valid UTF-8, no special token); -2 when out
 * of memory. */
static int
count_utf8(BytesMap *counts, const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t j = bpe_next_end_utf8(s, i, n);
        uint64_t h = bpe_hash_bytes(s + i, j - i);
        Entry *slot = bpe_bm_get(counts, s + i, j - i, h);
        if (slot != NULL) {
            slot->value++;
        }
        else if (bpe_bm_insert(counts, s + i, j - i, h, 1, 0) == NULL) {
            return -2;
        }
        i = j;
    }
    return 0;
}

static PyObject *
Counter_add_utf8(CounterObject *self, PyObject *args)
{
    Py_buffer view;
    PyObject *specials_arg;
    if (!bpe_classes_ready()) {
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*O:add_utf8", &view, &specials_arg)) {
        return NULL;
    }
    if (self->counts.index == NULL || self->busy) {
        PyBuffer_Release(&view);
        PyErr_SetString(
            PyExc_RuntimeError,
            "PretokenCounter is uninitialised or in use by another thread");
        return NULL;
    }
    Specials sp;
    PyObject *held = NULL;
    if (bpe_specials_open(&sp, specials_arg, &held) < 0) {
        bpe_specials_close(&sp, held);
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *s = view.buf;
    size_t n = (size_t)view.len;
    int valid, failed = 0;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    valid = bpe_utf8_valid(s, n);
    for (size_t pos = 0; valid && pos <= n && !failed;) {
        size_t len, which;
        size_t at = bpe_next_special(&sp, s, pos, n, &len, &which);
        failed = count_utf8(&self->counts, s + pos, at - pos);
        pos = at + (len ? len : 1);
    }
    Py_END_ALLOW_THREADS
    self->busy = 0;
    bpe_specials_close(&sp, held);
    PyBuffer_Release(&view);
    if (failed) {
        return PyErr_NoMemory();
    }
    return PyBool_FromLong(valid);
}

static Py_ssize_t
Counter_len(CounterObject *self)
{
    return (Py_ssize_t)self->counts.used;
}

static PyMethodDef Counter_methods[] = {
    {"add", (PyCFunction)Counter_add, METH_O,
     "add(text)\n--\n\nCount the GPT-2 pre-tokens of text (a str holding no "
     "special token)."},
    {"add_utf8", (PyCFunction)Counter_add_utf8, METH_VARARGS,
     "add_utf8(data, special_tokens)\n--\n\nCount the pre-tokens of UTF-8 "
     "bytes, split on the special tokens (bytes).\nFalse, counting nothing, "
     "if data is not valid UTF-8."},
    {"merge", (PyCFunction)Counter_merge, METH_O,
     "merge(other)\n--\n\nAdd another PretokenCounter's counts to this one."},
    {"to_dict", (PyCFunction)Counter_to_dict, METH_NOARGS,
     "to_dict()\n--\n\nThe counts so far: {pre-token UTF-8 bytes: count}."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods Counter_as_sequence = {
    .sq_length = (lenfunc)Counter_len,
};

BPE_INTERNAL PyTypeObject bpe_CounterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bpe_impls._native.PretokenCounter",
    .tp_doc =
        "Counts GPT-2 pre-tokens by their UTF-8 bytes. One thread at a time.",
    .tp_basicsize = sizeof(CounterObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Counter_init,
    .tp_dealloc = (destructor)Counter_dealloc,
    .tp_methods = Counter_methods,
    .tp_as_sequence = &Counter_as_sequence,
};
