/* Template: the scanners over one kind of text. scanner.h includes this file
 * once per code unit width of a str (PEP 393's kinds: 1, 2 or 4 bytes), with
 * CHAR_T the unit type and SUFFIX the functions' name suffix (as CPython's
 * Objects/stringlib does), so each width gets its own loops:
 *
 *     #define CHAR_T uint8_t
 *     #define SUFFIX _1
 *     #include "scan_kind.h"
 *
 * defines bpe_gpt2_end_1(), bpe_cl100k_end_1(), bpe_o200k_end_1() and
 * bpe_utf8_1(). Defining SCAN_UTF8 as well (with CHAR_T unsigned char) makes
 * the same scanners read valid UTF-8 bytes instead, positions being byte
 * offsets (size_t), and leaves out bpe_utf8_*. CHAR_T, SUFFIX and SCAN_UTF8
 * are undefined at the end. No include guard: it is meant to be included
 * several times.
 *
 * Each scanner returns the end of the pre-token that starts at i (i < n),
 * trying the pattern's alternatives in the pattern's order; the comments give
 * the regex's reasoning (backtracking included). Positions only ever land on
 * character boundaries: a scanner reads whole characters, and compares single
 * units (bytes, in UTF-8) only with ASCII characters, which in valid UTF-8
 * are never part of a longer character. */
#if !defined(CHAR_T) || !defined(SUFFIX)
#error "define CHAR_T and SUFFIX before including scan_kind.h"
#endif

#define SCAN_PASTE(name, suffix) name##suffix
#define SCAN_NAME(name, suffix) SCAN_PASTE(name, suffix)

#ifdef SCAN_UTF8
#define POS_T size_t
/* The code point at position j, its length in units into len. */
#define SCAN_READ(s, j, len) bpe_utf8_at((s), (j), &(len))
#else
#define POS_T ptrdiff_t
#define SCAN_READ(s, j, len) ((len) = 1, (uint32_t)(s)[j])
#endif
/* In a run of letters (cls), move j past its ASCII letters in bulk when the
 * units are bytes (UTF-8, or a Latin-1 str, whose units >= 0x80 are
 * characters of their own): the scalar loop after it then goes on from the
 * first unit that is not an ASCII letter. Other kinds: nothing (the test is
 * constant, so the code goes). */
#define SCAN_LETTER_RUN(cls, j)                                              \
    do {                                                                     \
        if (sizeof(CHAR_T) == 1 && (cls) == CLS_LETTER) {                    \
            (j) = (POS_T)bpe_ascii_letters_end(                              \
                (const unsigned char *)(const void *)s, (size_t)(j),         \
                (size_t)n);                                                  \
        }                                                                    \
    } while (0)
/* The class table entry of the character at j (its length into len). */
#define SCAN_CLASS(j, len) (char_class[SCAN_READ(s, (j), len)])
#define SCAN_BASE(j, len) (SCAN_CLASS(j, len) & CLS_BASE)

/* GPT-2: '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|
 * \s+(?!\S)|\s */
BPE_ALWAYS_INLINE POS_T
SCAN_NAME(bpe_gpt2_end, SUFFIX)(const CHAR_T *s, POS_T i, POS_T n)
{
    uint32_t c = s[i]; /* (in UTF-8, the first byte: compared to ASCII only) */
    /* '(?:[sdmt]|ll|ve|re): lower case only, tried before everything else. */
    if (c == '\'' && i + 1 < n) {
        uint32_t d = s[i + 1];
        if (d == 's' || d == 'd' || d == 'm' || d == 't') {
            return i + 2;
        }
        if (i + 2 < n) {
            uint32_t e = s[i + 2];
            if ((d == 'l' && e == 'l') || (d == 'v' && e == 'e') ||
                (d == 'r' && e == 'e'))
            {
                return i + 3;
            }
        }
    }
    /* ` ?X++` for X = letters, numbers, other: one leading U+0020 joins a
     * run of one class. A space before whitespace (or at the end) joins
     * nothing: it is whitespace below. */
    const unsigned char *char_class = bpe_char_class;
    POS_T len;
    int cls = SCAN_BASE(i, len);
    POS_T j = i + len;
    if (c == ' ' && j < n) {
        int next = SCAN_BASE(j, len);
        if (next != CLS_SPACE) {
            cls = next;
            j += len;
        }
    }
    if (cls != CLS_SPACE) {
        SCAN_LETTER_RUN(cls, j);
        while (j < n && SCAN_BASE(j, len) == cls) {
            j += len;
        }
        return j;
    }
    /* \s++$: the whole run at the end of the text; \s+(?!\S): before a
     * non-space, the run minus its last character (which then leads the next
     * token), if that leaves one. Else \s. `last` is where the run's last
     * character starts. */
    POS_T last = i;
    while (j < n && SCAN_BASE(j, len) == CLS_SPACE) {
        last = j;
        j += len;
    }
    if (j == n || last == i) {
        return j;
    }
    return last;
}

