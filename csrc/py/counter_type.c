/* PretokenCounter: counts the pre-tokens of many texts by their UTF-8 bytes,
 * in a BytesMap (counter.h) whose keys live in one arena: counting creates a
 * Python object per *distinct* pre-token, not per occurrence. add(),
 * add_utf8(), merge() and to_packed() (these two on threads of their own)
 * run the core (counter.c) without the GIL. */
#include "common.h"

#include "counter.h"
#include "packed_py.h"

typedef struct {
    PyObject_HEAD
    BytesMap counts;
    /* A call is using the table: add(), add_utf8(), merge() (both
     * counters) and to_packed() while they run without the GIL (and
     * to_packed() while it makes its bytes object), to_dict() while it builds
     * Python objects (which may run Python code). Set and cleared only with
     * the GIL held; every method that touches the table checks it first, so
     * no other thread (and no callback) can free, grow or read the table
     * meanwhile. */
    int busy;
    int pattern; /* the scanner: PAT_GPT2, PAT_CL100K or PAT_O200K */
} CounterObject;

/* 1 if the table may be used now, else 0 with RuntimeError set. */
static int
counter_usable(CounterObject *self)
{
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "PretokenCounter is in use by another thread");
        return 0;
    }
    if (self->counts.index == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "PretokenCounter was not initialised");
        return 0;
    }
    return 1;
}

static int
Counter_init(CounterObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"pattern", NULL};
    const char *name = "gpt2";
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|s:PretokenCounter", kwlist,
                                     &name))
    {
        return -1;
    }
    int pattern = bpe_pattern_from_name(name);
    if (pattern < 0) {
        return -1;
    }
    if (self->busy) { /* freeing the table under a running add() */
        PyErr_SetString(PyExc_RuntimeError,
                        "PretokenCounter is in use by another thread");
        return -1;
    }
    bpe_bm_free(&self->counts);
    if (bpe_bm_init(&self->counts, 1024) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    self->pattern = pattern;
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
    Text t;
    if (bpe_text_open(&t, arg) < 0) {
        return NULL;
    }
    /* (a str is immutable, and the caller's reference keeps it alive) */
    if (!counter_usable(self)) {
        bpe_text_close(&t);
        return NULL;
    }
    int failed; /* -1: lone surrogate, -2: out of memory */
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    failed = bpe_count_text(&self->counts, &t, self->pattern);
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
    if (!counter_usable(self)) {
        return NULL;
    }
    PyObject *out = PyDict_New();
    if (out == NULL) {
        return NULL;
    }
    /* Creating objects may run the garbage collector, and so Python code
     * (finalizers) that could call this counter's methods: busy refuses them
     * while the loop reads the table. */
    self->busy = 1;
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
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(key);
        Py_DECREF(value);
    }
    self->busy = 0;
    return out;
}

/* 1 if `threads` (method's argument) is 1 .. BPE_MAX_THREADS, else 0 with
 * ValueError set. */
static int
threads_in_range(const char *method, Py_ssize_t threads)
{
    if (threads < 1 || threads > BPE_MAX_THREADS) {
        PyErr_Format(PyExc_ValueError,
                     "%s: threads must be 1 .. %d, not %zd", method,
                     BPE_MAX_THREADS, threads);
        return 0;
    }
    return 1;
}

