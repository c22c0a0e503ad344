/* The preset split patterns over 64 bytes of ASCII text at a time.
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
 * On ASCII, \p{L} is [A-Za-z] (o200k's upper-case set [A-Z], its lower-case
 * set [a-z]), \p{N} [0-9], \s [\t\n\v\f\r ], checked against the class table
 * by bpe_blocks_match_classes; "other" below is any other byte, "newline" \r
 * or \n, "space" U+0020. A block's first byte starts a pre-token (the caller
 * knows), and no pattern looks behind, so the starts after it are those of a
 * text that begins there. Each pattern's function states its rules. */
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

/* True if the class table's ASCII entries are those the block masks assume
 * (o200k's letter sets included). */
static inline int
bpe_blocks_match_classes(const unsigned char *char_class)
{
    for (unsigned b = 0; b < 128; b++) {
        int expected = (b - 'A' < 26u)                ? CLS_LETTER | CLS_UP
                       : (b - 'a' < 26u)              ? CLS_LETTER | CLS_LOW
                       : (b - '0' < 10u)              ? CLS_NUMBER
                       : (b == ' ' || b - '\t' < 5u)  ? CLS_SPACE
                                                      : CLS_OTHER;
        if (char_class[b] != expected) {
            return 0;
        }
    }
    return 1;
}

#if BPE_HAVE_BLOCKS
/* One bit per byte of a block s[0:64] (bit p: s[p]) for each ASCII class the
 * patterns tell apart. */
typedef struct {
    uint64_t letter, upper, digit, white, space, newline, apostrophe, slash;
    uint64_t white_after; /* 1 if s[64] is whitespace */
} BlockMasks;

/* 0xFF for the bytes of v in [lo, lo + count) (v ASCII), else 0. */
BPE_ALWAYS_INLINE __m128i
bpe_block_in_range(__m128i v, char lo, char count)
{
    return _mm_cmplt_epi8(_mm_add_epi8(v, _mm_set1_epi8((char)(0x80 - lo))),
                          _mm_set1_epi8((char)(-128 + count)));
}

/* 0xFF for the bytes of v equal to c, else 0. */
BPE_ALWAYS_INLINE __m128i
bpe_block_equal(__m128i v, char c)
{
    return _mm_cmpeq_epi8(v, _mm_set1_epi8(c));
}

/* One bit a byte of a vector's bytes of 0xFF or 0, at bit `shift` on. */
BPE_ALWAYS_INLINE uint64_t
bpe_block_bits(__m128i is, unsigned shift)
{
    return (uint64_t)(unsigned)_mm_movemask_epi8(is) << shift;
}

/* The class masks of s[0:64] that `pattern` reads (GPT-2's: no newline, slash
 * or upper case) into *m, where s[0:BLOCK_READ] is text (none of it past the
 * end): 1, or 0 if a byte of s[0:BLOCK_READ] is not ASCII, with the offset of
 * the first such byte in *high_at. */
BPE_ALWAYS_INLINE int
bpe_block_masks(const unsigned char *s, int pattern, BlockMasks *m,
                size_t *high_at)
{
    uint64_t high = 0, letter = 0, upper = 0, digit = 0, white = 0, space = 0,
             newline = 0, apostrophe = 0, slash = 0;
    for (int k = 0; k < BLOCK_BYTES / 16; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + 16 * k));
        unsigned shift = 16u * (unsigned)k;
        __m128i sp = bpe_block_equal(v, ' ');
        high |= bpe_block_bits(v, shift);
        letter |= bpe_block_bits(
            bpe_block_in_range(_mm_or_si128(v, _mm_set1_epi8(0x20)), 'a', 26),
            shift);
        digit |= bpe_block_bits(bpe_block_in_range(v, '0', 10), shift);
        white |= bpe_block_bits(
            _mm_or_si128(sp, bpe_block_in_range(v, '\t', 5)), shift);
        space |= bpe_block_bits(sp, shift);
        apostrophe |= bpe_block_bits(bpe_block_equal(v, '\''), shift);
        if (pattern != PAT_GPT2) {
            newline |= bpe_block_bits(_mm_or_si128(bpe_block_equal(v, '\n'),
                                                   bpe_block_equal(v, '\r')),
                                      shift);
        }
        if (pattern == PAT_O200K) {
            upper |= bpe_block_bits(bpe_block_in_range(v, 'A', 26), shift);
            slash |= bpe_block_bits(bpe_block_equal(v, '/'), shift);
        }
    }
    unsigned tail = (unsigned)_mm_movemask_epi8(
        _mm_loadu_si128((const __m128i *)(const void *)(s + BLOCK_BYTES)));
    if (high | tail) {
        *high_at = high ? (size_t)__builtin_ctzll(high)
                        : BLOCK_BYTES + (size_t)__builtin_ctz(tail);
        return 0;
    }
    unsigned char after = s[BLOCK_BYTES];
    *m = (BlockMasks){
        .letter = letter, .upper = upper, .digit = digit, .white = white,
        .space = space, .newline = newline, .apostrophe = apostrophe,
        .slash = slash,
        .white_after = after == ' ' || (unsigned)(after - '\t') < 5u};
    return 1;
}