/* The lower-cased letter of a contraction at j, its length into *len, else 0:
 * (?i:...) matches a letter of [sdmtlvre] in either case, and s also as
 * U+017F LATIN SMALL LETTER LONG S, whose simple case folding is s (the
 * `regex` module's (?i) folds simply; tests/test_native_patterns.py checks
 * every code point against it). */
BPE_ALWAYS_INLINE uint32_t
SCAN_NAME(bpe_contraction_letter, SUFFIX)(const CHAR_T *s, POS_T j, POS_T *len)
{
    uint32_t d = SCAN_READ(s, j, *len);
    if (d >= 'A' && d <= 'Z') {
        d += 'a' - 'A';
    }
    return d == 0x17F ? 's' : d;
}

/* The end of a contraction '(?i:[sdmt]|ll|ve|re) at i (s[i] is an apostrophe
 * and i + 1 < n), else 0; [sdmt] before the two-letter ones. cl100k's first
 * alternative, and o200k's C?. */
BPE_ALWAYS_INLINE POS_T
SCAN_NAME(bpe_contraction_end, SUFFIX)(const CHAR_T *s, POS_T i, POS_T n)
{
    POS_T len;
    uint32_t d = SCAN_NAME(bpe_contraction_letter, SUFFIX)(s, i + 1, &len);
    POS_T k = i + 1 + len;
    if (d == 's' || d == 'd' || d == 'm' || d == 't') {
        return k;
    }
    if (k < n && (d == 'l' || d == 'v' || d == 'r')) {
        uint32_t e = s[k];
        e = (e >= 'A' && e <= 'Z') ? e + ('a' - 'A') : e;
        if (e == (d == 'l' ? 'l' : 'e')) {
            return k + 1;
        }
    }
    return 0;
}

/* The end of cl100k's whitespace alternatives for the run that starts at i
 * with character c, whose first character ends at j. */
BPE_ALWAYS_INLINE POS_T
SCAN_NAME(bpe_cl100k_space_end, SUFFIX)(const CHAR_T *s, POS_T i, POS_T j,
                                        POS_T n, uint32_t c)
{
    const unsigned char *char_class = bpe_char_class;
    POS_T len;
    /* `last`: where the run's last character starts; `newline`: the end of
     * its last \r or \n (i if none). */
    POS_T last = i, newline = (c == '\r' || c == '\n') ? j : i;
    while (j < n && SCAN_BASE(j, len) == CLS_SPACE) {
        last = j;
        j += len;
        if (s[last] == '\r' || s[last] == '\n') {
            newline = j;
        }
    }
    /* \s++$: the whole run, when it ends the text (`$` also matches before a
     * final \n, but the possessive run has taken that \n) */
    if (j == n) {
        return j;
    }
    /* \s*[\r\n]: the run backs off to its last \r or \n */
    if (newline != i) {
        return newline;
    }
    /* \s+(?!\S): the run minus its last character, if that leaves one; else
     * \s */
    return last != i ? last : j;
}

/* cl100k: '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|
 * ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s */
