/* Template: the scanner over one str kind. scanner.h includes this file once
 * per PEP 393 kind, with CHAR_T the kind's code unit type and SUFFIX the
 * functions' name suffix (as CPython's Objects/stringlib does), so each kind
 * gets its own loop over its own unit width:
 *
 *     #define CHAR_T Py_UCS1
 *     #define SUFFIX _1
 *     #include "scan_kind.h"
 *
 * defines bpe_next_end_1() and bpe_utf8_1(). CHAR_T and SUFFIX are undefined
 * at the end. No include guard: it is meant to be included several times. */
#if !defined(CHAR_T) || !defined(SUFFIX)
#error "define CHAR_T and SUFFIX before including scan_kind.h"
#endif

#define SCAN_PASTE(name, suffix) name##suffix
#define SCAN_NAME(name, suffix) SCAN_PASTE(name, suffix)

/* The end of the GPT-2 pre-token that starts at i (i < n). The alternatives
 * are tried in the pattern's order; the comments give the regex's reasoning.
 */
static inline Py_ssize_t
SCAN_NAME(bpe_next_end, SUFFIX)(const CHAR_T *s, Py_ssize_t i, Py_ssize_t n)
{
    Py_UCS4 c = s[i];
    /* '(?:[sdmt]|ll|ve|re): lower case only, tried before everything else. */
    if (c == '\'' && i + 1 < n) {
        Py_UCS4 d = s[i + 1];
        if (d == 's' || d == 'd' || d == 'm' || d == 't') {
            return i + 2;
        }
        if (i + 2 < n) {
            Py_UCS4 e = s[i + 2];
            if ((d == 'l' && e == 'l') || (d == 'v' && e == 'e') ||
                (d == 'r' && e == 'e'))
            {
                return i + 3;
            }
        }
    }
    /* ` ?X+` for X = letters, numbers, other: one leading U+0020 joins a run
     * of one class. A space before whitespace (or at the end) joins nothing:
     * it is whitespace below. */
    const unsigned char *char_class = bpe_char_class;
    Py_ssize_t j = i;
    int cls = char_class[c];
    if (c == ' ' && i + 1 < n && char_class[s[i + 1]] != CLS_SPACE) {
        j = i + 1;
        cls = char_class[s[j]];
    }
    if (cls != CLS_SPACE) {
        j++;
        while (j < n && char_class[s[j]] == cls) {
            j++;
        }
        return j;
    }
    /* \s+(?!\S): the whole run at the end of the text; before a non-space, the
     * run minus its last character (which then leads the next token), if that
     * leaves one. Else \s+. */
    j = i + 1;
    while (j < n && char_class[s[j]] == CLS_SPACE) {
        j++;
    }
    if (j == n || j - i == 1) {
        return j;
    }
    return j - 1;
}

/* UTF-8 bytes of s[i:j] into out (room for 4 bytes a character); -1 at a lone
 * surrogate, whose position goes to *bad. */
static inline Py_ssize_t
SCAN_NAME(bpe_utf8, SUFFIX)(const CHAR_T *s, Py_ssize_t i, Py_ssize_t j,
                            unsigned char *out, Py_ssize_t *bad)
{
    unsigned char *p = out;
    for (; i < j; i++) {
        Py_UCS4 c = s[i];
        if (c < 0x80) {
            *p++ = (unsigned char)c;
        }
        else if (c < 0x800) {
            *p++ = (unsigned char)(0xC0 | (c >> 6));
            *p++ = (unsigned char)(0x80 | (c & 0x3F));
        }
        else if (c < 0x10000) {
            if (c >= 0xD800 && c <= 0xDFFF) {
                *bad = i;
                return -1;
            }
            *p++ = (unsigned char)(0xE0 | (c >> 12));
            *p++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            *p++ = (unsigned char)(0x80 | (c & 0x3F));
        }
        else {
            *p++ = (unsigned char)(0xF0 | (c >> 18));
            *p++ = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
            *p++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            *p++ = (unsigned char)(0x80 | (c & 0x3F));
        }
    }
    return p - out;
}

#undef SCAN_NAME
#undef SCAN_PASTE
#undef CHAR_T
#undef SUFFIX
