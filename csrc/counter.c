/* PretokenCounter: counts the pre-tokens of many texts by their UTF-8 bytes,
 * in a BytesMap (see counter.h) whose keys live in one arena: counting creates
 * a Python object per *distinct* pre-token, not per occurrence. add(),
 * add_utf8(), merge() and to_packed() (these two on threads of their own)
 * drop the GIL. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "bpe_util.h"
#include "counter.h"
#include "packed.h"
#include "scan_blocks.h"
#include "scanner.h"


/* ---- PretokenCounter ---------------------------------------------------- */

static int add_count(BytesMap *m, const unsigned char *key, size_t len,
                     uint64_t h, int64_t count);

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

static const char *const pattern_names[N_PATTERNS] = {"gpt2", "cl100k",
                                                      "o200k"};

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
    int pattern = bpe_pattern_id(name);
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
    int failed = 0; /* -1: lone surrogate, -2: out of memory */
    int pattern = self->pattern;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < t.n;) {
        Py_ssize_t j = bpe_text_next_end(&t, i, pattern);
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

/* ---- merging counters, on several threads --------------------------------
 *
 * merge(other, threads) adds other's counts to this counter's as adding its
 * entries one by one, in other's order, would: keys already here keep their
 * place, new ones follow in other's first-seen order (so to_dict() and
 * to_packed() give the same order for any number of threads). In two phases
 * (three when the index must grow), each on `threads` threads with the GIL
 * released and both counters busy:
 *
 *   1. lookup: share p of other's entries (a range of positions) is looked up
 *      here, through an index nobody changes meanwhile; a hit adds to its
 *      entry's count (other's keys are distinct, so each entry here is hit by
 *      at most one share: no two threads write one count), a miss is kept in
 *      the share's list, in other's order.
 *   2. append: the shares' misses, concatenated, are the new entries, in
 *      other's order; each share copies its own to the place the counts of
 *      the shares before it give, and puts them in the index, claiming free
 *      slots by compare-and-swap. The index is first grown, if it must be, to
 *      the size one-by-one insertion would reach (a phase clears it, one
 *      refills it with the old entries and the new), so it takes the same
 *      slots as one-by-one insertion, maybe by other entries within a run of
 *      taken slots, which lookups do not depend on.
 *
 * On one thread this is also faster than adding the entries one by one: the
 * lookups, independent of each other, prefetch ahead, and the index grows
 * once. */

#if defined(__unix__)
#include <pthread.h>
#define COUNTER_THREADS 1
#endif

/* How many entries ahead the merge's loops prefetch. */
#define MERGE_AHEAD 16

/* More threads than this are refused (a caller's typo, not a machine). */
#define MAX_THREADS 1024

/* 1 if `threads` (method's argument) is 1 .. MAX_THREADS, else 0 with
 * ValueError set. */
static int
threads_in_range(const char *method, Py_ssize_t threads)
{
    if (threads < 1 || threads > MAX_THREADS) {
        PyErr_Format(PyExc_ValueError,
                     "%s: threads must be 1 .. %d, not %zd", method,
                     MAX_THREADS, threads);
        return 0;
    }
    return 1;
}

typedef struct {
    BytesMap *into;
    const BytesMap *from;
    enum { MERGE_LOOKUP, MERGE_CLEAR_INDEX, MERGE_APPEND } phase;
    /* lookup: from's entries [begin, end); misses into fresh (room for
     * end - begin), n_fresh of them, long_bytes of long keys among them */
    size_t begin, end;
    uint32_t *fresh;
    size_t n_fresh, long_bytes;
    /* when the index was grown: the slots [clear_begin, clear_end) it clears
     * (the first touch of fresh pages, which the kernel zeroes, costs more
     * than the writes), and the old entries [old_begin, old_end) it puts
     * back */
    size_t clear_begin, clear_end, old_begin, old_end;
    /* append: where this share's new entries and long keys go */
    size_t first_id, arena_at;
} MergeShare;

/* The entry of `into` whose key is that of e, an entry of `from` (NULL if
 * absent): bpe_bm_get, comparing a short key as packed (both maps pack
 * alike), so the key is never unpacked and packed again. */
static Entry *
bm_find_entry(const BytesMap *into, const BytesMap *from, const Entry *e)
{
    size_t at = e->hash & into->mask;
    uint32_t id_mask = bpe_bm_id_mask(into), tag = bpe_bm_tag(e->hash, id_mask);
    const unsigned char *key = e->len > INLINE_KEY ? from->arena + e->off : NULL;
    for (;;) {
        uint32_t k = into->index[at];
        if (k == NO_ENTRY) {
            return NULL;
        }
        if ((k & ~id_mask) == tag) {
            Entry *s = &into->entries[k & id_mask];
            if (s->hash == e->hash && s->len == e->len &&
                (key == NULL
                     ? s->off == e->off
                     : bpe_long_key_equal(into->arena + s->off, key, e->len)))
            {
                return s;
            }
        }
        at = (at + 1) & into->mask;
    }
}

/* Put entry `id` (hash h) in the first free slot of its probe sequence,
 * claimed by compare-and-swap where other threads fill the index too. */
static void
put_slot(BytesMap *m, uint64_t h, size_t id)
{
    uint32_t id_mask = bpe_bm_id_mask(m);
    uint32_t slot = bpe_bm_tag(h, id_mask) | (uint32_t)id;
    for (size_t at = h & m->mask;; at = (at + 1) & m->mask) {
        uint32_t free_slot = NO_ENTRY;
        if (__atomic_load_n(&m->index[at], __ATOMIC_RELAXED) == NO_ENTRY &&
            __atomic_compare_exchange_n(&m->index[at], &free_slot, slot, 0,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        {
            return;
        }
    }
}

static void
merge_lookup(MergeShare *sh)
{
    const BytesMap *from = sh->from;
    const BytesMap *into = sh->into;
    for (size_t k = sh->begin; k < sh->end; k++) {
        /* the lookups are independent: their index slots, and then their
         * entries, are fetched ahead */
        if (k + 2 * MERGE_AHEAD < sh->end) {
            __builtin_prefetch(
                &into->index[from->entries[k + 2 * MERGE_AHEAD].hash &
                             into->mask]);
        }
        if (k + MERGE_AHEAD < sh->end) {
            uint32_t slot =
                into->index[from->entries[k + MERGE_AHEAD].hash & into->mask];
            if (slot != NO_ENTRY) {
                __builtin_prefetch(
                    &into->entries[slot & bpe_bm_id_mask(into)]);
            }
        }
        const Entry *e = &from->entries[k];
        Entry *s = bm_find_entry(sh->into, from, e);
        if (s != NULL) {
            s->value = e->value > INT64_MAX - s->value ? INT64_MAX
                                                       : s->value + e->value;
        }
        else {
            sh->fresh[sh->n_fresh++] = (uint32_t)k;
            if (e->len > INLINE_KEY) {
                sh->long_bytes += e->len;
            }
        }
    }
}

static void
merge_append(MergeShare *sh)
{
    BytesMap *into = sh->into;
    const BytesMap *from = sh->from;
    for (size_t k = sh->old_begin; k < sh->old_end; k++) {
        if (k + MERGE_AHEAD < sh->old_end) {
            __builtin_prefetch(
                &into->index[into->entries[k + MERGE_AHEAD].hash & into->mask],
                1);
        }
        put_slot(into, into->entries[k].hash, k);
    }
    size_t arena_at = sh->arena_at;
    for (size_t i = 0; i < sh->n_fresh; i++) {
        if (i + MERGE_AHEAD < sh->n_fresh) {
            const Entry *ahead = &from->entries[sh->fresh[i + MERGE_AHEAD]];
            __builtin_prefetch(&into->index[ahead->hash & into->mask], 1);
            __builtin_prefetch(ahead);
        }
        const Entry *e = &from->entries[sh->fresh[i]];
        Entry *d = &into->entries[sh->first_id + i];
        *d = *e;
        d->aux = 0;
        if (e->len > INLINE_KEY) {
            memcpy(into->arena + arena_at, from->arena + e->off, e->len);
            d->off = arena_at;
            arena_at += e->len;
        }
        put_slot(into, e->hash, sh->first_id + i);
    }
}

static void *
merge_share_run(void *arg)
{
    MergeShare *sh = arg;
    switch (sh->phase) {
    case MERGE_LOOKUP:
        merge_lookup(sh);
        break;
    case MERGE_CLEAR_INDEX:
        memset(sh->into->index + sh->clear_begin, 0xFF,
               (sh->clear_end - sh->clear_begin) * sizeof(uint32_t));
        break;
    case MERGE_APPEND:
        merge_append(sh);
        break;
    }
    return NULL;
}

/* Run fn on each of n shares (consecutive structs of `size` bytes from
 * `shares`): shares 1.. on threads of their own (any that cannot start runs
 * here instead), share 0 on this one. Used by merge() and to_packed(). */
static void
run_shares(void *(*fn)(void *), void *shares, size_t size, size_t n)
{
    unsigned char *share = shares;
#ifdef COUNTER_THREADS
    pthread_t *ids = n > 1 ? malloc((n - 1) * sizeof(pthread_t)) : NULL;
    unsigned char *started = n > 1 ? calloc(n - 1, 1) : NULL;
    if (ids != NULL && started != NULL) {
        for (size_t p = 1; p < n; p++) {
            started[p - 1] =
                pthread_create(&ids[p - 1], NULL, fn, share + p * size) == 0;
        }
    }
    fn(share);
    for (size_t p = 1; p < n; p++) {
        if (started != NULL && started[p - 1]) {
            pthread_join(ids[p - 1], NULL);
        }
        else {
            fn(share + p * size);
        }
    }
    free(ids);
    free(started);
#else
    for (size_t p = 0; p < n; p++) {
        fn(share + p * size);
    }
#endif
}

/* Run every merge share's current phase. */
static void
merge_run_phase(MergeShare *shares, size_t n)
{
    run_shares(merge_share_run, shares, sizeof(MergeShare), n);
}

/* Add from's counts to into's (see above): 0, or -1 when out of memory (into
 * may then hold some of from's counts). Touches no Python object. */
static int
bm_merge(BytesMap *into, const BytesMap *from, size_t threads)
{
    if (from->used == 0) {
        return 0;
    }
    size_t n = threads < from->used ? threads : from->used;
    MergeShare *shares = calloc(n, sizeof(MergeShare));
    uint32_t *fresh = malloc(from->used * sizeof(uint32_t));
    int failed = shares == NULL || fresh == NULL;
    for (size_t p = 0; p < n && !failed; p++) {
        shares[p].into = into;
        shares[p].from = from;
        shares[p].phase = MERGE_LOOKUP;
        shares[p].begin = from->used * p / n;
        shares[p].end = from->used * (p + 1) / n;
        shares[p].fresh = fresh + shares[p].begin;
    }
    if (!failed) {
        merge_run_phase(shares, n);
    }
    size_t added = 0, long_bytes = 0;
    for (size_t p = 0; p < n && !failed; p++) {
        shares[p].first_id = into->used + added;
        shares[p].arena_at = into->arena_len + long_bytes;
        added += shares[p].n_fresh;
        long_bytes += shares[p].long_bytes;
    }
    size_t used = into->used + added, capacity = into->mask + 1;
    while (used * 2 > capacity) {
        capacity *= 2;
    }
    failed = failed || used >= NO_ENTRY - 1 ||
             table_reserve(&into->entries, &into->entries_cap, into->used,
                           used, sizeof(Entry), 512) < 0 ||
             table_reserve(&into->arena, &into->arena_cap, into->arena_len,
                           into->arena_len + long_bytes, 1, 4096) < 0;
    if (!failed && added > 0) {
        if (capacity > into->mask + 1) {
            /* a larger index, which every entry goes back into */
            uint32_t *index = table_alloc(capacity * sizeof(uint32_t));
            if (index == NULL) {
                failed = 1;
            }
            else {
                table_free(into->index, (into->mask + 1) * sizeof(uint32_t));
                into->index = index;
                into->mask = capacity - 1;
                for (size_t p = 0; p < n; p++) {
                    shares[p].phase = MERGE_CLEAR_INDEX;
                    shares[p].clear_begin = capacity * p / n;
                    shares[p].clear_end = capacity * (p + 1) / n;
                    shares[p].old_begin = into->used * p / n;
                    shares[p].old_end = into->used * (p + 1) / n;
                }
                merge_run_phase(shares, n);
            }
        }
        for (size_t p = 0; p < n; p++) {
            shares[p].phase = MERGE_APPEND;
        }
        if (!failed) {
            merge_run_phase(shares, n);
            into->used = used;
            into->arena_len += long_bytes;
        }
    }
    free(shares);
    free(fresh);
    return failed ? -1 : 0;
}

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
                     pattern_names[other->pattern],
                     pattern_names[self->pattern]);
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
    failed = bm_merge(&self->counts, &other->counts, (size_t)threads);
    Py_END_ALLOW_THREADS
    self->busy = other->busy = 0;
    if (failed) {
        return PyErr_NoMemory();
    }
    Py_RETURN_NONE;
}

/* Add counts[k] to the count of key (creating it): 0, or -1 when out of
 * memory. A sum past 2**63 - 1 saturates there (a count that large is beyond
 * any corpus; the trainer refuses it anyway). */
static int
add_count(BytesMap *m, const unsigned char *key, size_t len, uint64_t h,
          int64_t count)
{
    Entry *s = bpe_bm_get(m, key, len, h);
    if (s == NULL) {
        return bpe_bm_insert(m, key, len, h, count, 0) == NULL ? -1 : 0;
    }
    s->value = count > INT64_MAX - s->value ? INT64_MAX : s->value + count;
    return 0;
}

/* ---- to_packed, on several threads ----------------------------------------
 *
 * to_packed(min_count, threads) writes the entries of at least min_count, in
 * first-seen order, as packed word counts (packed.h). Share p of the entries
 * (a range of positions) is read by one thread, in two phases with the GIL
 * released and the counter busy: (1) how many of its entries are kept and
 * their keys' bytes; then, once the bytes object is made (with the GIL) and
 * the sizes of the shares before each give where its words go, (2) it writes
 * its counts, lengths and keys there. The bytes object is new and nobody else
 * holds it while it is filled. The output is the same for any thread count. */

typedef struct {
    const BytesMap *m;
    int64_t min_count;
    enum { PACK_SIZE, PACK_WRITE } phase;
    size_t begin, end; /* the entries [begin, end) */
    /* size: how many of them are kept, and their keys' bytes */
    uint64_t n;
    size_t key_bytes;
    /* write: where their counts, lengths and keys go */
    unsigned char *counts, *lengths, *bytes;
} PackShare;

static void *
pack_share_run(void *arg)
{
    PackShare *sh = arg;
    const BytesMap *m = sh->m;
    if (sh->phase == PACK_SIZE) {
        uint64_t n = 0;
        size_t key_bytes = 0;
        for (size_t k = sh->begin; k < sh->end; k++) {
            if (m->entries[k].value >= sh->min_count) {
                n++;
                key_bytes += m->entries[k].len;
            }
        }
        sh->n = n;
        sh->key_bytes = key_bytes;
        return NULL;
    }
    unsigned char *counts = sh->counts, *lengths = sh->lengths,
                  *bytes = sh->bytes;
    for (size_t k = sh->begin; k < sh->end; k++) { /* in first-seen order */
        const Entry *e = &m->entries[k];
        if (e->value < sh->min_count) {
            continue;
        }
        unsigned char key_buf[INLINE_KEY];
        memcpy(counts, &e->value, 8);
        memcpy(lengths, &e->len, 4);
        memcpy(bytes, bpe_entry_key(m, e, key_buf), e->len);
        counts += 8;
        lengths += 4;
        bytes += e->len;
    }
    return NULL;
}

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
    const BytesMap *m = &self->counts;
    size_t n_shares = (size_t)threads < m->used ? (size_t)threads : m->used;
    n_shares = n_shares ? n_shares : 1;
    PackShare *shares = calloc(n_shares, sizeof(PackShare));
    if (shares == NULL) {
        return PyErr_NoMemory();
    }
    for (size_t p = 0; p < n_shares; p++) {
        shares[p].m = m;
        shares[p].min_count = min_count;
        shares[p].phase = PACK_SIZE;
        shares[p].begin = m->used * p / n_shares;
        shares[p].end = m->used * (p + 1) / n_shares;
    }
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    run_shares(pack_share_run, shares, sizeof(PackShare), n_shares);
    Py_END_ALLOW_THREADS
    uint64_t n = 0;
    size_t key_bytes = 0;
    for (size_t p = 0; p < n_shares; p++) {
        n += shares[p].n;
        key_bytes += shares[p].key_bytes;
    }
    PyObject *out = NULL;
    if (key_bytes > (size_t)PY_SSIZE_T_MAX - PACKED_HEADER - 12 * n) {
        PyErr_NoMemory();
    }
    else {
        out = PyBytes_FromStringAndSize(
            NULL, (Py_ssize_t)(PACKED_HEADER + 12 * n + key_bytes));
    }
    if (out != NULL) {
        unsigned char *buf = (unsigned char *)PyBytes_AS_STRING(out);
        uint32_t version = PACKED_VERSION;
        memcpy(buf, PACKED_MAGIC, 4);
        memcpy(buf + 4, &version, 4);
        memcpy(buf + 8, &n, 8);
        unsigned char *counts = buf + PACKED_HEADER, *lengths = counts + 8 * n,
                      *bytes = lengths + 4 * n;
        for (size_t p = 0; p < n_shares; p++) {
            shares[p].phase = PACK_WRITE;
            shares[p].counts = counts;
            shares[p].lengths = lengths;
            shares[p].bytes = bytes;
            counts += 8 * shares[p].n;
            lengths += 4 * shares[p].n;
            bytes += shares[p].key_bytes;
        }
        Py_BEGIN_ALLOW_THREADS
        run_shares(pack_share_run, shares, sizeof(PackShare), n_shares);
        Py_END_ALLOW_THREADS
    }
    self->busy = 0;
    free(shares);
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
    if (bpe_packed_open(&p, view.buf, (size_t)view.len) < 0 ||
        !counter_usable(self))
    {
        goto done;
    }
    for (uint64_t k = 0; k < p.n; k++) {
        if (bpe_packed_count(&p, k) <= 0) {
            PyErr_Format(PyExc_ValueError,
                         "packed word counts: word %llu has count %lld; "
                         "counts must be positive",
                         (unsigned long long)k,
                         (long long)bpe_packed_count(&p, k));
            goto done;
        }
    }
    const unsigned char *key = p.bytes;
    for (uint64_t k = 0; k < p.n; k++) {
        size_t len = bpe_packed_len(&p, k);
        if (add_count(&self->counts, key, len, bpe_hash_bytes(key, len),
                      bpe_packed_count(&p, k)) < 0)
        {
            PyErr_NoMemory();
            goto done;
        }
        key += len;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return result;
}

/* Count the pre-tokens of `pattern` (PAT_*) in s[0:n] (valid UTF-8, no
 * special token); -2 when out of memory. Inlined into count_utf8 once per
 * pattern, so each copy calls its own scanner (no switch per pre-token).
 * Each token is looked up as it is scanned (no prefetching lookahead: see
 * docs/design-notes.md). */
BPE_ALWAYS_INLINE int
count_utf8_as(BytesMap *counts, const unsigned char *s, size_t n, int pattern)
{
    /* GPT-2's pattern splits ASCII text from whole blocks (scan_blocks.h) */
    Spans spans;
    bpe_spans_init(&spans, pattern);
    for (size_t i = 0; i < n;) {
        size_t j = bpe_spans_next(&spans, s, i, n, pattern);
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

static int
count_utf8(BytesMap *counts, const unsigned char *s, size_t n, int pattern)
{
    switch (pattern) {
    case PAT_CL100K:
        return count_utf8_as(counts, s, n, PAT_CL100K);
    case PAT_O200K:
        return count_utf8_as(counts, s, n, PAT_O200K);
    default:
        return count_utf8_as(counts, s, n, PAT_GPT2);
    }
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
    const unsigned char *s = d.buf;
    size_t n = d.len;
    if (sp.bad >= 0) {
        /* RegexCounter decodes the data first: not UTF-8 is False whatever
         * the special tokens */
        result = bpe_utf8_valid(s, n) ? bpe_specials_refuse(&sp)
                                      : Py_NewRef(Py_False);
        goto done;
    }
    if (!counter_usable(self)) {
        goto done;
    }
    int valid, failed = 0, pattern = self->pattern;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    valid = bpe_utf8_valid(s, n);
    for (size_t pos = 0; valid && pos <= n && !failed;) {
        size_t len, which;
        size_t at = bpe_next_special(&sp, s, pos, n, &len, &which);
        failed = count_utf8(&self->counts, s + pos, at - pos, pattern);
        pos = at + (len ? len : 1);
    }
    Py_END_ALLOW_THREADS
    self->busy = 0;
    result = failed ? PyErr_NoMemory() : PyBool_FromLong(valid);
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
    return PyUnicode_FromString(pattern_names[self->pattern]);
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
