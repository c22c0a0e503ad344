/* A tiktoken rank file (one `base64(token) rank` line per token) read into
 * the tables a Tokenizer runs on, with the merges rebuilt from the ranks, and
 * no Python object per token.
 *
 * The pure-Python twin is formats/tiktoken_file.py's `rank_tables_py`
 * (`load_ranks` then `recover_merges`); tests/test_formats.py proves the two
 * equal. This path reads the plain form of the file only (each line exactly
 * `base64 SP digits LF`, canonical base64 length, ranks up to 2**32 - 2) and
 * only a file the Python path would accept: anything else, a fault included,
 * returns None and the caller reads the file in Python, which names the
 * fault. So it never accepts a file Python refuses nor reads one differently.
 *
 * Rebuilding a token's merge runs tiktoken's BPE on its bytes with the ranks
 * below its own (merge the adjacent pair whose concatenation has the lowest
 * rank, leftmost on a tie) with a heap of (rank, position) over a linked list
 * of pieces: O(L log L) pair lookups for a token of L bytes, where merging one
 * pair per pass was O(L^2). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_util.h"
#include "encoder.h"
#include "ranks.h"
#include "u64_heap.h"

static signed char b64_value[256];

static void
b64_init(void)
{
    const char *alphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    memset(b64_value, -1, sizeof(b64_value));
    for (int k = 0; k < 64; k++) {
        b64_value[(unsigned char)alphabet[k]] = (signed char)k;
    }
}

/* Decode s[0:len] (len a positive multiple of 4; '=' only as the last one or
 * two characters) to out; the number of bytes, or -1 if it is not of that
 * form. Bits below the last whole byte are ignored, as binascii does. */
