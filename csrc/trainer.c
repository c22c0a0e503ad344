/* bpe_impls._native_train: the merge loop of the "native" trainer, in C.
 *
 * bpe_impls/trainers/native.py is the Python side; this is route_b.py's
 * algorithm (in-place merges found through an append-only
 * occurrence index, lazy max-heap) on flat C arrays. One entry point:
 *
 *     train(word_counts, num_merges, on_merges=None, stats=None, *,
 *           heap_limit=65536) -> [(left bytes, right bytes), ...]
 *
 * It copies the words out of `word_counts` (holding the GIL), then builds the
 * pair table and runs the merges with the GIL released, in batches; between
 * batches it checks for signals (Ctrl-C) and calls on_merges(k) with the
 * number of merges just made, if given. Nothing in the trainer's files holds a
 * Python object while the GIL is released.
 *
 * Words are laid out one byte per cell in one array, `val`, each word preceded
 * by a boundary cell holding its number (and one more at the end), so a cell
 * needs no parallel array naming its word. A token covers consecutive
 * cells (its bytes); val of its first cell is its id. The other cells of a
 * token are dead (negative): its last cell holds the offset back to the
 * token's start, so the token before cell n is found from val[n - 1] alone,
 * and the token after a token starting at n starts at n + len(token). So a
 * word needs no prev/next links.
 *
 * Data structures (C arrays; the merge loop touches no Python object and runs
 * with the GIL released):
 * - cells: every distinct word of two or more bytes, one byte per cell, in one
 *   int32 array with a boundary cell before each word that holds the word's
 *   count (counts from about 2**31 up: an index into a side table). A merge
 *   walks back to it for the count; in a word of 32 bytes or more it bisects
 *   the long words' boundary positions instead. About 4 bytes per byte of
 *   distinct words. A token covers consecutive cells (its bytes): its first
 *   cell holds its id, its last cell (if it has several) the offset back to
 *   its first. So the next token starts at `cell + len(token)` and the
 *   previous one is read off the cell before: the words need no prev/next
 *   links.
 * - tokens: every token's bytes back to back, plus a hash table bytes -> id.
 *   One id per byte string: a merge whose bytes already exist as a token
 *   (`a`+`bc` after `ab`+`c`) reuses that id, because the naive trainer
 *   compares tokens by their bytes.
 * - pairs: an open-addressing hash table (left id, right id) -> pair record
 *   (32 bytes): the pair's int64 count and its occurrence list, the cells
 *   where the pair was seen. A slot is 4 bytes: the record's id and, in the
 *   bits the id does not need, a tag of the key's hash, so a probe reads a
 *   record only when the tag matches. Lists are append-only, as in route_b: an
 *   entry is live only if the cell still starts the left token and the next
 *   token is the right one; stale and repeated entries are skipped on use. A
 *   list of one entry holds it in the record, the next few come from a shared
 *   arena, and one of 16384 entries or more gets pages of its own (on Linux),
 *   returned as soon as it shrinks or dies. Memory follows the live pairs, not
 *   all pairs ever made: a pair counted down to 0 frees its list at once and
 *   leaves the table after the merge (its record is reused), and a list whose
 *   pair's count falls below a quarter of its entries drops its stale ones
 *   (each live entry weighs >= 1, so the work is at most 4/3 of the entries
 *   dropped). Freed heap memory goes back to the system (malloc_trim) before
 *   the words' pairs are indexed and whenever 16 MB of lists have been freed.
 * - shifts: two arrays indexed by token id, filled once per merge of (a, b):
 *   for a neighbour token t, the ids of (t, a) and (t, new) on the left, (b,
 *   t) and (new, t) on the right. A merge's many occurrences share few
 *   neighbours, so most pair lookups are an array read, not a hash probe.
 * - heap: a binary max-heap of (count, left id, right id), ordered by
 *   `merge_priority` (count, then left bytes, then right bytes, as Python
 *   compares bytes; each token's first 8 bytes, kept as one integer, settle
 *   most ties). Lazy, as in route_b: an entry's count is an upper bound of the
 *   pair's count, which the pop checks against the table. It holds only the
 *   pairs at or above a floor: when it reaches its limit (65536 entries to
 *   start) the floor rises to keep about a quarter of them; when it runs dry
 *   the floor falls and the pairs above it are pushed again. Most of a web
 *   corpus's millions of pairs are too rare ever to be merged and never enter
 *   it.
 *
 * One merge of (a, b) costs O(len(occurrences of (a, b))) cell and array
 * updates -- each entry once, live or stale; a run of a's is walked once more
 * for a == b -- plus a hash probe per distinct neighbour token, and O(log
 * heap) per pair whose count grew and per stale entry popped later: route_b's
 * bounds, without its Python objects; plus the compactions (bounded by the
 * entries appended) and the floor's moves (a pass over the pairs each time the
 * heap runs dry, a few times a run). Counts are int64: word counts whose pair
 * occurrences sum past 2**63 - 1 raise OverflowError instead of wrapping.
 *
 * It takes word counts as a mapping or as PackedCounts
 * (bpe_impls.corpus.tally), which the C side reads directly: `train_bpe`
 * counts into packed form for this trainer, so a corpus's millions of distinct
 * pre-tokens never become Python objects on the way from the counter to the
 * merge loop, and hands them over (PackedCounts.disposable), so the packed
 * bytes are freed once the words are laid out, before the merges.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "trainer_internal.h"

/* ---- the module --------------------------------------------------------- */

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
                cache[id] = PyBytes_FromStringAndSize(
                    (const char *)s->tok.bytes + s->tok.start[id],
                    s->tok.len[id]);
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