/* merge(other, threads): bpe_bm_merge (counter.c) with both counters busy. */
static PyObject *
Counter_merge(CounterObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"", "threads", NULL};
    PyObject *arg;
    Py_ssize_t threads = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|n:merge", kwlist, &arg,
                                     &threads))
    {
        return NULL;
    }
    if (!threads_in_range("merge", threads)) {
        return NULL;
    }
    if (!PyObject_TypeCheck(arg, Py_TYPE(self))) {
        PyErr_Format(PyExc_TypeError,
                     "can only merge a PretokenCounter, not %.100s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    CounterObject *other = (CounterObject *)arg;
    if (other == self) {
        PyErr_SetString(PyExc_ValueError,
                        "cannot merge a counter into itself");
        return NULL;
    }
    if (other->pattern != self->pattern) {
        PyErr_Format(PyExc_ValueError,
                     "cannot merge the %s pre-tokens of another counter into "
                     "this counter of %s pre-tokens",
                     bpe_pattern_names[other->pattern],
                     bpe_pattern_names[self->pattern]);
        return NULL;
    }
    /* (nothing runs Python code between these checks and busy = 1; `args`
     * holds a reference to other until the end) */
    if (!counter_usable(self) || !counter_usable(other)) {
        return NULL;
    }
    int failed;
    self->busy = other->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    failed = bpe_bm_merge(&self->counts, &other->counts, (size_t)threads);
    Py_END_ALLOW_THREADS
    self->busy = other->busy = 0;
    if (failed) {
        return PyErr_NoMemory();
    }
    Py_RETURN_NONE;
}

/* to_packed(min_count, threads): the counter busy throughout; the sizes and
 * the writing without the GIL (bpe_pack_plan, bpe_pack_write), the bytes
 * object made with it in between. */
static PyObject *
Counter_to_packed(CounterObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"min_count", "threads", NULL};
    long long min_count = 1;
    Py_ssize_t threads = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|Ln:to_packed", kwlist,
                                     &min_count, &threads))
    {
        return NULL;
    }
    if (!threads_in_range("to_packed", threads)) {
        return NULL;
    }
    /* (nothing runs Python code between this check and busy = 1) */
    if (!counter_usable(self)) {
        return NULL;
    }
    PackPlan plan;
    uint64_t size;
    int err;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    err = bpe_pack_plan(&plan, &self->counts, min_count, (size_t)threads,
                        &size);
    Py_END_ALLOW_THREADS
    PyObject *out = NULL;
    if (err < 0 || plan.key_bytes > (size_t)PY_SSIZE_T_MAX - PACKED_HEADER -
                                        12 * plan.n)
    {
        PyErr_NoMemory();
    }
    else {
        out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    }
    if (out != NULL) {
        unsigned char *buf = (unsigned char *)PyBytes_AS_STRING(out);
        Py_BEGIN_ALLOW_THREADS
        bpe_pack_write(&plan, buf);
        Py_END_ALLOW_THREADS
    }
    self->busy = 0;
    bpe_pack_free(&plan);
    return out;
}

