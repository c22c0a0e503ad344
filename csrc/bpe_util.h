/* Utilities shared by both extensions (bpe_impls._native and
 * bpe_impls._native_train): a byte string hash, growable arrays, and the
 * visibility of symbols shared between .c files.
 *
 * Everything here is `static inline`: each .c file gets its own copy and the
 * compiler inlines the fast paths (the hash and the "already big enough" test
 * run once per pre-token or per merge). */
#ifndef BPE_UTIL_H
#define BPE_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Functions and variables shared between the .c files of one extension: kept
 * out of the .so's exported symbols, so calls between the files are direct,
 * not through the PLT. */
#if defined(__GNUC__) || defined(__clang__)
#define BPE_INTERNAL __attribute__((visibility("hidden")))
#else
#define BPE_INTERNAL
#endif

/* A function inlined even where the compiler's size heuristics would not: the
 * scanners and the loops that call them once per pre-token (each loop is
 * inlined once per pattern, so each copy calls its own scanner, inlined). */
#if defined(__GNUC__) || defined(__clang__)
#define BPE_ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define BPE_ALWAYS_INLINE static inline
#endif

/* A hot loop compiled twice, for AVX2 and for the baseline x86-64, the copy to
 * run chosen once when the library loads (target_clones, through glibc's
 * ifunc): the baseline has no SIMD minimum of unsigned 32-bit integers
 * (SSE4.1's pminud), which BPE's scan takes on every merge. Elsewhere (other
 * CPUs, other C libraries, compilers without target_clones in C: GCC before
 * 6, clang before 14) one copy, as written. */
#if defined(__clang__)
#define BPE_HAS_TARGET_CLONES (__clang_major__ >= 14)
#elif defined(__GNUC__)
#define BPE_HAS_TARGET_CLONES (__GNUC__ >= 6)
#else
#define BPE_HAS_TARGET_CLONES 0
#endif
#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && \
    BPE_HAS_TARGET_CLONES
#define BPE_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define BPE_AVX2_CLONES
#endif

/* A 64-bit hash of p[0:n], eight bytes at a time. */
static inline uint64_t
bpe_hash_bytes(const unsigned char *p, size_t n)
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
    /* the tail, built in a register: a memcpy of n < 8 bytes would stall the
     * load */
    uint64_t v = 0;
    for (size_t k = 0; k < n; k++) {
        v |= (uint64_t)p[k] << (8 * k);
    }
    h = (h ^ v) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    return h;
}

/* The slow path of bpe_reserve: grow to the first of first_cap, 2 * first_cap,
 * ... that holds need elements, or to `most` elements if that is fewer (and
 * holds need). */
static inline int
bpe_grow(void *items_ptr, size_t *cap, size_t need, size_t size,
         size_t first_cap, size_t most)
{
    size_t new_cap = *cap ? *cap : first_cap;
    while (new_cap < need && new_cap < most) {
        new_cap *= 2;
    }
    new_cap = new_cap < most ? new_cap : most;
    new_cap = new_cap > need ? new_cap : need;
    if (new_cap > SIZE_MAX / size) {
        return -1;
    }
    /* *items_ptr is read and written as bytes: it may be any T * (a void **
     * would break strict aliasing). */
    void *items;
    memcpy(&items, items_ptr, sizeof(items));
    void *grown = realloc(items, new_cap * size);
    if (grown == NULL) {
        return -1;
    }
    memcpy(items_ptr, &grown, sizeof(grown));
    *cap = new_cap;
    return 0;
}

/* Make the array at *items_ptr (a T **, *cap elements of `size` bytes) hold at
 * least `need` elements: 0, or -1 when out of memory (then the array is
 * unchanged and still the caller's). A first allocation has first_cap elements
 * (or more, if need is larger). */
static inline int
bpe_reserve(void *items_ptr, size_t *cap, size_t need, size_t size,
            size_t first_cap)
{
    if (need <= *cap) {
        return 0;
    }
    return bpe_grow(items_ptr, cap, need, size, first_cap, SIZE_MAX);
}

/* bpe_reserve for an array kept within a bound: it never grows past `most`
 * elements (callers keep need <= most). */
static inline int
bpe_reserve_within(void *items_ptr, size_t *cap, size_t need, size_t size,
                   size_t first_cap, size_t most)
{
    if (need <= *cap) {
        return 0;
    }
    return bpe_grow(items_ptr, cap, need, size, first_cap, most);
}

/* The memory of a large table (bytes_map.c): from 2 MB on, pages of its own
 * (on Linux), 2 MB-aligned, asked to be huge pages (a table read at random
 * then misses the TLB far less); returned to the system when freed. Smaller,
 * malloc's. table_alloc_zeroed: the same, zeroed. table_reserve grows *items
 * (a T **, *cap elements of `size` bytes, `used` in use) to hold `need`,
 * doubling from first_cap: 0, or -1 when out of memory (unchanged). */
BPE_INTERNAL void *table_alloc(size_t bytes);
BPE_INTERNAL void *table_alloc_zeroed(size_t bytes);
BPE_INTERNAL void table_free(void *p, size_t bytes);
BPE_INTERNAL int table_reserve(void *items_ptr, size_t *cap, size_t used,
                               size_t need, size_t size, size_t first_cap);

#endif /* BPE_UTIL_H */
