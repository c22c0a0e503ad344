/* Encoder: BPE over a rank table, with a bounded cache of pre-token -> ids.
 * Encodes whole UTF-8 texts (split on special tokens and pre-tokenized by the
 * scanner, scanner.h) without creating a Python object per pre-token. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "bpe_util.h"
#include "counter.h"
#include "encoder.h"
#include "scanner.h"

#define NO_RANK UINT32_MAX
/* Pre-tokens up to this many bytes use the O(n^2) scan, longer ones the
 * O(n log n) heap. */
#define SCAN_LIMIT 64
/* Longer pre-tokens are not cached: rare, and they would pin large keys. */
#define MAX_CACHED_BYTES 1024

typedef struct {
    uint64_t *keys; /* left << 32 | right; EMPTY_PAIR marks a free slot */
    uint32_t *ranks;
    uint32_t *merged;
    size_t mask;
} PairMap;

#define EMPTY_PAIR UINT64_MAX

static inline uint64_t
pair_key(uint32_t a, uint32_t b)
{
    return (uint64_t)a << 32 | b;
}

static inline size_t
pair_slot(uint64_t key, size_t mask)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & mask;
}

/* The rank of pair (a, b) and the id it merges into; NO_RANK when there is no
 * such merge. */
static inline uint32_t
pair_rank(const PairMap *pm, uint32_t a, uint32_t b, uint32_t *merged)
{
    uint64_t key = pair_key(a, b);
    size_t at = pair_slot(key, pm->mask);
    for (;;) {
        uint64_t k = pm->keys[at];
        if (k == key) {
            if (merged) {
                *merged = pm->merged[at];
            }
            return pm->ranks[at];
        }
        if (k == EMPTY_PAIR) {
            return NO_RANK;
        }
        at = (at + 1) & pm->mask;
    }
}

typedef struct {
    PyObject_HEAD
    /* 1 once an __init__ has succeeded and none failed since; then every table
     * below is allocated. */
    int ready;
    PairMap pairs;
    uint32_t byte_ids[256];
    BytesMap
        cache; /* pre-token bytes -> (offset in cache_ids, number of ids) */
    uint32_t *cache_ids;
    size_t cache_ids_len, cache_ids_cap;
    Py_ssize_t cache_size;
    int pattern; /* the scanner: PAT_GPT2, PAT_CL100K or PAT_O200K */
} EncoderObject;

static void
pairs_free(PairMap *pm)
{
    free(pm->keys);
    free(pm->ranks);
    free(pm->merged);
    memset(pm, 0, sizeof(*pm));
}

/* Free every table: the encoder is then not initialised. */
static void
encoder_clear(EncoderObject *self)
{
    self->ready = 0;
    pairs_free(&self->pairs);
    bpe_bm_free(&self->cache);
    free(self->cache_ids);
    self->cache_ids = NULL;
    self->cache_ids_len = self->cache_ids_cap = 0;
}

