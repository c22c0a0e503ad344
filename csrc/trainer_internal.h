/* The native trainer's core: the types its components share
 * (trainer_words.c, trainer_pairs.c, trainer_heap.c, trainer_merge.c,
 * trainer_load.c, trainer.c), the small functions the merge loop calls on
 * every occurrence (static inline), and the components' functions, which the
 * Python module (py/trainer_module.c) calls. The design is described at the
 * top of trainer.c. Plain C: a State is one run's memory, used by one thread
 * at a time.
 *
 * Include it first: mremap needs _GNU_SOURCE before any system header. */
#ifndef BPE_TRAINER_INTERNAL_H
#define BPE_TRAINER_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GLIBC__)
#include <malloc.h> /* malloc_trim */
#endif
#if defined(__linux__)
#include <sys/mman.h> /* mmap, mremap */
#endif

#include "bpe_util.h"
#include "packed.h"

/* The base of a boundary cell's code (trainer.c describes the cells). */
#define BOUNDARY INT32_MIN
/* Tokens walked back from a cell to its word's boundary, to read the word's
 * count, before a long word's boundary is looked up in long_starts instead:
 * bounds the walk in a word of millions of bytes. */
#define WALK_LIMIT 32
/* val[] of a token's inner cell, never read (any negative above
 * last_boundary would do) */
#define DEAD (-1)
/* merges between signal checks and progress calls */
#define BATCH 256
/* heap entries before the first cut (train's heap_limit) */
#define HEAP_LIMIT 65536
/* a list is compacted when its count is below len / STALE_SHARE */
#define STALE_SHARE 4
/* batches between calls to malloc_trim */
#define TRIM_EVERY 8
/* bytes of lists freed (Arena.released) that call malloc_trim at once, in
 * mid-batch: the first merges free the byte pairs' large lists (141 MB on a
 * 250 MB web corpus) while the new pairs' lists grow, and glibc kept the freed
 * pages until the batch's trim, which made the run's peak (about 35 MB more
 * than the merges' end) */
#define TRIM_BYTES ((size_t)16 << 20)
/* occurrence-list entries between a prefetch and its use */
#define LOOKAHEAD 16

/* An occurrence list's cells are scattered over the words: fetching them ahead
 * hides the cache misses that dominate the first, largest merges on a big
 * corpus. */
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(address) __builtin_prefetch(address)
#else
#define PREFETCH(address) ((void)0)
#endif

/* The cells where a pair was seen. Append-only: an entry is live only while
 * the pair is still at that cell, which the merge re-tests (route_b's index).
 */

typedef struct {
    union {
        int32_t *items;
        int32_t one; /* the only entry, when cap is 1 */
    } u;
    uint32_t len, cap; /* 32-bit: a Pair of 32 bytes, not 40, on millions */
} CellList;
/* A list's entries: most pairs of a web corpus are seen once, and keep that
 * cell in the list itself. */
static inline int32_t *
cells_items(CellList *list)
{
    return list->cap == 1 ? &list->u.one : list->u.items;
}
/* Most pairs never hold more than a few occurrences, so a list of one entry
 * holds it in place, and a list's first SMALL_LIST entries come from an arena
 * rather than from one malloc each; a list that outgrows them moves to malloc
 * and gives them back. So a list owns malloc'd items exactly when cap >
 * SMALL_LIST. */
#define SMALL_LIST 4
#define ARENA_BLOCK 16384 /* int32s per arena block */
typedef struct {
    int32_t **blocks;
    size_t num_blocks, blocks_cap;
    size_t used; /* int32s handed out from the last block */
    /* chunks given back, each holding the next one's address */
    int32_t *free_chunks;
    /* bytes of malloc'd lists freed (or left by a realloc) since the last
     * malloc_trim */
    size_t released;
} Arena;
/* A list of BIG_LIST entries or more gets pages of its own (on Linux): they
 * go back to the system the moment the list shrinks or is freed, and a list
 * doubles in place (mremap) rather than being copied next to its old self,
 * whatever glibc's (moving) mmap threshold is. */
#define BIG_LIST 16384
/* Every token's bytes back to back, and a hash table from bytes to id: one id
 * per byte string, so a merge whose bytes already exist (`a`+`bc` after
 * `ab`+`c`) reuses that token's id. */
