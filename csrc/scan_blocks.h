/* GPT-2's split over 64 bytes of ASCII text at a time.
 *
 * The scanners (scan_kind.h) find one pre-token per call, branching on each
 * character's class; on English text that is two thirds of an encode with a
 * warm cache. Here the pre-tokens that start in a block of 64 bytes come out
 * of a few vector compares and bit operations on class masks at once (one
 * bit per byte), for the common case: a block of ASCII text (the text's last
 * bytes from a copy padded with spaces, see bpe_spans_next). Anything else (a
 * byte >= 0x80 within reach) is left to the scanner, which stays the
 * reference: tests compare both with `regex`.
 *
 * GPT-2's pattern, '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++|
 * ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s, on ASCII, where \p{L} is [A-Za-z],
 * \p{N} [0-9] and \s [\t\n\v\f\r ] (checked against the class table by
 * bpe_blocks_match_classes), starts a pre-token at p (past the block's first
 * byte, which is a start by construction) when
 *   - p is a letter, digit or other (neither) after a byte of another class,
 *     unless that byte is a space (U+0020), which then leads p's run;
 *   - p is whitespace after a non-whitespace byte (a run starts), or p is
 *     the last of a whitespace run followed by a non-whitespace byte (the
 *     run minus its last byte is \s+(?!\S); the last is \s or leads the next
 *     run). The end of the text is out of reach (\s++$ never applies: past
 *     a text's end come the spaces of its padded copy);
 *   - and a contraction ('s 'd 'm 't 'll 've 're, lower case) starting at a
 *     start p is one pre-token: no start inside it, a start right after. */
#ifndef BPE_SCAN_BLOCKS_H
#define BPE_SCAN_BLOCKS_H

#include <stdint.h>

#include "bpe_util.h"
#include "scanner.h"

#ifdef __SSE2__
#include <emmintrin.h>
#define BPE_HAVE_BLOCKS 1
#else
#define BPE_HAVE_BLOCKS 0
#endif

#define BLOCK_BYTES 64
/* The bytes a block reads: 64, the byte after (whitespace lookahead), the two
 * after an apostrophe at the last byte, rounded up to a whole vector. */
#define BLOCK_READ 80

/* Whether the class table's ASCII entries are those the block masks assume:
 * set with the table (set_char_classes), which never changes after. The
 * table comes from the regex module; if a version ever disagreed, the blocks
 * would be turned off, not wrong. */
extern BPE_INTERNAL int bpe_ascii_blocks;

/* True if the class table's ASCII entries are those the block masks assume. */
static inline int
bpe_blocks_match_classes(const unsigned char *char_class)
{
    for (unsigned b = 0; b < 128; b++) {
        int expected = ((b | 0x20) - 'a' < 26u)                ? CLS_LETTER
                       : (b - '0' < 10u)                        ? CLS_NUMBER
                       : (b == ' ' || b - '\t' < 5u)            ? CLS_SPACE
                                                                : CLS_OTHER;
        if ((char_class[b] & CLS_BASE) != expected) {
            return 0;
        }
    }
    return 1;
}

#if BPE_HAVE_BLOCKS
/* The pre-token starts in s[0:64] as bits (bit p: one starts at p; bit 0 is
 * always set), where s[0] starts a pre-token and s[0:BLOCK_READ] is ASCII
 * text, none of it past the end. If a byte of s[0:BLOCK_READ] is not ASCII:
 * 0, and the offset of the first such byte into *high_at. */
