/* The encoder's core: what its components share (encoder_tables.c,
 * encoder_cache.c, encoder_bpe.c, encoder_loop.c, batch_runs.c) and what its
 * Python type (py/encoder_type.c, py/encoder_many.c) calls. The small
 * functions every pre-token calls are static inline here, so each component
 * inlines them. Plain C: the tables, caches and outputs are the caller's
 * memory, and nothing here takes a lock (the Python type gives each call a
 * cache of its own and keeps the tables alive while a call runs). */
#ifndef BPE_ENCODER_INTERNAL_H
#define BPE_ENCODER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bpe_util.h"
#include "scan_blocks.h"
#include "scanner.h"

#define NO_RANK UINT32_MAX
/* Pre-tokens up to this many bytes use the O(n^2) scan, longer ones the
 * O(n log n) heap. */
#define SCAN_LIMIT 64
/* Longer pre-tokens are not cached: rare, and they would pin large keys. */
#define MAX_CACHED_BYTES 1024

/* The merges: (left, right) -> (rank, merged id), open addressing, one slot
 * per probe (key, rank and merged id on one cache line). */
typedef struct {
    uint64_t key; /* left << 32 | right; EMPTY_PAIR marks a free slot */
    uint32_t rank;
    uint32_t merged;
} PairSlot;

typedef struct {
    PairSlot *slots;
    size_t mask;
} PairMap;

#define EMPTY_PAIR UINT64_MAX

static inline uint64_t
pair_key(uint32_t a, uint32_t b)
{
    return (uint64_t)a << 32 | b;
}

static inline size_t
pair_slot(uint64_t key, size_t mask)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 29) & mask;
}

/* The rank of pair (a, b) and the id it merges into; NO_RANK when there is no
 * such merge. */
static inline uint32_t
pair_rank(const PairMap *pm, uint32_t a, uint32_t b, uint32_t *merged)
{
    uint64_t key = pair_key(a, b);
    size_t at = pair_slot(key, pm->mask);
    for (;;) {
        const PairSlot *slot = &pm->slots[at];
        if (slot->key == key) {
            if (merged) {
                *merged = slot->merged;
            }
            return slot->rank;
        }
        if (slot->key == EMPTY_PAIR) {
            return NO_RANK;
        }
        at = (at + 1) & pm->mask;
    }
}

/* The merges again, 8 bytes a slot, where every id is below MERGED_NONE and
 * the merged ids increase with rank (GPT-2's files, tiktoken's rank files and
 * every vocab trained here): a pair's merged id then orders pairs as its rank
 * does, so BPE needs no rank, and the table is half the pair map's size
 * (GPT-2's 1 MB against 2, o200k_base's 4 MB against 8, where the CPU's L2
 * holds 4): fewer misses on a pre-token not seen before. A slot is
 * left << 42 | right << 21 | merged; all ones marks a free one. */
#define MERGED_BITS 21
#define MERGED_NONE ((1u << MERGED_BITS) - 1)
#define EMPTY_MERGED UINT64_MAX

typedef struct {
    uint64_t *slots; /* NULL: the ids do not allow it; BPE uses the PairMap */
    size_t mask;
} MergedMap;

/* The id pair (a, b) merges into; NO_RANK when there is no such merge. */
static inline uint32_t
pair_merged(const MergedMap *mm, uint32_t a, uint32_t b)
{
    uint64_t key = (uint64_t)a << MERGED_BITS | b;
    size_t at = pair_slot(key, mm->mask);
    for (;;) {
        uint64_t slot = mm->slots[at];
        if (slot >> MERGED_BITS == key) {
            return (uint32_t)slot & MERGED_NONE;
        }
        if (slot == EMPTY_MERGED) {
            return NO_RANK;
        }
        at = (at + 1) & mm->mask;
    }
}

/* ---- the pre-token cache ------------------------------------------------
 *
 * pre-token bytes -> ids, open addressing with linear probing. A key of up to
 * 16 bytes (nearly every pre-token) lives in its slot as two integers, zero
 * padded, so a hit compares three integers and copies ids out of the same
 * slot (up to CACHE_INLINE_IDS of them): no allocation, no indirection. Longer
 * keys and longer id lists live in arenas. Full (cache_size entries): the
 * entries hit since it last filled up are kept and the rest dropped (one pass,
 * no LRU bookkeeping on a hit; on text with more distinct pre-tokens than
 * cache_size, as CJK text has, clearing it all would also drop the frequent
 * ones, and the cache would stop helping). */
#define CACHE_INLINE_IDS 3
#define HOT 0x8000u /* in CacheSlot.n: hit since the cache last filled up */
/* Keys up to this long live in their slot, the length in the top byte. */
#define INLINE_KEY_BYTES 15
/* The top byte of k1 of a longer key (no short key's length). */
#define LONG_KEY_TAG ((uint64_t)0xFF << 56)
/* The id arena keeps this many ids of room past its last entry, so a hit
 * copies its ids in whole 16-byte chunks (copy_ids), reading past the end of
 * the last entry. */