/* The first bit of each run of set bits. */
BPE_ALWAYS_INLINE uint64_t
bpe_run_starts(uint64_t x)
{
    return x & ~(x << 1);
}

/* The bits of `within` at or after a bit of `seeds` (seeds within `within`)
 * in the same run: adding a seed carries through the rest of its run, which
 * turns to zeros (a later seed in the run becomes a one again). */
BPE_ALWAYS_INLINE uint64_t
bpe_fill_up(uint64_t seeds, uint64_t within)
{
    return (within & ~(within + seeds)) | seeds;
}

/* The bits of `within` at or before a bit of `seeds` (seeds within `within`)
 * in the same run: steps of 1, 2, 4, ... bits, each over `within` shrunk to
 * the bits that many ahead of which are all in it. */
BPE_ALWAYS_INLINE uint64_t
bpe_fill_down(uint64_t seeds, uint64_t within)
{
    for (unsigned k = 1; k < 64 && within; k *= 2) {
        seeds |= (seeds >> k) & within;
        within &= within >> k;
    }
    return seeds;
}

/* \p{N}{1,3}: the first digit of each run and every third one after. */
BPE_ALWAYS_INLINE uint64_t
bpe_digit_chunk_starts(uint64_t digit)
{
    /* bit p: s[p-3:p+1] are digits */
    uint64_t four = digit & (digit << 1) & (digit << 2) & (digit << 3);
    uint64_t starts = bpe_run_starts(digit);
    for (uint64_t chunk = starts; (chunk = (chunk << 3) & four) != 0;) {
        starts |= chunk;
    }
    return starts;
}

/* The length of the contraction (?i:'s|'t|'re|'ve|'m|'ll|'d) at s (an
 * apostrophe; s[1] and s[2] readable), else 0. `| 0x20` lower-cases a letter
 * and maps no other byte to one. */
BPE_ALWAYS_INLINE unsigned
bpe_block_contraction(const unsigned char *s)
{
    unsigned d = s[1] | 0x20u, e = s[2] | 0x20u;
    if (d == 's' || d == 'd' || d == 'm' || d == 't') {
        return 2;
    }
    return (d == 'l' && e == 'l') || (d == 'v' && e == 'e') ||
                   (d == 'r' && e == 'e')
               ? 3
               : 0;
}

/* The starts in whitespace of cl100k and o200k, whose whitespace
 * alternatives (\s*[\r\n]+ or \s*[\r\n], \s+(?!\S), \s) split a run the same
 * way inside a text. In each run of `white` (the whitespace an other run's
 * newline suffix has not taken, so the end of each run of `all_white`): its
 * first byte; the byte after its last newline (\s*[\r\n] backs off to that
 * newline); its last byte, if not a newline (\s+(?!\S) leaves it to lead what
 * follows, or be \s alone). If `open_top`, a run that reaches past the block
 * keeps its first start only: its last newline may be further on. */
BPE_ALWAYS_INLINE uint64_t
bpe_white_starts(uint64_t white, uint64_t all_white, uint64_t newline,
                 uint64_t white_after, int open_top)
{
    uint64_t first = bpe_run_starts(white);
    uint64_t run_end = ~((all_white >> 1) | white_after << 63);
    uint64_t after_newline = white & ~newline & (newline << 1);
    if (after_newline) {
        after_newline &= ~bpe_fill_down(white & newline, white);
    }
    uint64_t starts = first | after_newline | (white & ~newline & run_end);
    if (open_top && white_after && (all_white >> 63)) {
        uint64_t gap = ~all_white; /* bit 63 clear */
        uint64_t top = gap ? ~(uint64_t)0 << (64 - __builtin_clzll(gap))
                           : ~(uint64_t)0;
        starts = (starts & ~top) | (first & top);
    }
    return starts;
}

