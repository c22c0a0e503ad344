/* BytesMap (counter.h): bytes -> count, open addressing over an index of
 * entry ids, keys in one arena; and the memory of its tables (huge pages for
 * the large ones, returned to the system when freed). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* mremap (Linux) */
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_util.h"
#include "counter.h"

#if defined(__linux__)
#include <sys/mman.h> /* mmap, madvise, mremap */
#endif

/* ---- table memory ------------------------------------------------------- */

/* A map's arrays of BIG_TABLE bytes or more get pages of their own (on
 * Linux), 2 MB-aligned and asked to be huge pages. Its index and entries are
 * read at random, once per pre-token: with 4 KB pages each lookup also missed
 * the TLB. And their memory goes back to the system
 * when freed, whichever thread's malloc arena would otherwise keep it (glibc
 * never trims the top of a thread's arena below its moving threshold). */
#define BIG_TABLE ((size_t)2 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

BPE_INTERNAL void *
table_alloc(size_t bytes)
{
#if defined(__linux__)
    if (bytes >= BIG_TABLE) {
        bytes = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        unsigned char *p = mmap(NULL, bytes + HUGE_PAGE, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            return NULL;
        }
        size_t head = (HUGE_PAGE - (uintptr_t)p % HUGE_PAGE) % HUGE_PAGE;
        if (head > 0) {
            munmap(p, head);
        }
        munmap(p + head + bytes, HUGE_PAGE - head);
#ifdef MADV_HUGEPAGE
        madvise(p + head, bytes, MADV_HUGEPAGE); /* a hint: may fail */
#endif
        return p + head;
    }
#endif
    return malloc(bytes ? bytes : 1);
}

BPE_INTERNAL void *
table_alloc_zeroed(size_t bytes)
{
#if defined(__linux__)
    if (bytes >= BIG_TABLE) {
        return table_alloc(bytes); /* (fresh anonymous pages are zero) */
    }
#endif
    return calloc(1, bytes ? bytes : 1);
}

