/* BPE of one pre-token's ids over the pair map: a scan for short pre-tokens
 * (through the MergedMap where the ids allow), a heap for long ones. */
#include <stdint.h>
#include <string.h>

#include "encoder_internal.h"
#include "u64_heap.h"

/* ---- BPE ------------------------------------------------------------------ */

/* Plain BPE, as tokenizer.bpe_scan: merge the lowest-ranked pair (leftmost on
 * a tie), repeat. ranks[k] is the rank of (ids[k], ids[k+1]); after a merge
 * only its two neighbours change. */
BPE_AVX2_CLONES BPE_INTERNAL size_t
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
        /* The merged id's new pairs: their slots, each a likely cache miss
         * on a pre-token not seen before, are fetched now, so that both
         * arrive while the arrays shift below instead of one after the
         * other in the probes. */
        if (at + 2 < n) {
            __builtin_prefetch(&pm->slots[pair_slot(pair_key(ids[at], ids[at + 2]), pm->mask)]);
        }
        if (at > 0) {
            __builtin_prefetch(&pm->slots[pair_slot(pair_key(ids[at - 1], ids[at]), pm->mask)]);
        }
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

/* bpe_scan where merged ids order pairs as ranks do (MergedMap): merged[k]
 * is the id (ids[k], ids[k + 1]) merges into, and the lowest one is the merge
 * to make. One array to search and shift, not two, and 8-byte probes. */
BPE_AVX2_CLONES BPE_INTERNAL size_t
bpe_scan_merged(const MergedMap *mm, const uint32_t *byte_merged,
                const unsigned char *bytes, uint32_t *ids, size_t n,
                uint32_t *merged)
{
    if (n < 2) {
        return n;
    }
    size_t m = n - 1;
    for (size_t k = 0; k < m; k++) {
        merged[k] = byte_merged[bytes[k] << 8 | bytes[k + 1]];
    }
    for (;;) {
        uint32_t best = NO_RANK; /* (branch-free: see bpe_scan) */
        for (size_t k = 0; k < m; k++) {
            best = merged[k] < best ? merged[k] : best;
        }
        if (best == NO_RANK) {
            break;
        }
        size_t at = 0;
        while (merged[at] != best) {
            at++;
        }
        ids[at] = best;
        if (at + 2 < n) {
            __builtin_prefetch(&mm->slots[pair_slot(
                (uint64_t)best << MERGED_BITS | ids[at + 2], mm->mask)]);
        }
        if (at > 0) {
            __builtin_prefetch(&mm->slots[pair_slot(
                (uint64_t)ids[at - 1] << MERGED_BITS | best, mm->mask)]);
        }
        for (size_t k = at + 1; k + 1 < n; k++) {
            ids[k] = ids[k + 1];
        }
        for (size_t k = at; k + 1 < m; k++) {
            merged[k] = merged[k + 1];
        }
        n--;
        m--;
        if (at < m) {
            merged[at] = pair_merged(mm, ids[at], ids[at + 1]);
        }
        if (at > 0) {
            merged[at - 1] = pair_merged(mm, ids[at - 1], ids[at]);
        }
    }
    return n;
}

#define DEAD UINT32_MAX

/* BPE in O(n log n), as tokenizer.bpe_heap: a linked list over positions and a
 * lazy heap whose entries are re-checked when popped (a neighbour may have
 * merged since). Ranks are unique per pair, so an entry whose position still
 * holds a pair of that rank is still valid. Returns the new length (ids
 * compacted in place); (size_t)-1 when out of memory. */
BPE_INTERNAL size_t
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
                u64_heap_push(heap, &size, (uint64_t)rank << 32 | k);
            }
        }
    }
    while (size) {
        uint64_t top = u64_heap_pop(heap, &size);
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
                u64_heap_push(heap, &size, (uint64_t)r << 32 | i);
            }
        }
        uint32_t p = prev[i];
        if (p != DEAD) {
            uint32_t r = pair_rank(pm, ids[p], merged, NULL);
            if (r != NO_RANK) {
                u64_heap_push(heap, &size, (uint64_t)r << 32 | p);
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

