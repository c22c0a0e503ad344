/* The trainer's memory for words and tokens: occurrence lists (one entry
 * inline, then an arena of small lists, then pages of their own) and the
 * token table (id <-> bytes, one id per byte string). */
#include "trainer_internal.h"

BPE_INTERNAL int32_t *
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

BPE_INTERNAL void
arena_free(Arena *arena)
{
    for (size_t i = 0; i < arena->num_blocks; i++) {
        free(arena->blocks[i]);
    }
    free(arena->blocks);
}

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
BPE_INTERNAL int32_t *
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

BPE_INTERNAL int
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

BPE_INTERNAL void
cells_free(CellList *list)
{
    if (list->cap > SMALL_LIST) {
        list_free(list->u.items, list->cap);
    }
}

/* Empty the list, giving its memory back (to reuse it if the list grows
 * again). */
BPE_INTERNAL void
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

/* Python's bytes order: memcmp over the common prefix, then the shorter one is
 * smaller. */
BPE_INTERNAL int
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

BPE_INTERNAL int
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
BPE_INTERNAL int32_t
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
