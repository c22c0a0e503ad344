/* Encoder: BPE over a rank table, with a bounded cache of pre-token -> ids.
 * Encodes whole UTF-8 texts (split on special tokens and pre-tokenized by the
 * scanner, scanner.h) without creating a Python object per pre-token.
 *
 * The encoding itself (encode_text) touches no Python object and runs with the
 * GIL released: it reads only its own copies of the inputs, the tables (held
 * by a reference taken with the GIL, so a concurrent __init__ cannot free
 * them) and a cache that the call owns for its duration (see CachePool). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "bpe_util.h"
#include "encoder.h"
#include "scan_blocks.h"
#include "scanner.h"

#define NO_RANK UINT32_MAX
/* Pre-tokens up to this many bytes use the O(n^2) scan, longer ones the
 * O(n log n) heap. */
#define SCAN_LIMIT 64
/* Longer pre-tokens are not cached: rare, and they would pin large keys. */
#define MAX_CACHED_BYTES 1024
/* Inputs shorter than this are encoded without releasing the GIL: handing it
 * over costs more than such a call. */
#define NOGIL_MIN_BYTES 4096
/* Ids below this get a shared int object each (IdObjects); larger ones (rare:
 * special tokens of huge vocabularies) a new int per use. */
#define MAX_ID_OBJECTS (1u << 20)

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
    size_t key_len, key_cap;
    uint32_t *id_arena;
    size_t id_len, id_cap;
} Cache;

static void
cache_free(Cache *c)
{
    if (c == NULL) {
        return;
    }
    free(c->slots);
    free(c->key_arena);
    free(c->id_arena);
    free(c);
}

/* A new empty cache for up to `limit` entries (limit > 0); NULL when out of
 * memory. It starts small and grows up to twice the limit (load <= 1/2). */
static Cache *
cache_new(size_t limit)
{
    Cache *c = calloc(1, sizeof(Cache));
    if (c == NULL) {
        return NULL;
    }
    size_t max_cap = 2;
    while (max_cap < 2 * limit && max_cap < ((size_t)1 << 40)) {
        max_cap *= 2;
    }
    size_t cap = max_cap < 1024 ? max_cap : 1024;
    c->slots = calloc(cap, sizeof(CacheSlot));
    if (c->slots == NULL) {
        free(c);
        return NULL;
    }
    c->mask = cap - 1;
    c->shift = 64u - (unsigned)__builtin_ctzll((unsigned long long)cap);
    c->limit = limit;
    c->max_cap = max_cap;
    return c;
}

static void
cache_clear(Cache *c)
{
    memset(c->slots, 0, (c->mask + 1) * sizeof(CacheSlot));
    c->used = c->key_len = c->id_len = 0;
}

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

/* The slot holding the long key s[0:len] (h: bpe_hash_bytes of it), or the
 * free slot where it would go. */
static CacheSlot *
cache_find_long(const Cache *c, const unsigned char *s, size_t len,
                uint64_t h)
{
    uint64_t k1 = long_key_k1(h);
    size_t at = cache_home(c, h);
    for (;;) {
        CacheSlot *slot = &c->slots[at];
        if (slot->k1 == 0 ||
            (slot->k1 == k1 && slot->len == len &&
             memcmp(c->key_arena + slot->k0, s, len) == 0))
        {
            return slot;
        }
        at = (at + 1) & c->mask;
    }
}

/* The hash of an occupied slot's key, for a rehash. */
static inline uint64_t
cache_slot_hash(const Cache *c, const CacheSlot *slot)
{
    return slot->len <= INLINE_KEY_BYTES
               ? cache_hash_short(slot->k0, slot->k1)
               : bpe_hash_bytes(c->key_arena + slot->k0, slot->len);
}

/* Double the slots, or quadruple them past PREFETCH_MIN_SLOTS (rehash); -1
 * when out of memory (the cache unchanged). A small table stays small, as its
 * hits are fast while it fits in L2; a large one is looked up in prefetched
 * batches whatever its size, and each rehash of it costs a pass over
 * megabytes (a fresh call on 4 MB of multilingual text: 6-8% faster). */
static int
cache_grow(Cache *c)
{
    size_t old_cap = c->mask + 1;
    size_t cap = old_cap * (old_cap >= PREFETCH_MIN_SLOTS &&
                                    old_cap * 4 <= c->max_cap
                                ? 4
                                : 2);
    CacheSlot *slots = calloc(cap, sizeof(CacheSlot)), *old = c->slots;
    if (slots == NULL) {
        return -1;
    }
    c->slots = slots;
    c->mask = cap - 1;
    c->shift = 64u - (unsigned)__builtin_ctzll((unsigned long long)cap);
    for (size_t k = 0; k < old_cap; k++) {
        if (old[k].len) {
            size_t at = cache_home(c, cache_slot_hash(c, &old[k]));
            while (slots[at].len) {
                at = (at + 1) & c->mask;
            }
            slots[at] = old[k];
        }
    }
    free(old);
    return 0;
}

/* Make room in a full cache: keep the entries hit since it last filled up
 * (unmarked), drop the others. Everything goes when more than half would stay
 * (each eviction then frees half the cache at least), or when memory for the
 * new tables is short. */
static void
cache_evict(Cache *c)
{
    size_t cap = c->mask + 1, kept = 0, key_bytes = 0, id_count = 0;
    for (size_t k = 0; k < cap; k++) {
        const CacheSlot *slot = &c->slots[k];
        size_t n = slot->n & ~HOT;
        if (slot->len && (slot->n & HOT)) {
            kept++;
            key_bytes += slot->len > INLINE_KEY_BYTES ? slot->len : 0;
            id_count += n > CACHE_INLINE_IDS ? n : 0;
        }
    }
    CacheSlot *slots = NULL;
    unsigned char *keys = NULL;
    uint32_t *ids = NULL;
    if (2 * kept > c->limit ||
        (slots = calloc(cap, sizeof(CacheSlot))) == NULL ||
        (key_bytes && (keys = malloc(key_bytes)) == NULL) ||
        (id_count && (ids = malloc((id_count + ID_ARENA_SLACK) *
                                   sizeof(uint32_t))) == NULL))
    {
        free(slots);
        free(keys);
        cache_clear(c);
        return;
    }
    size_t key_len = 0, id_len = 0;
    for (size_t k = 0; k < cap; k++) {
        CacheSlot slot = c->slots[k];
        if (!slot.len || !(slot.n & HOT)) {
            continue;
        }
        /* (the hash of a long key reads it where it is now) */
        size_t at = cache_home(c, cache_slot_hash(c, &slot));
        slot.n &= (uint16_t)~HOT;
        if (slot.len > INLINE_KEY_BYTES) {
            memcpy(keys + key_len, c->key_arena + slot.k0, slot.len);
            slot.k0 = key_len;
            key_len += slot.len;
        }
        if (slot.n > CACHE_INLINE_IDS) {
            memcpy(ids + id_len, c->id_arena + slot.ids[0],
                   slot.n * sizeof(uint32_t));
            slot.ids[0] = (uint32_t)id_len;
            id_len += slot.n;
        }
        while (slots[at].len) {
            at = (at + 1) & c->mask;
        }
        slots[at] = slot;
    }
    free(c->slots);
    free(c->key_arena);
    free(c->id_arena);
    c->slots = slots;
    c->key_arena = keys;
    c->key_len = c->key_cap = key_len;
    c->id_arena = ids;
    c->id_len = id_len;
    c->id_cap = id_len ? id_len + ID_ARENA_SLACK : 0;
    c->used = kept;
}

/* Whether one more entry fits without moving any slot: no eviction, no
 * growth, no clearing. A free slot found by a lookup then still takes it. */
static inline int
cache_has_room(const Cache *c, size_t n)
{
    return c->used < c->limit && c->id_len + n <= UINT32_MAX &&
           (2 * (c->used + 1) <= c->mask + 1 || c->mask + 1 >= c->max_cap);
}