static PyObject *
Counter_add_packed(CounterObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    /* The buffer is exported (a bytearray cannot resize) and nothing below
     * runs Python code, so it stays as it is while it is read. */
    PyObject *result = NULL;
    PackedView p;
    PackedError err;
    uint64_t bad;
    if (bpe_packed_open(&p, view.buf, (size_t)view.len, &err) != PACKED_OK) {
        bpe_packed_raise(&err, (size_t)view.len);
    }
    else if (counter_usable(self)) {
        if ((bad = bpe_packed_first_bad_count(&p)) < p.n) {
            bpe_packed_raise_count(&p, bad);
        }
        else if (bpe_add_packed(&self->counts, &p) < 0) {
            PyErr_NoMemory();
        }
        else {
            result = Py_NewRef(Py_None);
        }
    }
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
Counter_add_utf8(CounterObject *self, PyObject *args)
{
    PyObject *data_arg, *specials_arg;
    if (!bpe_classes_ready()) {
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO:add_utf8", &data_arg, &specials_arg)) {
        return NULL;
    }
    /* Copies first (Python code may run while they are made), then the state
     * checks, then the scan: nothing runs between the checks and busy = 1. */
    Specials sp;
    Utf8Data d = {0};
    PyObject *result = NULL;
    if (bpe_specials_open(&sp, specials_arg) < 0 ||
        bpe_data_open(&d, data_arg) < 0)
    {
        goto done;
    }
    if (sp.bad >= 0) {
        /* RegexCounter decodes the data first: not UTF-8 is False whatever
         * the special tokens */
        result = bpe_utf8_valid(d.buf, d.len) ? bpe_specials_refuse(&sp)
                                              : Py_NewRef(Py_False);
        goto done;
    }
    if (!counter_usable(self)) {
        goto done;
    }
    int counted;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    counted = bpe_count_utf8(&self->counts, &sp, d.buf, d.len, self->pattern);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    result = counted < 0 ? PyErr_NoMemory() : PyBool_FromLong(counted);
done:
    bpe_specials_close(&sp);
    bpe_data_close(&d);
    return result;
}

static Py_ssize_t
Counter_len(CounterObject *self)
{
    if (self->busy) { /* the count changes under a running add() */
        PyErr_SetString(PyExc_RuntimeError,
                        "PretokenCounter is in use by another thread");
        return -1;
    }
    return (Py_ssize_t)self->counts.used;
}

static PyMethodDef Counter_methods[] = {
    {"add", (PyCFunction)Counter_add, METH_O,
     "add(text)\n--\n\nCount the pre-tokens of text (a str holding no "
     "special token)."},
    {"add_utf8", (PyCFunction)Counter_add_utf8, METH_VARARGS,
     "add_utf8(data, special_tokens)\n--\n\nCount the pre-tokens of UTF-8 "
     "bytes, split on the special tokens (bytes).\nFalse, counting nothing, "
     "if data is not valid UTF-8."},
    {"merge", (PyCFunction)(void (*)(void))Counter_merge,
     METH_VARARGS | METH_KEYWORDS,
     "merge(other, /, threads=1)\n--\n\nAdd another PretokenCounter's counts "
     "to this one, its new pre-tokens after\nthis one's in its first-seen "
     "order, on `threads` threads (without the GIL)."},
    {"to_packed", (PyCFunction)(void (*)(void))Counter_to_packed,
     METH_VARARGS | METH_KEYWORDS,
     "to_packed(min_count=1, threads=1)\n--\n\nThe counts of at least "
     "min_count as packed word counts (bytes; see\n"
     "bpe_impls.corpus.tally.pack_counts), in first-seen order, written on "
     "`threads`\nthreads (without the GIL)."},
    {"add_packed", (PyCFunction)Counter_add_packed, METH_O,
     "add_packed(data)\n--\n\nAdd packed word counts (as to_packed "
     "makes) to this counter's."},
    {"to_dict", (PyCFunction)Counter_to_dict, METH_NOARGS,
     "to_dict()\n--\n\nThe counts so far: {pre-token UTF-8 bytes: count}."},
    {NULL, NULL, 0, NULL},
};

static PyObject *
Counter_get_pattern(CounterObject *self, void *closure)
{
    return PyUnicode_FromString(bpe_pattern_names[self->pattern]);
}

static PyGetSetDef Counter_getset[] = {
    {"pattern", (getter)Counter_get_pattern, NULL,
     "The split pattern it scans: 'gpt2', 'cl100k' or 'o200k'.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Counter_as_sequence = {
    .sq_length = (lenfunc)Counter_len,
};

BPE_INTERNAL PyTypeObject bpe_CounterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bpe_impls._native.PretokenCounter",
    .tp_doc =
        "PretokenCounter(pattern='gpt2'): counts the pre-tokens of a preset "
        "split pattern ('gpt2', 'cl100k' or 'o200k') by their UTF-8 bytes. "
        "One thread at a time: a call made while another thread's add(), "
        "merge() or to_packed() runs raises RuntimeError.",
    .tp_basicsize = sizeof(CounterObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Counter_init,
    .tp_dealloc = (destructor)Counter_dealloc,
    .tp_methods = Counter_methods,
    .tp_getset = Counter_getset,
    .tp_as_sequence = &Counter_as_sequence,
};
