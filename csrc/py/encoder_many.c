/* Encoder.encode_many_buffer and encode_many_lists: a batch's texts (a range
 * of one list) encoded by the core in one pass without the GIL (encode_many),
 * then the ids as one buffer with offsets, or as a list of lists whose ints
 * are the tables' shared objects, filled without the GIL when long. */
#include "encoder_py.h"

/* encode_many_buffer(datas, special_tokens, special_ids, itemsize=4, start=0,
 * stop=len(datas)): each of datas[start:stop] (bytes of valid UTF-8, or str)
 * encoded as encode_utf8 would, all with the GIL released once; (ids,
 * offsets): the ids back to back as in encode_utf8_buffer, and stop - start +
 * 1 native int64 offsets, datas[start + i]'s ids being ids[offsets[i]:offsets[i
 * + 1]]. (A range, not a slice: a batch's runs are ranges of one list, and
 * slicing it would touch every item's reference count once more.) */
/* Each of held[start:start + count] as UTF-8 in texts, with a reference of
 * our own in items. No Python code runs here (nor in making a str's UTF-8):
 * the sequence stays as it is. A str gives the UTF-8 CPython keeps with it
 * (valid by construction). The number of items taken; *failed set with an
 * exception when an item is neither bytes nor str (or a str has a lone
 * surrogate). */
static Py_ssize_t
many_take(PyObject *held, Py_ssize_t start, Py_ssize_t count,
          PyObject **items, Utf8Text *texts, int *failed)
{
    Py_ssize_t taken = 0;
    *failed = 0;
    for (; taken < count; taken++) {
        PyObject *item = PySequence_Fast_GET_ITEM(held, start + taken);
        Utf8Text *text = &texts[taken];
        if (PyBytes_Check(item)) {
            text->s = (const unsigned char *)PyBytes_AS_STRING(item);
            text->n = (size_t)PyBytes_GET_SIZE(item);
        }
        else if (PyUnicode_Check(item)) {
            Py_ssize_t len;
            const char *utf8 = PyUnicode_AsUTF8AndSize(item, &len);
            if (utf8 == NULL) {
                *failed = 1; /* (a lone surrogate: UnicodeEncodeError) */
                break;
            }
            text->s = (const unsigned char *)utf8;
            text->n = (size_t)len;
            text->valid = 1;
        }
        else {
            PyErr_Format(PyExc_TypeError,
                         "datas[%zd] is %.100s, not bytes or str",
                         start + taken, Py_TYPE(item)->tp_name);
            *failed = 1;
            break;
        }
        items[taken] = Py_NewRef(item);
    }
    return taken;
}

/* Encodes texts[0:count] into call->out without the GIL (encode_many), each
 * followed by `separator` unless negative, offsets[k + 1] the end of text
 * k's ids. 0; -1 with an exception set
 * (MemoryError, or ValueError naming datas[start + k] that is not valid
 * UTF-8). */
