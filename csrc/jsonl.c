/* The documents of JSON Lines: one string field of each record, decoded to
 * UTF-8, with no Python object per record (bpe_jsonl_documents, json_scan.h).
 *
 * The pure-Python twin is corpus/units.py's _document (json.loads and the
 * checks after it); tests/test_jsonl_native.py proves that every record read
 * here gives the document _document gives. As vocab_files.c does, this path
 * takes only the records it is sure Python reads the same way: strict JSON
 * whose text field is a string with no lone surrogate. Anything else (a bad
 * record, but also NaN or Infinity, which Python's json accepts, a lone
 * surrogate in any string, a number long enough that Python's int might
 * refuse it, deep nesting) is left to the caller, which reads that one line
 * in Python and names the fault. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_util.h"
#include "json_scan.h"
#include "scanner.h" /* bpe_utf8_valid */

/* Deeper values are left to Python (which may refuse them with a
 * RecursionError, not as JSON). */
#define MAX_DEPTH 64
/* Longer numbers are left to Python: its int() refuses more than 4300
 * digits. */
#define MAX_NUMBER 256

static int value_ok(Cursor *c, unsigned char *scratch, int depth);

/* Past a JSON number at c: 0, or 1 if it is not one by the JSON grammar, or
 * too long. */
static int
number_ok(Cursor *c)
{
    const unsigned char *p = c->p, *end = c->end, *start = c->p;
    p += p < end && *p == '-';
    if (p >= end) {
        return 1;
    }
    if (*p == '0') {
        p++;
    }
    else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
    }
    else {
        return 1;
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') {
            return 1;
        }
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        p += p < end && (*p == '+' || *p == '-');
        if (p >= end || *p < '0' || *p > '9') {
            return 1;
        }
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
    }
    if (p - start > MAX_NUMBER) {
        return 1;
    }
    c->p = p;
    return 0;
}

static int
literal_ok(Cursor *c, const char *word, size_t len)
{
    if ((size_t)(c->end - c->p) < len || memcmp(c->p, word, len) != 0) {
        return 1;
    }
    c->p += len;
    return 0;
}

/* A key at c (after whitespace) and its ':': 0 with its text in key[0:*len]
 * (as written, or decoded to scratch where it holds an escape), or 1 if
 * there is none or Python might read it otherwise. */
static int
key_ok(Cursor *c, unsigned char *scratch, const unsigned char **key, size_t *len)
{
    if (expect(c, '"')) {
        return 1;
    }
    const unsigned char *start = c->p;
    while (c->p < c->end && *c->p != '"' && *c->p != '\\' && *c->p >= 0x20) {
        c->p++;
    }
    if (c->p < c->end && *c->p == '"') {
        *key = start;
        *len = (size_t)(c->p - start);
        c->p++;
    }
    else {
        c->p = start - 1; /* (at its quote) */
        if (json_string(c, scratch, len)) {
            return 1;
        }
        *key = scratch;
    }
    return expect(c, ':');
}

/* The members of an object (c past its '{'), each value checked; where
 * `field` is not NULL, the string value of the last member named field is
 * decoded to found[0:*found_len] (*found_len stays SIZE_MAX if there is none
 * or it is not a string). Strings of other members are decoded to scratch,
 * which holds as many bytes as the rest of the line. 0, or 1 if Python
 * might read it otherwise. */
static int
object_ok(Cursor *c, unsigned char *scratch, int depth, const unsigned char *field,
          size_t field_len, unsigned char *found, size_t *found_len)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    for (;;) {
        const unsigned char *key;
        size_t key_len;
        if (key_ok(c, scratch, &key, &key_len)) {
            return 1;
        }
        skip_ws(c);
        if (field != NULL && key_len == field_len && memcmp(key, field, field_len) == 0) {
            size_t len;
            if (c->p < c->end && *c->p == '"') {
                if (json_string(c, found, &len)) {
                    return 1;
                }
                *found_len = len;
                /* (later strings are decoded after it: a value read twice,
                 * the last one wins, as in Python's dict) */
                scratch = found + len;
            }
            else {
                if (value_ok(c, scratch, depth + 1)) {
                    return 1;
                }
                *found_len = SIZE_MAX;
            }
        }
        else if (value_ok(c, scratch, depth + 1)) {
            return 1;
        }
        skip_ws(c);
        if (c->p >= c->end) {
            return 1;
        }
        unsigned char ch = *c->p++;
        if (ch == '}') {
            return 0;
        }
        if (ch != ',') {
            return 1;
        }
    }
}

