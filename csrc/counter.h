/* BytesMap, the byte string -> (value, aux) table of the pre-token counter
 * (bytes_map.c), and the counting done on it (counter.c): PretokenCounter's
 * core (its Python type is py/counter_type.c). The encoder keeps a cache of
 * its own (encoder_internal.h).
 *
 * Laid out as CPython's dict: the entries in one dense array in insertion
 * order, found through an open-addressing index of positions (linear probing).
 * Insertion order matters: the counts reach the trainers in first-seen order,
 * as a Counter fed the text would give them, and the pure-Python trainers run
 * slower on the same counts in hash order (their per-word objects are then
 * laid out at random). A key of up to 8 bytes (most pre-tokens) is
 * kept in its entry, compared as one integer; longer keys live in an arena.
 *
 * Lookups are `static inline` here (once per pre-token); insertion and the
 * rest are in bytes_map.c. */
#ifndef BPE_COUNTER_H
#define BPE_COUNTER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bpe_util.h"
#include "packed.h"
#include "scanner.h"

#define INLINE_KEY 8
#define NO_ENTRY UINT32_MAX

typedef struct {
    uint64_t hash;
    /* a short key's bytes (see bpe_pack_key), else its offset in the arena */
    uint64_t off;
    /* keys are pre-tokens: bpe_bm_insert refuses one of 4 GB or more */
    uint32_t len;
    uint32_t aux;
    int64_t value;
} Entry; /* 32 bytes: two to a cache line */

typedef struct {
    /* mask + 1 slots: NO_ENTRY where free, else an entry's position in its
     * low bits (bpe_bm_id_mask) and the top of its hash above them, so a
     * probe reads an entry (a cache miss, on a large map) only when those
     * match */
    uint32_t *index;
    size_t mask;     /* index capacity - 1 (a power of two) */
    Entry *entries;  /* used of them, in insertion order */
    size_t used, entries_cap;
    unsigned char *arena;
    size_t arena_len, arena_cap;
} BytesMap;

/* Up to 8 bytes as one integer, byte k in bits 8k..8k+7 (so equal keys of one
 * length pack equal). */
static inline uint64_t
bpe_pack_key(const unsigned char *key, size_t len)
{
    uint64_t v = 0;
    for (size_t k = 0; k < len; k++) {
        v |= (uint64_t)key[k] << (8 * k);
    }
    return v;
}

/* An entry's key: in the arena, or unpacked into buf (INLINE_KEY bytes). */
static inline const unsigned char *
bpe_entry_key(const BytesMap *m, const Entry *e, unsigned char *buf)
{
    if (e->len > INLINE_KEY) {
        return m->arena + e->off;
    }
    for (size_t k = 0; k < e->len; k++) {
        buf[k] = (unsigned char)(e->off >> (8 * k));
    }
    return buf;
}

/* The bits of an index slot that hold an entry's position: as many as the
 * index's positions need (the map keeps at most half as many entries, so a
 * position never has all of them set, and a slot is never NO_ENTRY by
 * accident). The bits above hold a tag of the entry's hash. */
static inline uint32_t
bpe_bm_id_mask(const BytesMap *m)
{
    return m->mask >= UINT32_MAX ? UINT32_MAX : (uint32_t)m->mask;
}

/* Hash h's tag in an index slot: its top bits (the position uses the low
 * ones). */
static inline uint32_t
bpe_bm_tag(uint64_t h, uint32_t id_mask)
{
    return (uint32_t)(h >> 32) & ~id_mask;
}

/* Whether the len bytes at a and b are equal, for len > INLINE_KEY: up to 16
 * bytes (most of the longer words, as 2- to 5-character words of a script of
 * 3-byte characters) in two overlapping 8-byte loads, not a call. */
static inline int
bpe_long_key_equal(const unsigned char *a, const unsigned char *b, size_t len)
{
    if (len > 16) {
        return memcmp(a, b, len) == 0;
    }
    uint64_t x, y, u, v;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    memcpy(&u, a + len - 8, 8);
    memcpy(&v, b + len - 8, 8);
    return ((x ^ y) | (u ^ v)) == 0;
}

/* The entry holding key, whose bpe_hash_bytes is h (NULL if absent); valid
 * until the next insertion. */