static int
many_encode(Call *call, const Utf8Text *texts, Py_ssize_t count,
            int64_t separator, int64_t *offsets, Py_ssize_t start)
{
    size_t bad = 0;
    int err;
    IdBuf out = call->out;
    Py_BEGIN_ALLOW_THREADS
    err = encode_many(&call->tables->bpe, call->cache, &call->sp,
                      call->special_ids, texts, (size_t)count, separator,
                      offsets, &out, &bad);
    Py_END_ALLOW_THREADS
    call->out = out; /* (grown: call_close frees or keeps it) */
    if (err > 0) {
        PyErr_Format(PyExc_ValueError, "datas[%zd] is not valid UTF-8",
                     start + (Py_ssize_t)bad);
        return -1;
    }
    if (err < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* (ids bytearray of itemsize-byte ids, int64 offsets bytearray). */
static PyObject *
many_result(const IdBuf *out, const int64_t *offsets, Py_ssize_t count,
            int itemsize)
{
    PyObject *ids = ids_to_bytearray(out->ids, out->len, itemsize);
    if (ids == NULL) {
        return NULL;
    }
    PyObject *offs = PyByteArray_FromStringAndSize(
        (const char *)offsets, (Py_ssize_t)((size_t)(count + 1) * 8));
    if (offs == NULL) {
        Py_DECREF(ids);
        return NULL;
    }
    PyObject *result = PyTuple_Pack(2, ids, offs);
    Py_DECREF(ids);
    Py_DECREF(offs);
    return result;
}

/* From this many ids a run's lists are filled without the GIL (below it the
 * GIL round trips would cost more than the fill). */
#define LISTS_NOGIL_MIN_IDS 8192

/* many_lists with the GIL all along: a load and an incref per id. */
static PyObject *
many_lists_gil(Tables *t, const IdBuf *out, const int64_t *offsets,
               Py_ssize_t count)
{
    PyObject *lists = PyList_New(count);
    if (lists == NULL) {
        return NULL;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *one = ids_to_list(t, out->ids + offsets[k],
                                    (size_t)(offsets[k + 1] - offsets[k]));
        if (one == NULL) {
            Py_DECREF(lists); /* (its items not yet set are NULL) */
            return NULL;
        }
        PyList_SET_ITEM(lists, k, one);
    }
    return lists;
}

/* Every id's int object in the table, made once (with the GIL; no Python
 * code runs: an int is not tracked by the collector). 0, or -1 with
 * MemoryError set. */
static int
tables_fill_id_objects(Tables *t)
{
    for (size_t id = 0; !t->id_objects_full && id < t->id_objects_len; id++) {
        if (t->id_objects[id] == NULL) {
            t->id_objects[id] = PyLong_FromSize_t(id);
            if (t->id_objects[id] == NULL) {
                return -1;
            }
        }
    }
    t->id_objects_full = 1;
    return 0;
}

/* A slot fill_lists left NULL: its id is beyond the table (a special
 * token's, typically). */
typedef struct {
    Py_ssize_t list, at;
} Miss;

/* What fill_lists reads and writes: the run's ids, its new lists (each
 * untracked by the collector and referenced only here, so no other code can
 * see them) and the arrays below, all the call's own; and the table, which
 * no code changes once full. */
typedef struct {
    const IdBuf *out;
    const int64_t *offsets;
    Py_ssize_t count;
    PyObject **lists;
    PyObject *const *objects;
    size_t objects_len;
    uint32_t *uses; /* per id, the slots given its int: references to count */
    /* The ids whose uses are not 0, in the order first met: fill_finish
     * counts the references of these alone, not of every id of the vocab
     * (o200k_base's 200k, for a run of a few thousand ids). */
    uint32_t *used;
    size_t used_len;
    Miss *misses;
    size_t misses_len, misses_cap;
} Fill;

/* Notes slot `at` of list `list` as missed. 0, or -1 if out of memory. */
static int
fill_miss(Fill *f, Py_ssize_t list, Py_ssize_t at)
{
    if (bpe_reserve(&f->misses, &f->misses_cap, f->misses_len + 1,
                    sizeof(Miss), 16) < 0)
    {
        return -1;
    }
    f->misses[f->misses_len++] = (Miss){list, at};
    return 0;
}

/* Without the GIL: each list's slots get the table's int of their id,
 * borrowed (the table holds them; their references are counted after, with
 * the GIL, from uses). Allocates uses and used here, not with the GIL. 0, or
 * -1 if out of memory. */
static int
fill_lists(Fill *f)
{
    /* (at most one used id per id of the run, or of the table) */
    size_t most = f->out->len < f->objects_len ? f->out->len : f->objects_len;
    f->uses = calloc(f->objects_len, sizeof(uint32_t));
    f->used = malloc((most + 1) * sizeof(uint32_t));
    if (f->uses == NULL || f->used == NULL) {
        return -1;
    }
    /* (locals: the loop keeps them in registers) */
    PyObject *const *objects = f->objects;
    const size_t objects_len = f->objects_len;
    uint32_t *uses = f->uses, *used = f->used;
    size_t used_len = 0;
    for (Py_ssize_t k = 0; k < f->count; k++) {
        PyObject **slots = ((PyListObject *)f->lists[k])->ob_item;
        const uint32_t *ids = f->out->ids + f->offsets[k];
        const Py_ssize_t n = (Py_ssize_t)(f->offsets[k + 1] - f->offsets[k]);
        for (Py_ssize_t i = 0; i < n; i++) {
            const uint32_t id = ids[i];
            if (id < objects_len) {
                slots[i] = objects[id];
                if (uses[id]++ == 0) {
                    used[used_len++] = id;
                }
            }
            else if (fill_miss(f, k, i) < 0) {
                f->used_len = used_len;
                return -1;
            }
        }
    }
    f->used_len = used_len;
    return 0;
}

/* After fill_lists, with the GIL: each slot's reference counted, the missed
 * slots made, the lists tracked again and gathered in one list. NULL with
 * an exception set if out of memory (the lists are freed). */
static PyObject *
fill_finish(Tables *t, Fill *f)
{
    for (size_t k = 0; k < f->used_len; k++) {
        uint32_t id = f->used[k];
        PyObject *v = f->objects[id];
#if defined(Py_REF_DEBUG) || defined(Py_GIL_DISABLED)
        /* (a debug build counts every reference taken; a free-threaded one
         * counts another thread's atomically, which a store would undo) */
        for (uint32_t c = f->uses[id]; c; c--) {
            Py_INCREF(v);
        }
#else
        /* (one store for all its uses: the compiler kept an increment per
         * use. Py_SET_REFCNT leaves an immortal int as it is.) */
        Py_SET_REFCNT(v, Py_REFCNT(v) + (Py_ssize_t)f->uses[id]);
#endif
    }
    int failed = 0;
    for (size_t m = 0; m < f->misses_len && !failed; m++) {
        Miss miss = f->misses[m];
        uint32_t id = f->out->ids[f->offsets[miss.list] + miss.at];
        PyObject *v = tables_id_object(t, id);
        failed = v == NULL;
        PyList_SET_ITEM(f->lists[miss.list], miss.at, v);
    }
    /* (complete before the collector may see them: creating the outer list
     * may run a collection) */
    for (Py_ssize_t k = 0; k < f->count && !failed; k++) {
        PyObject_GC_Track(f->lists[k]);
    }
    PyObject *lists = failed ? NULL : PyList_New(f->count);
    for (Py_ssize_t k = 0; k < f->count; k++) {
        if (lists != NULL) {
            PyList_SET_ITEM(lists, k, f->lists[k]);
        }
        else {
            Py_DECREF(f->lists[k]); /* (a slot still NULL is skipped) */
        }
    }
    return lists;
}

/* A list of one list of ids per text (text k's ids are
 * out[offsets[k]:offsets[k + 1]]). The ints are the tables' shared objects,
 * so a token costs a store and a reference, not an allocation. A long run's
 * lists are made with the GIL (the allocations), filled without it, and
 * their references counted with it, id by id: the part that holds the GIL,
 * while a batch's other threads wait for it, is a small share of the work. */
static PyObject *
many_lists(Tables *t, const IdBuf *out, const int64_t *offsets,
           Py_ssize_t count)
{
    if (out->len < LISTS_NOGIL_MIN_IDS || out->len > UINT32_MAX) {
        return many_lists_gil(t, out, offsets, count);
    }
    if (tables_fill_id_objects(t) < 0) {
        return NULL;
    }
    Fill f = {.out = out, .offsets = offsets, .count = count,
              .objects = t->id_objects, .objects_len = t->id_objects_len};
    PyObject *result = NULL;
    Py_ssize_t made = 0;
    f.lists = PyMem_Calloc((size_t)count + 1, sizeof(PyObject *));
    if (f.lists == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; made < count; made++) {
        f.lists[made] = PyList_New(offsets[made + 1] - offsets[made]);
        if (f.lists[made] == NULL) {
            goto done;
        }
        PyObject_GC_UnTrack(f.lists[made]);
    }
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = fill_lists(&f);
    Py_END_ALLOW_THREADS
    if (err < 0) {
        PyErr_NoMemory();
        for (Py_ssize_t k = 0; k < count; k++) { /* (none is counted yet) */
            Py_ssize_t n = (Py_ssize_t)(offsets[k + 1] - offsets[k]);
            if (n) {
                memset(((PyListObject *)f.lists[k])->ob_item, 0,
                       (size_t)n * sizeof(PyObject *));
            }
        }
        goto done;
    }
    result = fill_finish(t, &f);
    made = 0; /* (fill_finish gave them to result, or freed them) */
done:
    for (Py_ssize_t k = 0; k < made; k++) {
        Py_DECREF(f.lists[k]);
    }
    free(f.misses);
    free(f.uses);
    free(f.used);
    PyMem_Free(f.lists);
    return result;
}

/* encode_many_buffer and encode_many_lists: itemsize 0 for lists. */
static PyObject *
encode_batch(EncoderObject *self, PyObject *datas_arg, PyObject *specials_arg,
            PyObject *ids_arg, int itemsize, Py_ssize_t start, Py_ssize_t stop)
{
    int failed = 0;
    Call call;
    PyObject *result = NULL, *held = NULL;
    PyObject **items = NULL; /* our own references: the list may change */
    Utf8Text *texts = NULL;  /* each item's UTF-8 */
    int64_t *offsets = NULL;
    Py_ssize_t count = 0, taken = 0;
    if (call_open_specials(&call, specials_arg, ids_arg) < 0) {
        goto done;
    }
    held = PySequence_Fast(datas_arg, "datas must be a list of bytes");
    if (held == NULL) {
        goto done;
    }
    Py_ssize_t size = PySequence_Fast_GET_SIZE(held);
    stop = stop == PY_SSIZE_T_MAX ? size : stop;
    if (start < 0 || start > stop || stop > size) {
        PyErr_Format(PyExc_ValueError,
                     "start %zd and stop %zd are not a range of datas' %zd "
                     "items",
                     start, stop, size);
        goto done;
    }
    count = stop - start;
    items = PyMem_Calloc((size_t)count + 1, sizeof(PyObject *));
    offsets = PyMem_Calloc((size_t)count + 1, sizeof(int64_t));
    texts = PyMem_Calloc((size_t)count + 1, sizeof(Utf8Text));
    if (items == NULL || offsets == NULL || texts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    taken = many_take(held, start, count, items, texts, &failed);
    if (!failed && call_start(&call, self) == 0 &&
        many_encode(&call, texts, count, -1, offsets, start) == 0)
    {
        /* (the lists' ints come from the tables: they stay until
         * call_close) */
        result = itemsize ? many_result(&call.out, offsets, count, itemsize)
                          : many_lists(call.tables, &call.out, offsets, count);
    }
done:
    call_close(&call);
    for (Py_ssize_t k = 0; k < taken; k++) {
        Py_DECREF(items[k]);
    }
    PyMem_Free(items);
    PyMem_Free(texts);
    PyMem_Free(offsets);
    Py_XDECREF(held);
    return result;
}

BPE_INTERNAL PyObject *
Encoder_encode_many_buffer(EncoderObject *self, PyObject *args,
                           PyObject *kwds)
{
    static char *kwlist[] = {"datas", "special_tokens", "special_ids",
                             "itemsize", "start", "stop", NULL};
    PyObject *datas_arg, *specials_arg, *ids_arg;
    int itemsize = 4;
    Py_ssize_t start = 0, stop = PY_SSIZE_T_MAX;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|inn:encode_many_buffer",
                                     kwlist, &datas_arg, &specials_arg,
                                     &ids_arg, &itemsize, &start, &stop) ||
        check_itemsize(itemsize) < 0 || encoder_tables(self) == NULL)
    {
        return NULL;
    }
    return encode_batch(self, datas_arg, specials_arg, ids_arg, itemsize,
                       start, stop);
}

/* encode_many_lists(datas, special_tokens, special_ids, start=0,
 * stop=len(datas)): encode_many_buffer's encoding (one GIL-free pass over
 * the range), then a list of ids per text, as encode_utf8 gives it. A
 * batch's threads each call it on their runs: one builds its lists with the
 * GIL while the others encode. */
BPE_INTERNAL PyObject *
Encoder_encode_many_lists(EncoderObject *self, PyObject *args,
                          PyObject *kwds)
{
    static char *kwlist[] = {"datas", "special_tokens", "special_ids",
                             "start", "stop", NULL};
    PyObject *datas_arg, *specials_arg, *ids_arg;
    Py_ssize_t start = 0, stop = PY_SSIZE_T_MAX;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|nn:encode_many_lists",
                                     kwlist, &datas_arg, &specials_arg,
                                     &ids_arg, &start, &stop) ||
        encoder_tables(self) == NULL)
    {
        return NULL;
    }
    return encode_batch(self, datas_arg, specials_arg, ids_arg, 0, start,
                       stop);
}