typedef struct {
    uint8_t *bytes;
    size_t bytes_len, bytes_cap;
    size_t *start; /* token id -> offset of its bytes */
    int32_t *len; /* token id -> number of bytes = number of cells it covers */
    /* token id -> its first 8 bytes, big-endian, zero-padded: orders most ties
     */
    uint64_t *head;
    int32_t count, cap;
    int32_t *slots; /* open addressing, linear probing; -1 is empty */
    size_t slot_mask;
} Tokens;
typedef struct {
    /* over the pair's current occurrences, each weighted by its word's count
     */
    int64_t count;
    int32_t left, right;
    CellList seen; /* cells where the pair was seen (left token's start) */
} Pair; /* 32 bytes: a web corpus makes millions */
/* A slot of the pair table (a uint32_t) is SLOT_EMPTY or holds a pair's id in
 * its low slot_bits bits and, above them, as many bits of a second hash of the
 * pair's key (its tag), so a probe reads the (large, randomly accessed) pair
 * record only when the tag matches: 4 bytes a slot, not 8 for a full id and
 * tag (16 MB of the 250 MB web corpus's peak). Ids fit: a record is made only
 * when none is free, so there are never more than the live pairs' peak,
 * which the table's load factor keeps below 3/4 of its slots (pair_id also
 * doubles it should they reach its id mask). */
#define SLOT_EMPTY UINT32_MAX
/* A heap entry: `count` is the pair's count when pushed, an upper bound of it
 * or a leftover (see pop_best). It names the pair by its tokens, not its id:
 * comparing entries then reads only the small token tables, not the (large,
 * randomly accessed) pair records. */
typedef struct {
    int64_t count;
    int32_t left, right;
} Entry;
/* The two pairs one neighbour token t of the merged pair (a, b) moves an
 * occurrence between: (t, a) -> (t, new) for a left neighbour, (b, t) -> (new,
 * t) for a right one. Looked up once per merge and neighbour token rather than
 * once per occurrence: a merge's many occurrences share few neighbours, and a
 * token-indexed array is cheaper than the pair hash table. */
typedef struct {
    /* the merge these ids belong to (its number + 1; 0: none yet) */
    int32_t stamp;
    int32_t lost, gained;
} Shift;
typedef struct {
    /* the cells: boundaries, token ids, offsets (trainer.c) */
    int32_t *val;
    int32_t num_cells, num_words;
    int32_t last_boundary; /* val[] <= it is a boundary */
    int64_t count_limit; /* boundaries code counts below it as themselves */
    int64_t *big_counts; /* the others */
    size_t num_big, big_cap;
    int64_t max_len; /* the longest word's bytes */
    /* the boundary cells of words of WALK_LIMIT bytes or more, ascending */
    int32_t *long_starts;
    size_t num_long, long_cap;

    Pair *pairs; /* pair id -> pair; a pair keeps its id for the whole run */
    size_t num_pairs, pairs_cap; /* records, free ones included */
    /* Records of pairs counted down to 0, taken out of the table after the
     * merge that did it and reused for new pairs: on a web corpus about a
     * sixth of all pairs end so. A free record has left == -1. */
    int32_t *free_ids;
    size_t num_free, free_cap;
    int32_t *zeroed; /* pairs counted down to 0 in the current merge */
    size_t zeroed_len, zeroed_cap;
    /* (left, right) -> tag and pair id, open addressing, linear probing */
    uint32_t *slots;
    int slot_bits;
    Arena arena; /* the first entries of every occurrence list */

    Entry *heap;
    size_t heap_len, heap_cap;
    /* The heap holds (an entry at least the count of) every pair whose
     * count is >= floor, not every pair: a web corpus makes millions of
     * pairs, most too rare ever to be merged. When the heap reaches
     * heap_limit entries the floor rises (heap_cut); when it runs dry the
     * floor falls and the pairs above it come back (heap_refill). */
    int64_t floor;
    size_t heap_limit;

    int32_t *grown; /* pairs whose count rose in the current merge */
    size_t grown_len, grown_cap;
    /* token id t -> ids of (t, a) and (t, new) in the current merge; each
     * pair that grows in a merge is the `gained` of one of them, so a shift
     * looked up also lists its gained pair in `grown` */
    Shift *left_shift;
    Shift *right_shift; /* token id t -> ids of (b, t) and (new, t) */

    Tokens tok;
    int32_t *merge_left, *merge_right;
    int32_t num_merges, max_merges;

    /* the work done, for train(stats=...): occurrence-list entries visited
     * and merged, heap pushes and pops (lazy ones included), the heap's
     * largest size */
    int64_t visited, merged, pushes, pops, cuts, refills, compacted;
    int64_t pairs_created, trims;
    size_t heap_peak;
} State;
/* The hash of pair (a, b): its high bits pick the slot (Fibonacci hashing).
 */