static void
Encoder_dealloc(EncoderObject *self)
{
    encoder_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
as_id(PyObject *obj, uint32_t *out, const char *what)
{
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v < 0 || v >= (long long)UINT32_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "%s %lld is not a token id in 0..2**32-2", what, v);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* The merges (left, right, merged) in rank order into a new pm; a repeated
 * pair keeps its first rank. merges is a tuple the caller owns: the ids'
 * __index__ may run any Python code, but cannot change it. */
static int
read_merges(PairMap *pm, PyObject *merges)
{
    Py_ssize_t n = PyTuple_GET_SIZE(merges);
    size_t capacity = 16;
    while (capacity < (size_t)n * 2 + 2) {
        capacity *= 2;
    }
    pm->keys = malloc(capacity * sizeof(uint64_t));
    pm->ranks = malloc(capacity * sizeof(uint32_t));
    pm->merged = malloc(capacity * sizeof(uint32_t));
    if (pm->keys == NULL || pm->ranks == NULL || pm->merged == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(pm->keys, 0xFF, capacity * sizeof(uint64_t));
    pm->mask = capacity - 1;
    for (Py_ssize_t rank = 0; rank < n; rank++) {
        PyObject *item = PyTuple_GET_ITEM(merges, rank);
        uint32_t a, b, merged;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
            PyErr_Format(PyExc_ValueError,
                         "merge #%zd is not a (left, right, merged) tuple",
                         rank);
            return -1;
        }
        if (as_id(PyTuple_GET_ITEM(item, 0), &a, "left id") < 0 ||
            as_id(PyTuple_GET_ITEM(item, 1), &b, "right id") < 0 ||
            as_id(PyTuple_GET_ITEM(item, 2), &merged, "merged id") < 0)
        {
            return -1;
        }
        uint64_t key = pair_key(a, b);
        size_t at = pair_slot(key, pm->mask);
        while (pm->keys[at] != EMPTY_PAIR && pm->keys[at] != key) {
            at = (at + 1) & pm->mask;
        }
        if (pm->keys[at] == EMPTY_PAIR) {
            pm->keys[at] = key;
            pm->ranks[at] = (uint32_t)rank;
            pm->merged[at] = merged;
        }
    }
    return 0;
}

/* The new tables are built aside (the ids' __index__ may run Python code that
 * uses this very encoder: encodes with it, or re-initialises it) and swapped
 * in at the end, when nothing can run in between. A re-init frees the old
 * tables; a failed (re-)init leaves the encoder not initialised, so it raises
 * RuntimeError until an __init__ succeeds. */
static int
Encoder_init(EncoderObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"byte_ids", "merges", "cache_size", "pattern",
                             NULL};
    PyObject *byte_ids_arg, *merges_arg;
    const char *name = "gpt2";
    int pattern;
    PyObject *byte_seq = NULL, *merges = NULL;
    Py_ssize_t cache_size = 1 << 16;
    PairMap pm = {0};
    BytesMap cache = {0};
    uint32_t byte_ids[256];
    int result = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|ns:Encoder", kwlist,
                                     &byte_ids_arg, &merges_arg, &cache_size,
                                     &name))
    {
        goto done;
    }
    pattern = bpe_pattern_id(name);
    if (pattern < 0) {
        goto done;
    }
    if (cache_size < 0) {
        PyErr_SetString(PyExc_ValueError, "cache_size must be non-negative");
        goto done;
    }
    /* Tuples of our own: a list passed in could change under an __index__. */
    byte_seq = PySequence_Tuple(byte_ids_arg);
    if (byte_seq == NULL) {
        goto done;
    }
    if (PyTuple_GET_SIZE(byte_seq) != 256) {
        PyErr_SetString(PyExc_ValueError, "byte_ids must hold 256 ids");
        goto done;
    }
    for (int b = 0; b < 256; b++) {
        if (as_id(PyTuple_GET_ITEM(byte_seq, b), &byte_ids[b], "byte id") <
            0)
        {
            goto done;
        }
    }
    merges = PySequence_Tuple(merges_arg);
    if (merges == NULL || read_merges(&pm, merges) < 0) {
        goto done;
    }
    if (bpe_bm_init(&cache, 1024) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    /* No Python code from here to the end. */
    encoder_clear(self);
    self->pairs = pm;
    memset(&pm, 0, sizeof(pm));
    self->cache = cache;
    memset(&cache, 0, sizeof(cache));
    memcpy(self->byte_ids, byte_ids, sizeof(byte_ids));
    self->cache_size = cache_size;
    self->pattern = pattern;
    self->ready = 1;
    result = 0;
done:
    pairs_free(&pm);
    bpe_bm_free(&cache);
    if (result < 0) {
        encoder_clear(self);
    }
    Py_XDECREF(byte_seq);
    Py_XDECREF(merges);
    return result;
}