/* Make room for one more entry of n ids: clear, evict or grow (each moves the
 * slots); 0, or -1 when out of memory. */
static int
cache_make_room(Cache *c, size_t n)
{
    if (c->id_len + n > UINT32_MAX) {
        cache_clear(c); /* (id_arena offsets are 32 bits) */
    }
    if (c->used >= c->limit) {
        cache_evict(c);
    }
    else if (2 * (c->used + 1) > c->mask + 1 && c->mask + 1 < c->max_cap &&
             cache_grow(c) < 0)
    {
        return -1;
    }
    return 0;
}

/* Fill the free slot with key (k0, k1) of len bytes (a long key's bytes
 * already appended to key_arena) and ids[0:n]; 0, or -1 when out of memory
 * (the slot left free). */
static int
cache_fill(Cache *c, CacheSlot *slot, uint64_t k0, uint64_t k1, size_t len,
           const uint32_t *ids, size_t n)
{
    uint32_t id_off = 0;
    if (n > CACHE_INLINE_IDS) {
        if (bpe_reserve(&c->id_arena, &c->id_cap,
                        c->id_len + n + ID_ARENA_SLACK, sizeof(uint32_t),
                        1024) < 0)
        {
            return -1;
        }
        memcpy(c->id_arena + c->id_len, ids, n * sizeof(uint32_t));
        id_off = (uint32_t)c->id_len;
    }
    slot->k0 = k0;
    slot->k1 = k1;
    slot->len = (uint16_t)len;
    slot->n = (uint16_t)n;
    if (n > CACHE_INLINE_IDS) {
        slot->ids[0] = id_off;
        c->id_len += n;
    }
    else {
        memcpy(slot->ids, ids, n * sizeof(uint32_t));
    }
    if (len > INLINE_KEY_BYTES) {
        c->key_len += len;
    }
    c->used++;
    return 0;
}

/* Remember ids[0:n] for the key (absent from the cache); 0, or -1 when out of
 * memory. */
static int
cache_store(Cache *c, const unsigned char *s, size_t len, size_t room,
            const uint32_t *ids, size_t n)
{
    if (len > MAX_CACHED_BYTES) {
        return 0;
    }
    if (cache_make_room(c, n) < 0) {
        return -1;
    }
    uint64_t k0, k1;
    CacheSlot *slot;
    if (len <= INLINE_KEY_BYTES) {
        cache_pack(s, len, room, &k0, &k1);
        slot = cache_find_short(c, k0, k1, cache_hash_short(k0, k1));
    }
    else {
        uint64_t h = bpe_hash_bytes(s, len);
        slot = cache_find_long(c, s, len, h);
        if (bpe_reserve(&c->key_arena, &c->key_cap, c->key_len + len, 1,
                        4096) < 0)
        {
            return -1;
        }
        memcpy(c->key_arena + c->key_len, s, len);
        k0 = c->key_len;
        k1 = long_key_k1(h);
    }
    return cache_fill(c, slot, k0, k1, len, ids, n);
}

/* Growable array of ids: the encoder's output. */
typedef struct {
    uint32_t *ids;
    size_t len, cap;
} IdBuf;

/* A spare output buffer larger than this many ids is not kept for the next
 * call. */
#define MAX_SPARE_IDS ((size_t)1 << 24)

/* ---- the tables ---------------------------------------------------------
 *
 * What an __init__ builds, reference counted (with the GIL held): each call
 * takes a reference before it releases the GIL, so a concurrent __init__ that
 * swaps in new tables only drops its own, and the old tables go when the last
 * call using them ends. */
typedef struct {
    Py_ssize_t refs;
    PairMap pairs;
    uint32_t byte_ids[256];
    /* byte_pairs[x << 8 | y]: the rank (high half) and merged id (low half)
     * of the pair of byte ids of bytes x and y, NO_RANK << 32 if none: BPE's
     * first round, which looks up every pair of a pre-token, reads 512 KB
     * directly instead of probing the pair map (2 MB for GPT-2). */
    uint64_t *byte_pairs;
    int pattern; /* the scanner: PAT_GPT2, PAT_CL100K or PAT_O200K */
    size_t cache_size;
    /* The caches not in use: a call takes one (the last returned: the
     * warmest) and gives it back at its end, both with the GIL held, so no
     * lock is needed and each thread encoding at a time has a cache of its
     * own. Measured against one shared table (see the report of issue 17):
     * per-call caches need no atomics on the hit path and scale with the
     * threads; each holds at most cache_size pre-tokens. A second, lock-free
     * table shared by a batch's threads and asked on each miss was measured
     * too, and dropped: every miss then also paid a probe of a large cold
     * table, and the threads contended for its counters (16 MB of
     * multilingual lines, fresh: one thread 31% slower, two threads twice as
     * slow as with their own caches alone). */
    Cache **pool;
    size_t pool_len, pool_cap;
    /* The int object of each id below id_objects_len, made on first use (with
     * the GIL), so filling a list is a store and an INCREF per id. */
    PyObject **id_objects;
    size_t id_objects_len;
    /* The output buffer of the last call, kept for the next (with the GIL,
     * as the caches): a warm call then writes to memory already mapped. */
    IdBuf spare;
} Tables;

static void
tables_free(Tables *t)
{
    if (t == NULL) {
        return;
    }
    free(t->pairs.slots);
    free(t->byte_pairs);
    free(t->spare.ids);
    for (size_t k = 0; k < t->pool_len; k++) {
        cache_free(t->pool[k]);
    }
    free(t->pool);
    if (t->id_objects != NULL) {
        for (size_t k = 0; k < t->id_objects_len; k++) {
            Py_XDECREF(t->id_objects[k]);
        }
        free(t->id_objects);
    }
    free(t);
}

static void
tables_decref(Tables *t)
{
    if (t != NULL && --t->refs == 0) {
        tables_free(t);
    }
}

/* A cache for one call (NULL: caching is off); *failed set when out of
 * memory. With the GIL. */
static Cache *
tables_take_cache(Tables *t, int *failed)
{
    *failed = 0;
    if (t->cache_size == 0) {
        return NULL;
    }
    if (t->pool_len) {
        return t->pool[--t->pool_len];
    }
    Cache *c = cache_new(t->cache_size);
    if (c == NULL) {
        *failed = 1;
    }
    return c;
}

/* Give a cache back (with the GIL); one that cannot be kept is freed. */
static void
tables_give_cache(Tables *t, Cache *c)
{
    if (c == NULL) {
        return;
    }
    if (bpe_reserve(&t->pool, &t->pool_cap, t->pool_len + 1, sizeof(Cache *),
                    4) < 0)
    {
        cache_free(c);
        return;
    }
    t->pool[t->pool_len++] = c;
}

/* The int object of an id (a new reference), with the GIL. */
static inline PyObject *
tables_id_object(Tables *t, uint32_t id)
{
    if (id < t->id_objects_len) {
        PyObject *v = t->id_objects[id];
        if (v == NULL) {
            v = PyLong_FromUnsignedLong(id);
            if (v == NULL) {
                return NULL;
            }
            t->id_objects[id] = v;
        }
        return Py_NewRef(v);
    }
    return PyLong_FromUnsignedLong(id);
}


static inline int
idbuf_reserve(IdBuf *b, size_t extra)
{
    return bpe_reserve(&b->ids, &b->cap, b->len + extra, sizeof(uint32_t),
                       1024);
}

/* A list of the ids in b[from:to], with the GIL. */
static PyObject *
ids_to_list(Tables *t, const uint32_t *ids, size_t n)
{
    PyObject *out = PyList_New((Py_ssize_t)n);
    if (out == NULL) {
        return NULL;
    }
    for (size_t k = 0; k < n; k++) {
        PyObject *v = tables_id_object(t, ids[k]);
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)k, v);
    }
    return out;
}

/* ---- BPE ------------------------------------------------------------------ */

/* Plain BPE, as tokenizer.bpe_scan: merge the lowest-ranked pair (leftmost on
 * a tie), repeat. ranks[k] is the rank of (ids[k], ids[k+1]); after a merge
 * only its two neighbours change. */