#define ID_ARENA_SLACK 3
/* A cache of cache_size entries holds at most cache_size times this many
 * bytes of long keys and ids in its arenas, however long its pre-tokens
 * (real text needs far less: udhr.txt about 3 bytes of keys and 5 ids an
 * entry, a CJK-heavy mix 10 and 9), and at most 85 bytes of slots an entry
 * (32-byte slots, a power of two of them, loaded up to 3/4): under 150 bytes
 * an entry in all, 160 MiB at the default cache_size of 1.5 M (a table of
 * 2**21 slots, 64 MiB, full). An entry that would fill half an arena is not
 * cached. */
#define KEY_BYTES_PER_ENTRY 16
#define IDS_PER_ENTRY 12

/* In a cache of more than PREFETCH_MIN_SLOTS slots (more than the CPU's L2
 * cache holds, typically), pre-tokens are scanned in batches of SPAN_BATCH:
 * the scan computes each one's hash and prefetches its slot, so that by the
 * time the batch is looked up the slots are on their way (a lookup is
 * otherwise a stall on the slot's line). A smaller cache is looked up as each
 * pre-token is scanned: the batches would only add work. */
#define PREFETCH_MIN_SLOTS ((size_t)1 << 16)
#define SPAN_BATCH 32

typedef struct {
    /* A key of len <= 15 bytes: k0 its bytes 0-7, k1 its bytes 8-14 with len
     * in the top byte, zero padded (so a lookup compares two integers). A
     * longer key: k0 its offset in key_arena, k1 its hash's low 56 bits with
     * LONG_KEY_TAG. k1 == 0: a free slot (a pre-token is never empty). */
    uint64_t k0, k1;
    uint16_t len;
    uint16_t n;      /* number of ids (<= MAX_CACHED_BYTES), | HOT */
    uint32_t ids[CACHE_INLINE_IDS]; /* else ids[0]: offset in id_arena */
} CacheSlot; /* 32 bytes: two to a cache line (English needs ~1 MB of them) */

typedef struct {
    CacheSlot *slots;
    size_t mask, used, limit; /* limit: cache_size entries at most */
    unsigned shift;           /* 64 - log2(mask + 1): see cache_home */
    size_t max_cap;           /* the slot count it may grow to */
    unsigned char *key_arena;
    size_t key_len, key_cap, key_budget; /* key_cap <= key_budget */
    uint32_t *id_arena;
    size_t id_len, id_cap, id_budget; /* id_cap <= id_budget */
} Cache;

/* Growable array of ids: the encoder's output. */
typedef struct {
    uint32_t *ids;
    size_t len, cap;
} IdBuf;

/* ---- the tables ---------------------------------------------------------
 *
 * What BPE reads: the merges and the byte ids, built once (encoder_tables.c)
 * and only read after, by any number of calls at once. */
typedef struct {
    PairMap pairs;
    uint32_t byte_ids[256];
    /* byte_pairs[x << 8 | y]: the rank (high half) and merged id (low half)
     * of the pair of byte ids of bytes x and y, NO_RANK << 32 if none: BPE's
     * first round, which looks up every pair of a pre-token, reads 512 KB
     * directly instead of probing the pair map (2 MB for GPT-2). */
    uint64_t *byte_pairs;
    /* Where the ids allow (MergedMap): the merges by merged id, and
     * byte_merged[x << 8 | y], the merged id of the pair of byte ids of bytes
     * x and y (NO_RANK if none), 256 KB; else NULL and NULL. */
    MergedMap merged;
    uint32_t *byte_merged;
    int pattern; /* the scanner: PAT_GPT2, PAT_CL100K or PAT_O200K */
} BpeTables;

/* pack_mask[len]: the bits of a key of len <= 15 bytes in each half. */
static const uint64_t pack_mask[INLINE_KEY_BYTES + 1][2] = {
#define LOW_BYTES(k) ((k) >= 8 ? ~0ull : ((uint64_t)1 << (8 * (k))) - 1)
#define MASKS(k) {LOW_BYTES(k), (k) <= 8 ? 0 : LOW_BYTES((k) - 8)}
    MASKS(0),  MASKS(1),  MASKS(2),  MASKS(3),  MASKS(4),  MASKS(5),
    MASKS(6),  MASKS(7),  MASKS(8),  MASKS(9),  MASKS(10), MASKS(11),
    MASKS(12), MASKS(13), MASKS(14), MASKS(15),
#undef MASKS
#undef LOW_BYTES
};