/* encode_packed_buffer(data, offsets, special_tokens, special_ids,
 * itemsize=4, start=0, stop=len(offsets) // 8 - 1, separator=-1): texts
 * start..stop-1 of data (bytes), text k being data[offsets[k]:offsets[k +
 * 1]] (offsets native int64, non-decreasing, within data), encoded as
 * encode_many_buffer encodes a list of them (each checked as UTF-8), without
 * a bytes object per text: the texts of an Arrow string array, or of a data
 * set's records (jsonl_documents). A separator id >= 0 follows each text's
 * ids, within its offsets (a data set's EOT, with no second pass to insert
 * it). */
BPE_INTERNAL PyObject *
Encoder_encode_packed_buffer(EncoderObject *self, PyObject *args,
                             PyObject *kwds)
{
    static char *kwlist[] = {"data", "offsets", "special_tokens",
                             "special_ids", "itemsize", "start", "stop",
                             "separator", NULL};
    PyObject *data, *offsets_arg, *specials_arg, *ids_arg;
    int itemsize = 4;
    Py_ssize_t start = 0, stop = PY_SSIZE_T_MAX;
    long long separator = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "SOOO|innL:encode_packed_buffer",
                                     kwlist, &data, &offsets_arg,
                                     &specials_arg, &ids_arg, &itemsize,
                                     &start, &stop, &separator) ||
        check_itemsize(itemsize) < 0 || encoder_tables(self) == NULL)
    {
        return NULL;
    }
    if (separator > (long long)UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "separator %lld is not an id",
                     separator);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(offsets_arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    Call call;
    PyObject *result = NULL;
    Utf8Text *texts = NULL;
    int64_t *offsets = NULL; /* the ids' offsets, from 0 */
    Py_ssize_t size = view.len / 8 - 1; /* (texts in offsets) */
    stop = stop == PY_SSIZE_T_MAX ? size : stop;
    if (call_open_specials(&call, specials_arg, ids_arg) < 0) {
        goto done;
    }
    if (view.len % 8 != 0 || size < 0) {
        PyErr_Format(PyExc_ValueError,
                     "offsets holds %zd bytes, not one or more int64",
                     view.len);
        goto done;
    }
    if (start < 0 || start > stop || stop > size) {
        PyErr_Format(PyExc_ValueError,
                     "start %zd and stop %zd are not a range of the %zd "
                     "texts",
                     start, stop, size);
        goto done;
    }
    Py_ssize_t count = stop - start;
    offsets = PyMem_Calloc((size_t)count + 1, sizeof(int64_t));
    texts = PyMem_Calloc((size_t)count + 1, sizeof(Utf8Text));
    if (offsets == NULL || texts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* (the bounds read once, here, with the GIL: offsets may be a mutable
     * buffer; data is bytes, immutable, and args holds it) */
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(data);
    const int64_t n = (int64_t)PyBytes_GET_SIZE(data);
    int64_t previous;
    memcpy(&previous, (const char *)view.buf + 8 * start, 8);
    for (Py_ssize_t k = 0; k < count; k++) {
        int64_t next;
        memcpy(&next, (const char *)view.buf + 8 * (start + k + 1), 8);
        if (previous < 0 || next < previous || next > n) {
            PyErr_Format(PyExc_ValueError,
                         "offsets[%zd:%zd] = %lld, %lld is not a range of "
                         "data's %lld bytes",
                         start + k, start + k + 2, (long long)previous,
                         (long long)next, (long long)n);
            goto done;
        }
        texts[k].s = s + previous;
        texts[k].n = (size_t)(next - previous);
        previous = next;
    }
    if (call_start(&call, self) == 0 &&
        many_encode(&call, texts, count, (int64_t)separator, offsets,
                    start) == 0)
    {
        result = many_result(&call.out, offsets, count, itemsize);
    }
done:
    call_close(&call); /* (safe once call_open_specials ran, as it has) */
    PyBuffer_Release(&view);
    PyMem_Free(texts);
    PyMem_Free(offsets);
    return result;
}