/* Plain BPE, as tokenizer.bpe_scan: merge the lowest-ranked pair (leftmost on
 * a tie), repeat. ranks[k] is the rank of (ids[k], ids[k+1]); after a merge
 * only its two neighbours change. */
static size_t
bpe_scan(const PairMap *pm, uint32_t *ids, size_t n, uint32_t *ranks,
         uint32_t *merged)
{
    if (n < 2) {
        return n;
    }
    size_t m = n - 1;
    for (size_t k = 0; k < m; k++) {
        ranks[k] = pair_rank(pm, ids[k], ids[k + 1], &merged[k]);
    }
    for (;;) {
        uint32_t best = NO_RANK;
        size_t at = 0;
        for (size_t k = 0; k < m; k++) {
            if (ranks[k] < best) {
                best = ranks[k];
                at = k;
            }
        }
        if (best == NO_RANK) {
            break;
        }
        ids[at] = merged[at];
        memmove(ids + at + 1, ids + at + 2, (n - at - 2) * sizeof(uint32_t));
        memmove(ranks + at, ranks + at + 1, (m - at - 1) * sizeof(uint32_t));
        memmove(merged + at, merged + at + 1, (m - at - 1) * sizeof(uint32_t));
        n--;
        m--;
        if (at < m) {
            ranks[at] = pair_rank(pm, ids[at], ids[at + 1], &merged[at]);
        }
        if (at > 0) {
            ranks[at - 1] =
                pair_rank(pm, ids[at - 1], ids[at], &merged[at - 1]);
        }
    }
    return n;
}

/* A min-heap of (rank << 32 | position): pops the lowest rank, the leftmost
 * position on a tie. Not shared with trainer.c's heap: that one orders structs
 * through a comparison function, and plain integer comparisons keep this one,
 * run per merge of long pre-tokens, cheap. */
static void
heap_push(uint64_t *heap, size_t *size, uint64_t v)
{
    size_t k = (*size)++;
    while (k > 0) {
        size_t parent = (k - 1) / 2;
        if (heap[parent] <= v) {
            break;
        }
        heap[k] = heap[parent];
        k = parent;
    }
    heap[k] = v;
}

static uint64_t
heap_pop(uint64_t *heap, size_t *size)
{
    uint64_t top = heap[0];
    uint64_t last = heap[--(*size)];
    size_t k = 0, n = *size;
    for (;;) {
        size_t child = 2 * k + 1;
        if (child >= n) {
            break;
        }
        if (child + 1 < n && heap[child + 1] < heap[child]) {
            child++;
        }
        if (last <= heap[child]) {
            break;
        }
        heap[k] = heap[child];
        k = child;
    }
    if (n) {
        heap[k] = last;
    }
    return top;
}

#define DEAD UINT32_MAX

/* BPE in O(n log n), as tokenizer.bpe_heap: a linked list over positions and a
 * lazy heap whose entries are re-checked when popped (a neighbour may have
 * merged since). Ranks are unique per pair, so an entry whose position still
 * holds a pair of that rank is still valid. Returns the new length (ids
 * compacted in place); (size_t)-1 when out of memory. */