/* Past one JSON value at c (after whitespace): 0, or 1 if it is not strict
 * JSON or Python might read it otherwise. */
static int
value_ok(Cursor *c, unsigned char *scratch, int depth)
{
    skip_ws(c);
    if (c->p >= c->end || depth > MAX_DEPTH) {
        return 1;
    }
    size_t len;
    switch (*c->p) {
    case '"':
        return json_string(c, scratch, &len);
    case '{':
        c->p++;
        return object_ok(c, scratch, depth, NULL, 0, NULL, NULL);
    case '[':
        c->p++;
        skip_ws(c);
        if (c->p < c->end && *c->p == ']') {
            c->p++;
            return 0;
        }
        for (;;) {
            if (value_ok(c, scratch, depth + 1)) {
                return 1;
            }
            skip_ws(c);
            if (c->p >= c->end) {
                return 1;
            }
            unsigned char ch = *c->p++;
            if (ch == ']') {
                return 0;
            }
            if (ch != ',') {
                return 1;
            }
        }
    case 't':
        return literal_ok(c, "true", 4);
    case 'f':
        return literal_ok(c, "false", 5);
    case 'n':
        return literal_ok(c, "null", 4);
    default:
        return number_ok(c); /* (NaN, Infinity, -Infinity: 1, for Python) */
    }
}

/* Whether s[0:n] is blank as Python's bytes.strip() sees it. */
static int
blank(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = s[i];
        if (!(ch == ' ' || (ch >= '\t' && ch <= '\r'))) {
            return 0;
        }
    }
    return 1;
}

/* The document of one record s[0:n] (no \n in it), decoded to out: 0 with
 * its length in *len, or 1 if the line is left to Python. */
static int
record_document(const unsigned char *s, size_t n, const unsigned char *field, size_t field_len,
                unsigned char *out, size_t *len)
{
    Cursor c = {s, s + n};
    size_t found = SIZE_MAX;
    if (expect(&c, '{') ||
        object_ok(&c, out, 1, field, field_len, out, &found) || found == SIZE_MAX)
    {
        return 1;
    }
    skip_ws(&c);
    if (c.p != c.end) {
        return 1; /* (extra data after the object) */
    }
    *len = found;
    return 0;
}

BPE_INTERNAL ptrdiff_t
bpe_jsonl_documents(const unsigned char *s, size_t n, size_t start, const unsigned char *field,
                    size_t field_len, int bom, JsonlDocs *out, size_t *line_end, size_t *lines)
{
    *lines = 0;
    /* One check of the whole range; a range with a fault is checked line by
     * line, so the lines before the faulty one are still read here. */
    int valid = bpe_utf8_valid(s + start, n - start);
    size_t at = start;
    while (at < n) {
        const unsigned char *nl = memchr(s + at, '\n', n - at);
        size_t end = nl != NULL ? (size_t)(nl - s) : n;
        size_t from = at;
        if (bom && at == start && end - at >= 3 && memcmp(s + at, "\xEF\xBB\xBF", 3) == 0) {
            from += 3;
        }
        if (!blank(s + from, end - from)) {
            size_t len;
            if ((!valid && !bpe_utf8_valid(s + from, end - from)) ||
                record_document(s + from, end - from, field, field_len, out->data + out->len,
                                &len))
            {
                *line_end = end;
                return (ptrdiff_t)at;
            }
            if (bpe_reserve(&out->ends, &out->cap, out->count + 1, sizeof(int64_t), 256) < 0) {
                return -1;
            }
            out->len += len;
            out->ends[out->count++] = (int64_t)out->len;
        }
        at = end + 1;
        ++*lines;
    }
    *line_end = n;
    return (ptrdiff_t)n;
}