static size_t
bpe_scan(const PairMap *pm, const uint64_t *byte_pairs,
         const unsigned char *bytes, uint32_t *ids, size_t n, uint32_t *ranks,
         uint32_t *merged)
{
    if (n < 2) {
        return n;
    }
    size_t m = n - 1;
    /* the first ranks: of byte pairs, one direct read each */
    for (size_t k = 0; k < m; k++) {
        uint64_t entry = byte_pairs[bytes[k] << 8 | bytes[k + 1]];
        ranks[k] = (uint32_t)(entry >> 32);
        merged[k] = (uint32_t)entry;
    }
    for (;;) {
        /* The lowest rank, then its leftmost position: the first loop has
         * no branch (it vectorises), where tracking the position as well
         * would mispredict on every new minimum. */
        uint32_t best = NO_RANK;
        for (size_t k = 0; k < m; k++) {
            best = ranks[k] < best ? ranks[k] : best;
        }
        if (best == NO_RANK) {
            break;
        }
        size_t at = 0;
        while (ranks[at] != best) {
            at++;
        }
        ids[at] = merged[at];
        for (size_t k = at + 1; k + 1 < n; k++) {
            ids[k] = ids[k + 1];
        }
        for (size_t k = at; k + 1 < m; k++) {
            ranks[k] = ranks[k + 1];
            merged[k] = merged[k + 1];
        }
        n--;
        m--;
        if (at < m) {
            ranks[at] = pair_rank(pm, ids[at], ids[at + 1], &merged[at]);
        }
        if (at > 0) {
            ranks[at - 1] =
                pair_rank(pm, ids[at - 1], ids[at], &merged[at - 1]);
        }
    }
    return n;
}

/* A min-heap of (rank << 32 | position): pops the lowest rank, the leftmost
 * position on a tie. Not shared with trainer.c's heap: that one orders structs
 * through a comparison function, and plain integer comparisons keep this one,
 * run per merge of long pre-tokens, cheap. */
static void
heap_push(uint64_t *heap, size_t *size, uint64_t v)
{
    size_t k = (*size)++;
    while (k > 0) {
        size_t parent = (k - 1) / 2;
        if (heap[parent] <= v) {
            break;
        }
        heap[k] = heap[parent];
        k = parent;
    }
    heap[k] = v;
}

static uint64_t
heap_pop(uint64_t *heap, size_t *size)
{
    uint64_t top = heap[0];
    uint64_t last = heap[--(*size)];
    size_t k = 0, n = *size;
    for (;;) {
        size_t child = 2 * k + 1;
        if (child >= n) {
            break;
        }
        if (child + 1 < n && heap[child + 1] < heap[child]) {
            child++;
        }
        if (last <= heap[child]) {
            break;
        }
        heap[k] = heap[child];
        k = child;
    }
    if (n) {
        heap[k] = last;
    }
    return top;
}

#define DEAD UINT32_MAX

/* BPE in O(n log n), as tokenizer.bpe_heap: a linked list over positions and a
 * lazy heap whose entries are re-checked when popped (a neighbour may have
 * merged since). Ranks are unique per pair, so an entry whose position still
 * holds a pair of that rank is still valid. Returns the new length (ids
 * compacted in place); (size_t)-1 when out of memory. */
static size_t
bpe_heap(const PairMap *pm, uint32_t *ids, size_t n)
{
    if (n < 2) {
        return n;
    }
    if (n > UINT32_MAX / 2) {
        return (size_t)-1;
    }
    size_t out = (size_t)-1;
    /* n - 1 pairs + 2 pushes per merge */
    uint64_t *heap = malloc(3 * n * sizeof(uint64_t));
    uint32_t *next = malloc(n * sizeof(uint32_t));
    uint32_t *prev = malloc(n * sizeof(uint32_t));
    if (heap == NULL || next == NULL || prev == NULL) {
        goto done;
    }
    size_t size = 0;
    for (size_t k = 0; k < n; k++) {
        next[k] = (uint32_t)(k + 1); /* n: none */
        prev[k] = k ? (uint32_t)(k - 1) : DEAD;
        if (k + 1 < n) {
            uint32_t rank = pair_rank(pm, ids[k], ids[k + 1], NULL);
            if (rank != NO_RANK) {
                heap_push(heap, &size, (uint64_t)rank << 32 | k);
            }
        }
    }
    while (size) {
        uint64_t top = heap_pop(heap, &size);
        uint32_t rank = (uint32_t)(top >> 32), i = (uint32_t)top, j = next[i],
                 merged = 0;
        if (j == n || ids[i] == DEAD) {
            continue;
        }
        if (pair_rank(pm, ids[i], ids[j], &merged) != rank) {
            continue; /* stale */
        }
        ids[i] = merged;
        ids[j] = DEAD;
        uint32_t k = next[j];
        next[i] = k;
        if (k != n) {
            prev[k] = i;
            uint32_t r = pair_rank(pm, merged, ids[k], NULL);
            if (r != NO_RANK) {
                heap_push(heap, &size, (uint64_t)r << 32 | i);
            }
        }
        uint32_t p = prev[i];
        if (p != DEAD) {
            uint32_t r = pair_rank(pm, ids[p], merged, NULL);
            if (r != NO_RANK) {
                heap_push(heap, &size, (uint64_t)r << 32 | p);
            }
        }
    }
    out = 0;
    for (size_t k = 0; k < n; k++) {
        if (ids[k] != DEAD) {
            ids[out++] = ids[k];
        }
    }
done:
    free(heap);
    free(next);
    free(prev);
    return out;
}

/* BPE of one pre-token's bytes, appended to out (which has room for len
 * ids); 0, or -1 if out of memory. */
static int
encode_pretoken(const Tables *t, const unsigned char *key, size_t len,
                IdBuf *out)
{
    if (len > SCAN_LIMIT) {
        uint32_t *ids = malloc(len * sizeof(uint32_t));
        if (ids == NULL) {
            return -1;
        }
        for (size_t k = 0; k < len; k++) {
            ids[k] = t->byte_ids[key[k]];
        }
        size_t n = bpe_heap(&t->pairs, ids, len);
        if (n != (size_t)-1) {
            memcpy(out->ids + out->len, ids, n * sizeof(uint32_t));
            out->len += n;
        }
        free(ids);
        return n == (size_t)-1 ? -1 : 0;
    }
    uint32_t ranks[SCAN_LIMIT], merged[SCAN_LIMIT];
    uint32_t *ids = out->ids + out->len;
    for (size_t k = 0; k < len; k++) {
        ids[k] = t->byte_ids[key[k]];
    }
    out->len +=
        bpe_scan(&t->pairs, t->byte_pairs, key, ids, len, ranks, merged);
    return 0;
}

/* A cached entry's ids (n > CACHE_INLINE_IDS) from the id arena to dst, in
 * 16-byte chunks (no call to memcpy for a few ids): up to 3 ids more are read
 * (ID_ARENA_SLACK) and written (encode_token's room). */
BPE_ALWAYS_INLINE void
copy_ids(uint32_t *dst, const uint32_t *src, size_t n)
{
    /* (typed copies, not memcpy: a memcpy may alias anything, so the
     * compiler would reload the encode loop's state after each one) */
    for (size_t k = 0; k < n; k += 4) {
        dst[k] = src[k];
        dst[k + 1] = src[k + 1];
        dst[k + 2] = src[k + 2];
        dst[k + 3] = src[k + 3];
    }
}

/* A hit: the slot's ids written at dst (which has room for a whole inline
 * copy, or n rounded up to 4), the slot marked hit; returns their number. */
BPE_ALWAYS_INLINE size_t
emit_hit(const Cache *c, CacheSlot *slot, uint32_t *dst)
{
    size_t n = slot->n & ~HOT;
    if (!(slot->n & HOT)) { /* (no store, so no dirty line, on most hits) */
        slot->n |= HOT;
    }
    if (n <= CACHE_INLINE_IDS) { /* a fixed-size copy: no loop */
        dst[0] = slot->ids[0];
        dst[1] = slot->ids[1];
        dst[2] = slot->ids[2];
    }
    else {
        copy_ids(dst, c->id_arena + slot->ids[0], n);
    }
    return n;
}

