/* JSON as Python's json module reads it, the parts the C readers share: a
 * cursor, whitespace, and a string decoded to UTF-8 (vocab_files.c reads
 * tokenizer files with them, jsonl.c the documents of JSON Lines). Each
 * answers 1 wherever Python might read the text otherwise, so a caller leaves
 * that input to Python, which names the fault or reads the case. */
#ifndef BPE_JSON_SCAN_H
#define BPE_JSON_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bpe_util.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

typedef struct {
    const unsigned char *p, *end;
} Cursor;

static inline void
skip_ws(Cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')) {
        c->p++;
    }
}

/* Expect character ch (after whitespace): 0 and past it, else 1. */
static inline int
expect(Cursor *c, unsigned char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 0;
    }
    return 1;
}

static inline int
hex4(const unsigned char *s, unsigned *value)
{
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned char h = s[k];
        unsigned d = h >= '0' && h <= '9'   ? (unsigned)(h - '0')
                     : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10)
                     : h >= 'A' && h <= 'F' ? (unsigned)(h - 'A' + 10)
                                            : 16u;
        if (d == 16) {
            return 1;
        }
        v = v << 4 | d;
    }
    *value = v;
    return 0;
}

/* The JSON string at c (after whitespace) decoded to UTF-8 in out (which
 * holds as many bytes as the string's text: decoding never lengthens it),
 * its length in *len: 0, or 1 if there is none or Python's json would read
 * it otherwise than as valid UTF-8 (a raw control character, a bad escape, a
 * lone surrogate, which no token may hold). Raw bytes are copied as they are:
 * the caller checks them (table_bytes, or a comparison with valid UTF-8). */
static inline int
json_string(Cursor *c, unsigned char *out, size_t *len)
{
    if (expect(c, '"')) {
        return 1;
    }
    /* The cursor in locals: a store to out may alias *c, so with c->p the
     * compiler would load and store it again at every step. */
    const unsigned char *p = c->p, *const end = c->end;
    size_t n = 0;
    int fault = 1;
    while (p < end) {
#ifdef __SSE2__
        /* Sixteen bytes at a time: the plain ones (not a quote, a backslash
         * or a control character) before the first that is not, copied as
         * they are; most of a document's text. */
        const __m128i quotes = _mm_set1_epi8('"'), slashes = _mm_set1_epi8('\\');
        const __m128i controls = _mm_set1_epi8(0x1F);
        while (end - p >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
            __m128i special = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(v, quotes), _mm_cmpeq_epi8(v, slashes)),
                _mm_cmpeq_epi8(_mm_max_epu8(v, controls), controls)); /* (v <= 0x1F) */
            unsigned mask = (unsigned)_mm_movemask_epi8(special);
            if (mask) {
                size_t plain = (size_t)__builtin_ctz(mask);
                memcpy(out + n, p, plain);
                n += plain;
                p += plain;
                break;
            }
            /* (sixteen bytes of the string's own text: out has room for them) */
            _mm_storeu_si128((__m128i *)(void *)(out + n), v);
            n += 16;
            p += 16;
        }
#endif
        /* Eight plain bytes at a time (none a quote, a backslash or a control
         * character): without SSE2, most of a document's text; with it, the
         * last few bytes of a line. */
        while (end - p >= 8) {
            uint64_t v;
            memcpy(&v, p, 8);
            const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
            uint64_t quote = v ^ (ones * '"'), slash = v ^ (ones * '\\');
            uint64_t special = ((v - ones * 0x20) | (quote - ones) | (slash - ones)) & ~v & highs;
            /* (the borrows of the subtractions may flag a plain byte after a
             * special one, never hide one: the byte loop then decides) */
            if (special) {
                break;
            }
            memcpy(out + n, p, 8);
            n += 8;
            p += 8;
        }
        if (p >= end) {
            break;
        }
        unsigned char ch = *p++;
        if (ch == '"') {
            *len = n;
            fault = 0;
            break;
        }
        if (ch < 0x20) {
            goto done;
        }
        if (ch != '\\') {
            out[n++] = ch;
            continue;
        }
        if (p >= end) {
            goto done;
        }
        ch = *p++;
        switch (ch) {
        case '"': case '\\': case '/': out[n++] = ch; continue;
        case 'b': out[n++] = '\b'; continue;
        case 'f': out[n++] = '\f'; continue;
        case 'n': out[n++] = '\n'; continue;
        case 'r': out[n++] = '\r'; continue;
        case 't': out[n++] = '\t'; continue;
        case 'u': break;
        default: goto done;
        }
        unsigned cp, low;
        if (end - p < 4 || hex4(p, &cp)) {
            goto done;
        }
        p += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (end - p < 6 || p[0] != '\\' || p[1] != 'u' ||
                hex4(p + 2, &low) || low < 0xDC00 || low > 0xDFFF)
            {
                goto done;
            }
            p += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            goto done;
        }
        if (cp < 0x80) {
            out[n++] = (unsigned char)cp;
        }
        else if (cp < 0x800) {
            out[n++] = (unsigned char)(0xC0 | cp >> 6);
            out[n++] = (unsigned char)(0x80 | (cp & 0x3F));
        }
        else if (cp < 0x10000) {
            out[n++] = (unsigned char)(0xE0 | cp >> 12);
            out[n++] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
            out[n++] = (unsigned char)(0x80 | (cp & 0x3F));
        }
        else {
            out[n++] = (unsigned char)(0xF0 | cp >> 18);
            out[n++] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
            out[n++] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
            out[n++] = (unsigned char)(0x80 | (cp & 0x3F));
        }
    }
done:
    c->p = p;
    return fault;
}

/* The documents of JSON Lines (jsonl.c): out->data (room for every byte of
 * the lines given) gets each document's UTF-8 back to back, out->ends each
 * one's end; out->ends grows as needed (free() it). */
typedef struct {
    unsigned char *data;
    size_t len;
    int64_t *ends;
    size_t count, cap;
} JsonlDocs;

/* The field_len-byte field `field` of each JSON Lines record in s[start:n]
 * (lines cut at \n, the last one possibly unterminated), appended to out;
 * blank lines (ASCII whitespace alone) skipped; `bom`: a UTF-8 byte order
 * mark at s[start] is skipped. Returns where it stopped: n when every line
 * was taken, else the start of the first line it leaves to the caller (a bad
 * record, or one Python's json might read otherwise), *line_end that line's
 * end, *lines the lines before it (blank ones too); -1 if out of memory. */
BPE_INTERNAL ptrdiff_t bpe_jsonl_documents(const unsigned char *s, size_t n, size_t start,
                                          const unsigned char *field, size_t field_len, int bom,
                                          JsonlDocs *out, size_t *line_end, size_t *lines);

#endif