static size_t
bpe_heap(const PairMap *pm, uint32_t *ids, size_t n)
{
    if (n < 2) {
        return n;
    }
    if (n > UINT32_MAX / 2) {
        return (size_t)-1;
    }
    size_t out = (size_t)-1;
    /* n - 1 pairs + 2 pushes per merge */
    uint64_t *heap = malloc(3 * n * sizeof(uint64_t));
    uint32_t *next = malloc(n * sizeof(uint32_t));
    uint32_t *prev = malloc(n * sizeof(uint32_t));
    if (heap == NULL || next == NULL || prev == NULL) {
        goto done;
    }
    size_t size = 0;
    for (size_t k = 0; k < n; k++) {
        next[k] = (uint32_t)(k + 1); /* n: none */
        prev[k] = k ? (uint32_t)(k - 1) : DEAD;
        if (k + 1 < n) {
            uint32_t rank = pair_rank(pm, ids[k], ids[k + 1], NULL);
            if (rank != NO_RANK) {
                heap_push(heap, &size, (uint64_t)rank << 32 | k);
            }
        }
    }
    while (size) {
        uint64_t top = heap_pop(heap, &size);
        uint32_t rank = (uint32_t)(top >> 32), i = (uint32_t)top, j = next[i],
                 merged = 0;
        if (j == n || ids[i] == DEAD) {
            continue;
        }
        if (pair_rank(pm, ids[i], ids[j], &merged) != rank) {
            continue; /* stale */
        }
        ids[i] = merged;
        ids[j] = DEAD;
        uint32_t k = next[j];
        next[i] = k;
        if (k != n) {
            prev[k] = i;
            uint32_t r = pair_rank(pm, merged, ids[k], NULL);
            if (r != NO_RANK) {
                heap_push(heap, &size, (uint64_t)r << 32 | i);
            }
        }
        uint32_t p = prev[i];
        if (p != DEAD) {
            uint32_t r = pair_rank(pm, ids[p], merged, NULL);
            if (r != NO_RANK) {
                heap_push(heap, &size, (uint64_t)r << 32 | p);
            }
        }
    }
    out = 0;
    for (size_t k = 0; k < n; k++) {
        if (ids[k] != DEAD) {
            ids[out++] = ids[k];
        }
    }
done:
    free(heap);
    free(next);
    free(prev);
    return out;
}

/* Growable array of ids: the encoder's output. */
typedef struct {
    uint32_t *ids;
    size_t len, cap;
} IdBuf;

static inline int
idbuf_reserve(IdBuf *b, size_t extra)
{
    return bpe_reserve(&b->ids, &b->cap, b->len + extra, sizeof(uint32_t),
                       1024);
}

/* BPE of one pre-token's bytes, appended to out; 0, or -1 if out of memory. */
static int
encode_pretoken(EncoderObject *self, const unsigned char *key, size_t len,
                IdBuf *out)
{
    if (len > SCAN_LIMIT) {
        uint32_t *ids = malloc(len * sizeof(uint32_t));
        if (ids == NULL) {
            return -1;
        }
        for (size_t k = 0; k < len; k++) {
            ids[k] = self->byte_ids[key[k]];
        }
        int err = -1;
        size_t n = bpe_heap(&self->pairs, ids, len);
        if (n != (size_t)-1 && idbuf_reserve(out, n) == 0) {
            memcpy(out->ids + out->len, ids, n * sizeof(uint32_t));
            out->len += n;
            err = 0;
        }
        free(ids);
        return err;
    }
    uint32_t ids[SCAN_LIMIT], ranks[SCAN_LIMIT], merged[SCAN_LIMIT];
    for (size_t k = 0; k < len; k++) {
        ids[k] = self->byte_ids[key[k]];
    }
    size_t n = bpe_scan(&self->pairs, ids, len, ranks, merged);
    if (idbuf_reserve(out, n) < 0) {
        return -1;
    }
    memcpy(out->ids + out->len, ids, n * sizeof(uint32_t));
    out->len += n;
    return 0;
}

/* Remember a pre-token's ids (the last n in out); clears the cache when it is
 * full. */
static int
cache_store(EncoderObject *self, const unsigned char *key, size_t len,
            uint64_t h, const uint32_t *ids, size_t n)
{
    if (self->cache_size == 0 || len > MAX_CACHED_BYTES) {
        return 0;
    }
    if ((Py_ssize_t)self->cache.used >= self->cache_size) {
        /* cheaper than LRU bookkeeping on every hit; refills quickly */
        bpe_bm_clear(&self->cache);
        self->cache_ids_len = 0;
    }
    if (bpe_reserve(&self->cache_ids, &self->cache_ids_cap,
                    self->cache_ids_len + n, sizeof(uint32_t), 4096) < 0)
    {
        return -1;
    }
    memcpy(self->cache_ids + self->cache_ids_len, ids, n * sizeof(uint32_t));
    if (bpe_bm_insert(&self->cache, key, len, h, (int64_t)self->cache_ids_len,
                      (uint32_t)n) == NULL)
    {
        return -1;
    }
    self->cache_ids_len += n;
    return 0;
}