/* The cached slot of pre-token s[0:len] (len <= MAX_CACHED_BYTES; `room` the
 * bytes readable from s on), or NULL if it is not cached. */
BPE_ALWAYS_INLINE CacheSlot *
cache_lookup(const Cache *c, const unsigned char *s, size_t len, size_t room)
{
    CacheSlot *slot;
    if (len <= INLINE_KEY_BYTES) {
        uint64_t k0, k1;
        cache_pack(s, len, room, &k0, &k1);
        slot = cache_find_short(c, k0, k1, cache_hash_short(k0, k1));
    }
    else {
        slot = cache_find_long(c, s, len, bpe_hash_bytes(s, len));
    }
    return slot->k1 ? slot : NULL;
}

/* A pre-token missed by the cache (or with none): its ids by BPE appended to
 * out (which has room for len ids), then cached; -1 when out of memory. */
static int
encode_miss(const Tables *t, Cache *c, const unsigned char *s, size_t len,
            size_t room, IdBuf *out)
{
    size_t before = out->len;
    if (encode_pretoken(t, s, len, out) < 0) {
        return -1;
    }
    if (c != NULL && cache_store(c, s, len, room, out->ids + before,
                                 out->len - before) < 0)
    {
        return -1;
    }
    return 0;
}

/* A short pre-token (k0, k1) that missed the cache at the free slot `slot`:
 * its ids by BPE appended to out (which has room for len ids), then cached,
 * in that slot when no slot has to move (no second probe); -1 when out of
 * memory. */
static int
encode_miss_short(const Tables *t, Cache *c, CacheSlot *slot, uint64_t k0,
                  uint64_t k1, const unsigned char *s, size_t len, size_t room,
                  IdBuf *out)
{
    size_t before = out->len;
    if (encode_pretoken(t, s, len, out) < 0) {
        return -1;
    }
    size_t n = out->len - before;
    if (cache_has_room(c, n)) {
        return cache_fill(c, slot, k0, k1, len, out->ids + before, n);
    }
    return cache_store(c, s, len, room, out->ids + before, n);
}

/* One pre-token's ids (from the cache, else by BPE, then cached), appended to
 * out; -1 when out of memory. s[0:len] is the pre-token, `room` the bytes
 * readable from s on. */
BPE_ALWAYS_INLINE int
encode_token(const Tables *t, Cache *c, const unsigned char *s, size_t len,
             size_t room, IdBuf *out)
{
    /* room for the ids (at most one a byte) and for a whole inline copy */
    if (out->len + len + CACHE_INLINE_IDS > out->cap &&
        idbuf_reserve(out, len + CACHE_INLINE_IDS) < 0)
    {
        return -1;
    }
    CacheSlot *slot;
    if (c != NULL && len <= MAX_CACHED_BYTES &&
        (slot = cache_lookup(c, s, len, room)) != NULL)
    {
        out->len += emit_hit(c, slot, out->ids + out->len);
        return 0;
    }
    return encode_miss(t, c, s, len, room, out);
}

/* ---- encoding a text (no Python objects, no GIL needed) ------------------ */

/* The pre-tokens of the ordinary text s[from:to] (of data s[0:n]), encoded
 * into out. Inlined once per pattern (encode_ordinary), so each copy calls
 * its own scanner inline. */
BPE_ALWAYS_INLINE int
encode_range(const Tables *t, Cache *c, const unsigned char *s, size_t from,
             size_t to, size_t n, IdBuf *out, int pattern)
{
    size_t ends[SPAN_BATCH + 1];
    uint64_t k0s[SPAN_BATCH], k1s[SPAN_BATCH], hashes[SPAN_BATCH];
    Spans spans;
    bpe_spans_init(&spans, pattern);
    for (size_t i = from; i < to;) {
        if (c == NULL || c->mask < PREFETCH_MIN_SLOTS) {
            /* one pre-token at a time until the cache grows past the size
             * (on a miss), the hit path on local copies of the state */
            CacheSlot *slots = c ? c->slots : NULL;
            uint32_t *ids = out->ids;
            size_t len_out = out->len, cap = out->cap, mask = c ? c->mask : 0;
            unsigned shift = c ? c->shift : 0;
            while (i < to) {
                size_t j = bpe_spans_next(&spans, s, i, to, pattern),
                       len = j - i;
                if (c != NULL && len <= INLINE_KEY_BYTES &&
                    len_out + INLINE_KEY_BYTES + CACHE_INLINE_IDS <= cap)
                {
                    uint64_t k0, k1;
                    cache_pack(s + i, len, n - i, &k0, &k1);
                    CacheSlot *slot = slots_find_short(
                        slots, mask, shift, k0, k1, cache_hash_short(k0, k1));
                    if (slot->k1) {
                        len_out += emit_hit(c, slot, ids + len_out);
                        i = j;
                        continue;
                    }
                    out->len = len_out;
                    if (encode_miss_short(t, c, slot, k0, k1, s + i, len,
                                          n - i, out) < 0)
                    {
                        return -1;
                    }
                }
                else {
                    out->len = len_out;
                    if (encode_token(t, c, s + i, len, n - i, out) < 0) {
                        return -1;
                    }
                }
                i = j;
                ids = out->ids;
                len_out = out->len;
                cap = out->cap;
                if (c != NULL) {
                    if (c->mask >= PREFETCH_MIN_SLOTS) {
                        break;
                    }
                    slots = c->slots;
                    mask = c->mask;
                    shift = c->shift;
                }
            }
            out->len = len_out;
            continue;
        }
        /* scan a batch: each pre-token's key and hash, its slot prefetched */
        size_t count = 0;
        ends[0] = i;
        do {
            size_t j = bpe_spans_next(&spans, s, i, to, pattern), len = j - i;
            if (len <= INLINE_KEY_BYTES) {
                cache_pack(s + i, len, n - i, &k0s[count], &k1s[count]);
                hashes[count] = cache_hash_short(k0s[count], k1s[count]);
            }
            else {
                hashes[count] =
                    len <= MAX_CACHED_BYTES ? bpe_hash_bytes(s + i, len) : 0;
            }
            __builtin_prefetch(&c->slots[cache_home(c, hashes[count])]);
            ends[++count] = i = j;
        } while (count < SPAN_BATCH && i < to);
        /* room for every id of the batch (at most one a byte) and for a
         * whole inline copy past the last */
        size_t bytes = i - ends[0];
        if (out->len + bytes + CACHE_INLINE_IDS > out->cap &&
            idbuf_reserve(out, bytes + CACHE_INLINE_IDS) < 0)
        {
            return -1;
        }
        for (size_t k = 0; k < count; k++) {
            size_t start = ends[k], len = ends[k + 1] - start;
            CacheSlot *slot = NULL;
            if (len <= INLINE_KEY_BYTES) {
                slot = cache_find_short(c, k0s[k], k1s[k], hashes[k]);
                if (!slot->k1) {
                    if (encode_miss_short(t, c, slot, k0s[k], k1s[k],
                                          s + start, len, n - start, out) < 0)
                    {
                        return -1;
                    }
                    continue;
                }
            }
            else if (len <= MAX_CACHED_BYTES) {
                slot = cache_find_long(c, s + start, len, hashes[k]);
            }
            if (slot != NULL && slot->k1) {
                out->len += emit_hit(c, slot, out->ids + out->len);
            }
            else if (encode_miss(t, c, s + start, len, n - start, out) < 0) {
                return -1;
            }
        }
    }
    return 0;
}

static int
encode_ordinary(const Tables *t, Cache *c, const unsigned char *s,
                size_t from, size_t to, size_t n, IdBuf *out)
{
    switch (t->pattern) {
    case PAT_CL100K:
        return encode_range(t, c, s, from, to, n, out, PAT_CL100K);
    case PAT_O200K:
        return encode_range(t, c, s, from, to, n, out, PAT_O200K);
    default:
        return encode_range(t, c, s, from, to, n, out, PAT_GPT2);
    }
}

