/* The pre-tokenizers: hand-written scanners for the three preset split
 * patterns of bpe_impls/base/patterns.py (GPT-2's, cl100k's and o200k's,
 * tiktoken's strings), each over a str's code points (code units of 1, 2 or 4
 * bytes) and over valid UTF-8 bytes, all from one template (scan_kind.h).
 * They need a few character classes (letter, number, whitespace, other, and
 * o200k's letter sets); their table is built by bpe_impls/base/compiled.py
 * from Unicode data and installed with bpe_char_classes_set() (the module's
 * set_char_classes()), so the C and the pure-Python paths use the same
 * classes.
 *
 * The functions called inside the counter's and the encoder's loops are
 * `static inline` here rather than in scanner.c: a call across .c files cannot
 * be inlined. Plain C: the Python side (str objects, buffers, exceptions) is
 * in py/common.h. */
#ifndef BPE_SCANNER_H
#define BPE_SCANNER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bpe_util.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* The class table: one byte per code point. The low two bits (CLS_BASE) are
 * the class every pattern uses: other, \p{L}, \p{N} or \s. CLS_UP and
 * CLS_LOW are o200k's two letter sets, [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and
 * [\p{Ll}\p{Lm}\p{Lo}\p{M}]: a letter is in one or both, a mark (\p{M}, of
 * base class other) in both, anything else in neither. So the entries are 0
 * (other), 2 (number), 3 (whitespace), 5 (Lu, Lt), 9 (Ll), 13 (Lm, Lo) and 12
 * (mark); bpe_char_classes_set() accepts no other value. */
enum {
    CLS_OTHER = 0,
    CLS_LETTER = 1,
    CLS_NUMBER = 2,
    CLS_SPACE = 3,
    CLS_BASE = 3,
    CLS_UP = 4,
    CLS_LOW = 8,
};
#define N_CODEPOINTS 0x110000

/* The split patterns that have a scanner: the presets of base/patterns.py. */
enum { PAT_GPT2 = 0, PAT_CL100K = 1, PAT_O200K = 2, N_PATTERNS = 3 };

/* One class per code point (1.1 MB); NULL until bpe_char_classes_set()
 * installs it. Once set, it is never freed or changed: scans in other threads
 * read it with no lock. */
extern BPE_INTERNAL unsigned char *bpe_char_class;

/* What bpe_char_classes_set() says of a table. */
enum {
    BPE_CLASSES_SET = 0,       /* installed (or the same table already was) */
    BPE_CLASSES_BAD_SIZE = 1,  /* not N_CODEPOINTS entries */
    BPE_CLASSES_BAD_ENTRY = 2, /* entry *bad is no class (see the enum) */
    BPE_CLASSES_OTHER = 3,     /* a different table is already installed */
    BPE_CLASSES_NO_MEMORY = -1,
};

/* Check table[0:len] and install a copy of it as bpe_char_class, unless one
 * is installed already (the first stays: a scan may be reading it). Not
 * synchronised with itself: callers take turns (the module calls it with the
 * GIL held). */
BPE_INTERNAL int bpe_char_classes_set(const unsigned char *table, size_t len,
                                      size_t *bad);

/* The code point at byte i of valid UTF-8, and its length in *len. */
static inline uint32_t
bpe_utf8_at(const unsigned char *s, size_t i, size_t *len)
{
    unsigned char c = s[i];
    if (c < 0x80) {
        *len = 1;
        return c;
    }
    if (c < 0xE0) {
        *len = 2;
        return (uint32_t)(c & 0x1F) << 6 | (s[i + 1] & 0x3F);
    }
    if (c < 0xF0) {
        *len = 3;
        return ((uint32_t)(c & 0x0F) << 12 | (uint32_t)(s[i + 1] & 0x3F) << 6 |
                (s[i + 2] & 0x3F));
    }
    *len = 4;
    return ((uint32_t)(c & 0x07) << 18 | (uint32_t)(s[i + 1] & 0x3F) << 12 |
            (uint32_t)(s[i + 2] & 0x3F) << 6 | (s[i + 3] & 0x3F));
}

/* The end of the run of ASCII letters at s[j:n] (units of one byte: UTF-8 or
 * a Latin-1 str), 16 bytes at a time where 16 are left: no branch per letter,
 * so where a word ends costs no misprediction. A unit >= 0x80 ends the run
 * here too; the caller looks at its class. */
static inline size_t
bpe_ascii_letters_end(const unsigned char *s, size_t j, size_t n)
{
#ifdef __SSE2__
    /* (b | 0x20) in 'a'..'z', as a signed compare: SSE2 has no unsigned one */
    const __m128i fold = _mm_set1_epi8(0x20);
    const __m128i shift = _mm_set1_epi8((char)(0x80 - 'a'));
    const __m128i limit = _mm_set1_epi8((char)(-128 + 26));
    while (j + 16 <= n) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + j));
        __m128i x = _mm_add_epi8(_mm_or_si128(v, fold), shift);
        unsigned other =
            ~(unsigned)_mm_movemask_epi8(_mm_cmplt_epi8(x, limit)) & 0xFFFFu;
        if (other) {
            return j + (size_t)__builtin_ctz(other);
        }
        j += 16;
    }
