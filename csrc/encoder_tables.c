/* Building the encoder's tables (BpeTables, encoder_internal.h): the pair map
 * of the merges, and BPE's first round as a direct table of byte pairs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "encoder_internal.h"

BPE_INTERNAL int
bpe_pairs_init(PairMap *pm, size_t n)
{
    size_t capacity = 16;
    while (capacity < n * 2 + 2) {
        capacity *= 2;
    }
    pm->slots = malloc(capacity * sizeof(PairSlot));
    if (pm->slots == NULL) {
        pm->mask = 0;
        return -1;
    }
    memset(pm->slots, 0xFF, capacity * sizeof(PairSlot));
    pm->mask = capacity - 1;
    return 0;
}

BPE_INTERNAL void
bpe_pairs_add(PairMap *pm, uint32_t a, uint32_t b, uint32_t merged,
              uint32_t rank)
{
    uint64_t key = pair_key(a, b);
    size_t at = pair_slot(key, pm->mask);
    while (pm->slots[at].key != EMPTY_PAIR && pm->slots[at].key != key) {
        at = (at + 1) & pm->mask;
    }
    if (pm->slots[at].key == EMPTY_PAIR) {
        pm->slots[at].key = key;
        pm->slots[at].rank = rank;
        pm->slots[at].merged = merged;
    }
}

BPE_INTERNAL int
bpe_pairs_read_triples(PairMap *pm, const unsigned char *p, size_t n,
                       uint32_t *max_id, size_t *bad_rank)
{
    if (bpe_pairs_init(pm, n) < 0) {
        return -1;
    }
    for (size_t rank = 0; rank < n; rank++) {
        uint32_t t[3];
        memcpy(t, p + rank * sizeof(t), sizeof(t));
        if (t[0] == UINT32_MAX || t[1] == UINT32_MAX || t[2] == UINT32_MAX) {
            *bad_rank = rank;
            return 1;
        }
        *max_id = t[2] > *max_id ? t[2] : *max_id;
        bpe_pairs_add(pm, t[0], t[1], t[2], (uint32_t)rank);
    }
    return 0;
}

/* t's merges as a MergedMap, if its ids allow it (see MergedMap): 0 (built,
 * or not allowed, slots left NULL), or -1 when out of memory. */
static int
merged_map_build(BpeTables *t)
{
    const PairMap *pm = &t->pairs;
    size_t cap = pm->mask + 1;
    for (size_t b = 0; b < 256; b++) {
        if (t->byte_ids[b] >= MERGED_NONE) {
            return 0;
        }
    }
    /* by_rank[rank]: the merged id (ranks are below cap: a pair map holds
     * fewer merges than slots, and a repeated pair keeps its first rank, so
     * some ranks may be missing) */
    uint32_t *by_rank = malloc(cap * sizeof(uint32_t));
    if (by_rank == NULL) {
        return -1;
    }
    memset(by_rank, 0xFF, cap * sizeof(uint32_t));
    int allowed = 1;
    for (size_t k = 0; k < cap && allowed; k++) {
        const PairSlot *slot = &pm->slots[k];
        if (slot->key == EMPTY_PAIR) {
            continue;
        }
        allowed = slot->rank < cap && slot->merged < MERGED_NONE &&
                  (slot->key >> 32) < MERGED_NONE &&
                  (uint32_t)slot->key < MERGED_NONE;
        if (allowed) {
            by_rank[slot->rank] = slot->merged;
        }
    }
    uint32_t last = 0;
    int first = 1;
    for (size_t r = 0; r < cap && allowed; r++) {
        if (by_rank[r] != UINT32_MAX) {
            allowed = first || by_rank[r] > last; /* strictly: no two alike */
            last = by_rank[r];
            first = 0;
        }
    }
    free(by_rank);
    if (!allowed) {
        return 0;
    }
    /* the same load as the pair map's: one slot per merge and as many free */
    uint64_t *slots = malloc(cap * sizeof(uint64_t));
    if (slots == NULL) {
        return -1;
    }
    memset(slots, 0xFF, cap * sizeof(uint64_t));
    for (size_t k = 0; k < cap; k++) {
        const PairSlot *slot = &pm->slots[k];
        if (slot->key == EMPTY_PAIR) {
            continue;
        }
        uint64_t key = (slot->key >> 32) << MERGED_BITS | (uint32_t)slot->key;
        size_t at = pair_slot(key, pm->mask);
        while (slots[at] != EMPTY_MERGED) {
            at = (at + 1) & pm->mask;
        }
        slots[at] = key << MERGED_BITS | slot->merged;
    }
    t->merged.slots = slots;
    t->merged.mask = pm->mask;
    return 0;
}

/* BPE's first round reads byte_pairs[x << 8 | y] (the rank and merged id of
 * the pair of byte ids of bytes x and y), or byte_merged[x << 8 | y], instead
 * of probing a map. */
BPE_INTERNAL int
bpe_tables_finish(BpeTables *t)
{
    t->byte_pairs = malloc(65536 * sizeof(uint64_t));
    if (t->byte_pairs == NULL || merged_map_build(t) < 0) {
        return -1;
    }
    for (size_t x = 0; x < 256; x++) {
        for (size_t y = 0; y < 256; y++) {
            uint32_t merged = 0;
            uint32_t rank = pair_rank(&t->pairs, t->byte_ids[x],
                                      t->byte_ids[y], &merged);
            t->byte_pairs[x << 8 | y] = (uint64_t)rank << 32 | merged;
        }
    }
    if (t->merged.slots != NULL) {
        t->byte_merged = malloc(65536 * sizeof(uint32_t));
        if (t->byte_merged == NULL) {
            return -1;
        }
        for (size_t xy = 0; xy < 65536; xy++) {
            t->byte_merged[xy] = t->byte_pairs[xy] >> 32 == NO_RANK
                                     ? NO_RANK
                                     : (uint32_t)t->byte_pairs[xy];
        }
    }
    return 0;
}

BPE_INTERNAL void
bpe_tables_clear(BpeTables *t)
{
    free(t->pairs.slots);
    free(t->byte_pairs);
    free(t->merged.slots);
    free(t->byte_merged);
    t->pairs.slots = NULL;
    t->pairs.mask = 0;
    t->byte_pairs = NULL;
    t->merged.slots = NULL;
    t->merged.mask = 0;
    t->byte_merged = NULL;
}