/* The number of characters in valid UTF-8. */
static size_t
count_chars(const unsigned char *s, size_t n)
{
    size_t chars = 0;
    for (size_t i = 0; i < n; i++) {
        chars += (s[i] & 0xC0) != 0x80;
    }
    return chars;
}

/* The byte offset of character number c (0-based) of valid UTF-8 s[0:n]; n +
 * 1 if there are no more than c characters. */
static size_t
byte_of_char(const unsigned char *s, size_t n, size_t c)
{
    for (size_t i = 0; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80 && c-- == 0) {
            return i;
        }
    }
    return c == 0 ? n : n + 1;
}

/* The settled rule of each pattern (SplitPattern.settle_margin and
 * settle_run, as PythonEncoder._settled applies them): a pre-token ending at
 * j, of text known up to `end` (a character boundary), is final once the first
 * non-whitespace character at or after j (GPT-2: the character at j, whatever
 * it is; o200k: after the run of letters and marks at j, which a run of
 * capitals followed by a lower-case letter would join) is known with
 * margin - 1 whole characters after it. */
static const struct {
    int skip_letters;
    int skip_space;
    int margin;
} settle_rule[N_PATTERNS] = {
    [PAT_GPT2] = {0, 0, 2},
    [PAT_CL100K] = {0, 1, 2},
    [PAT_O200K] = {1, 1, 4},
};

static int
is_settled(const unsigned char *s, size_t j, size_t end, int pattern)
{
    const unsigned char *char_class = bpe_char_class;
    size_t len;
    if (settle_rule[pattern].skip_letters) {
        while (j < end) {
            unsigned char c = char_class[bpe_utf8_at(s, j, &len)];
            if ((c & CLS_BASE) != CLS_LETTER && !(c & (CLS_UP | CLS_LOW))) {
                break; /* \p{M} is in both of o200k's letter sets */
            }
            j += len;
        }
    }
    if (settle_rule[pattern].skip_space) {
        while (j < end &&
               (char_class[bpe_utf8_at(s, j, &len)] & CLS_BASE) == CLS_SPACE)
        {
            j += len;
        }
    }
    for (int k = 0; k < settle_rule[pattern].margin; k++) {
        if (j >= end) {
            return 0;
        }
        bpe_utf8_at(s, j, &len);
        j += len;
    }
    return j <= end;
}

/* The whole of encode_utf8 over valid UTF-8 s[0:n], into out: split on the
 * special tokens (longest first), each one becoming its id, the text between
 * them encoded. With settled, only what more data could not change (see
 * Encoder_encode_utf8), its length in bytes into *cut. 0, or -1 when out of
 * memory. Touches no Python object: runs without the GIL. */
static int
encode_text(const Tables *t, Cache *c, const Specials *sp,
            const uint32_t *special_ids, const unsigned char *s, size_t n,
            int settled, IdBuf *out, size_t *cut)
{
    /* settled: a special token starting before `settle` is whole in data
     * (every one fits). Counted in characters, as PythonEncoder._settled
     * counts them (in bytes the cut could differ), then turned into the byte
     * offset of that character (n + 1: none). */
    size_t settle = n + 1;
    if (settled && sp->count) {
        size_t longest = 0, chars = count_chars(s, n);
        for (size_t k = 0; k < sp->count; k++) {
            size_t ch = count_chars(sp->token[k], sp->len[k]);
            longest = ch > longest ? ch : longest;
        }
        settle = chars + 1 > longest ? byte_of_char(s, n, chars + 1 - longest)
                                     : 0;
    }
    for (size_t pos = 0; pos <= n;) {
        size_t len, which = 0;
        size_t at = bpe_next_special(sp, s, pos, n, &len, &which);
        if (settled &&
            (len == 0 || at >= settle)) { /* no settled special token left */
            /* The ordinary text from pos is known up to settle (a character
             * boundary). */
            size_t known = settle < n ? settle : n;
            *cut = pos;
            for (size_t i = pos; i < known;) {
                size_t j = bpe_next_end_utf8(s, i, known, t->pattern);
                if (!is_settled(s, j, known, t->pattern)) {
                    break;
                }
                if (encode_token(t, c, s + i, j - i, n - i, out) < 0) {
                    return -1;
                }
                *cut = i = j;
            }
            return 0;
        }
        if (encode_ordinary(t, c, s, pos, at, n, out) < 0) {
            return -1;
        }
        if (len) {
            if (idbuf_reserve(out, 1) < 0) {
                return -1;
            }
            out->ids[out->len++] = special_ids[which];
        }
        pos = at + (len ? len : 1);
    }
    return 0;
}

/* ---- the Python type ------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    /* NULL until an __init__ succeeds, and after one fails */
    Tables *tables;
} EncoderObject;

