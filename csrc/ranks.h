/* Ranks: tokens' bytes back to back, each with a number (a rank file's rank,
 * a vocab's id), and a hash map from bytes to entry. rank_file.c reads a
 * tiktoken rank file into one, vocab_files.c (vocab_files.h) a vocab.json or
 * tokenizer.json model; py/tables_module.c gives their tables to Python. */
#ifndef BPE_RANKS_H
#define BPE_RANKS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_util.h"

#define MAX_RANK 4294967294u /* encoding/tables.py's MAX_TOKEN_ID */
#define NOT_FOUND UINT32_MAX

typedef struct {
    unsigned char *blob; /* the tokens' bytes, back to back in entry order */
    size_t *off;         /* n + 1 offsets into blob */
    uint32_t *rank;      /* entry k's number (ascending once sorted) */
    size_t n;
    uint64_t *slots; /* hash map: hash's high half << 32 | entry + 1; 0 free */
    size_t mask;
} Ranks;

static inline void
ranks_free(Ranks *r)
{
    free(r->blob);
    free(r->off);
    free(r->rank);
    free(r->slots);
    memset(r, 0, sizeof(*r));
}

/* The entry holding bytes s[0:len], or NOT_FOUND. */
static inline uint32_t
ranks_find(const Ranks *r, const unsigned char *s, size_t len)
{
    uint64_t h = bpe_hash_bytes(s, len);
    uint64_t tag = h >> 32 << 32;
    size_t at = (size_t)h & r->mask;
    for (;;) {
        uint64_t slot = r->slots[at];
        if (slot == 0) {
            return NOT_FOUND;
        }
        if ((slot & 0xFFFFFFFF00000000ull) == tag) {
            uint32_t k = (uint32_t)(slot & 0xFFFFFFFFu) - 1;
            if (r->off[k + 1] - r->off[k] == len &&
                memcmp(r->blob + r->off[k], s, len) == 0)
            {
                return k;
            }
        }
        at = (at + 1) & r->mask;
    }
}

/* Add entry k (already in the arrays) to the map: 0, or 1 if an entry with
 * the same bytes is there (then k is not added). The map must have a free
 * slot (ranks_index sizes it). */
static inline int
ranks_insert(Ranks *r, size_t k)
{
    const unsigned char *s = r->blob + r->off[k];
    size_t len = r->off[k + 1] - r->off[k];
    if (ranks_find(r, s, len) != NOT_FOUND) {
        return 1;
    }
    uint64_t h = bpe_hash_bytes(s, len);
    size_t at = (size_t)h & r->mask;
    while (r->slots[at] != 0) {
        at = (at + 1) & r->mask;
    }
    r->slots[at] = (h >> 32 << 32) | (uint64_t)(k + 1);
    return 0;
}

/* Index every entry, with room for `extra` more (ranks_insert): 0, 1 if two
 * entries hold the same bytes, -1 if out of memory (no exception set). */
static inline int
ranks_index(Ranks *r, size_t extra)
{
    size_t cap = 16;
    while (cap < (r->n + extra) * 2 + 2) {
        cap *= 2;
    }
    r->slots = calloc(cap, sizeof(uint64_t));
    if (r->slots == NULL) {
        return -1;
    }
    r->mask = cap - 1;
    for (size_t k = 0; k < r->n; k++) {
        if (ranks_insert(r, k)) {
            return 1;
        }
    }
    return 0;
}

typedef struct {
    uint32_t rank;
    uint32_t entry;
} RankEntry;

static inline int
ranks_by_rank(const void *a, const void *b)
{
    uint32_t x = ((const RankEntry *)a)->rank, y = ((const RankEntry *)b)->rank;
    return x < y ? -1 : x > y;
}

/* Put the entries (not yet indexed) in ascending order of their numbers,
 * the blob rebuilt in that order, with room for `extra` more entries of up
 * to `extra_bytes` in all: 0, 1 if a number is given twice, -1 if out of
 * memory. */
static inline int
ranks_sort(Ranks *r, size_t extra, size_t extra_bytes)
{
    size_t n = r->n, used = r->off[n];
    int sorted = 1;
    for (size_t k = 1; k < n; k++) {
        sorted &= r->rank[k - 1] < r->rank[k];
    }
    if (sorted) {
        return 0;
    }
    RankEntry *order = malloc((n ? n : 1) * sizeof(RankEntry));
    unsigned char *by = malloc(used + extra_bytes + 1);
    size_t *by_off = malloc((n + extra + 1) * sizeof(size_t));
    if (order == NULL || by == NULL || by_off == NULL) {
        free(order);
        free(by);
        free(by_off);
        return -1;
    }
    for (size_t k = 0; k < n; k++) {
        order[k].rank = r->rank[k];
        order[k].entry = (uint32_t)k;
    }
    qsort(order, n, sizeof(RankEntry), ranks_by_rank);
    size_t at = 0;
    for (size_t k = 0; k < n; k++) {
        size_t e = order[k].entry, len = r->off[e + 1] - r->off[e];
        memcpy(by + at, r->blob + r->off[e], len);
        by_off[k] = at;
        at += len;
        r->rank[k] = order[k].rank;
    }
    by_off[n] = at;
    free(order);
    free(r->blob);
    free(r->off);
    r->blob = by;
    r->off = by_off;
    for (size_t k = 1; k < n; k++) {
        if (r->rank[k - 1] == r->rank[k]) {
            return 1;
        }
    }
    return 0;
}

/* ---- a tiktoken rank file (rank_file.c) --------------------------------- */

/* A rank file's tables: its tokens in rank order (the ranks ascending), the
 * merges rebuilt from the ranks as (left rank, right rank, merged rank)
 * triples in rank order, and each byte's rank. */
typedef struct {
    Ranks r;
    uint32_t *merges;
    size_t n_merges;
    uint32_t byte_ids[256];
} RankFile;

/* Read data[0:size], one `base64(token) SP rank LF` line per token, into rf:
 * 0; 1 if the file is not of that plain form or holds a fault the Python
 * reader refuses (it is then read by Python, which names the fault); -1 when
 * out of memory. bpe_rank_file_free(rf) must follow either way. */
BPE_INTERNAL int bpe_rank_file_read(RankFile *rf, const unsigned char *data,
                                    size_t size);
BPE_INTERNAL void bpe_rank_file_free(RankFile *rf);

#endif /* BPE_RANKS_H */