BPE_ALWAYS_INLINE uint64_t
bpe_gpt2_block_starts(const unsigned char *s, size_t *high_at)
{
    const __m128i fold = _mm_set1_epi8(0x20);
    const __m128i to_letter = _mm_set1_epi8((char)(0x80 - 'a'));
    const __m128i letters = _mm_set1_epi8((char)(-128 + 26));
    const __m128i to_digit = _mm_set1_epi8((char)(0x80 - '0'));
    const __m128i digits = _mm_set1_epi8((char)(-128 + 10));
    const __m128i to_control = _mm_set1_epi8((char)(0x80 - '\t'));
    const __m128i controls = _mm_set1_epi8((char)(-128 + 5));
    const __m128i space = _mm_set1_epi8(' ');
    const __m128i apostrophe = _mm_set1_epi8('\'');
    uint64_t letter = 0, digit = 0, white = 0, sp = 0, ap = 0, high = 0;
    for (int k = 0; k < BLOCK_BYTES / 16; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + 16 * k));
        __m128i is_sp = _mm_cmpeq_epi8(v, space);
        __m128i is_white = _mm_or_si128(
            is_sp, _mm_cmplt_epi8(_mm_add_epi8(v, to_control), controls));
        unsigned shift = 16u * (unsigned)k;
        high |= (uint64_t)(unsigned)_mm_movemask_epi8(v) << shift;
        letter |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmplt_epi8(
                      _mm_add_epi8(_mm_or_si128(v, fold), to_letter), letters))
                  << shift;
        digit |= (uint64_t)(unsigned)_mm_movemask_epi8(
                     _mm_cmplt_epi8(_mm_add_epi8(v, to_digit), digits))
                 << shift;
        white |= (uint64_t)(unsigned)_mm_movemask_epi8(is_white) << shift;
        sp |= (uint64_t)(unsigned)_mm_movemask_epi8(is_sp) << shift;
        ap |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, apostrophe))
              << shift;
    }
    unsigned tail = (unsigned)_mm_movemask_epi8(
        _mm_loadu_si128((const __m128i *)(const void *)(s + BLOCK_BYTES)));
    if (high | tail) {
        *high_at = high ? (size_t)__builtin_ctzll(high)
                        : BLOCK_BYTES + (size_t)__builtin_ctz(tail);
        return 0;
    }
    unsigned char after = s[BLOCK_BYTES];
    uint64_t white_after = after == ' ' || (unsigned)(after - '\t') < 5u;
    uint64_t other = ~(letter | digit | white);
    uint64_t run_start = (letter & ~(letter << 1)) | (digit & ~(digit << 1)) |
                         (other & ~(other << 1));
    uint64_t last_white = white & ~((white >> 1) | white_after << 63);
    uint64_t starts = (run_start & ~(sp << 1)) |
                      (white & ~(white << 1)) | last_white;
    /* contractions: an apostrophe that starts a pre-token (one after a
     * space leads an "other" run instead) */
    for (uint64_t left = ap & starts; left; left &= left - 1) {
        unsigned p = (unsigned)__builtin_ctzll(left);
        unsigned char d = s[p + 1], e = s[p + 2];
        unsigned len = (d == 's' || d == 'd' || d == 'm' || d == 't') ? 2
                       : ((d == 'l' && e == 'l') || (d == 'v' && e == 'e') ||
                          (d == 'r' && e == 'e'))
                           ? 3
                           : 0;
        if (len) {
            starts &= ~((uint64_t)2 << p); /* (p + 1, a letter, starts no run) */
            if (p + len < BLOCK_BYTES) {
                starts |= (uint64_t)1 << (p + len);
            }
        }
    }
    return starts | 1;
}
#endif

/* The pre-tokens of one ordinary text in order, from blocks where they can
 * be (GPT-2's pattern, ASCII) and from the scanner elsewhere. Each call of
 * bpe_spans_next must pass the end the last one returned (or the text's
 * first position, to a new Spans). */
typedef struct {
    size_t base;     /* the block's first byte */
    uint64_t starts; /* the block's starts not yet returned */
    size_t retry_at; /* no block is tried before this position */
    int blocks;      /* blocks on (GPT-2's pattern, classes as assumed) */
} Spans;

/* A new Spans for text scanned with `pattern`. */
static inline void
bpe_spans_init(Spans *sp, int pattern)
{
    sp->base = 0;
    sp->starts = 0;
    sp->retry_at = 0;
    sp->blocks = pattern == PAT_GPT2 && bpe_ascii_blocks && BPE_HAVE_BLOCKS;
}

/* The end of the pre-token starting at i (i < to) of the ordinary text
 * s[..to] scanned with `pattern`. */
BPE_ALWAYS_INLINE size_t
bpe_spans_next(Spans *sp, const unsigned char *s, size_t i, size_t to,
               int pattern)
{
#if BPE_HAVE_BLOCKS
    if (sp->starts) {
        size_t j = sp->base + (size_t)__builtin_ctzll(sp->starts);
        sp->starts &= sp->starts - 1;
        return j;
    }
    if (sp->blocks && i >= sp->retry_at) {
        size_t left = to - i, high_at = 0;
        uint64_t starts;
        if (left >= BLOCK_READ) {
            starts = bpe_gpt2_block_starts(s + i, &high_at);
        }
        else {
            /* The text's last bytes, copied and padded with spaces: after
             * the end, spaces split as the end does (a whitespace run then
             * reaches the end whole, as \s++$ takes it, and any other run
             * ends there), so the starts before the end are the text's. The
             * end itself is a start. (Otherwise the scanner would take the
             * last 80 bytes of every text and of every piece before a special
             * token one pre-token at a time.) */
            unsigned char padded[BLOCK_READ];
            memcpy(padded, s + i, left);
            memset(padded + left, ' ', BLOCK_READ - left);
            starts = bpe_gpt2_block_starts(padded, &high_at);
            if (starts && left < BLOCK_BYTES) {
                starts = (starts & (((uint64_t)1 << left) - 1)) |
                         (uint64_t)1 << left;
            }
        }
        starts &= ~(uint64_t)1;
        if (starts) {
            sp->base = i;
            sp->starts = starts & (starts - 1);
            return i + (size_t)__builtin_ctzll(starts);
        }
        /* not ASCII: the scanner until past that byte; else one pre-token
         * fills the block */
        sp->retry_at = i + (high_at ? high_at + 1 : 1);
    }
#endif
    return bpe_next_end_utf8(s, i, to, pattern);
}

#endif /* BPE_SCAN_BLOCKS_H */