/* The key of s[0:len] (1 <= len <= 15) as two integers (see CacheSlot).
 * `room`: the bytes readable from s on (at least len): with 16 of them it is
 * two loads. */
static inline void
cache_pack(const unsigned char *s, size_t len, size_t room, uint64_t *k0,
           uint64_t *k1)
{
    uint64_t a = 0, b = 0;
    if (room >= 16) {
        memcpy(&a, s, 8);
        memcpy(&b, s + 8, 8);
        a &= pack_mask[len][0];
        b &= pack_mask[len][1];
    }
    else {
        for (size_t k = 0; k < len && k < 8; k++) {
            a |= (uint64_t)s[k] << (8 * k);
        }
        for (size_t k = 8; k < len; k++) {
            b |= (uint64_t)s[k] << (8 * (k - 8));
        }
    }
    *k0 = a;
    *k1 = b | (uint64_t)len << 56;
}

static inline uint64_t
cache_hash_short(uint64_t k0, uint64_t k1)
{
    /* The slot comes from the top bits (cache_home): every bit of the key
     * reaches them through the multiplications (the low bits of a product see
     * only the low bits of its factors). */
    return k0 * 0x9E3779B97F4A7C15ull ^ k1 * 0xC2B2AE3D27D4EB4Full;
}

/* k1 of a long key of hash h. */
static inline uint64_t
long_key_k1(uint64_t h)
{
    return (h & ~((uint64_t)0xFF << 56)) | LONG_KEY_TAG;
}

/* The first slot to probe for a hash: its top bits. */
static inline size_t
cache_home(const Cache *c, uint64_t h)
{
    return (size_t)(h >> c->shift);
}

/* The slot of slots[0:mask + 1] (shift as Cache.shift) holding the short key
 * (k0, k1; h its hash), or the free slot where it would go. Apart from the
 * Cache, for a loop that keeps the table's fields in registers. */
BPE_ALWAYS_INLINE CacheSlot *
slots_find_short(CacheSlot *slots, size_t mask, unsigned shift, uint64_t k0,
                 uint64_t k1, uint64_t h)
{
    size_t at = (size_t)(h >> shift);
    for (;;) {
        CacheSlot *slot = &slots[at];
        if ((slot->k0 == k0 && slot->k1 == k1) || slot->k1 == 0) {
            return slot;
        }
        at = (at + 1) & mask;
    }
}

/* The slot holding the short key (k0, k1; h its hash), or the free slot where
 * it would go. */
BPE_ALWAYS_INLINE CacheSlot *
cache_find_short(const Cache *c, uint64_t k0, uint64_t k1, uint64_t h)
{
    return slots_find_short(c->slots, c->mask, c->shift, k0, k1, h);
}

/* The hash of an occupied slot's key, for a rehash. */
static inline uint64_t
cache_slot_hash(const Cache *c, const CacheSlot *slot)
{
    return slot->len <= INLINE_KEY_BYTES
               ? cache_hash_short(slot->k0, slot->k1)
               : bpe_hash_bytes(c->key_arena + slot->k0, slot->len);
}

/* The ids an entry of n ids puts in the id arena (with the arena's slack). */
static inline size_t
arena_ids(size_t n)
{
    return n > CACHE_INLINE_IDS ? n + ID_ARENA_SLACK : 0;
}

/* Whether one more entry of a short key and n ids fits without moving any
 * slot: no eviction, no growth, no clearing. A free slot found by a lookup
 * then still takes it. */
static inline int
cache_has_room(const Cache *c, size_t n)
{
    return c->used < c->limit && c->id_len + n <= UINT32_MAX &&
           c->id_len + arena_ids(n) <= c->id_budget &&
           (2 * (c->used + 1) <= c->mask + 1 || c->mask + 1 >= c->max_cap);
}

static inline int
idbuf_reserve(IdBuf *b, size_t extra)
{
    return bpe_reserve(&b->ids, &b->cap, b->len + extra, sizeof(uint32_t),
                       1024);
}

/* ---- functions of the components ---------------------------------------- */

BPE_INTERNAL void
cache_free(Cache *c);

BPE_INTERNAL Cache *
cache_new(size_t limit);

/* The bytes a cache holds: its slots and its arenas' room. */
BPE_INTERNAL size_t
cache_memory(const Cache *c);

BPE_INTERNAL CacheSlot *
cache_find_long(const Cache *c, const unsigned char *s, size_t len,
                uint64_t h);

BPE_INTERNAL int
cache_fill(Cache *c, CacheSlot *slot, uint64_t k0, uint64_t k1, size_t len,
           const uint32_t *ids, size_t n);

BPE_INTERNAL int
cache_store(Cache *c, const unsigned char *s, size_t len, size_t room,
            const uint32_t *ids, size_t n);

