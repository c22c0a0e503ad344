/* bpe_impls._native: the GPT-2 pre-tokenizer, a pre-token counter and a BPE encoder, in C.
 *
 * Each piece does exactly what the pure-Python path does (bpe_impls/pretokenize.py and
 * bpe_impls/tokenizer.py); tests/test_native.py and the registry-wide suites prove it.
 *
 * The pre-tokenizer is a hand-written scanner for the GPT-2 pattern
 *     '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * over a str's code points. It needs only four character classes (letter, number, whitespace,
 * other); their table is built by bpe_impls/native.py from the `regex` module itself and handed in
 * with set_char_classes(), so both paths use the same Unicode data.
 *
 * Pre-tokens are keyed by their UTF-8 bytes in an open-addressing hash table whose keys live in
 * one arena: counting creates a Python object per *distinct* pre-token, not per occurrence.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { CLS_OTHER = 0, CLS_LETTER = 1, CLS_NUMBER = 2, CLS_SPACE = 3 };
#define N_CODEPOINTS 0x110000

/* One class per code point (1.1 MB); NULL until set_char_classes() is called. */
static unsigned char *char_class = NULL;

/* ---------------------------------------------------------------------------------------------
 * The scanner: the end of the GPT-2 pre-token that starts at i (i < n), for each str kind.
 * The alternatives are tried in the pattern's order; the comments give the regex's reasoning.
 * --------------------------------------------------------------------------------------------- */
#define DEFINE_NEXT_END(NAME, T)                                                                    \
    static Py_ssize_t NAME(const T *s, Py_ssize_t i, Py_ssize_t n)                                 \
    {                                                                                               \
        Py_UCS4 c = s[i];                                                                           \
        /* '(?:[sdmt]|ll|ve|re): lower case only, tried before everything else. */                  \
        if (c == '\'' && i + 1 < n) {                                                               \
            Py_UCS4 d = s[i + 1];                                                                   \
            if (d == 's' || d == 'd' || d == 'm' || d == 't')                                       \
                return i + 2;                                                                       \
            if (i + 2 < n) {                                                                        \
                Py_UCS4 e = s[i + 2];                                                               \
                if ((d == 'l' && e == 'l') || (d == 'v' && e == 'e') || (d == 'r' && e == 'e'))     \
                    return i + 3;                                                                   \
            }                                                                                       \
        }                                                                                           \
        /* ` ?X+` for X = letters, numbers, other: one leading U+0020 joins a run of one class.     \
         * A space before whitespace (or at the end) joins nothing: it is whitespace below. */      \
        Py_ssize_t j = i;                                                                           \
        int cls = char_class[c];                                                                    \
        if (c == ' ' && i + 1 < n && char_class[s[i + 1]] != CLS_SPACE) {                          \
            j = i + 1;                                                                              \
            cls = char_class[s[j]];                                                                 \
        }                                                                                           \
        if (cls != CLS_SPACE) {                                                                     \
            j++;                                                                                    \
            while (j < n && char_class[s[j]] == cls)                                                \
                j++;                                                                                \
            return j;                                                                               \
        }                                                                                           \
        /* \s+(?!\S): the whole run at the end of the text; before a non-space, the run minus its   \
         * last character (which then leads the next token), if that leaves one. Else \s+. */       \
        j = i + 1;                                                                                  \
        while (j < n && char_class[s[j]] == CLS_SPACE)                                              \
            j++;                                                                                    \
        if (j == n || j - i == 1)                                                                   \
            return j;                                                                               \
        return j - 1;                                                                               \
    }

DEFINE_NEXT_END(next_end_1, Py_UCS1)
DEFINE_NEXT_END(next_end_2, Py_UCS2)
DEFINE_NEXT_END(next_end_4, Py_UCS4)

/* UTF-8 bytes of s[i:j] into out (room for 4 bytes a character); -1 at a lone surrogate. */
#define DEFINE_UTF8(NAME, T)                                                                        \
    static Py_ssize_t NAME(const T *s, Py_ssize_t i, Py_ssize_t j, unsigned char *out,             \
                           Py_ssize_t *bad)                                                         \
    {                                                                                               \
        unsigned char *p = out;                                                                     \
        for (; i < j; i++) {                                                                        \
            Py_UCS4 c = s[i];                                                                       \
            if (c < 0x80) {                                                                         \
                *p++ = (unsigned char)c;                                                            \
            } else if (c < 0x800) {                                                                 \
                *p++ = (unsigned char)(0xC0 | (c >> 6));                                            \
                *p++ = (unsigned char)(0x80 | (c & 0x3F));                                          \
            } else if (c < 0x10000) {                                                               \
                if (c >= 0xD800 && c <= 0xDFFF) {                                                   \
                    *bad = i;                                                                       \
                    return -1;                                                                      \
                }                                                                                   \
                *p++ = (unsigned char)(0xE0 | (c >> 12));                                           \
                *p++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));                                   \
                *p++ = (unsigned char)(0x80 | (c & 0x3F));                                          \
            } else {                                                                                \
                *p++ = (unsigned char)(0xF0 | (c >> 18));                                           \
                *p++ = (unsigned char)(0x80 | ((c >> 12) & 0x3F));                                  \
                *p++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));                                   \
                *p++ = (unsigned char)(0x80 | (c & 0x3F));                                          \
            }                                                                                       \
        }                                                                                           \
        return p - out;                                                                             \
    }

DEFINE_UTF8(utf8_1, Py_UCS1)
DEFINE_UTF8(utf8_2, Py_UCS2)
DEFINE_UTF8(utf8_4, Py_UCS4)

/* The same scanner over valid UTF-8 bytes (positions are byte offsets): counting a file's bytes
 * directly skips decoding it to a str, and the pre-token's bytes are then its key as they stand. */
static inline Py_UCS4 utf8_at(const unsigned char *s, size_t i, size_t *len)
{
    unsigned char c = s[i];
    if (c < 0x80) {
        *len = 1;
        return c;
    }
    if (c < 0xE0) {
        *len = 2;
        return (Py_UCS4)(c & 0x1F) << 6 | (s[i + 1] & 0x3F);
    }
    if (c < 0xF0) {
        *len = 3;
        return (Py_UCS4)(c & 0x0F) << 12 | (Py_UCS4)(s[i + 1] & 0x3F) << 6 | (s[i + 2] & 0x3F);
    }
    *len = 4;
    return (Py_UCS4)(c & 0x07) << 18 | (Py_UCS4)(s[i + 1] & 0x3F) << 12 |
           (Py_UCS4)(s[i + 2] & 0x3F) << 6 | (s[i + 3] & 0x3F);
}

