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

/* BPE's first round reads byte_pairs[x << 8 | y] (the rank and merged id of
 * the pair of byte ids of bytes x and y) instead of probing the pair map. */
BPE_INTERNAL int
bpe_tables_fill_byte_pairs(BpeTables *t)
{
    t->byte_pairs = malloc(65536 * sizeof(uint64_t));
    if (t->byte_pairs == NULL) {
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
    return 0;
}

BPE_INTERNAL void
bpe_tables_clear(BpeTables *t)
{
    free(t->pairs.slots);
    free(t->byte_pairs);
    t->pairs.slots = NULL;
    t->pairs.mask = 0;
    t->byte_pairs = NULL;
}