static void
Encoder_dealloc(EncoderObject *self)
{
    tables_decref(self->tables);
    self->tables = NULL;
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
as_id(PyObject *obj, uint32_t *out, const char *what)
{
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v < 0 || v >= (long long)UINT32_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "%s %lld is not a token id in 0..2**32-2", what, v);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* The merges (left, right, merged) in rank order into a new pm; a repeated
 * pair keeps its first rank. merges is a tuple the caller owns: the ids'
 * __index__ may run any Python code, but cannot change it. The largest id
 * seen goes to *max_id. */
static int
read_merges(PairMap *pm, PyObject *merges, uint32_t *max_id)
{
    Py_ssize_t n = PyTuple_GET_SIZE(merges);
    size_t capacity = 16;
    while (capacity < (size_t)n * 2 + 2) {
        capacity *= 2;
    }
    pm->slots = malloc(capacity * sizeof(PairSlot));
    if (pm->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(pm->slots, 0xFF, capacity * sizeof(PairSlot));
    pm->mask = capacity - 1;
    for (Py_ssize_t rank = 0; rank < n; rank++) {
        PyObject *item = PyTuple_GET_ITEM(merges, rank);
        uint32_t a, b, merged;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
            PyErr_Format(PyExc_ValueError,
                         "merge #%zd is not a (left, right, merged) tuple",
                         rank);
            return -1;
        }
        if (as_id(PyTuple_GET_ITEM(item, 0), &a, "left id") < 0 ||
            as_id(PyTuple_GET_ITEM(item, 1), &b, "right id") < 0 ||
            as_id(PyTuple_GET_ITEM(item, 2), &merged, "merged id") < 0)
        {
            return -1;
        }
        *max_id = merged > *max_id ? merged : *max_id;
        uint64_t key = pair_key(a, b);
        size_t at = pair_slot(key, pm->mask);
        while (pm->slots[at].key != EMPTY_PAIR && pm->slots[at].key != key) {
            at = (at + 1) & pm->mask;
        }
        if (pm->slots[at].key == EMPTY_PAIR) {
            pm->slots[at].key = key;
            pm->slots[at].rank = (uint32_t)rank;
            pm->slots[at].merged = merged;
        }
    }
    return 0;
}

/* The new tables are built aside (the ids' __index__ may run Python code that
 * uses this very encoder: encodes with it, or re-initialises it) and swapped
 * in at the end, when nothing can run in between. A re-init drops the old
 * tables (freed once no call uses them); a failed (re-)init leaves the
 * encoder not initialised, so it raises RuntimeError until an __init__
 * succeeds. */
static int
Encoder_init(EncoderObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"byte_ids", "merges", "cache_size", "pattern",
                             NULL};
    PyObject *byte_ids_arg, *merges_arg;
    const char *name = "gpt2";
    int pattern;
    PyObject *byte_seq = NULL, *merges = NULL;
    Py_ssize_t cache_size = 1 << 16;
    Tables *t = NULL;
    int result = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|ns:Encoder", kwlist,
                                     &byte_ids_arg, &merges_arg, &cache_size,
                                     &name))
    {
        goto done;
    }
    pattern = bpe_pattern_id(name);
    if (pattern < 0) {
        goto done;
    }
    if (cache_size < 0) {
        PyErr_SetString(PyExc_ValueError, "cache_size must be non-negative");
        goto done;
    }
    t = calloc(1, sizeof(Tables));
    if (t == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    t->refs = 1;
    /* Tuples of our own: a list passed in could change under an __index__. */
    byte_seq = PySequence_Tuple(byte_ids_arg);
    if (byte_seq == NULL) {
        goto done;
    }
    if (PyTuple_GET_SIZE(byte_seq) != 256) {
        PyErr_SetString(PyExc_ValueError, "byte_ids must hold 256 ids");
        goto done;
    }
    uint32_t max_id = 0;
    for (int b = 0; b < 256; b++) {
        if (as_id(PyTuple_GET_ITEM(byte_seq, b), &t->byte_ids[b],
                  "byte id") < 0)
        {
            goto done;
        }
        max_id = t->byte_ids[b] > max_id ? t->byte_ids[b] : max_id;
    }
    merges = PySequence_Tuple(merges_arg);
    if (merges == NULL || read_merges(&t->pairs, merges, &max_id) < 0) {
        goto done;
    }
    t->byte_pairs = malloc(65536 * sizeof(uint64_t));
    if (t->byte_pairs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t x = 0; x < 256; x++) {
        for (size_t y = 0; y < 256; y++) {
            uint32_t merged = 0;
            uint32_t rank = pair_rank(&t->pairs, t->byte_ids[x],
                                      t->byte_ids[y], &merged);
            t->byte_pairs[x << 8 | y] = (uint64_t)rank << 32 | merged;
        }
    }
    t->id_objects_len =
        max_id < MAX_ID_OBJECTS ? (size_t)max_id + 1 : MAX_ID_OBJECTS;
    t->id_objects = calloc(t->id_objects_len, sizeof(PyObject *));
    if (t->id_objects == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    t->cache_size = (size_t)cache_size;
    t->pattern = pattern;
    /* No Python code from here to the end. */
    Tables *old = self->tables;
    self->tables = t;
    t = NULL;
    tables_decref(old);
    result = 0;
done:
    tables_free(t);
    if (result < 0) {
        Tables *old = self->tables;
        self->tables = NULL;
        tables_decref(old);
    }
    Py_XDECREF(byte_seq);
    Py_XDECREF(merges);
    return result;
}

/* The tables of an initialised encoder, or NULL with RuntimeError set. */
static Tables *
encoder_tables(EncoderObject *self)
{
    if (self->tables == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Encoder is not initialised (never, or its last "
                        "__init__ failed)");
        return NULL;
    }
    return bpe_classes_ready() ? self->tables : NULL;
}

/* What one encode call holds: its copies of the special tokens and their
 * ids, a reference to the tables and a cache of its own. */
typedef struct {
    Specials sp;
    PyObject *ids_seq;
    uint32_t *special_ids;
    Tables *tables;
    Cache *cache;
    IdBuf out; /* the ids */
} Call;

/* The special tokens and their ids, read (and checked) in PythonEncoder's
 * order around the data's own checks: call_open_specials first, then the
 * data, then call_start. call_close must follow either way. */
static int
call_open_specials(Call *call, PyObject *specials_arg, PyObject *ids_arg)
{
    memset(call, 0, sizeof(*call));
    if (bpe_specials_open(&call->sp, specials_arg) < 0) {
        return -1;
    }
    call->ids_seq = PySequence_Tuple(ids_arg);
    return call->ids_seq == NULL ? -1 : 0;
}

/* The special ids checked and converted (an __index__ may run any Python
 * code: the data and the tokens are copies by now), then the tables and a
 * cache taken. No Python code runs after this until call_close. */
static int
call_start(Call *call, EncoderObject *self)
{
    Specials *sp = &call->sp;
    if ((size_t)PyTuple_GET_SIZE(call->ids_seq) != sp->count) {
        PyErr_SetString(PyExc_ValueError,
                        "one id is needed per special token");
        return -1;
    }
    if (sp->bad >= 0) {
        bpe_specials_refuse(sp);
        return -1;
    }
    call->special_ids = PyMem_Calloc(sp->count + 1, sizeof(uint32_t));
    if (call->special_ids == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t k = 0; k < sp->count; k++) {
        if (as_id(PyTuple_GET_ITEM(call->ids_seq, (Py_ssize_t)k),
                  &call->special_ids[k], "special id") < 0)
        {
            return -1;
        }
    }
    /* (an __index__ may have re-initialised the encoder) */
    Tables *t = encoder_tables(self);
    if (t == NULL) {
        return -1;
    }
    int failed;
    call->cache = tables_take_cache(t, &failed);
    if (failed) {
        PyErr_NoMemory();
        return -1;
    }
    call->tables = t;
    t->refs++;
    call->out = t->spare;
    call->out.len = 0;
    memset(&t->spare, 0, sizeof(t->spare));
    return 0;
}

/* Give back the cache (the call's results are built by then, or abandoned),
 * drop the tables. */
static void
call_close(Call *call)
{
    if (call->tables != NULL) {
        tables_give_cache(call->tables, call->cache);
        if (call->tables->spare.ids == NULL &&
            call->out.cap <= MAX_SPARE_IDS)
        {
            call->tables->spare = call->out;
            memset(&call->out, 0, sizeof(call->out));
        }
        tables_decref(call->tables);
    }
    free(call->out.ids);
    PyMem_Free(call->special_ids);
    Py_XDECREF(call->ids_seq);
    bpe_specials_close(&call->sp);
    memset(call, 0, sizeof(*call));
}

/* The data's bytes (a snapshot: see Utf8Data) checked as valid UTF-8, the
 * GIL released for a long one. A str gives its UTF-8 as CPython keeps it
 * (the str's own bytes when it is ASCII; else made once and kept with the
 * str), valid by construction, with no copy: a str is immutable, and d holds
 * a reference. A lone surrogate raises UnicodeEncodeError. */
static int
open_utf8(Utf8Data *d, PyObject *data_arg)
{
    if (PyUnicode_Check(data_arg)) {
        Py_ssize_t len;
        const char *utf8 = PyUnicode_AsUTF8AndSize(data_arg, &len);
        if (utf8 == NULL) {
            return -1;
        }
        memset(d, 0, sizeof(*d));
        d->obj = Py_NewRef(data_arg);
        d->buf = (const unsigned char *)utf8;
        d->len = (size_t)len;
        return 0;
    }
    if (bpe_data_open(d, data_arg) < 0) {
        return -1;
    }
    int valid;
    if (d->len >= NOGIL_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        valid = bpe_utf8_valid(d->buf, d->len);
        Py_END_ALLOW_THREADS
    }
    else {
        /* the scanner reads whole characters: never past a bad one */
        valid = bpe_utf8_valid(d->buf, d->len);
    }
    if (!valid) {
        PyErr_SetString(PyExc_ValueError, "data is not valid UTF-8");
        return -1;
    }
    return 0;
}

/* encode_text for one call, without the GIL when the data is long; -1 with
 * MemoryError set. */
static int
call_encode(Call *call, const Utf8Data *d, int settled, IdBuf *out,
            size_t *cut)
{
    int err;
    if (d->len >= NOGIL_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        err = encode_text(call->tables, call->cache, &call->sp,
                          call->special_ids, d->buf, d->len, settled, out,
                          cut);
        Py_END_ALLOW_THREADS
    }
    else {
        err = encode_text(call->tables, call->cache, &call->sp,
                          call->special_ids, d->buf, d->len, settled, out,
                          cut);
    }
    if (err < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* ids[0:n] into dst as native-endian unsigned integers of `itemsize` bytes
 * (2 or 4); for 2, whether every id fits (else dst is left part-written). */
static int
narrow_ids(char *dst, const uint32_t *ids, size_t n, int itemsize)
{
    if (itemsize == 4) {
        if (n) {
            memcpy(dst, ids, n * sizeof(uint32_t));
        }
        return 1;
    }
    uint16_t *half = (uint16_t *)(void *)dst; /* bytearray: malloc'd */
    uint32_t high = 0;
    for (size_t k = 0; k < n; k++) {
        high |= ids[k];
        half[k] = (uint16_t)ids[k];
    }
    return high <= UINT16_MAX;
}

/* The ids as native-endian unsigned integers of `itemsize` bytes (2 or 4), in
 * a new bytearray; ValueError naming the first id that 2 bytes cannot hold.
 * With the GIL; a long copy runs without it (the new bytearray is no other
 * code's yet), so a batch's threads do not take turns copying out. */
static PyObject *
ids_to_bytearray(const uint32_t *ids, size_t n, int itemsize)
{
    if (n > (size_t)PY_SSIZE_T_MAX / 4) {
        return PyErr_NoMemory();
    }
    PyObject *out =
        PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n * itemsize));
    if (out == NULL) {
        return NULL;
    }
    char *dst = PyByteArray_AS_STRING(out);
    int fits;
    if (n * (size_t)itemsize >= NOGIL_MIN_BYTES * 16) {
        Py_BEGIN_ALLOW_THREADS
        fits = narrow_ids(dst, ids, n, itemsize);
        Py_END_ALLOW_THREADS
    }
    else {
        fits = narrow_ids(dst, ids, n, itemsize);
    }
    if (!fits) {
        size_t k = 0;
        while (ids[k] <= UINT16_MAX) {
            k++;
        }
        Py_DECREF(out);
        return PyErr_Format(PyExc_ValueError,
                            "id %u (at %zu) does not fit in itemsize 2 (ids "
                            "below 65536)",
                            (unsigned)ids[k], k);
    }
    return out;
}

static int
check_itemsize(int itemsize)
{
    if (itemsize != 2 && itemsize != 4) {
        PyErr_Format(PyExc_ValueError, "itemsize must be 2 or 4, not %d",
                     itemsize);
        return -1;
    }
    return 0;
}

/* encode_utf8 and encode_utf8_buffer: as_buffer 0 for a list, else the
 * itemsize. */
static PyObject *
encode_one(EncoderObject *self, PyObject *data_arg, PyObject *specials_arg,
           PyObject *ids_arg, int settled, int as_buffer)
{
    if (encoder_tables(self) == NULL) {
        return NULL;
    }
    /* Everything the call reads is copied (or, for bytes, immutable) before
     * Python code can run: the special ids' __index__ may change the data,
     * the special tokens or this encoder. The checks come in
     * PythonEncoder.encode_utf8's order. */
    Call call;
    Utf8Data d = {0};
    PyObject *result = NULL;
    size_t cut = 0;
    if (call_open_specials(&call, specials_arg, ids_arg) < 0 ||
        open_utf8(&d, data_arg) < 0 || call_start(&call, self) < 0 ||
        call_encode(&call, &d, settled, &call.out, &cut) < 0)
    {
        goto done;
    }
    const IdBuf out = call.out;
    /* A list's ints come from the tables: they stay until call_close. */
    PyObject *ids = as_buffer ? ids_to_bytearray(out.ids, out.len, as_buffer)
                              : ids_to_list(call.tables, out.ids, out.len);
    if (ids != NULL) {
        result = settled ? Py_BuildValue("(Nn)", ids, (Py_ssize_t)cut) : ids;
    }
done:
    call_close(&call);
    bpe_data_close(&d);
    return result;
}

/* encode_utf8(data, special_tokens, special_ids, settled=False): the whole of
 * Tokenizer.encode over UTF-8 bytes: split on the special tokens (bytes,
 * longest first) in C, each one becoming its id, and the text between them
 * encoded straight from the bytes (no str slices, no per-token UTF-8
 * encoding). With settled, Tokenizer._encode_settled in bytes, for
 * encode_iterable: encode only what more data could not change and return
 * (ids, cut), cut a byte offset: special tokens that start where the longest
 * one still fits, then the pre-tokens after the last of them that end before
 * the unsettled region and are settled by their pattern's rule (is_settled).
 */
static PyObject *
Encoder_encode_utf8(EncoderObject *self, PyObject *args)
{
    PyObject *data_arg, *specials_arg, *ids_arg;
    int settled = 0;
    if (!PyArg_ParseTuple(args, "OOO|p:encode_utf8", &data_arg, &specials_arg,
                          &ids_arg, &settled))
    {
        return NULL;
    }
    return encode_one(self, data_arg, specials_arg, ids_arg, settled, 0);
}

static PyObject *
Encoder_encode_utf8_buffer(EncoderObject *self, PyObject *args,
                           PyObject *kwds)
{
    static char *kwlist[] = {"data",    "special_tokens", "special_ids",
                             "settled", "itemsize",       NULL};
    PyObject *data_arg, *specials_arg, *ids_arg;
    int settled = 0, itemsize = 4;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|pi:encode_utf8_buffer",
                                     kwlist, &data_arg, &specials_arg,
                                     &ids_arg, &settled, &itemsize) ||
        check_itemsize(itemsize) < 0)
    {
        return NULL;
    }
    return encode_one(self, data_arg, specials_arg, ids_arg, settled,
                      itemsize);
}

