/* The encoder's pre-token cache: pre-token bytes -> ids (encoder_internal.h
 * describes its layout); growth, eviction and storing a miss. */
#include <stdint.h>
#include <string.h>

#include "encoder_internal.h"

/* cap zeroed slots (huge pages for a large table: each lookup of a
 * pre-token is a read at random); NULL when out of memory. */
static CacheSlot *
slots_new(size_t cap)
{
    return table_alloc_zeroed(cap * sizeof(CacheSlot));
}

static void
slots_free(CacheSlot *slots, size_t cap)
{
    table_free(slots, cap * sizeof(CacheSlot));
}

BPE_INTERNAL void
cache_free(Cache *c)
{
    if (c == NULL) {
        return;
    }
    slots_free(c->slots, c->mask + 1);
    free(c->key_arena);
    free(c->id_arena);
    free(c);
}

/* A new empty cache for up to `limit` entries (limit > 0); NULL when out of
 * memory. It starts small and grows, doubling (or quadrupling) while its
 * load would pass 1/2, up to the power of two of slots that holds `limit`
 * entries at a load of at most 3/4: the largest table, the one most of a
 * cache's memory is in, is filled further (a lookup then probes about 2.5
 * slots on a hit, 8.5 on a miss, most on the same line or the next). */
BPE_INTERNAL Cache *
cache_new(size_t limit)
{
    Cache *c = calloc(1, sizeof(Cache));
    if (c == NULL) {
        return NULL;
    }
    size_t max_cap = 2;
    while (max_cap * 3 / 4 < limit && max_cap < ((size_t)1 << 40)) {
        max_cap *= 2;
    }
    size_t cap = max_cap < 1024 ? max_cap : 1024;
    c->slots = slots_new(cap);
    if (c->slots == NULL) {
        free(c);
        return NULL;
    }
    c->mask = cap - 1;
    c->shift = 64u - (unsigned)__builtin_ctzll((unsigned long long)cap);
    c->limit = limit;
    c->max_cap = max_cap;
    c->key_budget = limit <= SIZE_MAX / KEY_BYTES_PER_ENTRY
                        ? limit * KEY_BYTES_PER_ENTRY
                        : SIZE_MAX;
    c->id_budget = limit <= SIZE_MAX / sizeof(uint32_t) / IDS_PER_ENTRY
                       ? limit * IDS_PER_ENTRY
                       : SIZE_MAX / sizeof(uint32_t);
    return c;
}

BPE_INTERNAL size_t
cache_memory(const Cache *c)
{
    return sizeof(Cache) + (c->mask + 1) * sizeof(CacheSlot) + c->key_cap +
           c->id_cap * sizeof(uint32_t);
}

static void
cache_clear(Cache *c)
{
    memset(c->slots, 0, (c->mask + 1) * sizeof(CacheSlot));
    c->used = c->key_len = c->id_len = 0;
}

/* The slot holding the long key s[0:len] (h: bpe_hash_bytes of it), or the
 * free slot where it would go. */
BPE_INTERNAL CacheSlot *
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

/* Double the slots, or quadruple them from PREFETCH_MIN_SLOTS up to
 * QUADRUPLE_BELOW (rehash); -1 when out of memory (the cache unchanged). A
 * small table stays small, as its hits are fast while it fits in L2; a large
 * one is looked up in prefetched batches whatever its size, and each rehash
 * of it costs a pass over megabytes; past QUADRUPLE_BELOW it doubles again,
 * so a cache of udhr.txt's 226k entries takes 2**19 slots (16 MiB), not
 * 2**20 (same speed through fresh encoders, 16 MiB less peak RSS). */
#define QUADRUPLE_BELOW ((size_t)1 << 18)
static int
cache_grow(Cache *c)
{
    size_t old_cap = c->mask + 1;
    size_t cap = old_cap * (old_cap >= PREFETCH_MIN_SLOTS &&
                                    old_cap < QUADRUPLE_BELOW &&
                                    old_cap * 4 <= c->max_cap
                                ? 4
                                : 2);
    CacheSlot *slots = slots_new(cap), *old = c->slots;
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
    slots_free(old, old_cap);
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
    if (2 * kept > c->limit || 2 * key_bytes > c->key_budget ||
        2 * (id_count + ID_ARENA_SLACK) > c->id_budget ||
        (slots = slots_new(cap)) == NULL ||
        (key_bytes && (keys = malloc(key_bytes)) == NULL) ||
        (id_count && (ids = malloc((id_count + ID_ARENA_SLACK) *
                                   sizeof(uint32_t))) == NULL))
    {
        if (slots != NULL) {
            slots_free(slots, cap);
        }
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
    slots_free(c->slots, cap);
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

/* Make room for one more entry of key_bytes in the key arena and n ids:
 * clear, evict or grow (each moves the slots); 0, or -1 when out of memory. */
static int
cache_make_room(Cache *c, size_t key_bytes, size_t n)
{
    if (c->id_len + n > UINT32_MAX) {
        cache_clear(c); /* (id_arena offsets are 32 bits) */
    }
    if (c->used >= c->limit || c->key_len + key_bytes > c->key_budget ||
        c->id_len + arena_ids(n) > c->id_budget)
    {
        cache_evict(c); /* (which leaves each arena at most half full) */
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
BPE_INTERNAL int
cache_fill(Cache *c, CacheSlot *slot, uint64_t k0, uint64_t k1, size_t len,
           const uint32_t *ids, size_t n)
{
    uint32_t id_off = 0;
    if (n > CACHE_INLINE_IDS) {
        if (bpe_reserve_within(&c->id_arena, &c->id_cap,
                               c->id_len + arena_ids(n), sizeof(uint32_t), 1024,
                               c->id_budget) < 0)
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
BPE_INTERNAL int
cache_store(Cache *c, const unsigned char *s, size_t len, size_t room,
            const uint32_t *ids, size_t n)
{
    size_t key_bytes = len > INLINE_KEY_BYTES ? len : 0;
    if (len > MAX_CACHED_BYTES || 2 * key_bytes > c->key_budget ||
        2 * arena_ids(n) > c->id_budget)
    {
        return 0; /* (too large for its arenas: not cached) */
    }
    if (cache_make_room(c, key_bytes, n) < 0) {
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
        if (bpe_reserve_within(&c->key_arena, &c->key_cap, c->key_len + len,
                               1, 4096, c->key_budget) < 0)
        {
            return -1;
        }
        memcpy(c->key_arena + c->key_len, s, len);
        k0 = c->key_len;
        k1 = long_key_k1(h);
    }
    return cache_fill(c, slot, k0, k1, len, ids, n);
}