static inline uint64_t
pair_hash(int32_t a, int32_t b)
{
    return ((uint64_t)a << 32 | (uint32_t)b) * 0x9E3779B97F4A7C15ull;
}
/* The bits of a slot that hold the pair id, in a table of 2**bits slots. */
static inline uint32_t
id_mask(int bits)
{
    return bits >= 32 ? UINT32_MAX : ((uint32_t)1 << bits) - 1;
}
/* Pair (a, b)'s tag, in the bits of a slot above `mask`: from another
 * multiplier, as the first hash's high bits are near-equal within a cluster
 * and its low 32 depend on b alone. */
static inline uint32_t
pair_tag(int32_t a, int32_t b, uint32_t mask)
{
    uint64_t h = ((uint64_t)a << 32 | (uint32_t)b) * 0xC2B2AE3D27D4EB4Full;
    return (uint32_t)(h >> 32) & ~mask;
}
/* The id of the pair in slot i, or -1 if it is empty. */
static inline int32_t
slot_pair(const State *s, size_t i)
{
    uint32_t v = s->slots[i];
    return v == SLOT_EMPTY ? -1 : (int32_t)(v & id_mask(s->slot_bits));
}
/* Counts in 4 buckets per power of 2 (bucket c for c < 4), to pick a floor
 * that keeps about a given number of entries: up to 2**63 - 1, the last. */
#define NUM_BUCKETS (4 * 61 + 4)
/* The start of the token before the one starting at cell n, or -1 at the start
 * of a word. */
static inline int32_t
token_before(const State *s, int32_t n)
{
    int32_t v = s->val[n - 1];
    if (v <= s->last_boundary) {
        return -1;
    }
    /* a multi-cell token's last cell holds -(its length - 1) */
    return v >= 0 ? n - 1 : n - 1 + v;
}
/* The count of the word whose boundary cell holds v. */
static inline int64_t
boundary_count(const State *s, int32_t v)
{
    int64_t code = (int64_t)v - BOUNDARY;
    return code < s->count_limit ? code : s->big_counts[code - s->count_limit];
}
/* What the words' first pass adds up, for train_alloc_cells. */
typedef struct {
    int64_t cells, words, pairs_weight, max_len;
} Sizes;

/* ---- functions of the components ---------------------------------------- */

BPE_INTERNAL int32_t *
arena_take(Arena *arena);

BPE_INTERNAL void
arena_free(Arena *arena);

BPE_INTERNAL int32_t *
list_resize(Arena *arena, int32_t *items, uint32_t old_cap, uint32_t cap,
            uint32_t keep);

BPE_INTERNAL int
cells_append(Arena *arena, CellList *list, int32_t cell);

BPE_INTERNAL void
cells_free(CellList *list);

BPE_INTERNAL void
cells_release(Arena *arena, CellList *list);

BPE_INTERNAL int
compare_tokens(const Tokens *t, int32_t x, int32_t y);

BPE_INTERNAL int
tokens_init(Tokens *t, int32_t cap);

BPE_INTERNAL int32_t
token_concat(Tokens *t, int32_t a, int32_t b);

BPE_INTERNAL int
slots_resize(State *s, int bits);

BPE_INTERNAL size_t
pair_slot(const State *s, int32_t a, int32_t b);

BPE_INTERNAL int32_t
pair_id(State *s, int32_t a, int32_t b);

BPE_INTERNAL int
pair_delete(State *s, int32_t id);

