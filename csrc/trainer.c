/* bpe_impls._native_train: the merge loop of the "native" trainer, in C.
 *
 * bpe_impls/trainers/native.py is the Python side and describes the design; this
 * is route_b.py's algorithm (in-place merges found through an append-only
 * occurrence index, lazy max-heap) on flat C arrays. One entry point:
 *
 *     train(word_counts, num_merges, on_merges=None, stats=None, *,
 *           heap_limit=65536) -> [(left bytes, right bytes), ...]
 *
 * It copies the words out of `word_counts` (holding the GIL), then builds the
 * pair table and runs the merges with the GIL released, in batches; between
 * batches it checks for signals (Ctrl-C) and calls on_merges(k) with the
 * number of merges just made, if given. Nothing in this file holds a Python
 * object while the GIL is released.
 *
 * Words are laid out one byte per cell in one array, `val`, each word preceded
 * by a boundary cell holding its number (and one more at the end), so a cell
 * needs no parallel array naming its word. A token covers consecutive
 * cells (its bytes); val of its first cell is its id. The other cells of a
 * token are dead (negative): its last cell holds the offset back to the
 * token's start, so the token before cell n is found from val[n - 1] alone,
 * and the token after a token starting at n starts at n + len(token). So a
 * word needs no prev/next links. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GLIBC__)
#include <malloc.h> /* malloc_trim */
#endif
#if defined(__linux__)
#include <sys/mman.h> /* mmap, mremap (pyconfig.h defines _GNU_SOURCE) */
#endif

#include "bpe_util.h"
#include "packed.h"

/* val[] of the cell before a word is BOUNDARY + the word's count (or, for a
 * count of count_limit or more, count_limit + its index in big_counts): it
 * matches no token, ends every walk and gives a merge the word's count with
 * no array of counts. Boundaries lie below every dead cell's offset (which is
 * > -(the longest word's length)), so `v <= s->last_boundary` tells them
 * apart. */
#define BOUNDARY INT32_MIN
/* Tokens walked back from a cell to its word's boundary, to read the word's
 * count, before a long word's boundary is looked up in long_starts instead:
 * bounds the walk in a word of millions of bytes. */
#define WALK_LIMIT 32
/* val[] of a token's inner cell (any negative but BOUNDARY would do) */
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

static int32_t *
arena_take(Arena *arena)
{
    if (arena->free_chunks != NULL) {
        int32_t *items = arena->free_chunks;
        memcpy(&arena->free_chunks, items, sizeof arena->free_chunks);
        return items;
    }
    if (arena->num_blocks == 0 || arena->used + SMALL_LIST > ARENA_BLOCK) {
        if (bpe_reserve(&arena->blocks, &arena->blocks_cap,
                        arena->num_blocks + 1, sizeof *arena->blocks, 4) < 0)
        {
            return NULL;
        }
        int32_t *block = malloc(ARENA_BLOCK * sizeof *block);
        if (block == NULL) {
            return NULL;
        }
        arena->blocks[arena->num_blocks++] = block;
        arena->used = 0;
    }
    int32_t *items = arena->blocks[arena->num_blocks - 1] + arena->used;
    arena->used += SMALL_LIST;
    return items;
}

static void
arena_give(Arena *arena, int32_t *items)
{
    _Static_assert(SMALL_LIST * sizeof(int32_t) >= sizeof(int32_t *),
                   "a free chunk holds a pointer");
    memcpy(items, &arena->free_chunks, sizeof arena->free_chunks);
    arena->free_chunks = items;
}

static void
arena_free(Arena *arena)
{
    for (size_t i = 0; i < arena->num_blocks; i++) {
        free(arena->blocks[i]);
    }
    free(arena->blocks);
}

/* A list of BIG_LIST entries or more gets pages of its own (on Linux): they
 * go back to the system the moment the list shrinks or is freed, and a list
 * doubles in place (mremap) rather than being copied next to its old self,
 * whatever glibc's (moving) mmap threshold is. */
#define BIG_LIST 16384

#if defined(__linux__)
static int32_t *
big_map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}
#endif

/* Memory for a list of cap entries (cap > SMALL_LIST), holding the first
 * `keep` of `items` (a list of old_cap > SMALL_LIST entries, or NULL): NULL
 * when out of memory, `items` then untouched. */
static int32_t *
list_resize(Arena *arena, int32_t *items, uint32_t old_cap, uint32_t cap,
            uint32_t keep)
{
    size_t bytes = (size_t)cap * sizeof *items;
    if (items != NULL && old_cap < BIG_LIST) {
        arena->released += (size_t)old_cap * sizeof *items;
    }
#if defined(__linux__)
    int was_big = items != NULL && old_cap >= BIG_LIST, big = cap >= BIG_LIST;
    if (was_big && big) {
        void *moved = mremap(items, (size_t)old_cap * sizeof *items, bytes,
                             MREMAP_MAYMOVE);
        return moved == MAP_FAILED ? NULL : moved;
    }
    if (was_big || big) {
        int32_t *moved = big ? big_map(bytes) : malloc(bytes);
        if (moved == NULL) {
            return NULL;
        }
        if (keep > 0) {
            memcpy(moved, items, (size_t)keep * sizeof *items);
        }
        if (was_big) {
            munmap(items, (size_t)old_cap * sizeof *items);
        }
        else {
            free(items);
        }
        return moved;
    }
#endif
    (void)keep;
    return realloc(items, bytes);
}

static void
list_free(int32_t *items, uint32_t cap)
{
#if defined(__linux__)
    if (cap >= BIG_LIST) {
        munmap(items, (size_t)cap * sizeof *items);
        return;
    }
#endif
    free(items);
}

static int
cells_append(Arena *arena, CellList *list, int32_t cell)
{
    if (list->len == list->cap) {
        if (list->cap == 0) {
            list->u.one = cell;
            list->cap = list->len = 1;
            return 0;
        }
        if (list->cap == 1) {
            int32_t *items = arena_take(arena);
            if (items == NULL) {
                return -1;
            }
            items[0] = list->u.one;
            list->u.items = items;
            list->cap = SMALL_LIST;
        }
        else {
            if (list->cap > UINT32_MAX / 2) {
                return -1; /* (beyond any real run: cells are < 2**31) */
            }
            uint32_t cap = 2 * list->cap;
            int32_t *items =
                list->cap > SMALL_LIST
                    ? list_resize(arena, list->u.items, list->cap, cap,
                                  list->len)
                    : malloc(cap * sizeof *items);
            if (items == NULL) {
                return -1;
            }
            if (list->cap == SMALL_LIST) {
                memcpy(items, list->u.items, list->len * sizeof *items);
                arena_give(arena, list->u.items);
            }
            list->u.items = items;
            list->cap = cap;
        }
    }
    list->u.items[list->len++] = cell;
    return 0;
}

static void
cells_free(CellList *list)
{
    if (list->cap > SMALL_LIST) {
        list_free(list->u.items, list->cap);
    }
}

/* Empty the list, giving its memory back (to reuse it if the list grows
 * again). */