/* One text of encode_many_buffer: its UTF-8, and whether it is known valid
 * (a str's). */
typedef struct {
    const unsigned char *s;
    size_t n;
    int valid;
} Utf8Text;

/* encode_many_buffer(datas, special_tokens, special_ids, itemsize=4, start=0,
 * stop=len(datas)): each of datas[start:stop] (bytes of valid UTF-8, or str)
 * encoded as encode_utf8 would, all with the GIL released once; (ids,
 * offsets): the ids back to back as in encode_utf8_buffer, and stop - start +
 * 1 native int64 offsets, datas[start + i]'s ids being ids[offsets[i]:offsets[i
 * + 1]]. (A range, not a slice: a batch's runs are ranges of one list, and
 * slicing it would touch every item's reference count once more.) */
static PyObject *
Encoder_encode_many_buffer(EncoderObject *self, PyObject *args,
                           PyObject *kwds)
{
    static char *kwlist[] = {"datas", "special_tokens", "special_ids",
                             "itemsize", "start", "stop", NULL};
    PyObject *datas_arg, *specials_arg, *ids_arg;
    int itemsize = 4;
    Py_ssize_t start = 0, stop = PY_SSIZE_T_MAX;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|inn:encode_many_buffer",
                                     kwlist, &datas_arg, &specials_arg,
                                     &ids_arg, &itemsize, &start, &stop) ||
        check_itemsize(itemsize) < 0 || encoder_tables(self) == NULL)
    {
        return NULL;
    }
    Call call;
    PyObject *result = NULL, *held = NULL;
    PyObject **items = NULL; /* our own references: the list may change */
    Utf8Text *texts = NULL;  /* each item's UTF-8 */
    int64_t *offsets = NULL;
    Py_ssize_t count = 0, taken = 0;
    if (call_open_specials(&call, specials_arg, ids_arg) < 0) {
        goto done;
    }
    held = PySequence_Fast(datas_arg, "datas must be a list of bytes");
    if (held == NULL) {
        goto done;
    }
    Py_ssize_t size = PySequence_Fast_GET_SIZE(held);
    stop = stop == PY_SSIZE_T_MAX ? size : stop;
    if (start < 0 || start > stop || stop > size) {
        PyErr_Format(PyExc_ValueError,
                     "start %zd and stop %zd are not a range of datas' %zd "
                     "items",
                     start, stop, size);
        goto done;
    }
    count = stop - start;
    items = PyMem_Calloc((size_t)count + 1, sizeof(PyObject *));
    offsets = PyMem_Calloc((size_t)count + 1, sizeof(int64_t));
    texts = PyMem_Calloc((size_t)count + 1, sizeof(Utf8Text));
    if (items == NULL || offsets == NULL || texts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* No Python code runs in this loop (nor in making a str's UTF-8): the
     * sequence stays as it is. A str gives the UTF-8 CPython keeps with it
     * (valid by construction), with the GIL; the encoding runs without. */
    for (; taken < count; taken++) {
        PyObject *item = PySequence_Fast_GET_ITEM(held, start + taken);
        Utf8Text *text = &texts[taken];
        if (PyBytes_Check(item)) {
            text->s = (const unsigned char *)PyBytes_AS_STRING(item);
            text->n = (size_t)PyBytes_GET_SIZE(item);
        }
        else if (PyUnicode_Check(item)) {
            Py_ssize_t len;
            const char *utf8 = PyUnicode_AsUTF8AndSize(item, &len);
            if (utf8 == NULL) {
                goto done; /* (a lone surrogate: UnicodeEncodeError) */
            }
            text->s = (const unsigned char *)utf8;
            text->n = (size_t)len;
            text->valid = 1;
        }
        else {
            PyErr_Format(PyExc_TypeError,
                         "datas[%zd] is %.100s, not bytes or str",
                         start + taken, Py_TYPE(item)->tp_name);
            goto done;
        }
        items[taken] = Py_NewRef(item);
    }
    if (call_start(&call, self) < 0) {
        goto done;
    }
    Py_ssize_t bad = -1;
    int err = 0;
    IdBuf out = call.out;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < count; k++) {
        const unsigned char *s = texts[k].s;
        size_t n = texts[k].n;
        if (!texts[k].valid && !bpe_utf8_valid(s, n)) {
            bad = k;
            break;
        }
        size_t cut;
        err = encode_text(call.tables, call.cache, &call.sp, call.special_ids,
                          s, n, 0, &out, &cut);
        if (err < 0) {
            break;
        }
        offsets[k + 1] = (int64_t)out.len;
    }
    Py_END_ALLOW_THREADS
    call.out = out; /* (grown: call_close frees or keeps it) */
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "datas[%zd] is not valid UTF-8",
                     start + bad);
        goto done;
    }
    if (err < 0) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *ids = ids_to_bytearray(out.ids, out.len, itemsize);
    if (ids == NULL) {
        goto done;
    }
    PyObject *offs = PyByteArray_FromStringAndSize(
        (const char *)offsets, (Py_ssize_t)((size_t)(count + 1) * 8));
    if (offs == NULL) {
        Py_DECREF(ids);
        goto done;
    }
    result = PyTuple_Pack(2, ids, offs);
    Py_DECREF(ids);
    Py_DECREF(offs);