static Py_ssize_t
b64_decode(const unsigned char *s, size_t len, unsigned char *out)
{
    if (len == 0 || len % 4 != 0) {
        return -1;
    }
    size_t pad = s[len - 1] == '=' ? (s[len - 2] == '=' ? 2 : 1) : 0;
    size_t n = 0;
    for (size_t i = 0; i < len; i += 4) {
        int last = i + 4 == len;
        int v[4];
        for (int k = 0; k < 4; k++) {
            if (last && k >= 4 - (int)pad) {
                v[k] = 0;
                continue;
            }
            v[k] = b64_value[s[i + k]];
            if (v[k] < 0) {
                return -1;
            }
        }
        out[n++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
        if (!last || pad < 2) {
            out[n++] = (unsigned char)((v[1] & 15) << 4 | v[2] >> 2);
        }
        if (!last || pad < 1) {
            out[n++] = (unsigned char)((v[2] & 3) << 6 | v[3]);
        }
    }
    return (Py_ssize_t)n;
}

/* Parse the file into r (entries in rank order, a rank given twice a fault): 0, 1 if the file is not of
 * the plain form or holds a fault, -1 if out of memory. */
static int
ranks_parse(Ranks *r, const unsigned char *data, size_t size)
{
    size_t lines = 1;
    for (const unsigned char *p = data; (p = memchr(p, '\n', size - (size_t)(p - data))) != NULL; p++) {
        lines++;
    }
    unsigned char *blob = malloc(size / 4 * 3 + 1);
    size_t *off = malloc((lines + 1) * sizeof(size_t));
    uint32_t *rank = malloc(lines * sizeof(uint32_t));
    int result = -1;
    if (blob == NULL || off == NULL || rank == NULL) {
        goto done;
    }
    size_t n = 0, used = 0, pos = 0;
    result = 1;
    while (pos < size) {
        const unsigned char *line = data + pos;
        const unsigned char *eol = memchr(line, '\n', size - pos);
        size_t len = eol ? (size_t)(eol - line) : size - pos;
        pos += len + 1;
        if (len == 0) {
            continue;
        }
        const unsigned char *space = memchr(line, ' ', len);
        if (space == NULL) {
            goto done;
        }
        size_t digits = len - (size_t)(space - line) - 1;
        if (digits == 0 || digits > 10) {
            goto done;
        }
        uint64_t value = 0;
        for (size_t k = 0; k < digits; k++) {
            unsigned char c = space[1 + k];
            if (c < '0' || c > '9') {
                goto done;
            }
            value = value * 10 + (uint64_t)(c - '0');
        }
        Py_ssize_t got = b64_decode(line, (size_t)(space - line), blob + used);
        if (got <= 0 || value > MAX_RANK) {
            goto done;
        }
        off[n] = used;
        rank[n] = (uint32_t)value;
        used += (size_t)got;
        n++;
    }
    off[n] = used;
    r->blob = blob;
    r->off = off;
    r->rank = rank;
    r->n = n;
    blob = NULL;
    off = NULL;
    rank = NULL;
    result = ranks_sort(r, 0, 0);
done:
    free(blob);
    free(off);
    free(rank);
    return result;
}

/* Scratch for token_merge, for tokens of up to cap bytes. */
typedef struct {
    uint32_t *next, *prev, *pair;
    uint64_t *heap;
    size_t cap;
    /* pair2[x << 8 | y]: the rank of the two-byte token xy, NOT_FOUND if
     * none: the first round's lookups, without hashing */
    uint32_t *pair2;
} Work;

static int
work_reserve(Work *w, size_t len)
{
    if (len <= w->cap) {
        return 0;
    }
    free(w->next);
    free(w->prev);
    free(w->pair);
    free(w->heap);
    w->cap = len;
    w->next = malloc((len + 1) * sizeof(uint32_t));
    w->prev = malloc((len + 1) * sizeof(uint32_t));
    w->pair = malloc((len + 1) * sizeof(uint32_t));
    /* len - 1 pairs at first, then at most two pushes per merge */
    w->heap = malloc((3 * len + 1) * sizeof(uint64_t));
    return w->next && w->prev && w->pair && w->heap ? 0 : -1;
}

static void
work_free(Work *w)
{
    free(w->next);
    free(w->prev);
    free(w->pair);
    free(w->heap);
    free(w->pair2);
}

/* The rank of s[a:b] if it is a token ranked below `below`, else NOT_FOUND. */
static uint32_t
rank_below(const Ranks *r, const unsigned char *s, size_t a, size_t b,
           uint32_t below)
{
    uint32_t k = ranks_find(r, s + a, b - a);
    return k != NOT_FOUND && r->rank[k] < below ? r->rank[k] : NOT_FOUND;
}

/* tiktoken's BPE on s[0:len] (len >= 2) with the ranks below `below`: 1
 * with the split point in *split if it ends in exactly two pieces, else 0.
 * pair[i] is the rank of the pair starting at piece i (NOT_FOUND: none
 * below `below`), kept current, so a heap entry is stale exactly when it
 * differs; prev[i] == len marks a piece merged into its left neighbour. */
static int
token_merge(const Ranks *r, const unsigned char *s, size_t len,
            uint32_t below, Work *w, size_t *split)
{
    if (len == 2) {
        *split = 1; /* the only pair is the token itself, not below it */
        return 1;
    }
    uint32_t *next = w->next, *prev = w->prev, *pair = w->pair;
    uint64_t *heap = w->heap;
    size_t count = 0, pieces = len;
    for (size_t i = 0; i < len; i++) {
        next[i] = (uint32_t)(i + 1);
        prev[i] = (uint32_t)i - 1; /* UINT32_MAX for the first */
        pair[i] = NOT_FOUND;
    }
    for (size_t i = 0; i + 1 < len; i++) {
        uint32_t rank = w->pair2[s[i] << 8 | s[i + 1]];
        if (rank < below) {
            pair[i] = rank;
            u64_heap_push(heap, &count, (uint64_t)rank << 32 | i);
        }
    }
    while (count > 0) {
        uint64_t top = u64_heap_pop(heap, &count);
        uint32_t rank = (uint32_t)(top >> 32), i = (uint32_t)top;
        if (prev[i] == (uint32_t)len || pair[i] != rank) {
            continue; /* stale: merged away, or a neighbour merged since */
        }
        uint32_t j = next[i], end = next[j];
        next[i] = end;
        prev[j] = (uint32_t)len;
        pieces--;
        pair[i] = NOT_FOUND;
        if (end < len) {
            prev[end] = i;
            pair[i] = rank_below(r, s, i, next[end], below);
            if (pair[i] != NOT_FOUND) {
                u64_heap_push(heap, &count, (uint64_t)pair[i] << 32 | i);
            }
        }
        uint32_t p = prev[i];
        if (p != UINT32_MAX) {
            pair[p] = rank_below(r, s, p, end, below);
            if (pair[p] != NOT_FOUND) {
                u64_heap_push(heap, &count, (uint64_t)pair[p] << 32 | p);
            }
        }
    }
    if (pieces != 2) {
        return 0;
    }
    *split = next[0];
    return 1;
}

static PyObject *
bytes_of(const void *p, size_t n)
{
    return PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)n);
}

/* The results as Python objects (see bpe_rank_file_tables), or NULL with an
 * exception set. */