BPE_INTERNAL void
table_free(void *p, size_t bytes)
{
    if (p == NULL) {
        return;
    }
#if defined(__linux__)
    if (bytes >= BIG_TABLE) {
        munmap(p, (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
        return;
    }
#endif
    free(p);
}

/* Grow *items (a T **, *cap elements of `size` bytes, `used` of them in use)
 * to hold `need`, doubling from first_cap: 0, or -1 when out of memory (the
 * array then unchanged). bpe_reserve for a table. */
BPE_INTERNAL int
table_reserve(void *items_ptr, size_t *cap, size_t used, size_t need,
              size_t size, size_t first_cap)
{
    if (need <= *cap) {
        return 0;
    }
    size_t new_cap = *cap ? *cap : first_cap;
    while (new_cap < need) {
        new_cap *= 2;
    }
    if (new_cap > SIZE_MAX / size / 2) {
        return -1;
    }
    void *items;
    memcpy(&items, items_ptr, sizeof(items));
    void *grown;
    if (new_cap * size < BIG_TABLE) {
        grown = realloc(items, new_cap * size);
    }
    else {
        grown = table_alloc(new_cap * size);
#if defined(__linux__)
        if (grown != NULL && *cap * size >= BIG_TABLE) {
            /* Move the old pages (huge ones whole: both ends are 2 MB
             * aligned) to the start of the new place, rather than copying
             * them into pages faulted in anew. */
            size_t old_bytes = (*cap * size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1),
                   new_bytes =
                       (new_cap * size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
            void *moved = mremap(items, old_bytes, new_bytes,
                                 MREMAP_MAYMOVE | MREMAP_FIXED, grown);
            if (moved == MAP_FAILED) {
                table_free(grown, new_cap * size);
                return -1;
            }
            memcpy(items_ptr, &moved, sizeof(moved));
            *cap = new_cap;
            return 0;
        }
#endif
        if (grown != NULL && used > 0) {
            memcpy(grown, items, used * size);
        }
        if (grown != NULL) {
            table_free(items, *cap * size);
        }
    }
    if (grown == NULL) {
        return -1;
    }
    memcpy(items_ptr, &grown, sizeof(grown));
    *cap = new_cap;
    return 0;
}

/* ---- BytesMap ----------------------------------------------------------- */

BPE_INTERNAL int
bpe_bm_init(BytesMap *m, size_t capacity)
{
    memset(m, 0, sizeof(*m));
    m->index = table_alloc(capacity * sizeof(uint32_t));
    m->entries = table_alloc(capacity / 2 * sizeof(Entry));
    if (m->index == NULL || m->entries == NULL) {
        table_free(m->index, capacity * sizeof(uint32_t));
        table_free(m->entries, capacity / 2 * sizeof(Entry));
        memset(m, 0, sizeof(*m));
        return -1;
    }
    memset(m->index, 0xFF, capacity * sizeof(uint32_t));
    m->mask = capacity - 1;
    m->entries_cap = capacity / 2;
    return 0;
}

BPE_INTERNAL void
bpe_bm_free(BytesMap *m)
{
    if (m->index != NULL) {
        table_free(m->index, (m->mask + 1) * sizeof(uint32_t));
    }
    table_free(m->entries, m->entries_cap * sizeof(Entry));
    table_free(m->arena, m->arena_cap);
    memset(m, 0, sizeof(*m));
}

BPE_INTERNAL void
bpe_bm_clear(BytesMap *m)
{
    memset(m->index, 0xFF, (m->mask + 1) * sizeof(uint32_t));
    m->used = 0;
    m->arena_len = 0;
}

/* Double the index (the entries stay where they are). */
static int
bm_grow(BytesMap *m)
{
    size_t capacity = (m->mask + 1) * 2;
    uint32_t *index = table_alloc(capacity * sizeof(uint32_t));
    if (index == NULL) {
        return -1;
    }
    memset(index, 0xFF, capacity * sizeof(uint32_t));
    uint32_t id_mask =
        capacity - 1 >= UINT32_MAX ? UINT32_MAX : (uint32_t)(capacity - 1);
    for (size_t k = 0; k < m->used; k++) {
        uint64_t h = m->entries[k].hash;
        size_t at = h & (capacity - 1);
        while (index[at] != NO_ENTRY) {
            at = (at + 1) & (capacity - 1);
        }
        index[at] = bpe_bm_tag(h, id_mask) | (uint32_t)k;
    }
    table_free(m->index, (m->mask + 1) * sizeof(uint32_t));
    m->index = index;
    m->mask = capacity - 1;
    return 0;
}

BPE_INTERNAL Entry *
bpe_bm_insert(BytesMap *m, const unsigned char *key, size_t len, uint64_t h,
              int64_t value, uint32_t aux)
{
    if (len >= UINT32_MAX || m->used >= NO_ENTRY - 1) {
        return NULL;
    }
    /* the index at most half full: short probe sequences matter more than its
     * size */
    if ((m->used + 1) * 2 > m->mask + 1 && bm_grow(m) < 0) {
        return NULL;
    }
    if (table_reserve(&m->entries, &m->entries_cap, m->used, m->used + 1,
                      sizeof(Entry), 512) < 0)
    {
        return NULL;
    }
    uint64_t off;
    if (len <= INLINE_KEY) {
        off = bpe_pack_key(key, len);
    }
    else {
        if (table_reserve(&m->arena, &m->arena_cap, m->arena_len,
                          m->arena_len + len, 1, 4096) < 0)
        {
            return NULL;
        }
        memcpy(m->arena + m->arena_len, key, len);
        off = m->arena_len;
        m->arena_len += len;
    }
    size_t at = h & m->mask;
    while (m->index[at] != NO_ENTRY) {
        at = (at + 1) & m->mask;
    }
    uint32_t id_mask = bpe_bm_id_mask(m);
    m->index[at] = bpe_bm_tag(h, id_mask) | (uint32_t)m->used;
    Entry *e = &m->entries[m->used++];
    e->hash = h;
    e->off = off;
    e->len = (uint32_t)len;
    e->value = value;
    e->aux = aux;
    return e;
}