done:
    call_close(&call);
    for (Py_ssize_t k = 0; k < taken; k++) {
        Py_DECREF(items[k]);
    }
    PyMem_Free(items);
    PyMem_Free(texts);
    PyMem_Free(offsets);
    Py_XDECREF(held);
    return result;
}

static PyObject *
Encoder_bpe(EncoderObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    /* (getting a buffer may run Python code: the state is checked after) */
    Tables *t = encoder_tables(self);
    if (t == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    IdBuf out = {0};
    int failed = idbuf_reserve(&out, (size_t)view.len + 1) < 0 ||
                 encode_pretoken(t, view.buf, (size_t)view.len, &out) < 0;
    PyBuffer_Release(&view);
    PyObject *result =
        failed ? PyErr_NoMemory() : ids_to_list(t, out.ids, out.len);
    free(out.ids);
    return result;
}

/* split_utf8(data): the end of each pre-token of the ordinary text data (no
 * special tokens), as the encoder splits it: from blocks of ASCII text
 * (scan_blocks.h) where it can, from the scanner elsewhere. For tests, which
 * compare it with the regex. */
static PyObject *
Encoder_split_utf8(EncoderObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    /* (getting a buffer may run Python code: the state is checked after) */
    Tables *t = encoder_tables(self);
    const unsigned char *s = view.buf;
    size_t n = (size_t)view.len;
    PyObject *ends = NULL;
    if (t == NULL || !bpe_classes_ready()) {
        goto done;
    }
    if (!bpe_utf8_valid(s, n)) {
        PyErr_SetString(PyExc_ValueError, "split_utf8: data is not UTF-8");
        goto done;
    }
    ends = PyList_New(0);
    Spans spans;
    bpe_spans_init(&spans, t->pattern);
    for (size_t i = 0; ends != NULL && i < n;) {
        i = bpe_spans_next(&spans, s, i, n, t->pattern);
        PyObject *end = PyLong_FromSize_t(i);
        if (end == NULL || PyList_Append(ends, end) < 0) {
            Py_CLEAR(ends);
        }
        Py_XDECREF(end);
    }
done:
    PyBuffer_Release(&view);
    return ends;
}

/* The most pre-tokens one cache holds: each thread encoding at a time has its
 * own, of at most cache_size. */
static PyObject *
Encoder_cache_len(EncoderObject *self, PyObject *unused)
{
    size_t most = 0;
    Tables *t = self->tables;
    for (size_t k = 0; t != NULL && k < t->pool_len; k++) {
        most = t->pool[k]->used > most ? t->pool[k]->used : most;
    }
    return PyLong_FromSize_t(most);
}

static PyMethodDef Encoder_methods[] = {
    {"encode_utf8", (PyCFunction)Encoder_encode_utf8, METH_VARARGS,
     "encode_utf8(data, special_tokens, special_ids, "
     "settled=False)\n--\n\nThe ids of UTF-8 text: each special token (bytes, "
     "longest first) becomes its id, the text between them is encoded.\nWith "
     "settled: (ids, cut), the ids of data[:cut], all that more data could "
     "not change."},
    {"encode_utf8_buffer", (PyCFunction)(void (*)(void))Encoder_encode_utf8_buffer,
     METH_VARARGS | METH_KEYWORDS,
     "encode_utf8_buffer(data, special_tokens, special_ids, settled=False, "
     "itemsize=4)\n--\n\nencode_utf8's ids as a bytearray of native unsigned "
     "integers of itemsize bytes (2 or 4), encoded without the GIL.\nWith "
     "settled: (ids, cut)."},
    {"encode_many_buffer", (PyCFunction)(void (*)(void))Encoder_encode_many_buffer,
     METH_VARARGS | METH_KEYWORDS,
     "encode_many_buffer(datas, special_tokens, special_ids, itemsize=4, "
     "start=0, stop=len(datas))\n--"
     "\n\nEach bytes (or str) of datas[start:stop] encoded as encode_utf8 "
     "would, without the GIL: "
     "(ids, offsets), ids as encode_utf8_buffer gives them back to back, and "
     "stop - start + 1 native int64 offsets (datas[start + i]'s ids are "
     "ids[offsets[i]:offsets[i + 1]])."},
    {"bpe", (PyCFunction)Encoder_bpe, METH_O,
     "bpe(token_bytes)\n--\n\nThe ids BPE gives one pre-token's bytes (no "
     "cache)."},
    {"split_utf8", (PyCFunction)Encoder_split_utf8, METH_O,
     "split_utf8(data)\n--\n\nThe end of each pre-token of UTF-8 text "
     "(no special tokens) as the encoder splits it."},
    {"cache_len", (PyCFunction)Encoder_cache_len, METH_NOARGS,
     "cache_len()\n--\n\nHow many pre-tokens a cache holds (the fullest: each "
     "thread encoding at a time has its own)."},
    {NULL, NULL, 0, NULL},
};

BPE_INTERNAL PyTypeObject bpe_EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bpe_impls._native.Encoder",
    .tp_doc = "Encoder(byte_ids, merges, cache_size=65536, pattern='gpt2'): "
              "BPE with a rank table and a cache.\n\nbyte_ids: the id of each "
              "byte 0..255; merges: (left, right, merged) ids in rank order; "
              "pattern: the split pattern of the text, 'gpt2', 'cl100k' or "
              "'o200k'.",
    .tp_basicsize = sizeof(EncoderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Encoder_init,
    .tp_dealloc = (destructor)Encoder_dealloc,
    .tp_methods = Encoder_methods,
};