static void
cells_release(Arena *arena, CellList *list)
{
    if (list->cap == SMALL_LIST) {
        arena_give(arena, list->u.items);
    }
    else if (list->cap > SMALL_LIST && list->cap < BIG_LIST) {
        arena->released += list->cap * sizeof(int32_t);
    }
    cells_free(list);
    *list = (CellList){{NULL}, 0, 0};
}

/* ---- tokens: id <-> bytes ----------------------------------------------- */

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

/* Python's bytes order: memcmp over the common prefix, then the shorter one is
 * smaller. */
static int
compare_tokens(const Tokens *t, int32_t x, int32_t y)
{
    if (x == y) {
        return 0; /* ids are unique per byte string */
    }
    /* Padded heads differ where the bytes differ or where one ends, so they
     * order most pairs. */
    if (t->head[x] != t->head[y]) {
        return t->head[x] < t->head[y] ? -1 : 1;
    }
    int32_t lx = t->len[x], ly = t->len[y];
    int c = memcmp(t->bytes + t->start[x], t->bytes + t->start[y],
                   (size_t)(lx < ly ? lx : ly));
    if (c != 0) {
        return c;
    }
    return (lx > ly) - (lx < ly);
}

/* The id of the token whose bytes end the arena (not yet committed), adding it
 * if new. */
static int32_t
intern_tail(Tokens *t, size_t start, size_t n)
{
    const uint8_t *p = t->bytes + start;
    size_t i = bpe_hash_bytes(p, n) & t->slot_mask;
    for (;; i = (i + 1) & t->slot_mask) {
        int32_t id = t->slots[i];
        if (id < 0) {
            break;
        }
        if ((size_t)t->len[id] == n &&
            memcmp(t->bytes + t->start[id], p, n) == 0)
        {
            return id;
        }
    }
    /* cap was sized for every token this run can make */
    int32_t id = t->count++;
    uint64_t head = 0;
    for (size_t k = 0; k < 8; k++) {
        head = head << 8 | (k < n ? p[k] : 0);
    }
    t->slots[i] = id;
    t->start[id] = start;
    t->len[id] = (int32_t)n;
    t->head[id] = head;
    t->bytes_len = start + n;
    return id;
}

static int
tokens_init(Tokens *t, int32_t cap)
{
    size_t slots = 16;
    while (slots < 2 * (size_t)cap) {
        slots *= 2; /* load factor <= 1/2 */
    }
    t->start = malloc((size_t)cap * sizeof *t->start);
    t->len = malloc((size_t)cap * sizeof *t->len);
    t->head = malloc((size_t)cap * sizeof *t->head);
    t->slots = malloc(slots * sizeof *t->slots);
    if (!t->start || !t->len || !t->head || !t->slots ||
        bpe_reserve(&t->bytes, &t->bytes_cap, 4096, 1, 4) < 0)
    {
        return -1;
    }
    memset(t->slots, 0xff, slots * sizeof *t->slots);
    t->slot_mask = slots - 1;
    t->cap = cap;
    for (int b = 0; b < 256; b++) { /* token id b is the byte b */
        t->bytes[b] = (uint8_t)b;
        intern_tail(t, (size_t)b, 1);
    }
    return 0;
}

/* The id of bytes(a) + bytes(b): -1 when out of memory. */
static int32_t
token_concat(Tokens *t, int32_t a, int32_t b)
{
    size_t la = (size_t)t->len[a], lb = (size_t)t->len[b],
           start = t->bytes_len;
    if (bpe_reserve(&t->bytes, &t->bytes_cap, start + la + lb, 1, 4) < 0) {
        return -1;
    }
    /* after reserve: bytes may have moved */
    memcpy(t->bytes + start, t->bytes + t->start[a], la);
    memcpy(t->bytes + start + la, t->bytes + t->start[b], lb);
    return intern_tail(t, start, la + lb);
}

/* ---- pairs -------------------------------------------------------------- */

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
    /* per cell: token id at a token's start, else BOUNDARY or negative */
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

static int
slots_resize(State *s, int bits)
{
    size_t n = (size_t)1 << bits;
    uint32_t mask = id_mask(bits);
    uint32_t *slots = malloc(n * sizeof *slots);
    if (slots == NULL) {
        return -1;
    }
    memset(slots, 0xff, n * sizeof *slots); /* SLOT_EMPTY */
    for (size_t p = 0; p < s->num_pairs; p++) {
        int32_t a = s->pairs[p].left, b = s->pairs[p].right;
        if (a < 0) {
            continue; /* a free record */
        }
        size_t i = (size_t)(pair_hash(a, b) >> (64 - bits));
        while (slots[i] != SLOT_EMPTY) {
            i = (i + 1) & (n - 1);
        }
        slots[i] = pair_tag(a, b, mask) | (uint32_t)p;
    }
    free(s->slots);
    s->slots = slots;
    s->slot_bits = bits;
    return 0;
}

/* The slot of pair (a, b), or the free slot where it would go. */
static size_t
pair_slot(const State *s, int32_t a, int32_t b)
{
    uint32_t mask = id_mask(s->slot_bits), tag = pair_tag(a, b, mask);
    size_t wrap = ((size_t)1 << s->slot_bits) - 1;
    size_t i = (size_t)(pair_hash(a, b) >> (64 - s->slot_bits));
    for (;; i = (i + 1) & wrap) {
        uint32_t v = s->slots[i];
        if (v == SLOT_EMPTY) {
            return i;
        }
        if ((v & ~mask) == tag) {
            const Pair *p = &s->pairs[v & mask];
            if (p->left == a && p->right == b) {
                return i;
            }
        }
    }
}

/* The id of pair (a, b), created with count 0 if new; -1 when out of memory.
 */
static int32_t
pair_id(State *s, int32_t a, int32_t b)
{
    size_t i = pair_slot(s, a, b);
    if (s->slots[i] != SLOT_EMPTY) {
        return slot_pair(s, i);
    }
    int32_t id;
    if (s->num_free > 0) {
        id = s->free_ids[--s->num_free];
    }
    else {
        if (bpe_reserve(&s->pairs, &s->pairs_cap, s->num_pairs + 1,
                        sizeof *s->pairs, 4) < 0)
        {
            return -1;
        }
        id = (int32_t)s->num_pairs++;
    }
    s->pairs[id] = (Pair){.count = 0, .left = a, .right = b};
    uint32_t mask = id_mask(s->slot_bits);
    s->slots[i] = pair_tag(a, b, mask) | (uint32_t)id;
    s->pairs_created++;
    /* Load factor <= 3/4: a web corpus makes millions of pairs; most lookups
     * go through the shift arrays, not this table. (The second test never
     * holds by the first: it keeps every id within the mask regardless.) */
    if ((4 * (s->num_pairs - s->num_free) > 3 * ((size_t)1 << s->slot_bits) ||
         s->num_pairs >= mask) &&
        slots_resize(s, s->slot_bits + 1) < 0)
    {
        return -1;
    }
    return id;
}