#endif
    while (j < n && (unsigned char)((s[j] | 0x20) - 'a') < 26) {
        j++;
    }
    return j;
}

/* bpe_{gpt2,cl100k,o200k}_end_{1,2,4} and bpe_utf8_{1,2,4}, per unit width. */
#define CHAR_T uint8_t
#define SUFFIX _1
#include "scan_kind.h"

#define CHAR_T uint16_t
#define SUFFIX _2
#include "scan_kind.h"

#define CHAR_T uint32_t
#define SUFFIX _4
#include "scan_kind.h"

/* bpe_{gpt2,cl100k,o200k}_end_utf8: the scanners over valid UTF-8 bytes
 * (positions are byte offsets): counting a file's bytes directly skips
 * decoding it to a str, and the pre-token's bytes are then its key as they
 * stand. */
#define CHAR_T unsigned char
#define SUFFIX _utf8
#define SCAN_UTF8
#include "scan_kind.h"

/* The end of the pre-token of `pattern` (PAT_*) that starts at byte i (i < n)
 * of valid UTF-8. */
BPE_ALWAYS_INLINE size_t
bpe_next_end_utf8(const unsigned char *s, size_t i, size_t n, int pattern)
{
    switch (pattern) {
    case PAT_CL100K:
        return bpe_cl100k_end_utf8(s, i, n);
    case PAT_O200K:
        return bpe_o200k_end_utf8(s, i, n);
    default:
        return bpe_gpt2_end_utf8(s, i, n);
    }
}

/* The PAT_* of a pattern name ("gpt2", "cl100k", "o200k"), or -1. */
BPE_INTERNAL int bpe_pattern_id(const char *name);

/* The name of each PAT_*. */
extern BPE_INTERNAL const char *const bpe_pattern_names[N_PATTERNS];

/* True if s[0:n] is valid UTF-8 as Python's strict decoder defines it (no
 * surrogates, nothing overlong, nothing above U+10FFFF, no truncated
 * sequence). */
BPE_INTERNAL int bpe_utf8_valid(const unsigned char *s, size_t n);

/* A text's code points as a str holds them: n code units of `kind` bytes
 * each (1, 2 or 4: PEP 393's kinds have these values), read in place. The
 * owner of the data keeps it alive and unchanged while the view is used (a
 * str is immutable). */
typedef struct {
    int kind;
    const void *data;
    ptrdiff_t n;
    int ascii; /* every unit is below 0x80: the data are the UTF-8 bytes */
    /* UTF-8 of the current pre-token, when not ascii */
    unsigned char *scratch;
    size_t scratch_cap;
    /* position of a lone surrogate, after bpe_text_utf8 failed */
    ptrdiff_t bad;
} Text;

/* A view of data[0:n] (units of `kind` bytes); bpe_text_close(t) must
 * follow. */
static inline void
bpe_text_init(Text *t, int kind, const void *data, ptrdiff_t n, int ascii)
{
    t->kind = kind;
    t->data = data;
    t->n = n;
    t->ascii = ascii;
    t->scratch = NULL;
    t->scratch_cap = 0;
    t->bad = -1;
}

BPE_INTERNAL void bpe_text_close(Text *t);

/* The code point at i. */
static inline uint32_t
bpe_text_at(const Text *t, ptrdiff_t i)
{
    switch (t->kind) {
    case 1:
        return ((const uint8_t *)t->data)[i];
    case 2:
        return ((const uint16_t *)t->data)[i];
    default:
        return ((const uint32_t *)t->data)[i];
    }
}

/* The end of the pre-token of `pattern` (PAT_*) that starts at i (i <
 * t->n). */
BPE_ALWAYS_INLINE ptrdiff_t
bpe_text_next_end(const Text *t, ptrdiff_t i, int pattern)
{
#define SCAN_KINDS(name)                                                     \
    switch (t->kind) {                                                       \
    case 1:                                                                  \
        return name##_1((const uint8_t *)t->data, i, t->n);                  \
    case 2:                                                                  \
        return name##_2((const uint16_t *)t->data, i, t->n);                 \
    default:                                                                 \
        return name##_4((const uint32_t *)t->data, i, t->n);                 \
    }
    switch (pattern) {
    case PAT_CL100K:
        SCAN_KINDS(bpe_cl100k_end)
    case PAT_O200K:
        SCAN_KINDS(bpe_o200k_end)
    default:
        SCAN_KINDS(bpe_gpt2_end)
    }
#undef SCAN_KINDS
}

/* The UTF-8 bytes of text[i:j]; NULL with *len = -1 at a lone surrogate, -2
 * when out of memory. Valid until the next call. */
