/* UTF-8 validation: 16 bytes at a time with SSSE3 (the Keiser-Lemire method,
 * chosen at run time), else eight ASCII bytes at a time and one character at
 * a time; both give the same answer for every input (tests/test_native.py). */
#include <stdint.h>
#include <string.h>

#include "scanner.h"

/* Scalar: ASCII eight bytes at a time, else one character at a time. */
static int
utf8_valid_scalar(const unsigned char *s, size_t n)
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
        /* allowed range of the second byte */
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        }
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) {
                lo = 0xA0;
            }
            else if (c == 0xED) {
                hi = 0x9F;
            }
        }
        else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) {
                lo = 0x90;
            }
            else if (c == 0xF4) {
                hi = 0x8F;
            }
        }
        else {
            return 0;
        }
        if (i + need >= n) {
            return 0; /* truncated */
        }
        if (s[i + 1] < lo || s[i + 1] > hi) {
            return 0;
        }
        for (size_t k = 2; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return 0;
            }
        }
        i += need + 1;
    }
    return 1;
}

#if (defined(__x86_64__) || defined(__i386__)) && \
    (defined(__GNUC__) || defined(__clang__))
#define UTF8_SSSE3 1
#include <tmmintrin.h>

/* Keiser and Lemire's validation ("Validating UTF-8 in less than one
 * instruction per byte", 2021; simdutf's lookup algorithm), 16 bytes at a
 * time with SSSE3 (checked at run time; the build targets plain x86-64). The
 * scalar loop branches once or more per character, so on text in other
 * scripts than Latin it took an eighth of the counting time. Each byte is
 * classified by three table lookups (the high and low nibbles of the byte
 * before it, and its own high nibble), whose AND has a bit set for each rule
 * the pair breaks; the third and fourth bytes of a character are checked by
 * what starts two and three bytes before. Python's strict decoder rejects
 * exactly these: bad or missing continuations, overlong forms, surrogates,
 * code points above U+10FFFF. */
#define TOO_SHORT (1 << 0)
#define TOO_LONG (1 << 1)
#define OVERLONG_3 (1 << 2)
#define TOO_LARGE (1 << 3)
#define SURROGATE (1 << 4)
#define OVERLONG_2 (1 << 5)
#define TOO_LARGE_1000 (1 << 6)
#define OVERLONG_4 (1 << 6)
#define TWO_CONTS (1 << 7)
#define CARRY (TOO_SHORT | TOO_LONG | TWO_CONTS)