BPE_INTERNAL int
note_zeroed(State *s, int32_t id);

BPE_INTERNAL int
shift_lookup(State *s, Shift *sh, const Shift *twin, int32_t lost_left,
             int32_t lost_right, int32_t gained_left, int32_t gained_right);

BPE_INTERNAL int
shift_occurrence(State *s, const Shift *sh, int64_t c, int32_t cell);

BPE_INTERNAL void
heapify(State *s);

BPE_INTERNAL int
heap_push(State *s, const Pair *p);

BPE_INTERNAL int32_t
pop_best(State *s);

BPE_INTERNAL int32_t
run_merges(State *s, int32_t limit);

BPE_INTERNAL int
initial_pairs(State *s);

BPE_INTERNAL void
state_free(State *s);

/* ---- a run, as the module drives it ---------------------------------------
 *
 *     State s = {0};  s.heap_limit = ...;
 *     words: train_load_packed(&s, view), or for a mapping, train_size_word
 *            per word, train_alloc_cells, train_lay_word per word and
 *            train_end_words;
 *     train_prepare(&s, num_merges);
 *     while ((made = train_batch(&s, batch++)) == BATCH) { ... }
 *     the merges: s.merge_left[i], s.merge_right[i] (token ids; their bytes
 *            by token_bytes), i < s.num_merges;
 *     state_free(&s);
 *
 * The statuses of the loading steps: */
enum {
    TRAIN_OK = 0,
    TRAIN_NO_MEMORY = -1,
    /* the pair occurrences could sum past 2**63 - 1 */
    TRAIN_TOO_MANY_OCCURRENCES = 1,
    /* the words' cells would reach 2**31 */
    TRAIN_TOO_MANY_CELLS = 2,
    /* the words differ from those sized (the caller's mapping changed) */
    TRAIN_CHANGED = 3,
    /* a word's count is not positive (packed counts: *bad is the word) */
    TRAIN_BAD_COUNT = 4,
};

/* Add one word of `len` bytes seen `count` (> 0) times to the sizes. */
BPE_INTERNAL int
train_size_word(Sizes *sizes, int64_t len, int64_t count);

/* The cells for the words sized: 0 or TRAIN_NO_MEMORY. */
BPE_INTERNAL int
train_alloc_cells(State *s, const Sizes *sizes);

/* Lay out a word of two or more bytes (its boundary, then its bytes) from
 * cell *n on, as sized: 0, TRAIN_NO_MEMORY or TRAIN_CHANGED. */
BPE_INTERNAL int
train_lay_word(State *s, int32_t *n, int64_t count, const unsigned char *bytes,
               size_t len);

/* After the last word (w of them, ending at cell n): 0 or TRAIN_CHANGED. */
BPE_INTERNAL int
train_end_words(State *s, int32_t n, int32_t w);

/* Every word of the packed counts laid out, as the steps above do for a
 * mapping: 0, TRAIN_BAD_COUNT (word *bad), TRAIN_TOO_MANY_* or
 * TRAIN_NO_MEMORY. */
BPE_INTERNAL int
train_load_packed(State *s, const PackedView *p, uint64_t *bad);

/* The arrays of up to num_merges merges, the tokens and the words' pairs: 0,
 * or -1 when out of memory. */
BPE_INTERNAL int
train_prepare(State *s, int64_t num_merges);

/* Up to BATCH merges (the batch-th batch, from 1): how many were made (fewer
 * than BATCH: the budget is spent or no pair is left), or -1 when out of
 * memory. */
BPE_INTERNAL int32_t
train_batch(State *s, int64_t batch);

/* A statistic of the run, for train(stats=...). */
typedef struct {
    const char *name;
    long long value;
} TrainStat;

#define TRAIN_STATS 16

/* The run's statistics into out[0:TRAIN_STATS]. */
BPE_INTERNAL void
train_stats(const State *s, TrainStat out[TRAIN_STATS]);

/* Token id's bytes, their length in *len. */
static inline const uint8_t *
token_bytes(const Tokens *t, int32_t id, size_t *len)
{
    *len = (size_t)t->len[id];
    return t->bytes + t->start[id];
}

#endif /* BPE_TRAINER_INTERNAL_H */
