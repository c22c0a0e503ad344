/* bpe_impls._native_train: the native trainer's core (trainer.c and its
 * components) as one function, train(). The words are read from word_counts
 * (a mapping here; packed counts by the core) holding the GIL, then the pair
 * table is built and the merges run with the GIL released, in batches;
 * between batches train() checks for signals (Ctrl-C) and calls
 * on_merges(k) with the number of merges just made, if given. No Python
 * object is held where the GIL is released. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "trainer_internal.h"

#include "packed_py.h"

/* ---- reading word_counts (GIL held) ------------------------------------- */

/* Iterates a dict (or Counter) in place, without copying it, and any other
 * mapping through .items(). A dict subclass is read as a dict: an items()
 * override would not be called. */
typedef struct {
    PyObject *dict;
    Py_ssize_t pos;
    PyObject *items; /* a list of (key, value) tuples, for other mappings */
} ItemIter;

static int
iter_start(ItemIter *it, PyObject *mapping)
{
    it->pos = 0;
    it->dict = PyDict_Check(mapping) ? mapping : NULL;
    it->items = NULL;
    if (it->dict == NULL) {
        PyObject *items = PyMapping_Items(mapping);
        if (items == NULL) {
            return -1;
        }
        it->items =
            PySequence_Fast(items, "word_counts.items() must be iterable");
        Py_DECREF(items);
        if (it->items == NULL) {
            return -1;
        }
    }
    return 0;
}

/* 1 and a borrowed (key, value), 0 at the end, -1 on error. */
static int
iter_next(ItemIter *it, PyObject **key, PyObject **value)
{
    if (it->dict != NULL) {
        return PyDict_Next(it->dict, &it->pos, key, value);
    }
    if (it->pos >= PySequence_Fast_GET_SIZE(it->items)) {
        return 0;
    }
    PyObject *item = PySequence_Fast_GET_ITEM(it->items, it->pos++);
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
        PyErr_SetString(PyExc_TypeError,
                        "word_counts.items() must yield (bytes, int) pairs");
        return -1;
    }
    *key = PyTuple_GET_ITEM(item, 0);
    *value = PyTuple_GET_ITEM(item, 1);
    return 1;
}

/* The count of `word` as int64 (check_word_counts has vetted it; this guards
 * the C side). A word of one byte (or none) has no pair, so no count of it is
 * too large: it only has to be positive, and *out is then left unset. */
static int
read_count(PyObject *word, PyObject *value, int64_t *out)
{
    if (!PyBytes_Check(word) || !PyLong_Check(value) || PyBool_Check(value)) {
        PyErr_Format(PyExc_TypeError,
                     "word counts must map bytes to int, got %R: %R", word,
                     value);
        return -1;
    }
    int overflow;
    long long count = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (count == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow > 0 && PyBytes_GET_SIZE(word) < 2) {
        return 0;
    }
    if (overflow > 0) {
        PyErr_Format(PyExc_OverflowError,
                     "word %R has count %R; the native trainer takes counts "
                     "up to 2**63 - 1",
                     word, value);
        return -1;
    }
    if (overflow < 0 || count <= 0) {
        PyErr_Format(PyExc_ValueError,
                     "word %R has count %R; counts must be positive", word,
                     value);
        return -1;
    }
    *out = (int64_t)count;
    return 0;
}

/* The exception for a loading step's status (trainer_internal.h); -1. */
static int
load_error(int status)
{
    switch (status) {
    case TRAIN_TOO_MANY_OCCURRENCES:
        PyErr_SetString(
            PyExc_OverflowError,
            "the word counts sum to more than 2**63 - 1 pair occurrences, "
            "beyond the native trainer's 64-bit counts");
        break;
    case TRAIN_TOO_MANY_CELLS:
        PyErr_SetString(PyExc_OverflowError,
                        "the distinct words hold about 2**31 bytes or more, "
                        "beyond the native trainer's 32-bit cell indices");
        break;
    case TRAIN_CHANGED:
        PyErr_SetString(PyExc_RuntimeError,
                        "word_counts changed while it was being read");
        break;
    default:
        PyErr_NoMemory();
        break;
    }
    return -1;
}

/* Lay out every word of two or more bytes of a mapping in s->val. Two passes:
 * size, then fill. */