/* Take pair `id` (its count is 0, its list empty) out of the table and free
 * its record: linear probing's deletion, moving back each later entry of the
 * cluster that may sit in the emptied slot. */
static int
pair_delete(State *s, int32_t id)
{
    if (bpe_reserve(&s->free_ids, &s->free_cap, s->num_free + 1,
                    sizeof *s->free_ids, 16) < 0)
    {
        return -1;
    }
    int bits = s->slot_bits;
    size_t mask = ((size_t)1 << bits) - 1;
    size_t hole = pair_slot(s, s->pairs[id].left, s->pairs[id].right);
    for (size_t j = (hole + 1) & mask; s->slots[j] != SLOT_EMPTY;
         j = (j + 1) & mask)
    {
        const Pair *q = &s->pairs[slot_pair(s, j)];
        size_t home = (size_t)(pair_hash(q->left, q->right) >> (64 - bits));
        /* it stays unless its home is cyclically outside (hole, j] */
        int stays = hole <= j ? (hole < home && home <= j)
                              : (hole < home || home <= j);
        if (!stays) {
            s->slots[hole] = s->slots[j];
            hole = j;
        }
    }
    s->slots[hole] = SLOT_EMPTY;
    s->pairs[id].left = s->pairs[id].right = -1;
    s->free_ids[s->num_free++] = id;
    return 0;
}

/* Note that pair `id` was counted down to 0 in this merge. */
static int
note_zeroed(State *s, int32_t id)
{
    if (bpe_reserve(&s->zeroed, &s->zeroed_cap, s->zeroed_len + 1,
                    sizeof *s->zeroed, 16) < 0)
    {
        return -1;
    }
    s->zeroed[s->zeroed_len++] = id;
    return 0;
}

/* Fill sh for this merge and list its gained pair in s->grown, unless
 * `twin`, the other side's shift of the same token, already did: the left
 * shift of token new and the right one both gain (new, new). */
static int
shift_lookup(State *s, Shift *sh, const Shift *twin, int32_t lost_left,
             int32_t lost_right, int32_t gained_left, int32_t gained_right)
{
    int32_t stamp = s->num_merges + 1;
    /* exists: every adjacent pair is counted */
    sh->lost = pair_id(s, lost_left, lost_right);
    sh->gained = pair_id(s, gained_left, gained_right);
    if (sh->lost < 0 || sh->gained < 0) {
        return -1;
    }
    sh->stamp = stamp;
    if (twin->stamp == stamp && twin->gained == sh->gained) {
        return 0;
    }
    if (bpe_reserve(&s->grown, &s->grown_cap, s->grown_len + 1,
                    sizeof *s->grown, 4) < 0)
    {
        return -1;
    }
    s->grown[s->grown_len++] = sh->gained;
    return 0;
}

/* Drop the stale entries of p's list (keeping the live ones in order) if it
 * has its own memory and its count shows that over half of them are stale:
 * each live entry weighs at least 1, so a count below len / 2 means so. Then
 * the work is at most twice the entries dropped. With `shrink`, the memory
 * shrinks to fit: the list of a pair losing occurrences, which on a web corpus
 * are mostly the byte pairs' large first lists, never merged. */
static void
compact_if_stale(State *s, Pair *p, int shrink)
{
    CellList *list = &p->seen;
    if (list->cap <= SMALL_LIST || p->count >= (int64_t)(list->len / STALE_SHARE)) {
        return;
    }
    int32_t *items = list->u.items;
    const int32_t *val = s->val;
    int32_t a = p->left, b = p->right, la = s->tok.len[a];
    uint32_t kept = 0;
    for (uint32_t k = 0; k < list->len; k++) {
        if (k + LOOKAHEAD < list->len) {
            PREFETCH(&val[items[k + LOOKAHEAD]]);
        }
        int32_t n = items[k];
        if (val[n] == a && val[n + la] == b) {
            items[kept++] = n;
        }
    }
    s->compacted += (int64_t)list->len;
    list->len = kept;
    if (shrink) {
        uint32_t cap = kept > SMALL_LIST ? kept : SMALL_LIST + 1;
        int32_t *fitted = list_resize(&s->arena, items, list->cap, cap, kept);
        if (fitted != NULL) { /* else it keeps the larger block */
            list->u.items = fitted;
            list->cap = cap;
        }
    }
}

/* Move one occurrence (at `cell`, in a word of count c) from sh->lost to
 * sh->gained and index it under gained. */
static int
shift_occurrence(State *s, const Shift *sh, int64_t c, int32_t cell)
{
    Pair *lost = &s->pairs[sh->lost];
    lost->count -= c;
    if (lost->count == 0) {
        /* Every entry is stale (a live one would weigh a positive count):
         * on a web corpus most pairs end so, holding half the lists' memory.
         */
        cells_release(&s->arena, &lost->seen);
        if (note_zeroed(s, sh->lost) < 0) {
            return -1;
        }
    }
    else {
        compact_if_stale(s, lost, 1);
    }
    Pair *p = &s->pairs[sh->gained];
    p->count += c;
    if (p->seen.len == p->seen.cap) {
        compact_if_stale(s, p, 0); /* rather than grow */
    }
    return cells_append(&s->arena, &p->seen, cell);
}

/* ---- the heap ----------------------------------------------------------- */

/* A max-heap of Entry: highest count first, ties to the greatest (left bytes,
 * right bytes). A mirror of encoder.c's heap, not shared with it: that one
 * orders plain uint64 keys, and a generic heap would call ranks_before through
 * a pointer once per level of every sift. */

static int
ranks_before(const State *s, Entry e, Entry f)
{
    if (e.count != f.count) {
        return e.count > f.count;
    }
    int c = compare_tokens(&s->tok, e.left, f.left);
    if (c == 0) {
        c = compare_tokens(&s->tok, e.right, f.right);
    }
    return c > 0;
}

/* Restore the heap below i after h[i] was lowered or replaced. Floyd's
 * variant: the hole goes down to a leaf along the better child (one comparison
 * per level), then the entry rises from there; the entry usually belongs near
 * the bottom, so this halves the comparisons. */