BPE_ALWAYS_INLINE POS_T
SCAN_NAME(bpe_cl100k_end, SUFFIX)(const CHAR_T *s, POS_T i, POS_T n)
{
    uint32_t c = s[i];
    POS_T len;
    if (c == '\'' && i + 1 < n) {
        POS_T end = SCAN_NAME(bpe_contraction_end, SUFFIX)(s, i, n);
        if (end) {
            return end;
        }
    }
    const unsigned char *char_class = bpe_char_class;
    int cls = SCAN_BASE(i, len);
    POS_T j = i + len;
    /* \p{L}++ (the optional prefix is no letter, so a letter starts the run
     * itself) */
    if (cls == CLS_LETTER) {
        SCAN_LETTER_RUN(cls, j);
        while (j < n && SCAN_BASE(j, len) == CLS_LETTER) {
            j += len;
        }
        return j;
    }
    /* \p{N}{1,3}+ */
    if (cls == CLS_NUMBER) {
        for (int k = 1; k < 3 && j < n && SCAN_BASE(j, len) == CLS_NUMBER;
             k++)
        {
            j += len;
        }
        return j;
    }
    /* [^\r\n\p{L}\p{N}]?+\p{L}++: any other character but \r and \n (so
     * whitespace too) leads a run of letters. */
    if (c != '\r' && c != '\n' && j < n && SCAN_BASE(j, len) == CLS_LETTER) {
        j += len;
        while (j < n && SCAN_BASE(j, len) == CLS_LETTER) {
            j += len;
        }
        return j;
    }
    /* ` ?[^\s\p{L}\p{N}]++[\r\n]*+`: a run of other characters, after one
     * U+0020 or none, then any \r and \n. */
    if (cls == CLS_OTHER ||
        (c == ' ' && j < n && SCAN_BASE(j, len) == CLS_OTHER))
    {
        if (cls != CLS_OTHER) {
            j += len;
        }
        while (j < n && SCAN_BASE(j, len) == CLS_OTHER) {
            j += len;
        }
        while (j < n && (s[j] == '\r' || s[j] == '\n')) {
            j++;
        }
        return j;
    }
    return SCAN_NAME(bpe_cl100k_space_end, SUFFIX)(s, i, j, n, c);
}

/* o200k's [\r\n/]* and [\r\n]+ and the like compare single units: \r, \n and
 * / are ASCII. */

/* o200k's two letter alternatives, from p (after the optional prefix
 * character, if there is one):
 *   1: [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+C?
 *   2: [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*C?
 * with C the contraction (?i:'s|'t|'re|'ve|'m|'ll|'d). In the class table,
 * CLS_UP marks the first set and CLS_LOW the second (Lm, Lo and marks are in
 * both). Returns the end, or 0 when neither matches at p (the caller then
 * tries what comes next; `mark` says the prefix character is a mark, which
 * alternative 1 may also take without the prefix). */
BPE_ALWAYS_INLINE POS_T
SCAN_NAME(bpe_o200k_letters, SUFFIX)(const CHAR_T *s, POS_T p, POS_T n,
                                     int mark)
{
    const unsigned char *char_class = bpe_char_class;
    POS_T k = p, len = 0, after_low = 0, m;
    int f = 0;
    /* The greedy UP* run: [p, k). after_low: the end of its last LOW
     * character (0 if none). */
    while (k < n) {
        f = SCAN_CLASS(k, len);
        if (!(f & CLS_UP)) {
            break;
        }
        k += len;
        if (f & CLS_LOW) {
            after_low = k;
        }
    }
    if (k < n && (f & CLS_LOW)) {
        /* 1: UP* the whole run, LOW+ from the Ll at k on */
        m = k + len;
        while (m < n && (SCAN_CLASS(m, len) & CLS_LOW)) {
            m += len;
        }
    }
    else if (after_low) {
        /* 1: UP* backs off to the run's last LOW character, which is LOW+
         * alone (what follows it in the run is Lu or Lt) */
        m = after_low;
    }
    else if (mark) {
        /* 1 without the prefix: the mark is UP* empty and LOW+ itself (the
         * run after it holds nothing LOW) */
        m = p;
    }
    else if (k > p) {
        /* 2: UP+ the whole run, then LOW* empty (s[k] is not LOW) */
        m = k;
    }
    else {
        return 0;
    }
    /* C? */
    if (m + 1 < n && s[m] == '\'') {
        POS_T end = SCAN_NAME(bpe_contraction_end, SUFFIX)(s, m, n);
        if (end) {
            return end;
        }
    }
    return m;
}