static int
load_words(State *s, PyObject *word_counts)
{
    ItemIter it;
    PyObject *word, *value;
    Sizes sizes = {.cells = 1};
    int r, status;
    if (iter_start(&it, word_counts) < 0) {
        return -1;
    }
    while ((r = iter_next(&it, &word, &value)) > 0) {
        int64_t count = 0;
        if (read_count(word, value, &count) < 0) {
            goto fail;
        }
        status = train_size_word(&sizes, PyBytes_GET_SIZE(word), count);
        if (status != TRAIN_OK) {
            load_error(status);
            goto fail;
        }
    }
    if (r < 0) {
        goto fail;
    }
    if (train_alloc_cells(s, &sizes) != TRAIN_OK) {
        load_error(TRAIN_NO_MEMORY);
        goto fail;
    }
    int32_t n = 0, w = 0;
    /* nothing ran between the passes that could change the mapping */
    it.pos = 0;
    while ((r = iter_next(&it, &word, &value)) > 0) {
        Py_ssize_t len = PyBytes_GET_SIZE(word);
        if (len < 2) {
            continue;
        }
        if (n + len + 2 > s->num_cells || /* and the last boundary */
            w >= sizes.words) { /* only if the mapping changed under us */
            load_error(TRAIN_CHANGED);
            goto fail;
        }
        const unsigned char *bytes =
            (const unsigned char *)PyBytes_AS_STRING(word);
        int64_t count = 0;
        if (read_count(word, value, &count) < 0) {
            goto fail;
        }
        status = train_lay_word(s, &n, count, bytes, (size_t)len);
        if (status != TRAIN_OK) {
            load_error(status);
            goto fail;
        }
        w++;
    }
    if (r < 0) {
        goto fail;
    }
    status = train_end_words(s, n, w);
    if (status != TRAIN_OK) {
        load_error(status);
        goto fail;
    }
    Py_XDECREF(it.items);
    return 0;
fail:
    Py_XDECREF(it.items);
    return -1;
}

/* Lay out the words of packed word counts (packed.h) as load_words does
 * those of a mapping. The buffer is exported for the whole read (a bytearray
 * cannot resize) and no Python code runs meanwhile. */