static PyObject *
idbuf_to_list(const IdBuf *b)
{
    PyObject *out = PyList_New((Py_ssize_t)b->len);
    if (out == NULL) {
        return NULL;
    }
    for (size_t k = 0; k < b->len; k++) {
        PyObject *v = PyLong_FromUnsignedLong(b->ids[k]);
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)k, v);
    }
    return out;
}

/* One pre-token's ids (from the cache, else by BPE, then cached), appended to
 * out; -1 when out of memory (the exception set). */
static int
encode_token(EncoderObject *self, const unsigned char *key, size_t len,
             IdBuf *out)
{
    uint64_t h = bpe_hash_bytes(key, len);
    Entry *hit =
        self->cache_size ? bpe_bm_get(&self->cache, key, len, h) : NULL;
    if (hit != NULL) {
        if (idbuf_reserve(out, (size_t)hit->aux) < 0) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(out->ids + out->len, self->cache_ids + hit->value,
               (size_t)hit->aux * sizeof(uint32_t));
        out->len += (size_t)hit->aux;
        return 0;
    }
    size_t before = out->len;
    if (encode_pretoken(self, key, len, out) < 0 ||
        cache_store(self, key, len, h, out->ids + before, out->len - before) <
            0)
    {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static int
encoder_ready(EncoderObject *self)
{
    if (!self->ready) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Encoder is not initialised (never, or its last "
                        "__init__ failed)");
        return 0;
    }
    return bpe_classes_ready();
}

/* The number of characters in valid UTF-8. */
static size_t
count_chars(const unsigned char *s, size_t n)
{
    size_t chars = 0;
    for (size_t i = 0; i < n; i++) {
        chars += (s[i] & 0xC0) != 0x80;
    }
    return chars;
}

/* The byte offset of character number c (0-based) of valid UTF-8 s[0:n]; n +
 * 1 if there are no more than c characters. */
static size_t
byte_of_char(const unsigned char *s, size_t n, size_t c)
{
    for (size_t i = 0; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80 && c-- == 0) {
            return i;
        }
    }
    return c == 0 ? n : n + 1;
}

/* The settled rule of each pattern (SplitPattern.settle_margin and
 * settle_run, as PythonEncoder._settled applies them): a pre-token ending at
 * j, of text known up to `end` (a character boundary), is final once the first
 * non-whitespace character at or after j (GPT-2: the character at j, whatever
 * it is; o200k: after the run of letters and marks at j, which a run of
 * capitals followed by a lower-case letter would join) is known with
 * margin - 1 whole characters after it. */
static const struct {
    int skip_letters;
    int skip_space;
    int margin;
} settle_rule[N_PATTERNS] = {
    [PAT_GPT2] = {0, 0, 2},
    [PAT_CL100K] = {0, 1, 2},
    [PAT_O200K] = {1, 1, 4},
};

static int
is_settled(const unsigned char *s, size_t j, size_t end, int pattern)
{
    const unsigned char *char_class = bpe_char_class;
    size_t len;
    if (settle_rule[pattern].skip_letters) {
        while (j < end) {
            unsigned char c = char_class[bpe_utf8_at(s, j, &len)];
            if ((c & CLS_BASE) != CLS_LETTER && !(c & (CLS_UP | CLS_LOW))) {
                break; /* \p{M} is in both of o200k's letter sets */
            }
            j += len;
        }
    }
    if (settle_rule[pattern].skip_space) {
        while (j < end &&
               (char_class[bpe_utf8_at(s, j, &len)] & CLS_BASE) == CLS_SPACE)
        {
            j += len;
        }
    }
    for (int k = 0; k < settle_rule[pattern].margin; k++) {
        if (j >= end) {
            return 0;
        }
        bpe_utf8_at(s, j, &len);
        j += len;
    }
    return j <= end;
}