/* o200k: [^\r\n\p{L}\p{N}]?UP*LOW+C?|[^\r\n\p{L}\p{N}]?UP+LOW*C?|\p{N}{1,3}|
 * ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+ (see bpe_o200k_letters;
 * no possessive quantifiers: the regex backtracks) */
BPE_ALWAYS_INLINE POS_T
SCAN_NAME(bpe_o200k_end, SUFFIX)(const CHAR_T *s, POS_T i, POS_T n)
{
    const unsigned char *char_class = bpe_char_class;
    uint32_t c = s[i];
    POS_T len;
    int f = SCAN_CLASS(i, len), cls = f & CLS_BASE;
    POS_T j = i + len, end;
    /* a letter: alternative 1 or 2 without a prefix (one of them matches) */
    if (cls == CLS_LETTER) {
        return SCAN_NAME(bpe_o200k_letters, SUFFIX)(s, i, n, 0);
    }
    /* \p{N}{1,3} */
    if (cls == CLS_NUMBER) {
        for (int k = 1; k < 3 && j < n && SCAN_BASE(j, len) == CLS_NUMBER;
             k++)
        {
            j += len;
        }
        return j;
    }
    /* Anything else but \r and \n may be the prefix of 1 or 2 (a mark
     * always matches 1, with the prefix or as its own LOW+). */
    if (c != '\r' && c != '\n') {
        end = SCAN_NAME(bpe_o200k_letters, SUFFIX)(s, j, n,
                                                   f & CLS_UP ? 1 : 0);
        if (end) {
            return end;
        }
    }
    /* ` ?[^\s\p{L}\p{N}]+[\r\n/]*` */
    if (cls == CLS_OTHER ||
        (c == ' ' && j < n && SCAN_BASE(j, len) == CLS_OTHER))
    {
        if (cls != CLS_OTHER) {
            j += len;
        }
        while (j < n && SCAN_BASE(j, len) == CLS_OTHER) {
            j += len;
        }
        while (j < n && (s[j] == '\r' || s[j] == '\n' || s[j] == '/')) {
            j++;
        }
        return j;
    }
    /* Whitespace: \s*[\r\n]+ backs the run off to its last \r or \n;
     * \s+(?!\S) takes the run at the end of the text, else the run minus its
     * last character if that leaves one; else \s+ (one character). */
    POS_T last = i, newline = (c == '\r' || c == '\n') ? j : i;
    while (j < n && SCAN_BASE(j, len) == CLS_SPACE) {
        last = j;
        j += len;
        if (s[last] == '\r' || s[last] == '\n') {
            newline = j;
        }
    }
    if (newline != i) {
        return newline;
    }
    if (j == n) {
        return j;
    }
    return last != i ? last : j;
}

#ifndef SCAN_UTF8
/* UTF-8 bytes of s[i:j] into out (room for 4 bytes a character); -1 at a lone
 * surrogate, whose position goes to *bad. */
static inline ptrdiff_t
SCAN_NAME(bpe_utf8, SUFFIX)(const CHAR_T *s, ptrdiff_t i, ptrdiff_t j,
                            unsigned char *out, ptrdiff_t *bad)
{
    unsigned char *p = out;
    for (; i < j; i++) {
        uint32_t c = s[i];
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
#endif

#undef SCAN_LETTER_RUN
#undef SCAN_BASE
#undef SCAN_CLASS
#undef SCAN_READ
#undef POS_T
#undef SCAN_NAME
#undef SCAN_PASTE
#undef CHAR_T
#undef SUFFIX
#undef SCAN_UTF8