static int
load_packed(State *s, PyObject *packed)
{
    Py_buffer view;
    if (PyObject_GetBuffer(packed, &view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    PackedView p;
    PackedError err;
    uint64_t bad = 0;
    int result = -1;
    if (bpe_packed_open(&p, view.buf, (size_t)view.len, &err) != PACKED_OK) {
        bpe_packed_raise(&err, (size_t)view.len);
    }
    else {
        int status = train_load_packed(s, &p, &bad);
        if (status == TRAIN_BAD_COUNT) {
            bpe_packed_raise_count(&p, bad);
        }
        else if (status != TRAIN_OK) {
            load_error(status);
        }
        else {
            result = 0;
        }
    }
    PyBuffer_Release(&view);
    return result;
}

/* The words of word_counts laid out in s: a mapping (a dict, a Counter),
 * packed word counts (bytes, or any buffer: PretokenCounter.to_packed's,
 * which hold no object per word), or a list holding only packed word counts,
 * which is emptied once they are read, so the caller's last reference to
 * them can go before the merges, which need as much memory again. 0, or -1
 * with an exception set. */
static int
load(State *s, PyObject *word_counts)
{
    if (!PyList_CheckExact(word_counts)) {
        return !PyDict_Check(word_counts) && PyObject_CheckBuffer(word_counts)
                   ? load_packed(s, word_counts)
                   : load_words(s, word_counts);
    }
    if (PyList_GET_SIZE(word_counts) != 1 ||
        !PyObject_CheckBuffer(PyList_GET_ITEM(word_counts, 0)))
    {
        PyErr_SetString(PyExc_TypeError,
                        "a list of word counts must hold one buffer of "
                        "packed word counts, and nothing else");
        return -1;
    }
    PyObject *taken = Py_NewRef(PyList_GET_ITEM(word_counts, 0));
    int loaded = load_packed(s, taken);
    /* (a bytes object's release runs no Python code) */
    int emptied = PyList_SetSlice(word_counts, 0, 1, NULL);
    Py_DECREF(taken);
    return loaded < 0 || emptied < 0 ? -1 : 0;
}

/* ---- the run -------------------------------------------------------------- */

/* The merges as a list of (left, right) bytes; one bytes object per token,
 * shared. */
static PyObject *
merges_to_list(const State *s)
{
    PyObject *result = NULL;
    PyObject **cache = calloc((size_t)s->tok.count, sizeof *cache);
    PyObject *list = PyList_New(s->num_merges);
    if (cache == NULL || list == NULL) {
        if (cache == NULL) {
            PyErr_NoMemory();
        }
        goto done;
    }
    for (int32_t i = 0; i < s->num_merges; i++) {
        int32_t ids[2] = {s->merge_left[i], s->merge_right[i]};
        for (int k = 0; k < 2; k++) {
            int32_t id = ids[k];
            if (cache[id] == NULL) {
                size_t len;
                const uint8_t *bytes = token_bytes(&s->tok, id, &len);
                cache[id] = PyBytes_FromStringAndSize((const char *)bytes,
                                                      (Py_ssize_t)len);
                if (cache[id] == NULL) {
                    goto done;
                }
            }
        }
        PyObject *pair = PyTuple_Pack(2, cache[ids[0]], cache[ids[1]]);
        if (pair == NULL) {
            goto done;
        }
        PyList_SET_ITEM(list, i, pair);
    }
    result = list;
    list = NULL;
done:
    Py_XDECREF(list);
    if (cache != NULL) {
        for (int32_t id = 0; id < s->tok.count; id++) {
            Py_XDECREF(cache[id]);
        }
    }
    free(cache);
    return result;
}

/* train's arguments checked: 0, or -1 with an exception set. */
static int
check_arguments(Py_ssize_t num_merges, Py_ssize_t heap_limit, PyObject *stats,
                PyObject *on_merges)
{
    if (heap_limit < 4) {
        PyErr_SetString(PyExc_ValueError, "heap_limit must be >= 4");
        return -1;
    }
    if (stats != Py_None && !PyDict_Check(stats)) {
        PyErr_SetString(PyExc_TypeError, "stats must be a dict or None");
        return -1;
    }
    if (num_merges < 0) {
        PyErr_SetString(PyExc_ValueError, "num_merges must be >= 0");
        return -1;
    }
    if (on_merges != Py_None && !PyCallable_Check(on_merges)) {
        PyErr_SetString(PyExc_TypeError, "on_merges must be callable or None");
        return -1;
    }
    return 0;
}

/* The arrays, the tokens and the words' pairs (train_prepare), without the
 * GIL. 0, or -1 with MemoryError. */
static int
prepare(State *s, Py_ssize_t num_merges)
{
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = train_prepare(s, (int64_t)num_merges);
    Py_END_ALLOW_THREADS
    if (err) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* The merges, in batches of BATCH without the GIL; between batches a check
 * for signals (Ctrl-C stops training) and on_merges(made). 0, or -1 with an
 * exception set. */
static int
run(State *s, PyObject *on_merges)
{
    for (int64_t batch = 1;; batch++) {
        int32_t made;
        Py_BEGIN_ALLOW_THREADS
        made = train_batch(s, batch);
        Py_END_ALLOW_THREADS
        if (made < 0) {
            PyErr_NoMemory();
            return -1;
        }
        if (made > 0 && on_merges != Py_None) {
            PyObject *r = PyObject_CallFunction(on_merges, "i", (int)made);
            if (r == NULL) {
                return -1;
            }
            Py_DECREF(r);
        }
        if (PyErr_CheckSignals() < 0) {
            return -1;
        }
        if (made < BATCH) {
            return 0; /* the budget is spent or no pair is left */
        }
    }
}

/* The run's statistics written into the dict stats: 0, or -1 with an
 * exception set. */
static int
write_stats(const State *s, PyObject *stats)
{
    TrainStat items[TRAIN_STATS];
    train_stats(s, items);
    for (size_t k = 0; k < TRAIN_STATS; k++) {
        PyObject *v = PyLong_FromLongLong(items[k].value);
        if (v == NULL || PyDict_SetItemString(stats, items[k].name, v) < 0) {
            Py_XDECREF(v);
            return -1;
        }
        Py_DECREF(v);
    }
    return 0;
}

static PyObject *
train(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"word_counts", "num_merges", "on_merges",
                               "stats", "heap_limit", NULL};
    PyObject *word_counts, *on_merges = Py_None, *stats = Py_None;
    Py_ssize_t num_merges, heap_limit = HEAP_LIMIT;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "On|OO$n:train", keywords,
                                     &word_counts, &num_merges, &on_merges,
                                     &stats, &heap_limit) ||
        check_arguments(num_merges, heap_limit, stats, on_merges) < 0)
    {
        return NULL;
    }
    State s = {0};
    s.heap_limit = (size_t)heap_limit;
    PyObject *result = NULL;
    if (load(&s, word_counts) == 0 && prepare(&s, num_merges) == 0 &&
        run(&s, on_merges) == 0)
    {
        result = merges_to_list(&s);
        if (result != NULL && stats != Py_None && write_stats(&s, stats) < 0) {
            Py_CLEAR(result);
        }
    }
    state_free(&s);
    return result;
}

static PyMethodDef methods[] = {
    {"train", (PyCFunction)(void (*)(void))train, METH_VARARGS | METH_KEYWORDS,
     "train(word_counts, num_merges, on_merges=None, stats=None, *, "
     "heap_limit=65536) -> list of (left bytes, right bytes)\n\nUp to num_merges BPE merges over word_counts (bytes -> "
     "positive int, packed word\ncounts as PretokenCounter.to_packed "
     "makes, or a list holding only those, which train\nempties once it has "
     "read them), in the order and with\nthe tie-break of bpe_impls.naive. "
     "on_merges(k), if given, is called after each batch of k\nmerges. "
     "stats, a dict, receives counts of the work done and sizes. "
     "heap_limit:\nthe heap's entries before it first drops the rarest "
     "pairs (tests make it small). Use "
     "bpe_impls.native_train.train, which validates arguments and builds "
     "the vocab."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "bpe_impls._native_train",
    .m_doc =
        "The merge loop of the native BPE trainer (bpe_impls.native_train).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__native_train(void)
{
    return PyModuleDef_Init(&module_def);
}