static inline Entry *
bpe_bm_get(const BytesMap *m, const unsigned char *key, size_t len, uint64_t h)
{
    size_t at = h & m->mask;
    int inline_key = len <= INLINE_KEY;
    uint64_t packed = inline_key ? bpe_pack_key(key, len) : 0;
    uint32_t id_mask = bpe_bm_id_mask(m), tag = bpe_bm_tag(h, id_mask);
    for (;;) {
        uint32_t k = m->index[at];
        if (k == NO_ENTRY) {
            return NULL;
        }
        if ((k & ~id_mask) != tag) {
            at = (at + 1) & m->mask;
            continue;
        }
        Entry *e = &m->entries[k & id_mask];
        if (e->hash == h && e->len == len &&
            (inline_key ? e->off == packed
                        : bpe_long_key_equal(m->arena + e->off, key, len)))
        {
            return e;
        }
        at = (at + 1) & m->mask;
    }
}

/* An empty map with an index of `capacity` positions (a power of two): 0, or
 * -1 when out of memory. */
BPE_INTERNAL int bpe_bm_init(BytesMap *m, size_t capacity);
BPE_INTERNAL void bpe_bm_free(BytesMap *m);
/* Remove every entry, keeping the memory. */
BPE_INTERNAL void bpe_bm_clear(BytesMap *m);
/* Append a key known to be absent, with value and aux; NULL when out of
 * memory. */
BPE_INTERNAL Entry *bpe_bm_insert(BytesMap *m, const unsigned char *key,
                                  size_t len, uint64_t h, int64_t value,
                                  uint32_t aux);

/* (table_alloc, table_free and table_reserve, the memory of its arrays, are
 * in bpe_util.h: the encoder's cache uses them too) */

/* ---- counting (counter.c) ------------------------------------------------
 *
 * None of these touches anything but the maps and inputs given: the module
 * runs them without the GIL, the maps held by its counters for the call. */

/* Count the pre-tokens of `pattern` (PAT_*) in the text: 0, -1 at a lone
 * surrogate (its position in t->bad; the pre-tokens before it are counted),
 * -2 when out of memory. */
BPE_INTERNAL int bpe_count_text(BytesMap *m, Text *t, int pattern);

/* Count the pre-tokens of `pattern` in UTF-8 s[0:n], split on the special
 * tokens (which are not counted): 1, or 0 (nothing counted) if s is not valid
 * UTF-8; -2 when out of memory. */
BPE_INTERNAL int bpe_count_utf8(BytesMap *m, const Specials *sp,
                                const unsigned char *s, size_t n, int pattern);

/* Add count to the count of key (hash h; creating it): 0, or -1 when out of
 * memory. A sum past 2**63 - 1 saturates there. */
BPE_INTERNAL int bpe_add_count(BytesMap *m, const unsigned char *key,
                               size_t len, uint64_t h, int64_t count);

/* Add the packed words' counts (each must be positive: see
 * bpe_packed_first_bad_count) in their order: 0, or -1 when out of memory. */
BPE_INTERNAL int bpe_add_packed(BytesMap *m, const PackedView *p);

/* More threads than this are refused (a caller's typo, not a machine). */
#define BPE_MAX_THREADS 1024

/* Add from's counts to into's on `threads` threads (1 .. BPE_MAX_THREADS), as
 * adding from's entries one by one would (see counter.c): 0, or -1 when out
 * of memory (into may then hold some of from's counts). */
BPE_INTERNAL int bpe_bm_merge(BytesMap *into, const BytesMap *from,
                              size_t threads);

/* Packing a map's entries of at least min_count as packed word counts, on
 * threads: bpe_pack_plan sizes the output (its bytes in *size), the caller
 * provides a buffer of that size, bpe_pack_write fills it, bpe_pack_free
 * ends. The map must not change in between. */
typedef struct PackShare PackShare;
typedef struct {
    PackShare *shares;
    size_t n_shares;
    uint64_t n;       /* entries kept */
    size_t key_bytes; /* their keys' bytes */
} PackPlan;

/* 0, or -1 when out of memory; bpe_pack_free(plan) must follow either way. */
BPE_INTERNAL int bpe_pack_plan(PackPlan *plan, const BytesMap *m,
                               int64_t min_count, size_t threads,
                               uint64_t *size);
BPE_INTERNAL void bpe_pack_write(PackPlan *plan, unsigned char *buf);
BPE_INTERNAL void bpe_pack_free(PackPlan *plan);

#endif /* BPE_COUNTER_H */