static void
sift_down(State *s, size_t i)
{
    Entry *h = s->heap, e = h[i];
    size_t n = s->heap_len, top = i;
    for (size_t child; (child = 2 * i + 1) < n; i = child) {
        if (child + 1 < n && ranks_before(s, h[child + 1], h[child])) {
            child++;
        }
        h[i] = h[child];
    }
    while (i > top && ranks_before(s, e, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static void
heapify(State *s)
{
    for (size_t i = s->heap_len / 2; i-- > 0;) {
        sift_down(s, i);
    }
}

/* Counts in 4 buckets per power of 2 (bucket c for c < 4), to pick a floor
 * that keeps about a given number of entries: up to 2**63 - 1, the last. */
#define NUM_BUCKETS (4 * 61 + 4)

static int
bucket_of(int64_t c)
{
    if (c < 4) {
        return (int)c;
    }
    int e = 2; /* c's highest set bit */
    while (e < 62 && c >> (e + 1)) {
        e++;
    }
    return 4 * (e - 1) + (int)((c >> (e - 2)) & 3);
}

/* The smallest count in bucket k. */
static int64_t
bucket_floor(int k)
{
    return k < 4 ? k : (int64_t)(4 + (k & 3)) << (k / 4 - 1);
}

/* The highest floor that keeps at least `want` of the counts histogram[]
 * holds, or 1 if that is all of them. */
static int64_t
choose_floor(const size_t *histogram, size_t want)
{
    size_t kept = 0;
    for (int k = NUM_BUCKETS - 1; k > 1; k--) {
        kept += histogram[k];
        if (kept >= want) {
            return bucket_floor(k);
        }
    }
    return 1;
}

/* The heap is full: raise the floor to keep about a quarter of its limit,
 * dropping the entries below it (their pairs' counts are lower still). If no
 * floor would drop enough, the limit doubles instead. */
static void
heap_cut(State *s)
{
    size_t histogram[NUM_BUCKETS] = {0};
    for (size_t i = 0; i < s->heap_len; i++) {
        histogram[bucket_of(s->heap[i].count)]++;
    }
    int64_t floor = choose_floor(histogram, s->heap_limit / 4);
    if (floor > s->floor) {
        size_t kept = 0;
        for (size_t i = 0; i < s->heap_len; i++) {
            if (s->heap[i].count >= floor) {
                s->heap[kept++] = s->heap[i];
            }
        }
        s->heap_len = kept;
        s->floor = floor;
        s->cuts++;
        heapify(s);
    }
    if (s->heap_len > s->heap_limit / 2) {
        s->heap_limit *= 2;
    }
}

/* The heap ran dry, so every pair's count is below the floor: lower the floor
 * to bring back about a quarter of the limit's pairs (every pair left, if
 * that is fewer), and push them. -1 when out of memory. */
static int
heap_refill(State *s)
{
    size_t histogram[NUM_BUCKETS] = {0};
    for (size_t p = 0; p < s->num_pairs; p++) {
        if (s->pairs[p].count > 0) {
            histogram[bucket_of(s->pairs[p].count)]++;
        }
    }
    int64_t floor = choose_floor(histogram, s->heap_limit / 4);
    size_t n = 0;
    for (int k = NUM_BUCKETS - 1; k > 0 && bucket_floor(k) >= floor; k--) {
        n += histogram[k];
    }
    if (bpe_reserve(&s->heap, &s->heap_cap, n, sizeof *s->heap, 4) < 0) {
        return -1;
    }
    for (size_t p = 0; p < s->num_pairs; p++) {
        const Pair *q = &s->pairs[p];
        if (q->count >= floor) {
            s->heap[s->heap_len++] = (Entry){q->count, q->left, q->right};
        }
    }
    s->floor = floor;
    s->refills++;
    s->pushes += (int64_t)s->heap_len;
    if (s->heap_len > s->heap_peak) {
        s->heap_peak = s->heap_len;
    }
    while (s->heap_len > s->heap_limit / 2) {
        s->heap_limit *= 2;
    }
    heapify(s);
    return 0;
}

/* Push p (its count is positive) if it is at or above the floor. */
static int
heap_push(State *s, const Pair *p)
{
    if (s->heap_len >= s->heap_limit) {
        heap_cut(s);
    }
    if (p->count < s->floor) {
        return 0;
    }
    if (bpe_reserve(&s->heap, &s->heap_cap, s->heap_len + 1, sizeof *s->heap,
                    4) < 0)
    {
        return -1;
    }
    Entry e = {p->count, p->left, p->right}, *h = s->heap;
    size_t i = s->heap_len++;
    s->pushes++;
    if (s->heap_len > s->heap_peak) {
        s->heap_peak = s->heap_len;
    }
    while (i > 0 && ranks_before(s, e, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
    return 0;
}

static void
heap_pop(State *s)
{
    s->heap[0] = s->heap[--s->heap_len];
    if (s->heap_len > 0) {
        sift_down(s, 0);
    }
}

/* The pair to merge next, -1 when none has a positive count (route_b's
 * `_best`), -2 when out of memory.
 *
 * Exact although lazy: a pair's count rises only in a merge that makes one of
 * its tokens, and every pair that rose is pushed after that merge if at or
 * above the floor; otherwise counts only fall, and the floor only rises but
 * in heap_refill, which pushes every pair at or above the new one. So each
 * pair whose count is at or above the floor has an entry at least its count.
 * An entry above the pair's count is put back with the real count (if still
 * at or above the floor); one below it is a leftover (a higher entry exists)
 * and is dropped. The first entry that equals its pair's count, at or above
 * the floor, therefore ranks before every other pair: the pairs without an
 * entry count less. */
static int32_t
pop_best(State *s)
{
    for (;;) {
        if (s->heap_len == 0) {
            if (s->floor <= 1) {
                return -1; /* every pair with a positive count had an entry */
            }
            if (heap_refill(s) < 0) {
                return -2;
            }
            if (s->heap_len == 0) {
                return -1;
            }
        }
        s->pops++;
        Entry top = s->heap[0];
        int32_t id = slot_pair(s, pair_slot(s, top.left, top.right));
        /* (no longer in the table: counted down to 0) */
        int64_t actual = id < 0 ? 0 : s->pairs[id].count;
        if (actual == top.count) { /* every entry is >= floor */
            heap_pop(s);
            return id;
        }
        if (actual >= s->floor && actual < top.count) {
            s->heap[0].count = actual;
            sift_down(s, 0);
        }
        else {
            /* merged away, counted down below the floor, or a leftover */
            heap_pop(s);
        }
    }
}

/* ---- merging ------------------------------------------------------------ */

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

/* The count of the word holding the token that starts at cell n. */
static int64_t
count_at(const State *s, int32_t n)
{
    const int32_t *val = s->val;
    for (int step = 0; step < WALK_LIMIT; step++) {
        int32_t v = val[n - 1];
        if (v <= s->last_boundary) {
            return boundary_count(s, v);
        }
        n = v >= 0 ? n - 1 : n - 1 + v;
    }
    /* WALK_LIMIT tokens from the boundary: a long word, whose boundary is the
     * last long one before n */
    size_t lo = 0, hi = s->num_long; /* long_starts[lo] < n <= [hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->long_starts[mid] < n) {
            lo = mid;
        }
        else {
            hi = mid;
        }
    }
    return boundary_count(s, val[s->long_starts[lo]]);
}

/* Merge `x a b y` into `x new y` at cell n, where a starts, and move the
 * neighbour pairs: (x, a) and (b, y) lose this occurrence, (x, new) and (new,
 * y) gain it (route_b's `_merge_at`). (a, b) itself is zeroed by the caller.
 * Neighbours are read as they are now, so successive merges in a word (`a b a
 * b`, a run of a's) each see the previous one. */
static int
merge_at(State *s, int32_t n, int32_t new_id)
{
    int32_t *val = s->val;
    int32_t a = val[n];
    int32_t m = n + s->tok.len[a];
    int32_t b = val[m];
    /* the next token's start, or the word's closing BOUNDARY */
    int32_t y = m + s->tok.len[b];
    int32_t last = y - 1;
    int32_t x = token_before(s, n);
    int64_t c = count_at(s, n);
    s->merged++;

    val[n] = new_id;
    val[m] = DEAD;
    /* after DEAD: when b is one byte, m is the last cell */
    val[last] = n - last;
    int32_t stamp = s->num_merges + 1;
    if (x >= 0) {
        int32_t t = val[x];
        Shift *sh = &s->left_shift[t];
        if (sh->stamp != stamp &&
            shift_lookup(s, sh, &s->right_shift[t], t, a, t, new_id) < 0)
        {
            return -1;
        }
        if (shift_occurrence(s, sh, c, x) < 0) {
            return -1;
        }
    }
    if (val[y] >= 0) { /* else the word's end */
        int32_t t = val[y];
        Shift *sh = &s->right_shift[t];
        if (sh->stamp != stamp &&
            shift_lookup(s, sh, &s->left_shift[t], b, t, new_id, t) < 0)
        {
            return -1;
        }
        if (shift_occurrence(s, sh, c, n) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Merge every live occurrence of pair `id` into `new_id`, greedily left to
 * right in each word (route_b's `_merge_pair`). */
static int
merge_pair(State *s, int32_t id, int32_t new_id)
{
    int32_t a = s->pairs[id].left, b = s->pairs[id].right;
    int32_t la = s->tok.len[a];
    const int32_t *val = s->val;
    /* Take the list: merging appends only to pairs holding new_id, never to
     * (a, b); and pair_id may move s->pairs, so no pointer into it is kept
     * across merge_at. */
    CellList seen = s->pairs[id].seen;
    s->pairs[id].seen = (CellList){{NULL}, 0, 0};
    const int32_t *items = cells_items(&seen);
    int err = 0;
    if (a != b) {
        /* Occurrences cannot overlap (the cell after an a holds b != a), so
         * their order does not matter; a stale or repeated entry fails the
         * test, as a merged cell holds new_id or is dead. */
        for (size_t k = 0; k < seen.len && !err; k++) {
            int32_t n = items[k];
            if (k + LOOKAHEAD < seen.len) {
                PREFETCH(&val[items[k + LOOKAHEAD]]);
            }
            if (val[n] == a && val[n + la] == b) {
                err = merge_at(s, n, new_id);
            }
        }
    }
    else {
        /* Overlapping: in a run of a's the naive trainer merges (0, 1), (2,
         * 3), ... from the run's start, and the list need not hold a run's
         * cells in that order. So from any live entry, walk back to the run's
         * start and merge the whole run; its other entries then fail the test
         * (no two a's stay adjacent). Each run is walked at most twice its
         * length. */
        int32_t lnew = s->tok.len[new_id];
        for (size_t k = 0; k < seen.len && !err; k++) {
            int32_t n = items[k];
            if (val[n] != a || val[n + la] != a) {
                continue;
            }
            for (int32_t p = token_before(s, n); p >= 0 && val[p] == a;
                 p = token_before(s, n))
            {
                n = p;
            }
            do {
                err = merge_at(s, n, new_id);
                n += lnew;
            } while (!err && val[n] == a && val[n + la] == a);
        }
    }
    s->visited += (int64_t)seen.len;
    cells_release(&s->arena, &seen);
    s->pairs[id].count = 0; /* no word holds (a, b) any more */
    return err < 0 ? err : note_zeroed(s, id);
}

/* Up to `limit` merges: how many were made (fewer when no pair is left), or -1
 * when out of memory. Touches no Python object: runs with the GIL released. */
static int32_t
run_merges(State *s, int32_t limit)
{
    int32_t done = 0;
    for (; done < limit && s->num_merges < s->max_merges; done++) {
        int32_t best = pop_best(s);
        if (best == -2) {
            return -1;
        }
        if (best < 0) {
            break; /* every word is a single token: nothing left to merge */
        }
        int32_t a = s->pairs[best].left, b = s->pairs[best].right;
        int32_t new_id = token_concat(&s->tok, a, b);
        if (new_id < 0) {
            return -1;
        }
        s->merge_left[s->num_merges] = a;
        s->merge_right[s->num_merges] = b;
        s->grown_len = 0;
        if (merge_pair(s, best, new_id) < 0) {
            return -1;
        }
        /* after merge_pair, which stamps the shifts with num_merges + 1 */
        s->num_merges++;
        for (size_t k = 0; k < s->grown_len; k++) {
            int32_t g = s->grown[k];
            if (s->pairs[g].count > 0 && heap_push(s, &s->pairs[g]) < 0) {
                return -1;
            }
        }
        /* After the merge, when no shift names them any more; some rose
         * again (or were noted twice). */
        for (size_t k = 0; k < s->zeroed_len; k++) {
            int32_t z = s->zeroed[k];
            if (s->pairs[z].count == 0 && s->pairs[z].left >= 0 &&
                pair_delete(s, z) < 0)
            {
                return -1;
            }
        }
        s->zeroed_len = 0;
#if defined(__GLIBC__)
        if (s->arena.released >= TRIM_BYTES) {
            malloc_trim(0);
            s->arena.released = 0;
            s->trims++;
        }
#endif
    }
    return done;
}

/* Count and index every adjacent pair of every word, then heapify. Each cell
 * is still one byte, so the pairs are byte pairs: a first pass counts each
 * one's occurrences in a 256 x 256 table, to give every list its exact size
 * (no regrowth), and the second fills the lists. */
static int
initial_pairs(State *s)
{
    const int32_t *val = s->val;
    int err = -1;
    size_t *occurrences = calloc(256 * 256, sizeof *occurrences);
    int32_t *id_of = malloc(256 * 256 * sizeof *id_of);
    if (occurrences == NULL || id_of == NULL || slots_resize(s, 12) < 0) {
        goto done;
    }
    /* Every position counts, overlapping ones included (`aaa` has (a, a)
     * twice), as in naive. */
    for (int32_t n = 1; n + 1 < s->num_cells; n++) {
        if (val[n] >= 0 && val[n + 1] >= 0) { /* bytes, not boundaries */
            occurrences[val[n] << 8 | val[n + 1]]++;
        }
    }
    for (int32_t k = 0; k < 256 * 256; k++) {
        if (occurrences[k] == 0) {
            continue;
        }
        int32_t id = id_of[k] = pair_id(s, k >> 8, k & 255);
        if (id < 0) {
            goto done;
        }
        CellList *seen = &s->pairs[id].seen;
        if (occurrences[k] == 1) {
            seen->cap = 1; /* filled below */
            continue;
        }
        if (occurrences[k] <= SMALL_LIST) {
            seen->u.items = arena_take(&s->arena);
            seen->cap = SMALL_LIST;
        }
        else {
            seen->u.items =
                list_resize(&s->arena, NULL, 0, (uint32_t)occurrences[k], 0);
            seen->cap = (uint32_t)occurrences[k];
        }
        if (seen->u.items == NULL) {
            goto done;
        }
    }
    int64_t c = 0; /* the count of the word being read */
    for (int32_t n = 0; n + 1 < s->num_cells; n++) {
        if (val[n] < 0) {
            c = boundary_count(s, val[n]);
        }
        else if (val[n + 1] >= 0) {
            Pair *p = &s->pairs[id_of[val[n] << 8 | val[n + 1]]];
            cells_items(&p->seen)[p->seen.len++] = n;
            p->count += c;
        }
    }
    if (bpe_reserve(&s->heap, &s->heap_cap, s->num_pairs, sizeof *s->heap, 4) <
        0)
    {
        goto done;
    }
    for (size_t p = 0; p < s->num_pairs; p++) {
        s->heap[p] =
            (Entry){s->pairs[p].count, s->pairs[p].left, s->pairs[p].right};
    }
    s->heap_len = s->num_pairs;
    s->pushes += (int64_t)s->num_pairs;
    s->floor = 1;
    while (s->heap_limit < 2 * s->heap_len) {
        s->heap_limit *= 2;
    }
    heapify(s);
    err = 0;
done:
    free(occurrences);
    free(id_of);
    return err;
}

static void
state_free(State *s)
{
    free(s->val);
    free(s->long_starts);
    free(s->big_counts);
    for (size_t p = 0; p < s->num_pairs; p++) {
        cells_free(&s->pairs[p].seen);
    }
    free(s->pairs);
    arena_free(&s->arena);
    free(s->slots);
    free(s->heap);
    free(s->grown);
    free(s->free_ids);
    free(s->zeroed);
    free(s->left_shift);
    free(s->right_shift);
    free(s->tok.bytes);
    free(s->tok.start);
    free(s->tok.len);
    free(s->tok.head);
    free(s->tok.slots);
    free(s->merge_left);
    free(s->merge_right);
}

/* ---- reading word_counts (GIL held) ------------------------------------- */

/* Iterates a dict (or Counter) in place, without copying it, and any other
 * mapping through .items(). A dict subclass is read as a dict: an items()
 * override would not be called. */
typedef struct {
    PyObject *dict;
    Py_ssize_t pos;
    PyObject *items; /* a list of (key, value) tuples, for other mappings */
} ItemIter;

static int
iter_start(ItemIter *it, PyObject *mapping)
{
    it->pos = 0;
    it->dict = PyDict_Check(mapping) ? mapping : NULL;
    it->items = NULL;
    if (it->dict == NULL) {
        PyObject *items = PyMapping_Items(mapping);
        if (items == NULL) {
            return -1;
        }
        it->items =
            PySequence_Fast(items, "word_counts.items() must be iterable");
        Py_DECREF(items);
        if (it->items == NULL) {
            return -1;
        }
    }
    return 0;
}

/* 1 and a borrowed (key, value), 0 at the end, -1 on error. */
static int
iter_next(ItemIter *it, PyObject **key, PyObject **value)
{
    if (it->dict != NULL) {
        return PyDict_Next(it->dict, &it->pos, key, value);
    }
    if (it->pos >= PySequence_Fast_GET_SIZE(it->items)) {
        return 0;
    }
    PyObject *item = PySequence_Fast_GET_ITEM(it->items, it->pos++);
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
        PyErr_SetString(PyExc_TypeError,
                        "word_counts.items() must yield (bytes, int) pairs");
        return -1;
    }
    *key = PyTuple_GET_ITEM(item, 0);
    *value = PyTuple_GET_ITEM(item, 1);
    return 1;
}

/* The count of `word` as int64 (check_word_counts has vetted it; this guards
 * the C side). A word of one byte (or none) has no pair, so no count of it is
 * too large: it only has to be positive, and *out is then left unset. */
static int
read_count(PyObject *word, PyObject *value, int64_t *out)
{
    if (!PyBytes_Check(word) || !PyLong_Check(value) || PyBool_Check(value)) {
        PyErr_Format(PyExc_TypeError,
                     "word counts must map bytes to int, got %R: %R", word,
                     value);
        return -1;
    }
    int overflow;
    long long count = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (count == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow > 0 && PyBytes_GET_SIZE(word) < 2) {
        return 0;
    }
    if (overflow > 0) {
        PyErr_Format(PyExc_OverflowError,
                     "word %R has count %R; the native trainer takes counts "
                     "up to 2**63 - 1",
                     word, value);
        return -1;
    }
    if (overflow < 0 || count <= 0) {
        PyErr_Format(PyExc_ValueError,
                     "word %R has count %R; counts must be positive", word,
                     value);
        return -1;
    }
    *out = (int64_t)count;
    return 0;
}

/* The cells for `words` words of up to max_len bytes filling `cells` cells
 * (their bytes, a boundary before each and one at the end), and the
 * boundaries' code. */
static int
alloc_cells(State *s, int64_t cells, int64_t words, int64_t max_len)
{
    s->num_cells = (int32_t)cells;
    s->val = malloc((size_t)cells * sizeof *s->val);
    if (!s->val) {
        PyErr_NoMemory();
        return -1;
    }
    /* Boundaries take the codes 0 .. room - 2, so each lies below
     * -(max_len) and every dead cell's offset; count_limit + words <= room - 1
     * codes, and count_limit is >= 512, as cells >= max_len + words + 1. */
    int64_t room = ((int64_t)1 << 31) - (max_len < 2 ? 2 : max_len);
    s->last_boundary = (int32_t)(BOUNDARY + room - 1);
    s->count_limit = room - words - 1;
    s->max_len = max_len;
    return 0;
}

/* Lay out a word (its boundary, then its bytes) from cell *n on. */
static int
lay_word(State *s, int32_t *n, int64_t count, const unsigned char *bytes,
         size_t len)
{
    if ((int64_t)len > s->max_len) {
        PyErr_SetString(PyExc_RuntimeError,
                        "word_counts changed while it was being read");
        return -1;
    }
    int64_t code = count;
    if (count >= s->count_limit) {
        if (bpe_reserve(&s->big_counts, &s->big_cap, s->num_big + 1,
                        sizeof *s->big_counts, 16) < 0)
        {
            PyErr_NoMemory();
            return -1;
        }
        code = s->count_limit + (int64_t)s->num_big;
        s->big_counts[s->num_big++] = count;
    }
    if (len >= WALK_LIMIT) {
        if (bpe_reserve(&s->long_starts, &s->long_cap, s->num_long + 1,
                        sizeof *s->long_starts, 16) < 0)
        {
            PyErr_NoMemory();
            return -1;
        }
        s->long_starts[s->num_long++] = *n;
    }
    int32_t *val = s->val + *n;
    val[0] = (int32_t)(BOUNDARY + code);
    for (size_t i = 0; i < len; i++) {
        val[1 + i] = bytes[i];
    }
    *n += (int32_t)len + 1;
    return 0;
}

/* What the words' first pass adds up, for alloc_cells. */
typedef struct {
    int64_t cells, words, pairs_weight, max_len;
} Sizes;

/* Add one word of `len` bytes seen `count` times to the sizes; -1 (with
 * OverflowError) when the run could outgrow its 64-bit counts or 32-bit
 * cells. A word of one byte has no pair and never changes: not laid out. */
static int
size_word(Sizes *sizes, int64_t len, int64_t count)
{
    if (len < 2) {
        return 0;
    }
    /* Bound every pair count the run can reach: each is a sum over distinct
     * (word, position) occurrences, so none exceeds the total over all of
     * them. */
    if (count > (INT64_MAX - sizes->pairs_weight) / (len - 1)) {
        PyErr_SetString(
            PyExc_OverflowError,
            "the word counts sum to more than 2**63 - 1 pair occurrences, "
            "beyond the native trainer's 64-bit counts");
        return -1;
    }
    sizes->pairs_weight += count * (len - 1);
    sizes->cells += len + 1;
    sizes->words++;
    sizes->max_len = len > sizes->max_len ? len : sizes->max_len;
    /* cell, token and merge ids all stay below 2**31 */
    if (sizes->cells > INT32_MAX - 512) {
        PyErr_SetString(PyExc_OverflowError,
                        "the distinct words hold about 2**31 bytes or more, "
                        "beyond the native trainer's 32-bit cell indices");
        return -1;
    }
    return 0;
}

/* Lay out every word of two or more bytes in s->val. Two passes: size, then
 * fill. */
static int
load_words(State *s, PyObject *word_counts)
{
    ItemIter it;
    PyObject *word, *value;
    Sizes sizes = {.cells = 1};
    int r;
    if (iter_start(&it, word_counts) < 0) {
        return -1;
    }
    while ((r = iter_next(&it, &word, &value)) > 0) {
        int64_t count = 0;
        if (read_count(word, value, &count) < 0) {
            goto fail;
        }
        if (size_word(&sizes, PyBytes_GET_SIZE(word), count) < 0) {
            goto fail;
        }
    }
    if (r < 0) {
        goto fail;
    }

    if (alloc_cells(s, sizes.cells, sizes.words, sizes.max_len) < 0) {
        goto fail;
    }
    int32_t n = 0, w = 0;
    /* nothing ran between the passes that could change the mapping */
    it.pos = 0;
    while ((r = iter_next(&it, &word, &value)) > 0) {
        Py_ssize_t len = PyBytes_GET_SIZE(word);
        if (len < 2) {
            continue;
        }
        if (n + len + 2 > s->num_cells || /* and the last boundary */
            w >= sizes.words) { /* only if the mapping changed under us */
            PyErr_SetString(PyExc_RuntimeError,
                            "word_counts changed while it was being read");
            goto fail;
        }
        const unsigned char *bytes =
            (const unsigned char *)PyBytes_AS_STRING(word);
        int64_t count = 0;
        if (read_count(word, value, &count) < 0 ||
            lay_word(s, &n, count, bytes, (size_t)len) < 0)
        {
            goto fail;
        }
        w++;
    }
    if (r < 0) {
        goto fail;
    }
    s->val[n++] = BOUNDARY; /* after the last word */
    if (n != s->num_cells) {
        PyErr_SetString(PyExc_RuntimeError,
                        "word_counts changed while it was being read");
        goto fail;
    }
    s->num_words = w;
    Py_XDECREF(it.items);
    return 0;
fail:
    Py_XDECREF(it.items);
    return -1;
}

/* Lay out the words of packed word counts (see counter.h) as load_words does
 * those of a mapping. The buffer is exported for the whole read (a bytearray
 * cannot resize) and no Python code runs meanwhile. */
static int
load_packed(State *s, PyObject *packed)
{
    Py_buffer view;
    if (PyObject_GetBuffer(packed, &view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    PackedView p;
    Sizes sizes = {.cells = 1};
    if (bpe_packed_open(&p, view.buf, (size_t)view.len) < 0) {
        goto fail;
    }
    for (uint64_t k = 0; k < p.n; k++) {
        int64_t count = bpe_packed_count(&p, k);
        int64_t len = bpe_packed_len(&p, k);
        if (count <= 0) {
            PyErr_Format(PyExc_ValueError,
                         "packed word counts: word %llu has count %lld; "
                         "counts must be positive",
                         (unsigned long long)k, (long long)count);
            goto fail;
        }
        if (size_word(&sizes, len, count) < 0) {
            goto fail;
        }
    }
    if (alloc_cells(s, sizes.cells, sizes.words, sizes.max_len) < 0) {
        goto fail;
    }
    int32_t n = 0, w = 0;
    const unsigned char *bytes = p.bytes;
    for (uint64_t k = 0; k < p.n; k++) {
        uint32_t len = bpe_packed_len(&p, k);
        if (len >= 2) {
            if (lay_word(s, &n, bpe_packed_count(&p, k), bytes, len) < 0) {
                goto fail;
            }
            w++;
        }
        bytes += len;
    }
    s->val[n++] = BOUNDARY; /* after the last word */
    s->num_words = w;
    PyBuffer_Release(&view);
    return 0;
fail:
    PyBuffer_Release(&view);
    return -1;
}

/* ---- the module --------------------------------------------------------- */

/* The merges as a list of (left, right) bytes; one bytes object per token,
 * shared. */
static PyObject *
merges_to_list(const State *s)
{
    PyObject *result = NULL;
    PyObject **cache = calloc((size_t)s->tok.count, sizeof *cache);
    PyObject *list = PyList_New(s->num_merges);
    if (cache == NULL || list == NULL) {
        if (cache == NULL) {
            PyErr_NoMemory();
        }
        goto done;
    }
    for (int32_t i = 0; i < s->num_merges; i++) {
        int32_t ids[2] = {s->merge_left[i], s->merge_right[i]};
        for (int k = 0; k < 2; k++) {
            int32_t id = ids[k];
            if (cache[id] == NULL) {
                cache[id] = PyBytes_FromStringAndSize(
                    (const char *)s->tok.bytes + s->tok.start[id],
                    s->tok.len[id]);
                if (cache[id] == NULL) {
                    goto done;
                }
            }
        }
        PyObject *pair = PyTuple_Pack(2, cache[ids[0]], cache[ids[1]]);
        if (pair == NULL) {
            goto done;
        }
        PyList_SET_ITEM(list, i, pair);
    }
    result = list;
    list = NULL;
done:
    Py_XDECREF(list);
    if (cache != NULL) {
        for (int32_t id = 0; id < s->tok.count; id++) {
            Py_XDECREF(cache[id]);
        }
    }
    free(cache);
    return result;
}

static PyObject *
train(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"word_counts", "num_merges", "on_merges",
                               "stats", "heap_limit", NULL};
    PyObject *word_counts, *on_merges = Py_None, *stats = Py_None;
    Py_ssize_t num_merges, heap_limit = HEAP_LIMIT;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "On|OO$n:train", keywords,
                                     &word_counts, &num_merges, &on_merges,
                                     &stats, &heap_limit))
    {
        return NULL;
    }
    if (heap_limit < 4) {
        PyErr_SetString(PyExc_ValueError, "heap_limit must be >= 4");
        return NULL;
    }
    if (stats != Py_None && !PyDict_Check(stats)) {
        PyErr_SetString(PyExc_TypeError, "stats must be a dict or None");
        return NULL;
    }
    if (num_merges < 0) {
        PyErr_SetString(PyExc_ValueError, "num_merges must be >= 0");
        return NULL;
    }
    if (on_merges != Py_None && !PyCallable_Check(on_merges)) {
        PyErr_SetString(PyExc_TypeError, "on_merges must be callable or None");
        return NULL;
    }

    State s = {0};
    s.heap_limit = (size_t)heap_limit;
    PyObject *result = NULL;
    int err = 0;
    /* a mapping (a dict, a Counter), packed word counts (bytes, or any
     * buffer: PretokenCounter.to_packed's, which hold no object per word), or
     * a list holding only packed word counts, which the trainer takes out of
     * the list once read: the caller's last reference to them can then go
     * before the merges, which need as much memory again */
    if (PyList_CheckExact(word_counts)) {
        if (PyList_GET_SIZE(word_counts) != 1 ||
            !PyObject_CheckBuffer(PyList_GET_ITEM(word_counts, 0)))
        {
            PyErr_SetString(PyExc_TypeError,
                            "a list of word counts must hold one buffer of "
                            "packed word counts, and nothing else");
            goto done;
        }
        PyObject *taken = PyList_GET_ITEM(word_counts, 0);
        Py_INCREF(taken);
        int loaded = load_packed(&s, taken);
        /* (a bytes object's release runs no Python code) */
        if (PyList_SetSlice(word_counts, 0, 1, NULL) < 0 || loaded < 0) {
            Py_DECREF(taken);
            goto done;
        }
        Py_DECREF(taken);
    }
    else if ((!PyDict_Check(word_counts) && PyObject_CheckBuffer(word_counts)
                  ? load_packed(&s, word_counts)
                  : load_words(&s, word_counts)) < 0)
    {
        goto done;
    }
    /* Each merge shortens some word by a cell, so no run makes more than
     * num_cells merges; this also bounds every token and merge id below 2**31.
     */
    s.max_merges =
        num_merges < s.num_cells ? (int32_t)num_merges : s.num_cells;
    s.merge_left = malloc(((size_t)s.max_merges + 1) * sizeof *s.merge_left);
    s.merge_right = malloc(((size_t)s.max_merges + 1) * sizeof *s.merge_right);
    s.left_shift = calloc(256 + (size_t)s.max_merges, sizeof *s.left_shift);
    s.right_shift = calloc(256 + (size_t)s.max_merges, sizeof *s.right_shift);
    if (!s.merge_left || !s.merge_right || !s.left_shift || !s.right_shift) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
#if defined(__GLIBC__)
    /* What the caller freed (the packed counts just read, the counter's
     * tables) stays in the process until asked for, under the lists about to
     * be made: about 18 MB on a 250 MB web corpus, at the run's peak. */
    malloc_trim(0);
#endif
    err = tokens_init(&s.tok, 256 + s.max_merges) < 0 || initial_pairs(&s) < 0;
    Py_END_ALLOW_THREADS
    if (err) {
        PyErr_NoMemory();
        goto done;
    }
    for (int64_t batch = 1;; batch++) {
        int32_t made;
        Py_BEGIN_ALLOW_THREADS
        made = run_merges(&s, BATCH);
#if defined(__GLIBC__)
        /* The lists freed as pairs are merged or counted down to 0 leave
         * holes that later, smaller lists fill only in part: glibc returns
         * their pages only when asked. */
        if (batch % TRIM_EVERY == 0) {
            malloc_trim(0);
            s.arena.released = 0;
        }
#endif
        Py_END_ALLOW_THREADS
        if (made < 0) {
            PyErr_NoMemory();
            goto done;
        }
        if (made > 0 && on_merges != Py_None) {
            PyObject *r = PyObject_CallFunction(on_merges, "i", (int)made);
            if (r == NULL) {
                goto done;
            }
            Py_DECREF(r);
        }
        if (PyErr_CheckSignals() <
            0) /* Ctrl-C stops training between batches */
        {
            goto done;
        }
        if (made < BATCH) {
            break; /* the budget is spent or no pair is left */
        }
    }
    result = merges_to_list(&s);
    if (result != NULL && stats != Py_None) {
        size_t list_bytes = 0;
        for (size_t p = 0; p < s.num_pairs; p++) {
            if (s.pairs[p].seen.cap > SMALL_LIST) {
                list_bytes += s.pairs[p].seen.cap * sizeof(int32_t);
            }
        }
        const struct {
            const char *name;
            long long value;
        } items[] = {
            {"words", s.num_words},
            {"cells", s.num_cells},
            {"pairs", (long long)s.pairs_created},
            {"pair_records", (long long)s.num_pairs},
            {"occurrences_visited", s.visited},
            {"occurrences_merged", s.merged},
            {"occurrences_compacted", s.compacted},
            {"heap_pushes", s.pushes},
            {"heap_pops", s.pops},
            {"heap_peak", (long long)s.heap_peak},
            {"heap_cuts", s.cuts},
            {"heap_refills", s.refills},
            {"trims", s.trims},
            {"pair_bytes", (long long)(s.pairs_cap * sizeof(Pair) +
                                       (sizeof(uint32_t) << s.slot_bits))},
            {"list_bytes", (long long)(list_bytes + s.arena.num_blocks *
                                                        ARENA_BLOCK *
                                                        sizeof(int32_t))},
            {"heap_bytes", (long long)(s.heap_cap * sizeof(Entry))},
        };
        for (size_t k = 0; k < sizeof items / sizeof items[0]; k++) {
            PyObject *v = PyLong_FromLongLong(items[k].value);
            if (v == NULL || PyDict_SetItemString(stats, items[k].name, v) < 0) {
                Py_XDECREF(v);
                Py_CLEAR(result);
                break;
            }
            Py_DECREF(v);
        }
    }
done:
    state_free(&s);
    return result;
}

static PyMethodDef methods[] = {
    {"train", (PyCFunction)(void (*)(void))train, METH_VARARGS | METH_KEYWORDS,
     "train(word_counts, num_merges, on_merges=None, stats=None, *, "
     "heap_limit=65536) -> list of (left bytes, right bytes)\n\nUp to num_merges BPE merges over word_counts (bytes -> "
     "positive int, packed word\ncounts as PretokenCounter.to_packed "
     "makes, or a list holding only those, which train\nempties once it has "
     "read them), in the order and with\nthe tie-break of bpe_impls.naive. "
     "on_merges(k), if given, is called after each batch of k\nmerges. "
     "stats, a dict, receives counts of the work done and sizes. "
     "heap_limit:\nthe heap's entries before it first drops the rarest "
     "pairs (tests make it small). Use "
     "bpe_impls.native_train.train, which validates arguments and builds "
     "the vocab."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "bpe_impls._native_train",
    .m_doc =
        "The merge loop of the native BPE trainer (bpe_impls.native_train).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__native_train(void)
{
    return PyModuleDef_Init(&module_def);
}