BPE_INTERNAL PyObject *
bpe_ranks_result(const Ranks *r, const uint32_t *merges, size_t n_merges,
              const uint32_t *byte_ids, PyObject *specials)
{
    PyObject *items[6] = {NULL};
    PyObject *result = NULL;
    int64_t *offsets = malloc((r->n + 1) * sizeof(int64_t));
    if (offsets == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t k = 0; k <= r->n; k++) {
        offsets[k] = (int64_t)r->off[k];
    }
    items[0] = bytes_of(r->blob, r->off[r->n]);
    items[1] = bytes_of(offsets, (r->n + 1) * sizeof(int64_t));
    items[2] = bytes_of(r->rank, r->n * sizeof(uint32_t));
    items[3] = bytes_of(merges, n_merges * 3 * sizeof(uint32_t));
    items[4] = PyTuple_New(256);
    items[5] = PyTuple_New(PyTuple_GET_SIZE(specials));
    for (int k = 0; k < 6; k++) {
        if (items[k] == NULL) {
            goto done;
        }
    }
    for (int b = 0; b < 256; b++) {
        PyObject *id = PyLong_FromUnsignedLong(byte_ids[b]);
        if (id == NULL) {
            goto done;
        }
        PyTuple_SET_ITEM(items[4], b, id);
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(specials); k++) {
        PyObject *special = PyTuple_GET_ITEM(specials, k);
        size_t len = (size_t)PyBytes_GET_SIZE(special);
        uint32_t e = len == 0 ? NOT_FOUND
                              : ranks_find(r, (const unsigned char *)PyBytes_AS_STRING(special), len);
        PyObject *rank = PyLong_FromLongLong(e == NOT_FOUND ? -1 : (long long)r->rank[e]);
        if (rank == NULL) {
            goto done;
        }
        PyTuple_SET_ITEM(items[5], k, rank);
    }
    result = PyTuple_Pack(6, items[0], items[1], items[2], items[3], items[4], items[5]);
done:
    for (int k = 0; k < 6; k++) {
        Py_XDECREF(items[k]);
    }
    free(offsets);
    return result;
}

/* rank_file_tables(data, specials) -> None, or (blob, offsets, ranks, merges,
 * byte_ids, special_ranks): the tokens' bytes back to back in rank order;
 * native int64 offsets of each token in blob (n + 1); native uint32 ranks,
 * ascending; native uint32 (left rank, right rank, merged rank) of each merge
 * in rank order; the rank of each byte 0..255; the rank of each of
 * `specials` (a sequence of bytes) that is a token, else -1. None: the file
 * is not of the plain form, or the Python path refuses it. */
BPE_INTERNAL PyObject *
bpe_rank_file_tables(PyObject *module, PyObject *args)
{
    PyObject *data, *specials_arg;
    if (!PyArg_ParseTuple(args, "O!O:rank_file_tables", &PyBytes_Type, &data,
                          &specials_arg))
    {
        return NULL;
    }
    PyObject *specials = PySequence_Tuple(specials_arg);
    if (specials == NULL) {
        return NULL;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(specials); k++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(specials, k))) {
            PyErr_SetString(PyExc_TypeError, "specials must be bytes");
            Py_DECREF(specials);
            return NULL;
        }
    }
    if (b64_value[0] == 0) {
        b64_init();
    }
    Ranks r;
    memset(&r, 0, sizeof(r));
    Work w;
    memset(&w, 0, sizeof(w));
    uint32_t *merges = NULL;
    size_t n_merges = 0;
    uint32_t byte_ids[256];
    PyObject *result = NULL;
    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(data);
    size_t size = (size_t)PyBytes_GET_SIZE(data);
    int status;

    /* data is an immutable bytes object we hold a reference to; everything
     * else here is this call's own memory. */
    Py_BEGIN_ALLOW_THREADS
    status = ranks_parse(&r, buf, size);
    if (status == 0) {
        status = ranks_index(&r, 0);
    }
    for (int b = 0; status == 0 && b < 256; b++) {
        unsigned char c = (unsigned char)b;
        uint32_t k = ranks_find(&r, &c, 1);
        if (k == NOT_FOUND) {
            status = 1;
        }
        else {
            byte_ids[b] = r.rank[k];
        }
    }
    if (status == 0) {
        merges = malloc((r.n - 256 + 1) * 3 * sizeof(uint32_t));
        w.pair2 = malloc(65536 * sizeof(uint32_t));
        status = merges == NULL || w.pair2 == NULL ? -1 : 0;
    }
    for (size_t k = 0; status == 0 && k < 65536; k++) {
        unsigned char two[2] = {(unsigned char)(k >> 8), (unsigned char)k};
        uint32_t e = ranks_find(&r, two, 2);
        w.pair2[k] = e == NOT_FOUND ? NOT_FOUND : r.rank[e];
    }
    for (size_t k = 0; status == 0 && k < r.n; k++) {
        const unsigned char *s = r.blob + r.off[k];
        size_t len = r.off[k + 1] - r.off[k], split;
        if (len == 1) {
            continue;
        }
        if (len >= UINT32_MAX || work_reserve(&w, len) < 0) {
            status = -1;
        }
        else if (!token_merge(&r, s, len, r.rank[k], &w, &split)) {
            status = 1;
        }
        else {
            merges[3 * n_merges] = r.rank[ranks_find(&r, s, split)];
            merges[3 * n_merges + 1] = r.rank[ranks_find(&r, s + split, len - split)];
            merges[3 * n_merges + 2] = r.rank[k];
            n_merges++;
        }
    }
    Py_END_ALLOW_THREADS

    if (status < 0) {
        PyErr_NoMemory();
    }
    else if (status > 0) {
        result = Py_NewRef(Py_None);
    }
    else {
        result = bpe_ranks_result(&r, merges, n_merges, byte_ids, specials);
    }
    ranks_free(&r);
    work_free(&w);
    free(merges);
    Py_DECREF(specials);
    return result;
}