/* encode_utf8(data, special_tokens, special_ids, settled=False): the whole of
 * Tokenizer.encode over UTF-8 bytes: split on the special tokens (bytes,
 * longest first) in C, each one becoming its id, and the text between them
 * encoded straight from the bytes (no str slices, no per-token UTF-8
 * encoding). With settled, Tokenizer._encode_settled in bytes, for
 * encode_iterable: encode only what more data could not change and return
 * (ids, cut), cut a byte offset: special tokens that start where the longest
 * one still fits, then the pre-tokens after the last of them that end before
 * the unsettled region and are settled by their pattern's rule (is_settled).
 */
static PyObject *
Encoder_encode_utf8(EncoderObject *self, PyObject *args)
{
    PyObject *data_arg, *specials_arg, *ids_arg;
    int settled = 0;
    if (!encoder_ready(self) ||
        !PyArg_ParseTuple(args, "OOO|p:encode_utf8", &data_arg, &specials_arg,
                          &ids_arg, &settled))
    {
        return NULL;
    }
    /* Everything the call reads is copied (or, for bytes, immutable) before
     * Python code can run: the special ids' __index__ may change the data,
     * the special tokens or this encoder. The checks come in
     * PythonEncoder.encode_utf8's order. */
    Specials sp;
    Utf8Data d = {0};
    PyObject *ids_seq = NULL, *result = NULL;
    uint32_t *special_ids = NULL;
    IdBuf out = {0};
    if (bpe_specials_open(&sp, specials_arg) < 0) {
        goto done;
    }
    ids_seq = PySequence_Tuple(ids_arg);
    if (ids_seq == NULL || bpe_data_open(&d, data_arg) < 0) {
        goto done;
    }
    const unsigned char *s = d.buf;
    size_t n = d.len;
    /* the scanner reads whole characters: never past a bad one */
    if (!bpe_utf8_valid(s, n)) {
        PyErr_SetString(PyExc_ValueError, "data is not valid UTF-8");
        goto done;
    }
    if ((size_t)PyTuple_GET_SIZE(ids_seq) != sp.count) {
        PyErr_SetString(PyExc_ValueError,
                        "one id is needed per special token");
        goto done;
    }
    if (sp.bad >= 0) {
        bpe_specials_refuse(&sp);
        goto done;
    }
    special_ids = PyMem_Calloc(sp.count + 1, sizeof(uint32_t));
    if (special_ids == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t k = 0; k < sp.count; k++) {
        if (as_id(PyTuple_GET_ITEM(ids_seq, (Py_ssize_t)k), &special_ids[k],
                  "special id") < 0)
        {
            goto done;
        }
    }
    /* Again: an __index__ may have re-initialised the encoder. No Python code
     * runs from here until the result is built. */
    if (!encoder_ready(self)) {
        goto done;
    }
    /* settled: a special token starting before `settle` is whole in data
     * (every one fits). Counted in characters, as PythonEncoder._settled
     * counts them (in bytes the cut could differ), then turned into the byte
     * offset of that character (n + 1: none). */
    size_t settle = n + 1;
    if (settled && sp.count) {
        size_t longest = 0, chars = count_chars(s, n);
        for (size_t k = 0; k < sp.count; k++) {
            size_t c = count_chars(sp.token[k], sp.len[k]);
            longest = c > longest ? c : longest;
        }
        settle = chars + 1 > longest ? byte_of_char(s, n, chars + 1 - longest)
                                     : 0;
    }
    for (size_t pos = 0; pos <= n;) {
        size_t len, which = 0;
        size_t at = bpe_next_special(&sp, s, pos, n, &len, &which);
        if (settled &&
            (len == 0 || at >= settle)) { /* no settled special token left */
            /* The ordinary text from pos is known up to settle (a character
             * boundary). */
            size_t known = settle < n ? settle : n;
            size_t cut = pos;
            for (size_t i = pos; i < known;) {
                size_t j = bpe_next_end_utf8(s, i, known, self->pattern);
                if (!is_settled(s, j, known, self->pattern)) {
                    break;
                }
                if (encode_token(self, s + i, j - i, &out) < 0) {
                    goto done;
                }
                cut = i = j;
            }
            PyObject *ids = idbuf_to_list(&out);
            if (ids != NULL) {
                result = Py_BuildValue("(Nn)", ids, (Py_ssize_t)cut);
            }
            goto done;
        }
        for (size_t i = pos; i < at;) {
            size_t j = bpe_next_end_utf8(s, i, at, self->pattern);
            if (encode_token(self, s + i, j - i, &out) < 0) {
                goto done;
            }
            i = j;
        }
        if (len) {
            if (idbuf_reserve(&out, 1) < 0) {
                PyErr_NoMemory();
                goto done;
            }
            out.ids[out.len++] = special_ids[which];
        }
        pos = at + (len ? len : 1);
    }
    /* not settled (settled always returns from the loop) */
    result = idbuf_to_list(&out);
done:
    free(out.ids);
    PyMem_Free(special_ids);
    Py_XDECREF(ids_seq);
    bpe_specials_close(&sp);
    bpe_data_close(&d);
    return result;
}