/* GPT-2's pattern, '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++|
 * ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s, starts a pre-token at p when
 *   - p is a letter, digit or other after a byte of another class, unless
 *     that byte is a space, which then leads p's run;
 *   - p is whitespace after a non-whitespace byte (a run starts), or p is
 *     the last of a whitespace run followed by a non-whitespace byte (the
 *     run minus its last byte is \s+(?!\S); the last is \s or leads the next
 *     run). The end of the text is out of reach (\s++$ never applies: past
 *     a text's end come the spaces of its padded copy);
 *   - and a contraction ('s 'd 'm 't 'll 've 're, lower case) starting at a
 *     start p is one pre-token: no start inside it, a start right after.
 * The starts in s[0:64] as bits (bit 0 always set), where s[0] starts a
 * pre-token and s[0:BLOCK_READ] is text; 0 if a byte of s[0:BLOCK_READ] is
 * not ASCII (see bpe_block_masks). */
BPE_ALWAYS_INLINE uint64_t
bpe_gpt2_block_starts(const unsigned char *s, size_t *high_at)
{
    BlockMasks m;
    if (!bpe_block_masks(s, PAT_GPT2, &m, high_at)) {
        return 0;
    }
    uint64_t other = ~(m.letter | m.digit | m.white);
    uint64_t run_start = bpe_run_starts(m.letter) | bpe_run_starts(m.digit) |
                         bpe_run_starts(other);
    uint64_t last_white = m.white & ~((m.white >> 1) | m.white_after << 63);
    uint64_t starts = (run_start & ~(m.space << 1)) |
                      bpe_run_starts(m.white) | last_white;
    /* contractions: an apostrophe that starts a pre-token (one after a
     * space leads an "other" run instead) */
    for (uint64_t left = m.apostrophe & starts; left; left &= left - 1) {
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

/* cl100k's pattern, '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|
 * \p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s,
 * starts a pre-token at p when
 *   - p is the first of a run of others, unless the byte before is a space,
 *     which then leads the run (` ?`). The run is one pre-token with the
 *     newlines right after it ([\r\n]*+), or, if it is one byte before a
 *     letter, the prefix of the letters (next rule: that alternative comes
 *     first; a prefix before no letter fails it whole, possessive);
 *   - p is the first of a run of letters, unless the byte before is a prefix
 *     that starts a pre-token: an other that does (above), or whitespace but
 *     a newline (always the last of its run, which starts one, below);
 *   - p is the first digit of a run or 3, 6, ... digits into it ({1,3}+);
 *   - p is whitespace the newlines after an other run have not taken, and
 *     starts as bpe_white_starts says. A run that reaches past the block
 *     keeps its first start only, which also makes a text's last run
 *     (\s++$, tried first) one pre-token: in the padded last block it runs
 *     on into the padding;
 *   - and an apostrophe that starts a pre-token followed by s, d, m, t, ll,
 *     ve or re in either case is a contraction: the pre-token ends after it
 *     (its letters start nothing already: the apostrophe was their prefix).
 * Returns as bpe_gpt2_block_starts. */
BPE_ALWAYS_INLINE uint64_t
bpe_cl100k_block_starts(const unsigned char *s, size_t *high_at)
{
    BlockMasks m;
    if (!bpe_block_masks(s, PAT_CL100K, &m, high_at)) {
        return 0;
    }
    uint64_t other = ~(m.letter | m.digit | m.white);
    uint64_t taken = bpe_fill_up(m.newline & (other << 1), m.newline);
    uint64_t other_start = bpe_run_starts(other) & ~(m.space << 1);
    uint64_t prefix = other_start | (m.white & ~m.newline);
    uint64_t starts =
        other_start | (bpe_run_starts(m.letter) & ~(prefix << 1)) |
        bpe_digit_chunk_starts(m.digit) |
        bpe_white_starts(m.white & ~taken, m.white, m.newline, m.white_after,
                         1);
    for (uint64_t left = m.apostrophe & other_start; left; left &= left - 1) {
        unsigned p = (unsigned)__builtin_ctzll(left);
        unsigned len = bpe_block_contraction(s + p);
        if (len && p + len < BLOCK_BYTES) {
            starts |= (uint64_t)1 << (p + len);
        }
    }
    return starts | 1;
}

/* o200k's pattern, [^\r\n\p{L}\p{N}]?UP*LOW+C?|[^\r\n\p{L}\p{N}]?UP+LOW*C?|
 * \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+, with UP
 * [A-Z], LOW [a-z] and C the contraction (?i:'s|'t|'re|'ve|'m|'ll|'d) on
 * ASCII (no possessive quantifier, but on ASCII backtracking finds nothing
 * the greedy match missed): a letter pre-token is its prefix (as cl100k's),
 * upper case letters, then lower case ones, then C if one follows. It starts
 * a pre-token where cl100k's does, except that
 *   - inside a run of letters, p also starts one if upper case after lower
 *     case (lower case ends LOW+; anything else stays in the pre-token);
 *   - a contraction is no pre-token: an apostrophe right after the letters
 *     of a letter pre-token (not after a contraction's letters: C? is taken
 *     once) followed by s, t, re, ve, m, ll or d in either case ends that
 *     pre-token after the contraction, and starts nothing inside it;
 *   - an other run takes \r, \n and / after it ([\r\n/]*: as long as they
 *     come, once the first newline is taken). A / taken starts nothing and
 *     is no prefix; the byte after it starts a pre-token;
 *   - whitespace: the text's last run is split as any other (\s*[\r\n]+
 *     backs off to its last newline; \s+(?!\S) then takes the rest, the end
 *     included), so only a run that reaches past the block in the text keeps
 *     its first start only; if `padded_end` (the text ends inside the block,
 *     padded with spaces), the top run holds no newline of the text but
 *     those of the block, and keeps all its starts.
 * Returns as bpe_gpt2_block_starts. */
BPE_ALWAYS_INLINE uint64_t
bpe_o200k_block_starts(const unsigned char *s, int padded_end, size_t *high_at)
{
    BlockMasks m;
    if (!bpe_block_masks(s, PAT_O200K, &m, high_at)) {
        return 0;
    }
    uint64_t other = ~(m.letter | m.digit | m.white);
    uint64_t taken =
        bpe_fill_up(m.newline & (other << 1), m.newline | m.slash);
    uint64_t own_other = other & ~taken;
    uint64_t other_start = bpe_run_starts(own_other) & ~(m.space << 1);
    uint64_t prefix = other_start | (m.white & ~m.newline);
    uint64_t lower = m.letter & ~m.upper;
    uint64_t starts =
        other_start | (bpe_run_starts(m.letter) & ~(prefix << 1)) |
        (m.upper & (lower << 1)) | bpe_digit_chunk_starts(m.digit) |
        bpe_white_starts(m.white & ~taken, m.white, m.newline, m.white_after,
                         !padded_end);
    unsigned after_contraction = BLOCK_BYTES; /* none yet */
    for (uint64_t left = m.apostrophe & (m.letter << 1); left;
         left &= left - 1)
    {
        unsigned p = (unsigned)__builtin_ctzll(left);
        unsigned len = p == after_contraction ? 0 : bpe_block_contraction(s + p);
        if (len) {
            starts &= ~((((uint64_t)1 << len) - 1) << p);
            if (p + len < BLOCK_BYTES) {
                starts |= (uint64_t)1 << (p + len);
            }
            after_contraction = p + len;
        }
    }
    return starts | 1;
}

/* The starts of `pattern`'s pre-tokens in the block s (see its function);
 * `padded_end`: the text ends inside the block (a padded copy). */
BPE_ALWAYS_INLINE uint64_t
bpe_block_starts(const unsigned char *s, int pattern, int padded_end,
                 size_t *high_at)
{
    switch (pattern) {
    case PAT_CL100K:
        return bpe_cl100k_block_starts(s, high_at);
    case PAT_O200K:
        return bpe_o200k_block_starts(s, padded_end, high_at);
    default:
        return bpe_gpt2_block_starts(s, high_at);
    }
}
#endif

/* The pre-tokens of one ordinary text in order, from blocks where they can
 * be (ASCII) and from the scanner elsewhere. Each call of bpe_spans_next
 * must pass the end the last one returned (or the text's first position, to
 * a new Spans). */
typedef struct {
    size_t base;     /* the block's first byte */
    uint64_t starts; /* the block's starts not yet returned */
    size_t retry_at; /* no block is tried before this position */
    int blocks;      /* blocks on (classes as assumed) */
} Spans;

/* A new Spans for text scanned with `pattern`. */
static inline void
bpe_spans_init(Spans *sp, int pattern)
{
    sp->base = 0;
    sp->starts = 0;
    sp->retry_at = 0;
    sp->blocks = bpe_ascii_blocks && BPE_HAVE_BLOCKS;
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
            starts = bpe_block_starts(s + i, pattern, 0, &high_at);
        }
        else {
            /* The text's last bytes, copied and padded with spaces: after
             * the end, spaces split as the end does (any run but whitespace
             * ends there; a whitespace run runs on into the padding, past
             * the block, and splits as each pattern's function says), so
             * the starts before the end are the text's. The end itself is a
             * start. (Otherwise the scanner would take the last 80 bytes of
             * every text and of every piece before a special token one
             * pre-token at a time.) */
            unsigned char padded[BLOCK_READ];
            memcpy(padded, s + i, left);
            memset(padded + left, ' ', BLOCK_READ - left);
            starts = bpe_block_starts(padded, pattern, left < BLOCK_BYTES,
                                      &high_at);
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