/* The arrays of up to num_merges merges (each merge shortens some word by a
 * cell, so no run makes more than num_cells merges; this also bounds every
 * token and merge id below 2**31), the tokens and the words' pairs. Without
 * the GIL for the pairs. 0, or -1 with MemoryError. */
static int
prepare(State *s, Py_ssize_t num_merges)
{
    s->max_merges =
        num_merges < s->num_cells ? (int32_t)num_merges : s->num_cells;
    size_t ids = (size_t)s->max_merges + 1, tokens = 256 + (size_t)s->max_merges;
    s->merge_left = malloc(ids * sizeof *s->merge_left);
    s->merge_right = malloc(ids * sizeof *s->merge_right);
    s->left_shift = calloc(tokens, sizeof *s->left_shift);
    s->right_shift = calloc(tokens, sizeof *s->right_shift);
    if (!s->merge_left || !s->merge_right || !s->left_shift ||
        !s->right_shift)
    {
        PyErr_NoMemory();
        return -1;
    }
    int err;
    Py_BEGIN_ALLOW_THREADS
#if defined(__GLIBC__)
    /* What the caller freed (the packed counts just read, the counter's
     * tables) stays in the process until asked for, under the lists about to
     * be made. */
    malloc_trim(0);
#endif
    err = tokens_init(&s->tok, 256 + s->max_merges) < 0 ||
          initial_pairs(s) < 0;
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
        made = run_merges(s, BATCH);
#if defined(__GLIBC__)
        /* The lists freed as pairs are merged or counted down to 0 leave
         * holes that later, smaller lists fill only in part: glibc returns
         * their pages only when asked. */
        if (batch % TRIM_EVERY == 0) {
            malloc_trim(0);
            s->arena.released = 0;
        }
#endif
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
    size_t list_bytes = 0;
    for (size_t p = 0; p < s->num_pairs; p++) {
        if (s->pairs[p].seen.cap > SMALL_LIST) {
            list_bytes += s->pairs[p].seen.cap * sizeof(int32_t);
        }
    }
    list_bytes += s->arena.num_blocks * ARENA_BLOCK * sizeof(int32_t);
    size_t pair_bytes =
        s->pairs_cap * sizeof(Pair) + (sizeof(uint32_t) << s->slot_bits);
    const struct {
        const char *name;
        long long value;
    } items[] = {
        {"words", s->num_words},
        {"cells", s->num_cells},
        {"pairs", (long long)s->pairs_created},
        {"pair_records", (long long)s->num_pairs},
        {"occurrences_visited", s->visited},
        {"occurrences_merged", s->merged},
        {"occurrences_compacted", s->compacted},
        {"heap_pushes", s->pushes},
        {"heap_pops", s->pops},
        {"heap_peak", (long long)s->heap_peak},
        {"heap_cuts", s->cuts},
        {"heap_refills", s->refills},
        {"trims", s->trims},
        {"pair_bytes", (long long)pair_bytes},
        {"list_bytes", (long long)list_bytes},
        {"heap_bytes", (long long)(s->heap_cap * sizeof(Entry))},
    };
    for (size_t k = 0; k < sizeof items / sizeof items[0]; k++) {
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