BPE_INTERNAL size_t
bpe_scan(const PairMap *pm, const uint64_t *byte_pairs,
         const unsigned char *bytes, uint32_t *ids, size_t n, uint32_t *ranks,
         uint32_t *merged);

/* bpe_scan through the MergedMap (t->merged.slots not NULL). */
BPE_INTERNAL size_t
bpe_scan_merged(const MergedMap *mm, const uint32_t *byte_merged,
                const unsigned char *bytes, uint32_t *ids, size_t n,
                uint32_t *merged);

BPE_INTERNAL size_t
bpe_heap(const PairMap *pm, uint32_t *ids, size_t n);

/* BPE of one pre-token's bytes key[0:len], appended to out (which has room
 * for len ids): 0, or -1 when out of memory. No cache. */
BPE_INTERNAL int
encode_pretoken(const BpeTables *t, const unsigned char *key, size_t len,
                IdBuf *out);

/* The ids of valid UTF-8 s[0:n] appended to out: split on the special tokens
 * (longest first), each one becoming its id (special_ids[k] for the token
 * added k-th), the text between them encoded through the cache c (NULL: none;
 * a cache is used by one call at a time). With settled, only what more data
 * could not change, its length in bytes into *cut (see encoder_loop.c). 0, or
 * -1 when out of memory. */
BPE_INTERNAL int
encode_text(const BpeTables *t, Cache *c, const Specials *sp,
            const uint32_t *special_ids, const unsigned char *s, size_t n,
            int settled, IdBuf *out, size_t *cut);

/* One text of a batch: its UTF-8, and whether it is known valid (a str's). */
typedef struct {
    const unsigned char *s;
    size_t n;
    int valid;
} Utf8Text;

/* encode_text (not settled) of texts[0:count] in turn into out, each
 * followed by the id `separator` unless it is negative (a data set's EOT),
 * offsets[k + 1] the end of text k's ids (its separator included) in out
 * (offsets[0] is the caller's): 0, -1 when out of memory, 1 when
 * texts[*bad], not known valid, is not valid UTF-8 (the texts before it
 * encoded). */
BPE_INTERNAL int
encode_many(const BpeTables *t, Cache *c, const Specials *sp,
            const uint32_t *special_ids, const Utf8Text *texts, size_t count,
            int64_t separator, int64_t *offsets, IdBuf *out, size_t *bad);

/* ids[0:n] into dst as native-endian unsigned integers of `itemsize` bytes
 * (2 or 4; dst suitably aligned); for 2, whether every id fits (else dst is
 * left part-written). */
BPE_INTERNAL int
bpe_ids_narrow(void *dst, const uint32_t *ids, size_t n, int itemsize);

/* ---- building the tables (encoder_tables.c) ------------------------------ */

/* An empty pair map with room for n merges: 0, or -1 when out of memory. */
BPE_INTERNAL int
bpe_pairs_init(PairMap *pm, size_t n);

/* Merge (a, b) -> merged with this rank, unless the pair has a rank already
 * (a repeated pair keeps its first rank); at most as many as bpe_pairs_init
 * made room for. */
BPE_INTERNAL void
bpe_pairs_add(PairMap *pm, uint32_t a, uint32_t b, uint32_t merged,
              uint32_t rank);

/* An empty pair map holding the n merges packed as native uint32 (left,
 * right, merged) triples at p (any alignment), in rank order; the largest
 * merged id raises *max_id. 0, -1 when out of memory, 1 when merge *bad_rank
 * holds the id UINT32_MAX (no token id). */
BPE_INTERNAL int
bpe_pairs_read_triples(PairMap *pm, const unsigned char *p, size_t n,
                       uint32_t *max_id, size_t *bad_rank);

/* What BPE reads besides t's pairs, from its pairs and byte_ids: byte_pairs,
 * and where the ids allow, the MergedMap and byte_merged. 0, or -1 when out
 * of memory. */
BPE_INTERNAL int
bpe_tables_finish(BpeTables *t);

/* Free what t holds (safe on a zeroed BpeTables). */
BPE_INTERNAL void
bpe_tables_clear(BpeTables *t);

/* ---- batches (batch_runs.c) ---------------------------------------------- */

/* The bounds of `parts` runs over items of cumulative sizes ends[0:count]
 * (count > 0, total = ends[count - 1]), as tokenizer._batch_runs gives them:
 * 0, then for each k in 1 .. parts - 1 the index after the item whose end is
 * nearest k/parts of the total (the earlier on a tie) when it is new and
 * below count, then count; into bounds (room for count + 1), their number
 * returned. */
BPE_INTERNAL size_t
bpe_run_bounds(const int64_t *ends, size_t count, int64_t total, size_t parts,
               size_t *bounds);

#endif /* BPE_ENCODER_INTERNAL_H */