static PyObject *
Encoder_bpe(EncoderObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    /* (getting a buffer may run Python code: the state is checked after) */
    if (!self->ready) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Encoder is not initialised (never, or its last "
                        "__init__ failed)");
        PyBuffer_Release(&view);
        return NULL;
    }
    IdBuf out = {0};
    int failed = encode_pretoken(self, view.buf, (size_t)view.len, &out);
    PyBuffer_Release(&view);
    PyObject *result = failed ? PyErr_NoMemory() : idbuf_to_list(&out);
    free(out.ids);
    return result;
}

static PyObject *
Encoder_cache_len(EncoderObject *self, PyObject *unused)
{
    return PyLong_FromSize_t(self->cache.used);
}

static PyMethodDef Encoder_methods[] = {
    {"encode_utf8", (PyCFunction)Encoder_encode_utf8, METH_VARARGS,
     "encode_utf8(data, special_tokens, special_ids, "
     "settled=False)\n--\n\nThe ids of UTF-8 text: each special token (bytes, "
     "longest first) becomes its id, the text between them is encoded.\nWith "
     "settled: (ids, cut), the ids of data[:cut], all that more data could "
     "not change."},
    {"bpe", (PyCFunction)Encoder_bpe, METH_O,
     "bpe(token_bytes)\n--\n\nThe ids BPE gives one pre-token's bytes (no "
     "cache)."},
    {"cache_len", (PyCFunction)Encoder_cache_len, METH_NOARGS,
     "cache_len()\n--\n\nHow many pre-tokens the cache holds."},
    {NULL, NULL, 0, NULL},
};

BPE_INTERNAL PyTypeObject bpe_EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bpe_impls._native.Encoder",
    .tp_doc = "Encoder(byte_ids, merges, cache_size=65536, pattern='gpt2'): "
              "BPE with a rank table and a cache.\n\nbyte_ids: the id of each "
              "byte 0..255; merges: (left, right, merged) ids in rank order; "
              "pattern: the split pattern of the text, 'gpt2', 'cl100k' or "
              "'o200k'.",
    .tp_basicsize = sizeof(EncoderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Encoder_init,
    .tp_dealloc = (destructor)Encoder_dealloc,
    .tp_methods = Encoder_methods,
};