static size_t next_end_utf8(const unsigned char *s, size_t i, size_t n)
{
    unsigned char c = s[i];
    if (c == '\'' && i + 1 < n) {
        unsigned char d = s[i + 1];
        if (d == 's' || d == 'd' || d == 'm' || d == 't')
            return i + 2;
        if (i + 2 < n) {
            unsigned char e = s[i + 2];
            if ((d == 'l' && e == 'l') || (d == 'v' && e == 'e') || (d == 'r' && e == 'e'))
                return i + 3;
        }
    }
    size_t len;
    int cls = char_class[utf8_at(s, i, &len)];
    size_t j = i + len;
    if (c == ' ' && j < n) {
        int next_cls = char_class[utf8_at(s, j, &len)];
        if (next_cls != CLS_SPACE) {
            cls = next_cls;
            j += len;
        }
    }
    if (cls != CLS_SPACE) {
        while (j < n && char_class[utf8_at(s, j, &len)] == cls)
            j += len;
        return j;
    }
    /* Whitespace: as next_end_*, with `last` the start of the run's last character. */
    size_t last = i;
    while (j < n && char_class[utf8_at(s, j, &len)] == CLS_SPACE) {
        last = j;
        j += len;
    }
    if (j == n || last == i)
        return j;
    return last;
}

/* True if s[0:n] is valid UTF-8 as Python's strict decoder defines it (no surrogates, nothing
 * overlong, nothing above U+10FFFF, no truncated sequence). */
static int utf8_valid(const unsigned char *s, size_t n)
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
        unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
        if (c >= 0xC2 && c <= 0xDF)
            need = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else
            return 0;
        if (i + need >= n)
            return 0; /* truncated */
        if (s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (size_t k = 2; k <= need; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
        i += need + 1;
    }
    return 1;
}

/* A str's code points, read without the GIL (a str is immutable; the caller holds a reference). */
typedef struct {
    int kind;
    const void *data;
    Py_ssize_t n;
    int ascii;                /* then the data are already the UTF-8 bytes */
    unsigned char *scratch;   /* UTF-8 of the current pre-token, when not ascii */
    Py_ssize_t scratch_cap;
    Py_ssize_t bad;           /* position of a lone surrogate, after token_utf8 failed */
} Text;