__attribute__((target("ssse3"))) static inline __m128i
utf8_block_errors(__m128i input, __m128i prev_input)
{
    const __m128i nibble = _mm_set1_epi8(0x0F);
    const __m128i byte_1_high_table = _mm_setr_epi8(
        TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG,
        TOO_LONG, TWO_CONTS, TWO_CONTS, TWO_CONTS, TWO_CONTS,
        TOO_SHORT | OVERLONG_2, TOO_SHORT, TOO_SHORT | OVERLONG_3 | SURROGATE,
        (char)(TOO_SHORT | TOO_LARGE | TOO_LARGE_1000 | OVERLONG_4));
    const __m128i byte_1_low_table = _mm_setr_epi8(
        (char)(CARRY | OVERLONG_3 | OVERLONG_2 | OVERLONG_4),
        (char)(CARRY | OVERLONG_2), (char)CARRY, (char)CARRY,
        (char)(CARRY | TOO_LARGE), (char)(CARRY | TOO_LARGE | TOO_LARGE_1000),
        (char)(CARRY | TOO_LARGE | TOO_LARGE_1000),
        (char)(CARRY | TOO_LARGE | TOO_LARGE_1000),
        (char)(CARRY | TOO_LARGE | TOO_LARGE_1000),
        (char)(CARRY | TOO_LARGE | TOO_LARGE_1000),
        (char)(CARRY | TOO_LARGE | TOO_LARGE_1000),
        (char)(CARRY | TOO_LARGE | TOO_LARGE_1000),
        (char)(CARRY | TOO_LARGE | TOO_LARGE_1000),
        (char)(CARRY | TOO_LARGE | TOO_LARGE_1000 | SURROGATE),
        (char)(CARRY | TOO_LARGE | TOO_LARGE_1000),
        (char)(CARRY | TOO_LARGE | TOO_LARGE_1000));
    const __m128i byte_2_high_table = _mm_setr_epi8(
        TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT,
        TOO_SHORT, TOO_SHORT,
        (char)(TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 |
               TOO_LARGE_1000 | OVERLONG_4),
        (char)(TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE),
        (char)(TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE),
        (char)(TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE),
        TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT);
    __m128i prev1 = _mm_alignr_epi8(input, prev_input, 15);
    __m128i byte_1_high = _mm_shuffle_epi8(
        byte_1_high_table, _mm_and_si128(_mm_srli_epi16(prev1, 4), nibble));
    __m128i byte_1_low =
        _mm_shuffle_epi8(byte_1_low_table, _mm_and_si128(prev1, nibble));
    __m128i byte_2_high = _mm_shuffle_epi8(
        byte_2_high_table, _mm_and_si128(_mm_srli_epi16(input, 4), nibble));
    __m128i special =
        _mm_and_si128(_mm_and_si128(byte_1_high, byte_1_low), byte_2_high);
    /* 0x80 where the byte must be a character's third or fourth: two or
     * three bytes after a lead byte of three or four (which TWO_CONTS then
     * cancels; anywhere else TWO_CONTS is an error) */
    __m128i prev2 = _mm_alignr_epi8(input, prev_input, 14);
    __m128i prev3 = _mm_alignr_epi8(input, prev_input, 13);
    __m128i third = _mm_subs_epu8(prev2, _mm_set1_epi8((char)(0xE0 - 0x80)));
    __m128i fourth = _mm_subs_epu8(prev3, _mm_set1_epi8((char)(0xF0 - 0x80)));
    __m128i must23 =
        _mm_and_si128(_mm_or_si128(third, fourth), _mm_set1_epi8((char)0x80));
    return _mm_xor_si128(must23, special);
}

__attribute__((target("ssse3"))) static int
utf8_valid_ssse3(const unsigned char *s, size_t n)
{
    /* the last bytes of a block that start a character it does not finish:
     * each at least the lead of one that needs more bytes than are left */
    const __m128i incomplete_below =
        _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                      (char)(0xF0 - 1), (char)(0xE0 - 1), (char)(0xC0 - 1));
    __m128i error = _mm_setzero_si128(), prev = _mm_setzero_si128(),
            prev_incomplete = _mm_setzero_si128();
    size_t i = 0;
    for (;; i += 16) {
        __m128i input;
        if (i + 16 <= n) {
            input = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        }
        else {
            /* the rest, then zeros (ASCII): a character cut by the end
             * fails as one cut by an ASCII byte; one more block of zeros
             * when the data end on a block's end */
            unsigned char last[16] = {0};
            if (i < n) {
                memcpy(last, s + i, n - i);
            }
            input = _mm_loadu_si128((const __m128i *)(const void *)last);
        }
        if (_mm_movemask_epi8(input) == 0) {
            /* ASCII: only a character left unfinished before it is wrong */
            error = _mm_or_si128(error, prev_incomplete);
            prev_incomplete = _mm_setzero_si128();
        }
        else {
            error = _mm_or_si128(error, utf8_block_errors(input, prev));
            prev_incomplete = _mm_subs_epu8(input, incomplete_below);
        }
        prev = input;
        if (i >= n) {
            break;
        }
        if ((i & 1023) == 0 &&
            _mm_movemask_epi8(_mm_cmpeq_epi8(error, _mm_setzero_si128())) !=
                0xFFFF)
        {
            return 0; /* (bad data fail early) */
        }
    }
    return _mm_movemask_epi8(_mm_cmpeq_epi8(error, _mm_setzero_si128())) ==
           0xFFFF;
}
#endif

BPE_INTERNAL int
bpe_utf8_valid(const unsigned char *s, size_t n)
{
#ifdef UTF8_SSSE3
    if (__builtin_cpu_supports("ssse3")) {
        return utf8_valid_ssse3(s, n);
    }
#endif
    return utf8_valid_scalar(s, n);
}