static inline const unsigned char *
bpe_text_utf8(Text *t, ptrdiff_t i, ptrdiff_t j, ptrdiff_t *len)
{
    if (t->ascii) {
        *len = j - i;
        return (const unsigned char *)t->data + i;
    }
    if (bpe_reserve(&t->scratch, &t->scratch_cap, 4 * (size_t)(j - i), 1,
                    256) < 0)
    {
        *len = -2;
        return NULL;
    }
    switch (t->kind) {
    case 1:
        *len = bpe_utf8_1((const uint8_t *)t->data, i, j, t->scratch, &t->bad);
        break;
    case 2:
        *len = bpe_utf8_2((const uint16_t *)t->data, i, j, t->scratch, &t->bad);
        break;
    default:
        *len = bpe_utf8_4((const uint32_t *)t->data, i, j, t->scratch, &t->bad);
        break;
    }
    return *len < 0 ? NULL : t->scratch;
}

/* The special tokens, longest first: at a position where several match, the
 * longest wins, as in pretokenize.special_token_regex (only tokens that are
 * prefixes of one another can both match at one position, so byte length
 * orders them as character length does).
 *
 * The tokens' bytes are copied into memory the Specials own: the caller's
 * copies may change or go as soon as they are added (in the module: an id's
 * __index__, another thread once the GIL is released). */
typedef struct {
    size_t count;
    const unsigned char **token;
    size_t *len;
    size_t *origin; /* each token's position in the order added */
    unsigned char *bytes; /* every token's bytes, back to back */
    size_t used;          /* of bytes */
    /* the position (in the order added) of the first token that is not valid
     * UTF-8, else -1: the caller refuses it (such a token could match inside
     * a character, and a scanner would then start between a character's
     * bytes and read past the end of the data) */
    ptrdiff_t bad;
    /* first[b]: some special token starts with byte b */
    unsigned char first[256];
    /* how many distinct first bytes; with one (the usual '<'), it is
     * first_byte and bpe_find_byte finds the candidates */
    int n_first;
    unsigned char first_byte;
} Specials;

/* No special tokens (what bpe_specials_close leaves): safe to close. */
BPE_INTERNAL void bpe_specials_empty(Specials *sp);
/* Room for `count` tokens of `total` bytes in all, added next with
 * bpe_specials_add: 0, or -1 when out of memory. bpe_specials_close(sp) must
 * follow either way. */
BPE_INTERNAL int bpe_specials_reserve(Specials *sp, size_t count,
                                      size_t total);
/* Add a non-empty token (within the room reserved), kept longest first; one
 * that is not valid UTF-8 (whole characters) is recorded in sp->bad. */
BPE_INTERNAL void bpe_specials_add(Specials *sp, const unsigned char *token,
                                   size_t len);
BPE_INTERNAL void bpe_specials_close(Specials *sp);

/* Texts shorter than this are searched for a byte 16 bytes at a time here
 * rather than by memchr, whose cost per call dominates on short texts: on a
 * batch's lines (134 bytes on average) about 65 ns a line with memchr, 26 ns
 * here. */
#define FIND_BYTE_MEMCHR_MIN 512

/* The first p in [from, n) with s[p] == b, or n. */
static inline size_t
bpe_find_byte(const unsigned char *s, size_t from, size_t n, unsigned char b)
{
    size_t p = from;
    if (n - from >= FIND_BYTE_MEMCHR_MIN) {
        const unsigned char *hit = memchr(s + from, b, n - from);
        return hit == NULL ? n : (size_t)(hit - s);
    }
#ifdef __SSE2__
    const __m128i needle = _mm_set1_epi8((char)b);
    for (; n - p >= 16; p += 16) {
        __m128i chunk = _mm_loadu_si128((const __m128i *)(s + p));
        unsigned mask =
            (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(chunk, needle));
        if (mask) {
            return p + (size_t)__builtin_ctz(mask);
        }
    }
#endif
    for (; p < n; p++) {
        if (s[p] == b) {
            return p;
        }
    }
    return n;
}

/* Where the next special token at or after `from` starts (n if none); its
 * length in *len (0 if none) and its position in the sequence given in *which.
 */
static inline size_t
bpe_next_special(const Specials *sp, const unsigned char *s, size_t from,
                 size_t n, size_t *len, size_t *which)
{
    if (sp->count == 0) { /* (most calls: encode_ordinary) */
        *len = 0;
        return n;
    }
    for (size_t p = from; p < n; p++) {
        if (sp->n_first == 1) {
            p = bpe_find_byte(s, p, n, sp->first_byte);
            if (p == n) {
                break;
            }
        }
        else if (!sp->first[s[p]]) {
            continue;
        }
        for (size_t k = 0; k < sp->count; k++) {
            if (sp->len[k] <= n - p &&
                memcmp(s + p, sp->token[k], sp->len[k]) == 0)
            {
                *len = sp->len[k];
                *which = sp->origin[k];
                return p;
            }
        }
    }
    *len = 0;
    return n;
}

#endif /* BPE_SCANNER_H */