static int text_open(Text *t, PyObject *obj)
{
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "expected str, got %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(obj) < 0)
        return -1;
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

static void text_close(Text *t)
{
    free(t->scratch);
    t->scratch = NULL;
}

static inline Py_ssize_t text_next_end(const Text *t, Py_ssize_t i)
{
    switch (t->kind) {
    case PyUnicode_1BYTE_KIND:
        return next_end_1((const Py_UCS1 *)t->data, i, t->n);
    case PyUnicode_2BYTE_KIND:
        return next_end_2((const Py_UCS2 *)t->data, i, t->n);
    default:
        return next_end_4((const Py_UCS4 *)t->data, i, t->n);
    }
}

/* The UTF-8 bytes of text[i:j]; NULL with *len = -1 at a lone surrogate, -2 when out of memory. */
static const unsigned char *text_utf8(Text *t, Py_ssize_t i, Py_ssize_t j, Py_ssize_t *len)
{
    if (t->ascii) {
        *len = j - i;
        return (const unsigned char *)t->data + i;
    }
    Py_ssize_t need = 4 * (j - i);
    if (need > t->scratch_cap) {
        Py_ssize_t cap = need < 256 ? 256 : need * 2;
        unsigned char *grown = realloc(t->scratch, (size_t)cap);
        if (grown == NULL) {
            *len = -2;
            return NULL;
        }
        t->scratch = grown;
        t->scratch_cap = cap;
    }
    switch (t->kind) {
    case PyUnicode_1BYTE_KIND:
        *len = utf8_1((const Py_UCS1 *)t->data, i, j, t->scratch, &t->bad);
        break;
    case PyUnicode_2BYTE_KIND:
        *len = utf8_2((const Py_UCS2 *)t->data, i, j, t->scratch, &t->bad);
        break;
    default:
        *len = utf8_4((const Py_UCS4 *)t->data, i, j, t->scratch, &t->bad);
        break;
    }
    return *len < 0 ? NULL : t->scratch;
}

static PyObject *surrogate_error(const Text *t)
{
    char code[16]; /* PyErr_Format has no %04X */
    snprintf(code, sizeof(code), "U+%04X", (unsigned)PyUnicode_READ(t->kind, t->data, t->bad));
    return PyErr_Format(PyExc_ValueError, "lone surrogate %s at position %zd cannot be encoded", code, t->bad);
}

/* ---------------------------------------------------------------------------------------------
 * BytesMap: byte string -> (value, aux), laid out as CPython's dict: the entries in one dense
 * array in insertion order, found through an open-addressing index of positions (linear probing).
 * Insertion order matters: the counts reach the trainers in first-seen order, as a Counter fed
 * the text would give them, and the pure-Python trainers run up to 1.8x slower on the same counts
 * in hash order (their per-word objects are then laid out at random). A key of up to 8 bytes
 * (most pre-tokens) is kept in its entry, compared as one integer; longer keys live in an arena.
 * --------------------------------------------------------------------------------------------- */
#define INLINE_KEY 8
#define NO_ENTRY UINT32_MAX

typedef struct {
    uint64_t hash;
    uint64_t off;   /* a short key's bytes (see pack_key), else the key's offset in the arena */
    uint32_t len;   /* keys are pre-tokens: bm_insert refuses one of 4 GB or more */
    uint32_t aux;
    int64_t value;
} Entry;            /* 32 bytes: two to a cache line */

typedef struct {
    uint32_t *index;  /* mask + 1 positions in entries; NO_ENTRY where free */
    size_t mask;      /* index capacity - 1 (a power of two) */
    Entry *entries;   /* used of them, in insertion order */
    size_t used, entries_cap;
    unsigned char *arena;
    size_t arena_len, arena_cap;
} BytesMap;

static inline uint64_t hash_bytes(const unsigned char *p, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0; /* the tail, built in a register: a memcpy of n < 8 bytes would stall the load */
    for (size_t k = 0; k < n; k++)
        v |= (uint64_t)p[k] << (8 * k);
    h = (h ^ v) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    return h;
}

static int bm_init(BytesMap *m, size_t capacity)
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

static void bm_free(BytesMap *m)
{
    free(m->index);
    free(m->entries);
    free(m->arena);
    memset(m, 0, sizeof(*m));
}

static void bm_clear(BytesMap *m)
{
    memset(m->index, 0xFF, (m->mask + 1) * sizeof(uint32_t));
    m->used = 0;
    m->arena_len = 0;
}

/* Double the index (the entries stay where they are). */
static int bm_grow(BytesMap *m)
{
    size_t capacity = (m->mask + 1) * 2;
    uint32_t *index = malloc(capacity * sizeof(uint32_t));
    if (index == NULL)
        return -1;
    memset(index, 0xFF, capacity * sizeof(uint32_t));
    for (size_t k = 0; k < m->used; k++) {
        size_t at = m->entries[k].hash & (capacity - 1);
        while (index[at] != NO_ENTRY)
            at = (at + 1) & (capacity - 1);
        index[at] = (uint32_t)k;
    }
    free(m->index);
    m->index = index;
    m->mask = capacity - 1;
    return 0;
}

/* Up to 8 bytes as one integer, byte k in bits 8k..8k+7 (so equal keys of one length pack equal). */
static inline uint64_t pack_key(const unsigned char *key, size_t len)
{
    uint64_t v = 0;
    for (size_t k = 0; k < len; k++)
        v |= (uint64_t)key[k] << (8 * k);
    return v;
}

/* An entry's key bytes: in the arena, or unpacked into buf (INLINE_KEY bytes). */
static inline const unsigned char *entry_key(const BytesMap *m, const Entry *e, unsigned char *buf)
{
    if (e->len > INLINE_KEY)
        return m->arena + e->off;
    for (size_t k = 0; k < e->len; k++)
        buf[k] = (unsigned char)(e->off >> (8 * k));
    return buf;
}

/* The entry holding key (NULL if absent); valid until the next insertion. */
static inline Entry *bm_get(const BytesMap *m, const unsigned char *key, size_t len, uint64_t h)
{
    size_t at = h & m->mask;
    int inline_key = len <= INLINE_KEY;
    uint64_t packed = inline_key ? pack_key(key, len) : 0;
    for (;;) {
        uint32_t k = m->index[at];
        if (k == NO_ENTRY)
            return NULL;
        Entry *e = &m->entries[k];
        if (e->hash == h && e->len == len &&
            (inline_key ? e->off == packed : memcmp(m->arena + e->off, key, len) == 0))
            return e;
        at = (at + 1) & m->mask;
    }
}

/* Append a key known to be absent, with value and aux; NULL when out of memory. */
static Entry *bm_insert(BytesMap *m, const unsigned char *key, size_t len, uint64_t h, int64_t value,
                        uint32_t aux)
{
    if (len >= UINT32_MAX || m->used >= NO_ENTRY - 1)
        return NULL;
    /* the index at most half full: short probe sequences matter more than its size */
    if ((m->used + 1) * 2 > m->mask + 1 && bm_grow(m) < 0)
        return NULL;
    if (m->used == m->entries_cap) {
        size_t cap = m->entries_cap ? m->entries_cap * 2 : 512;
        Entry *entries = realloc(m->entries, cap * sizeof(Entry));
        if (entries == NULL)
            return NULL;
        m->entries = entries;
        m->entries_cap = cap;
    }
    uint64_t off;
    if (len <= INLINE_KEY) {
        off = pack_key(key, len);
    } else {
        if (m->arena_len + len > m->arena_cap) {
            size_t cap = m->arena_cap ? m->arena_cap : 4096;
            while (cap < m->arena_len + len)
                cap *= 2;
            unsigned char *arena = realloc(m->arena, cap);
            if (arena == NULL)
                return NULL;
            m->arena = arena;
            m->arena_cap = cap;
        }
        memcpy(m->arena + m->arena_len, key, len);
        off = m->arena_len;
        m->arena_len += len;
    }
    size_t at = h & m->mask;
    while (m->index[at] != NO_ENTRY)
        at = (at + 1) & m->mask;
    m->index[at] = (uint32_t)m->used;
    Entry *e = &m->entries[m->used++];
    e->hash = h;
    e->off = off;
    e->len = (uint32_t)len;
    e->value = value;
    e->aux = aux;
    return e;
}

/* ---------------------------------------------------------------------------------------------
 * Module functions
 * --------------------------------------------------------------------------------------------- */
static PyObject *set_char_classes(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (view.len != N_CODEPOINTS) {
        PyBuffer_Release(&view);
        return PyErr_Format(PyExc_ValueError, "class table must have %d entries, got %zd",
                            N_CODEPOINTS, view.len);
    }
    const unsigned char *classes = view.buf;
    for (Py_ssize_t k = 0; k < view.len; k++) {
        if (classes[k] > CLS_SPACE) {
            PyBuffer_Release(&view);
            return PyErr_Format(PyExc_ValueError, "class table entry %zd is %d, not 0-3", k,
                                (int)classes[k]);
        }
    }
    unsigned char *copy = malloc(N_CODEPOINTS);
    if (copy == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    memcpy(copy, classes, N_CODEPOINTS);
    PyBuffer_Release(&view);
    /* The table in use is never freed or changed: scans in other threads read it without the GIL.
     * The first one set stays; a later call must bring the same table. */
    if (char_class != NULL) {
        int same = memcmp(char_class, copy, N_CODEPOINTS) == 0;
        free(copy);
        if (!same) {
            PyErr_SetString(PyExc_ValueError, "a different class table is already set");
            return NULL;
        }
        Py_RETURN_NONE;
    }
    char_class = copy;
    Py_RETURN_NONE;
}

static PyObject *every_code_point(PyObject *module, PyObject *unused)
{
    PyObject *out = PyUnicode_New(N_CODEPOINTS, 0x10FFFF);
    if (out == NULL)
        return NULL;
    Py_UCS4 *data = PyUnicode_4BYTE_DATA(out);
    for (Py_UCS4 c = 0; c < N_CODEPOINTS; c++)
        data[c] = c;
    return out;
}

static int classes_ready(void)
{
    if (char_class == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bpe_impls._native: set_char_classes() was not called");
        return 0;
    }
    return 1;
}

static PyObject *pretokenize(PyObject *module, PyObject *arg)
{
    if (!classes_ready())
        return NULL;
    Text t;
    if (text_open(&t, arg) < 0)
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < t.n;) {
        Py_ssize_t j = text_next_end(&t, i);
        PyObject *piece = PyUnicode_Substring(arg, i, j);
        if (piece == NULL || PyList_Append(out, piece) < 0) {
            Py_XDECREF(piece);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(piece);
        i = j;
    }
    return out;
}

/* ---------------------------------------------------------------------------------------------
 * PretokenCounter: counts the pre-tokens of many texts by UTF-8 bytes; add() drops the GIL.
 * --------------------------------------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    BytesMap counts;
    int busy;  /* add() running without the GIL: a second thread must not touch the table */
} CounterObject;

static int Counter_init(CounterObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, ":PretokenCounter", kwlist))
        return -1;
    bm_free(&self->counts);
    if (bm_init(&self->counts, 1024) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void Counter_dealloc(CounterObject *self)
{
    bm_free(&self->counts);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Counter_add(CounterObject *self, PyObject *arg)
{
    if (!classes_ready())
        return NULL;
    if (self->counts.index == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "PretokenCounter was not initialised");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "PretokenCounter is in use by another thread");
        return NULL;
    }
    Text t;
    if (text_open(&t, arg) < 0)
        return NULL;
    int failed = 0; /* -1: lone surrogate, -2: out of memory */
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < t.n;) {
        Py_ssize_t j = text_next_end(&t, i);
        Py_ssize_t len;
        const unsigned char *key = text_utf8(&t, i, j, &len);
        if (key == NULL) {
            failed = (int)len;
            break;
        }
        uint64_t h = hash_bytes(key, (size_t)len);
        Entry *s = bm_get(&self->counts, key, (size_t)len, h);
        if (s != NULL) {
            s->value++;
        } else if (bm_insert(&self->counts, key, (size_t)len, h, 1, 0) == NULL) {
            failed = -2;
            break;
        }
        i = j;
    }
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (failed == -1) {
        surrogate_error(&t);
        text_close(&t);
        return NULL;
    }
    text_close(&t);
    if (failed == -2)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *Counter_to_dict(CounterObject *self, PyObject *unused)
{
    PyObject *out = PyDict_New();
    if (out == NULL)
        return NULL;
    const BytesMap *m = &self->counts;
    for (size_t k = 0; k < m->used; k++) { /* in first-seen order */
        const Entry *s = &m->entries[k];
        unsigned char buf[INLINE_KEY];
        PyObject *key = PyBytes_FromStringAndSize((const char *)entry_key(m, s, buf), (Py_ssize_t)s->len);
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

static PyObject *Counter_merge(CounterObject *self, PyObject *arg)
{
    if (!PyObject_TypeCheck(arg, Py_TYPE(self))) {
        PyErr_Format(PyExc_TypeError, "can only merge a PretokenCounter, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    CounterObject *other = (CounterObject *)arg;
    if (self->busy || other->busy) {
        PyErr_SetString(PyExc_RuntimeError, "PretokenCounter is in use by another thread");
        return NULL;
    }
    if (self->counts.index == NULL || other == self) {
        PyErr_SetString(PyExc_ValueError, "cannot merge an uninitialised counter or a counter into itself");
        return NULL;
    }
    const BytesMap *m = &other->counts;
    for (size_t k = 0; k < m->used; k++) {
        const Entry *o = &m->entries[k];
        unsigned char buf[INLINE_KEY];
        const unsigned char *key = entry_key(m, o, buf);
        Entry *s = bm_get(&self->counts, key, o->len, o->hash);
        if (s != NULL)
            s->value += o->value;
        else if (bm_insert(&self->counts, key, o->len, o->hash, o->value, 0) == NULL)
            return PyErr_NoMemory();
    }
    Py_RETURN_NONE;
}

/* Count the pre-tokens of s[0:n] (valid UTF-8, no special token); -2 when out of memory. */
static int count_utf8(BytesMap *counts, const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t j = next_end_utf8(s, i, n);
        uint64_t h = hash_bytes(s + i, j - i);
        Entry *slot = bm_get(counts, s + i, j - i, h);
        if (slot != NULL)
            slot->value++;
        else if (bm_insert(counts, s + i, j - i, h, 1, 0) == NULL)
            return -2;
        i = j;
    }
    return 0;
}

/* The special tokens, longest first: at a position where several match, the longest wins, as in
 * pretokenize.special_token_regex (only tokens that are prefixes of one another can both match at
 * one position, so byte length orders them as character length does). */
typedef struct {
    size_t count;
    const unsigned char **token;
    size_t *len;
    size_t *origin;            /* each token's position in the sequence given */
    unsigned char first[256];  /* first[b]: some special token starts with byte b */
} Specials;

static int specials_open(Specials *sp, PyObject *seq, PyObject **held)
{
    memset(sp, 0, sizeof(*sp));
    *held = PySequence_Fast(seq, "special tokens must be a sequence of bytes");
    if (*held == NULL)
        return -1;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(*held);
    sp->token = PyMem_Calloc((size_t)count + 1, sizeof(*sp->token));
    sp->len = PyMem_Calloc((size_t)count + 1, sizeof(*sp->len));
    sp->origin = PyMem_Calloc((size_t)count + 1, sizeof(*sp->origin));
    if (sp->token == NULL || sp->len == NULL || sp->origin == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *item = PySequence_Fast_GET_ITEM(*held, k);
        if (!PyBytes_Check(item) || PyBytes_GET_SIZE(item) == 0) {
            PyErr_Format(PyExc_TypeError, "special token #%zd is not non-empty bytes", k);
            return -1;
        }
        /* insertion sort, longest first, stable */
        const unsigned char *token = (const unsigned char *)PyBytes_AS_STRING(item);
        size_t len = (size_t)PyBytes_GET_SIZE(item), at = sp->count;
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
        sp->first[token[0]] = 1;
    }
    return 0;
}

static void specials_close(Specials *sp, PyObject *held)
{
    PyMem_Free(sp->token);
    PyMem_Free(sp->len);
    PyMem_Free(sp->origin);
    Py_XDECREF(held);
}

/* Where the next special token at or after `from` starts (n if none); its length in *len (0 if
 * none) and its position in the sequence given in *which. */
static size_t next_special(const Specials *sp, const unsigned char *s, size_t from, size_t n, size_t *len,
                           size_t *which)
{
    for (size_t p = from; p < n; p++) {
        if (!sp->first[s[p]])
            continue;
        for (size_t k = 0; k < sp->count; k++) {
            if (sp->len[k] <= n - p && memcmp(s + p, sp->token[k], sp->len[k]) == 0) {
                *len = sp->len[k];
                *which = sp->origin[k];
                return p;
            }
        }
    }
    *len = 0;
    return n;
}

static PyObject *Counter_add_utf8(CounterObject *self, PyObject *args)
{
    Py_buffer view;
    PyObject *specials_arg;
    if (!classes_ready())
        return NULL;
    if (!PyArg_ParseTuple(args, "y*O:add_utf8", &view, &specials_arg))
        return NULL;
    if (self->counts.index == NULL || self->busy) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "PretokenCounter is uninitialised or in use by another thread");
        return NULL;
    }
    Specials sp;
    PyObject *held = NULL;
    if (specials_open(&sp, specials_arg, &held) < 0) {
        specials_close(&sp, held);
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *s = view.buf;
    size_t n = (size_t)view.len;
    int valid, failed = 0;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    valid = utf8_valid(s, n);
    for (size_t pos = 0; valid && pos <= n && !failed;) {
        size_t len, which;
        size_t at = next_special(&sp, s, pos, n, &len, &which);
        failed = count_utf8(&self->counts, s + pos, at - pos);
        pos = at + (len ? len : 1);
    }
    Py_END_ALLOW_THREADS
    self->busy = 0;
    specials_close(&sp, held);
    PyBuffer_Release(&view);
    if (failed)
        return PyErr_NoMemory();
    return PyBool_FromLong(valid);
}

static Py_ssize_t Counter_len(CounterObject *self)
{
    return (Py_ssize_t)self->counts.used;
}

static PyMethodDef Counter_methods[] = {
    {"add", (PyCFunction)Counter_add, METH_O,
     "add(text)\n--\n\nCount the GPT-2 pre-tokens of text (a str holding no special token)."},
    {"add_utf8", (PyCFunction)Counter_add_utf8, METH_VARARGS,
     "add_utf8(data, special_tokens)\n--\n\nCount the pre-tokens of UTF-8 bytes, split on the special "
     "tokens (bytes).\nFalse, counting nothing, if data is not valid UTF-8."},
    {"merge", (PyCFunction)Counter_merge, METH_O,
     "merge(other)\n--\n\nAdd another PretokenCounter's counts to this one."},
    {"to_dict", (PyCFunction)Counter_to_dict, METH_NOARGS,
     "to_dict()\n--\n\nThe counts so far: {pre-token UTF-8 bytes: count}."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods Counter_as_sequence = {
    .sq_length = (lenfunc)Counter_len,
};

static PyTypeObject CounterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bpe_impls._native.PretokenCounter",
    .tp_doc = "Counts GPT-2 pre-tokens by their UTF-8 bytes. One thread at a time.",
    .tp_basicsize = sizeof(CounterObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Counter_init,
    .tp_dealloc = (destructor)Counter_dealloc,
    .tp_methods = Counter_methods,
    .tp_as_sequence = &Counter_as_sequence,
};

/* ---------------------------------------------------------------------------------------------
 * Encoder: BPE over a rank table, with a bounded cache of pre-token -> ids.
 * --------------------------------------------------------------------------------------------- */
#define NO_RANK UINT32_MAX
/* Pre-tokens up to this many bytes use the O(n^2) scan; longer ones the O(n log n) heap. */
#define SCAN_LIMIT 64
/* Longer pre-tokens are not cached: rare, and they would pin large keys. */
#define MAX_CACHED_BYTES 1024

typedef struct {
    uint64_t *keys;   /* left << 32 | right; EMPTY_PAIR marks a free slot */
    uint32_t *ranks;
    uint32_t *merged;
    size_t mask;
} PairMap;

#define EMPTY_PAIR UINT64_MAX

static inline uint64_t pair_key(uint32_t a, uint32_t b) { return (uint64_t)a << 32 | b; }

static inline size_t pair_slot(uint64_t key, size_t mask)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & mask;
}

/* The rank of pair (a, b) and the id it merges into; NO_RANK when there is no such merge. */
static inline uint32_t pair_rank(const PairMap *pm, uint32_t a, uint32_t b, uint32_t *merged)
{
    uint64_t key = pair_key(a, b);
    size_t at = pair_slot(key, pm->mask);
    for (;;) {
        uint64_t k = pm->keys[at];
        if (k == key) {
            if (merged)
                *merged = pm->merged[at];
            return pm->ranks[at];
        }
        if (k == EMPTY_PAIR)
            return NO_RANK;
        at = (at + 1) & pm->mask;
    }
}

typedef struct {
    PyObject_HEAD
    PairMap pairs;
    uint32_t byte_ids[256];
    BytesMap cache;       /* pre-token bytes -> (offset in cache_ids, number of ids) */
    uint32_t *cache_ids;
    size_t cache_ids_len, cache_ids_cap;
    Py_ssize_t cache_size;
    /* Scratch for one pre-token's BPE, reused. */
    uint32_t *work;
    size_t work_cap;
} EncoderObject;

static void Encoder_dealloc(EncoderObject *self)
{
    free(self->pairs.keys);
    free(self->pairs.ranks);
    free(self->pairs.merged);
    bm_free(&self->cache);
    free(self->cache_ids);
    free(self->work);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int as_id(PyObject *obj, uint32_t *out, const char *what)
{
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 0 || v >= (long long)UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s %lld is not a token id in 0..2**32-2", what, v);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int Encoder_init(EncoderObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"byte_ids", "merges", "cache_size", NULL};
    PyObject *byte_ids, *merges;
    Py_ssize_t cache_size = 1 << 16;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|n:Encoder", kwlist, &byte_ids, &merges,
                                     &cache_size))
        return -1;
    if (self->pairs.keys != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Encoder is already initialised");
        return -1;
    }
    if (cache_size < 0) {
        PyErr_SetString(PyExc_ValueError, "cache_size must be non-negative");
        return -1;
    }
    self->cache_size = cache_size;

    PyObject *seq = PySequence_Fast(byte_ids, "byte_ids must be a sequence of 256 ids");
    if (seq == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(seq) != 256) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "byte_ids must hold 256 ids");
        return -1;
    }
    for (int b = 0; b < 256; b++) {
        if (as_id(PySequence_Fast_GET_ITEM(seq, b), &self->byte_ids[b], "byte id") < 0) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);

    /* merges: (left id, right id, merged id) in rank order; a repeated pair keeps its first rank. */
    seq = PySequence_Fast(merges, "merges must be a sequence of (left, right, merged) ids");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    size_t capacity = 16;
    while (capacity < (size_t)n * 2 + 2)
        capacity *= 2;
    PairMap *pm = &self->pairs;
    pm->keys = malloc(capacity * sizeof(uint64_t));
    pm->ranks = malloc(capacity * sizeof(uint32_t));
    pm->merged = malloc(capacity * sizeof(uint32_t));
    if (pm->keys == NULL || pm->ranks == NULL || pm->merged == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    memset(pm->keys, 0xFF, capacity * sizeof(uint64_t));
    pm->mask = capacity - 1;
    for (Py_ssize_t rank = 0; rank < n; rank++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, rank);
        uint32_t a, b, merged;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "merge #%zd is not a (left, right, merged) tuple", rank);
            return -1;
        }
        if (as_id(PyTuple_GET_ITEM(item, 0), &a, "left id") < 0 ||
            as_id(PyTuple_GET_ITEM(item, 1), &b, "right id") < 0 ||
            as_id(PyTuple_GET_ITEM(item, 2), &merged, "merged id") < 0) {
            Py_DECREF(seq);
            return -1;
        }
        uint64_t key = pair_key(a, b);
        size_t at = pair_slot(key, pm->mask);
        while (pm->keys[at] != EMPTY_PAIR && pm->keys[at] != key)
            at = (at + 1) & pm->mask;
        if (pm->keys[at] == EMPTY_PAIR) {
            pm->keys[at] = key;
            pm->ranks[at] = (uint32_t)rank;
            pm->merged[at] = merged;
        }
    }
    Py_DECREF(seq);
    if (bm_init(&self->cache, 1024) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Plain BPE, as tokenizer.bpe_scan: merge the lowest-ranked pair (leftmost on a tie), repeat.
 * ranks[k] is the rank of (ids[k], ids[k+1]); after a merge only its two neighbours change. */
static size_t bpe_scan(const PairMap *pm, uint32_t *ids, size_t n, uint32_t *ranks, uint32_t *merged)
{
    if (n < 2)
        return n;
    size_t m = n - 1;
    for (size_t k = 0; k < m; k++)
        ranks[k] = pair_rank(pm, ids[k], ids[k + 1], &merged[k]);
    for (;;) {
        uint32_t best = NO_RANK;
        size_t at = 0;
        for (size_t k = 0; k < m; k++) {
            if (ranks[k] < best) {
                best = ranks[k];
                at = k;
            }
        }
        if (best == NO_RANK)
            break;
        ids[at] = merged[at];
        memmove(ids + at + 1, ids + at + 2, (n - at - 2) * sizeof(uint32_t));
        memmove(ranks + at, ranks + at + 1, (m - at - 1) * sizeof(uint32_t));
        memmove(merged + at, merged + at + 1, (m - at - 1) * sizeof(uint32_t));
        n--;
        m--;
        if (at < m)
            ranks[at] = pair_rank(pm, ids[at], ids[at + 1], &merged[at]);
        if (at > 0)
            ranks[at - 1] = pair_rank(pm, ids[at - 1], ids[at], &merged[at - 1]);
    }
    return n;
}

/* A min-heap of (rank << 32 | position): pops the lowest rank, the leftmost position on a tie. */
static void heap_push(uint64_t *heap, size_t *size, uint64_t v)
{
    size_t k = (*size)++;
    while (k > 0) {
        size_t parent = (k - 1) / 2;
        if (heap[parent] <= v)
            break;
        heap[k] = heap[parent];
        k = parent;
    }
    heap[k] = v;
}

static uint64_t heap_pop(uint64_t *heap, size_t *size)
{
    uint64_t top = heap[0];
    uint64_t last = heap[--(*size)];
    size_t k = 0, n = *size;
    for (;;) {
        size_t child = 2 * k + 1;
        if (child >= n)
            break;
        if (child + 1 < n && heap[child + 1] < heap[child])
            child++;
        if (last <= heap[child])
            break;
        heap[k] = heap[child];
        k = child;
    }
    if (n)
        heap[k] = last;
    return top;
}

#define DEAD UINT32_MAX

/* BPE in O(n log n), as tokenizer.bpe_heap: a linked list over positions and a lazy heap whose
 * entries are re-checked when popped (a neighbour may have merged since). Ranks are unique per
 * pair, so an entry whose position still holds a pair of that rank is still valid. Returns the
 * new length (ids compacted in place); (size_t)-1 when out of memory. */
static size_t bpe_heap(const PairMap *pm, uint32_t *ids, size_t n)
{
    if (n < 2)
        return n;
    if (n > UINT32_MAX / 2)
        return (size_t)-1;
    uint64_t *heap = malloc(3 * n * sizeof(uint64_t)); /* n - 1 pairs + 2 pushes per merge */
    uint32_t *next = malloc(n * sizeof(uint32_t));
    uint32_t *prev = malloc(n * sizeof(uint32_t));
    if (heap == NULL || next == NULL || prev == NULL) {
        free(heap);
        free(next);
        free(prev);
        return (size_t)-1;
    }
    size_t size = 0;
    for (size_t k = 0; k < n; k++) {
        next[k] = (uint32_t)(k + 1); /* n: none */
        prev[k] = k ? (uint32_t)(k - 1) : DEAD;
        if (k + 1 < n) {
            uint32_t rank = pair_rank(pm, ids[k], ids[k + 1], NULL);
            if (rank != NO_RANK)
                heap_push(heap, &size, (uint64_t)rank << 32 | k);
        }
    }
    while (size) {
        uint64_t top = heap_pop(heap, &size);
        uint32_t rank = (uint32_t)(top >> 32), i = (uint32_t)top, j = next[i], merged = 0;
        if (j == n || ids[i] == DEAD)
            continue;
        if (pair_rank(pm, ids[i], ids[j], &merged) != rank)
            continue; /* stale */
        ids[i] = merged;
        ids[j] = DEAD;
        uint32_t k = next[j];
        next[i] = k;
        if (k != n) {
            prev[k] = i;
            uint32_t r = pair_rank(pm, merged, ids[k], NULL);
            if (r != NO_RANK)
                heap_push(heap, &size, (uint64_t)r << 32 | i);
        }
        uint32_t p = prev[i];
        if (p != DEAD) {
            uint32_t r = pair_rank(pm, ids[p], merged, NULL);
            if (r != NO_RANK)
                heap_push(heap, &size, (uint64_t)r << 32 | p);
        }
    }
    size_t out = 0;
    for (size_t k = 0; k < n; k++)
        if (ids[k] != DEAD)
            ids[out++] = ids[k];
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

static int idbuf_reserve(IdBuf *b, size_t extra)
{
    if (b->len + extra <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + extra)
        cap *= 2;
    uint32_t *ids = realloc(b->ids, cap * sizeof(uint32_t));
    if (ids == NULL)
        return -1;
    b->ids = ids;
    b->cap = cap;
    return 0;
}

/* BPE of one pre-token's bytes, appended to out; 0, or -1 when out of memory. */
static int encode_pretoken(EncoderObject *self, const unsigned char *key, size_t len, IdBuf *out)
{
    if (len > SCAN_LIMIT) {
        uint32_t *ids = malloc(len * sizeof(uint32_t));
        if (ids == NULL)
            return -1;
        for (size_t k = 0; k < len; k++)
            ids[k] = self->byte_ids[key[k]];
        size_t n = bpe_heap(&self->pairs, ids, len);
        if (n == (size_t)-1 || idbuf_reserve(out, n) < 0) {
            free(ids);
            return -1;
        }
        memcpy(out->ids + out->len, ids, n * sizeof(uint32_t));
        out->len += n;
        free(ids);
        return 0;
    }
    uint32_t ids[SCAN_LIMIT], ranks[SCAN_LIMIT], merged[SCAN_LIMIT];
    for (size_t k = 0; k < len; k++)
        ids[k] = self->byte_ids[key[k]];
    size_t n = bpe_scan(&self->pairs, ids, len, ranks, merged);
    if (idbuf_reserve(out, n) < 0)
        return -1;
    memcpy(out->ids + out->len, ids, n * sizeof(uint32_t));
    out->len += n;
    return 0;
}

/* Remember a pre-token's ids (the last n in out); clears the cache when it is full. */
static int cache_store(EncoderObject *self, const unsigned char *key, size_t len, uint64_t h,
                       const uint32_t *ids, size_t n)
{
    if (self->cache_size == 0 || len > MAX_CACHED_BYTES)
        return 0;
    if ((Py_ssize_t)self->cache.used >= self->cache_size) {
        bm_clear(&self->cache); /* cheaper than LRU bookkeeping on every hit; refills quickly */
        self->cache_ids_len = 0;
    }
    if (self->cache_ids_len + n > self->cache_ids_cap) {
        size_t cap = self->cache_ids_cap ? self->cache_ids_cap : 4096;
        while (cap < self->cache_ids_len + n)
            cap *= 2;
        uint32_t *grown = realloc(self->cache_ids, cap * sizeof(uint32_t));
        if (grown == NULL)
            return -1;
        self->cache_ids = grown;
        self->cache_ids_cap = cap;
    }
    memcpy(self->cache_ids + self->cache_ids_len, ids, n * sizeof(uint32_t));
    if (bm_insert(&self->cache, key, len, h, (int64_t)self->cache_ids_len, (uint32_t)n) == NULL)
        return -1;
    self->cache_ids_len += n;
    return 0;
}

static PyObject *idbuf_to_list(const IdBuf *b)
{
    PyObject *out = PyList_New((Py_ssize_t)b->len);
    if (out == NULL)
        return NULL;
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

/* One pre-token's ids (from the cache, else by BPE, then cached), appended to out; -1 when out of
 * memory (the exception set). */
static int encode_token(EncoderObject *self, const unsigned char *key, size_t len, IdBuf *out)
{
    uint64_t h = hash_bytes(key, len);
    Entry *hit = self->cache_size ? bm_get(&self->cache, key, len, h) : NULL;
    if (hit != NULL) {
        if (idbuf_reserve(out, (size_t)hit->aux) < 0) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(out->ids + out->len, self->cache_ids + hit->value, (size_t)hit->aux * sizeof(uint32_t));
        out->len += (size_t)hit->aux;
        return 0;
    }
    size_t before = out->len;
    if (encode_pretoken(self, key, len, out) < 0 ||
        cache_store(self, key, len, h, out->ids + before, out->len - before) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static int encoder_ready(EncoderObject *self)
{
    if (self->pairs.keys == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Encoder was not initialised");
        return 0;
    }
    return classes_ready();
}

/* True if two whole characters of s follow position j before end (end is a character boundary). */
static int two_chars_follow(const unsigned char *s, size_t j, size_t end)
{
    size_t len;
    if (j >= end)
        return 0;
    utf8_at(s, j, &len);
    j += len;
    if (j >= end)
        return 0;
    utf8_at(s, j, &len);
    return j + len <= end;
}

/* encode_utf8(data, special_tokens, special_ids, settled=False): the whole of Tokenizer.encode over
 * UTF-8 bytes: split on the special tokens (bytes, longest first) in C, each one becoming its id,
 * and the text between them encoded straight from the bytes (no str slices, no per-token UTF-8
 * encoding). With settled, Tokenizer._encode_settled in bytes, for encode_iterable: encode only
 * what more data could not change and return (ids, cut), cut a byte offset: special tokens that
 * start where the longest one still fits, then the pre-tokens after the last of them that end
 * before the unsettled region and have two whole characters after them. */
static PyObject *Encoder_encode_utf8(EncoderObject *self, PyObject *args)
{
    Py_buffer view;
    PyObject *specials_arg, *ids_arg;
    int settled = 0;
    if (!encoder_ready(self) ||
        !PyArg_ParseTuple(args, "y*OO|p:encode_utf8", &view, &specials_arg, &ids_arg, &settled))
        return NULL;
    Specials sp;
    PyObject *held = NULL, *ids_seq = NULL, *result = NULL;
    uint32_t *special_ids = NULL;
    IdBuf out = {0};
    if (specials_open(&sp, specials_arg, &held) < 0)
        goto done;
    ids_seq = PySequence_Fast(ids_arg, "special ids must be a sequence of ints");
    if (ids_seq == NULL)
        goto done;
    if ((size_t)PySequence_Fast_GET_SIZE(ids_seq) != sp.count) {
        PyErr_SetString(PyExc_ValueError, "one id is needed per special token");
        goto done;
    }
    special_ids = PyMem_Calloc(sp.count + 1, sizeof(uint32_t));
    if (special_ids == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t k = 0; k < sp.count; k++)
        if (as_id(PySequence_Fast_GET_ITEM(ids_seq, (Py_ssize_t)k), &special_ids[k], "special id") < 0)
            goto done;
    const unsigned char *s = view.buf;
    size_t n = (size_t)view.len;
    if (!utf8_valid(s, n)) { /* the scanner reads whole characters: never past a bad one */
        PyErr_SetString(PyExc_ValueError, "data is not valid UTF-8");
        goto done;
    }
    /* settled: a special token starting before `settle` is whole in data (every one fits). */
    size_t longest = 0;
    for (size_t k = 0; k < sp.count; k++)
        longest = sp.len[k] > longest ? sp.len[k] : longest;
    size_t settle = longest ? (n + 1 > longest ? n + 1 - longest : 0) : n + 1;
    for (size_t pos = 0; pos <= n;) {
        size_t len, which = 0;
        size_t at = next_special(&sp, s, pos, n, &len, &which);
        if (settled && (len == 0 || at >= settle)) { /* no settled special token left */
            /* The ordinary text from pos is known up to settle (back to a character boundary). */
            size_t known = settle < n ? settle : n;
            while (known > pos && (s[known] & 0xC0) == 0x80)
                known--;
            size_t cut = pos;
            for (size_t i = pos; i < known;) {
                size_t j = next_end_utf8(s, i, known);
                if (!two_chars_follow(s, j, known))
                    break;
                if (encode_token(self, s + i, j - i, &out) < 0)
                    goto done;
                cut = i = j;
            }
            PyObject *ids = idbuf_to_list(&out);
            if (ids != NULL)
                result = Py_BuildValue("(Nn)", ids, (Py_ssize_t)cut);
            goto done;
        }
        for (size_t i = pos; i < at;) {
            size_t j = next_end_utf8(s, i, at);
            if (encode_token(self, s + i, j - i, &out) < 0)
                goto done;
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
    result = idbuf_to_list(&out); /* not settled (settled always returns from the loop) */
done:
    free(out.ids);
    PyMem_Free(special_ids);
    Py_XDECREF(ids_seq);
    specials_close(&sp, held);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *Encoder_bpe(EncoderObject *self, PyObject *arg)
{
    if (self->pairs.keys == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Encoder was not initialised");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    IdBuf out = {0};
    int failed = encode_pretoken(self, view.buf, (size_t)view.len, &out);
    PyBuffer_Release(&view);
    PyObject *result = failed ? PyErr_NoMemory() : idbuf_to_list(&out);
    free(out.ids);
    return result;
}

static PyObject *Encoder_cache_len(EncoderObject *self, PyObject *unused)
{
    return PyLong_FromSize_t(self->cache.used);
}

static PyMethodDef Encoder_methods[] = {
    {"encode_utf8", (PyCFunction)Encoder_encode_utf8, METH_VARARGS,
     "encode_utf8(data, special_tokens, special_ids, settled=False)\n--\n\nThe ids of UTF-8 text: each "
     "special token (bytes, longest first) becomes its id, the text between them is encoded.\nWith "
     "settled: (ids, cut), the ids of data[:cut], all that more data could not change."},
    {"bpe", (PyCFunction)Encoder_bpe, METH_O,
     "bpe(token_bytes)\n--\n\nThe ids BPE gives one pre-token's bytes (no cache)."},
    {"cache_len", (PyCFunction)Encoder_cache_len, METH_NOARGS,
     "cache_len()\n--\n\nHow many pre-tokens the cache holds."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bpe_impls._native.Encoder",
    .tp_doc = "Encoder(byte_ids, merges, cache_size=65536): BPE with a rank table and a cache.\n\n"
              "byte_ids: the id of each byte 0..255; merges: (left, right, merged) ids in rank order.",
    .tp_basicsize = sizeof(EncoderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Encoder_init,
    .tp_dealloc = (destructor)Encoder_dealloc,
    .tp_methods = Encoder_methods,
};

static PyMethodDef module_methods[] = {
    {"set_char_classes", set_char_classes, METH_O,
     "set_char_classes(table)\n--\n\nThe class of every code point (0 other, 1 letter, 2 number, "
     "3 whitespace), 0x110000 bytes."},
    {"every_code_point", every_code_point, METH_NOARGS,
     "every_code_point()\n--\n\nA str of every code point in order, surrogates included."},
    {"pretokenize", pretokenize, METH_O,
     "pretokenize(text)\n--\n\nThe GPT-2 pre-tokens of text, as a list of str."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "bpe_impls._native",
    .m_doc = "The GPT-2 pre-tokenizer, a pre-token counter and a BPE encoder in C.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__native(void)
{
    if (PyType_Ready(&CounterType) < 0 || PyType_Ready(&EncoderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&native_module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "PretokenCounter", (PyObject *)&CounterType) < 0 ||
        PyModule_AddObjectRef(m, "Encoder", (PyObject *)&EncoderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
