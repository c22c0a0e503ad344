/* Counting pre-tokens into a BytesMap (counter.h), PretokenCounter's core:
 * by their UTF-8 bytes, from a str's code points or from UTF-8 split on
 * special tokens; merging two maps and packing one, each on several threads.
 * Plain C: the Python type is py/counter_type.c, which runs all of these
 * without the GIL. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_util.h"
#include "counter.h"
#include "packed.h"
#include "scan_blocks.h"
#include "scanner.h"

/* ---- counting ----------------------------------------------------------- */

BPE_INTERNAL int
bpe_count_text(BytesMap *m, Text *t, int pattern)
{
    for (ptrdiff_t i = 0; i < t->n;) {
        ptrdiff_t j = bpe_text_next_end(t, i, pattern);
        ptrdiff_t len;
        const unsigned char *key = bpe_text_utf8(t, i, j, &len);
        if (key == NULL) {
            return (int)len; /* -1: lone surrogate, -2: out of memory */
        }
        uint64_t h = bpe_hash_bytes(key, (size_t)len);
        Entry *e = bpe_bm_get(m, key, (size_t)len, h);
        if (e != NULL) {
            e->value++;
        }
        else if (bpe_bm_insert(m, key, (size_t)len, h, 1, 0) == NULL) {
            return -2;
        }
        i = j;
    }
    return 0;
}

/* Count the pre-tokens of `pattern` (PAT_*) in s[0:n] (valid UTF-8, no
 * special token); -2 when out of memory. Inlined into count_ordinary once per
 * pattern, so each copy calls its own scanner (no switch per pre-token).
 * Each token is looked up as it is scanned (no prefetching lookahead: see
 * docs/design-notes.md). */
BPE_ALWAYS_INLINE int
count_ordinary_as(BytesMap *counts, const unsigned char *s, size_t n,
                  int pattern)
{
    /* ASCII text is split from whole blocks (scan_blocks.h) */
    Spans spans;
    bpe_spans_init(&spans, pattern);
    for (size_t i = 0; i < n;) {
        size_t j = bpe_spans_next(&spans, s, i, n, pattern);
        uint64_t h = bpe_hash_bytes(s + i, j - i);
        Entry *slot = bpe_bm_get(counts, s + i, j - i, h);
        if (slot != NULL) {
            slot->value++;
        }
        else if (bpe_bm_insert(counts, s + i, j - i, h, 1, 0) == NULL) {
            return -2;
        }
        i = j;
    }
    return 0;
}

static int
count_ordinary(BytesMap *counts, const unsigned char *s, size_t n, int pattern)
{
    switch (pattern) {
    case PAT_CL100K:
        return count_ordinary_as(counts, s, n, PAT_CL100K);
    case PAT_O200K:
        return count_ordinary_as(counts, s, n, PAT_O200K);
    default:
        return count_ordinary_as(counts, s, n, PAT_GPT2);
    }
}

BPE_INTERNAL int
bpe_count_utf8(BytesMap *m, const Specials *sp, const unsigned char *s,
               size_t n, int pattern)
{
    if (!bpe_utf8_valid(s, n)) {
        return 0;
    }
    for (size_t pos = 0; pos <= n;) {
        size_t len, which;
        size_t at = bpe_next_special(sp, s, pos, n, &len, &which);
        if (count_ordinary(m, s + pos, at - pos, pattern) < 0) {
            return -2;
        }
        pos = at + (len ? len : 1);
    }
    return 1;
}

BPE_INTERNAL int
bpe_add_count(BytesMap *m, const unsigned char *key, size_t len, uint64_t h,
              int64_t count)
{
    Entry *s = bpe_bm_get(m, key, len, h);
    if (s == NULL) {
        return bpe_bm_insert(m, key, len, h, count, 0) == NULL ? -1 : 0;
    }
    s->value = count > INT64_MAX - s->value ? INT64_MAX : s->value + count;
    return 0;
}

BPE_INTERNAL int
bpe_add_packed(BytesMap *m, const PackedView *p)
{
    const unsigned char *key = p->bytes;
    for (uint64_t k = 0; k < p->n; k++) {
        size_t len = bpe_packed_len(p, k);
        if (bpe_add_count(m, key, len, bpe_hash_bytes(key, len),
                          bpe_packed_count(p, k)) < 0)
        {
            return -1;
        }
        key += len;
    }
    return 0;
}

/* ---- merging counters, on several threads --------------------------------
 *
 * bpe_bm_merge(into, from, threads) adds from's counts to into's as adding
 * its entries one by one, in from's order, would: keys already in `into` keep
 * their place, new ones follow in from's first-seen order (so the counter's
 * to_dict() and to_packed() give the same order for any number of threads).
 * In two phases (three when the index must grow), each on `threads` threads
 * (PretokenCounter.merge runs it with the GIL released and both counters
 * busy, so no other code touches either map):
 *
 *   1. lookup: share p of from's entries (a range of positions) is looked up
 *      in `into`, through an index nobody changes meanwhile; a hit adds to its
 *      entry's count (from's keys are distinct, so each entry of `into` is hit
 *      by at most one share: no two threads write one count), a miss is kept
 *      in the share's list, in from's order.
 *   2. append: the shares' misses, concatenated, are the new entries, in
 *      from's order; each share copies its own to the place the counts of
 *      the shares before it give, and puts them in the index, claiming free
 *      slots by compare-and-swap. The index is first grown, if it must be, to
 *      the size one-by-one insertion would reach (a phase clears it, one
 *      refills it with the old entries and the new), so it takes the same
 *      slots as one-by-one insertion, maybe by other entries within a run of
 *      taken slots, which lookups do not depend on.
 *
 * On one thread this is also faster than adding the entries one by one: the
 * lookups, independent of each other, prefetch ahead, and the index grows
 * once. */

#if defined(__unix__)
#include <pthread.h>
#define COUNTER_THREADS 1
#endif

/* How many entries ahead the merge's loops prefetch. */
#define MERGE_AHEAD 16

typedef struct {
    BytesMap *into;
    const BytesMap *from;
    enum { MERGE_LOOKUP, MERGE_CLEAR_INDEX, MERGE_APPEND } phase;
    /* lookup: from's entries [begin, end); misses into fresh (room for
     * end - begin), n_fresh of them, long_bytes of long keys among them */
    size_t begin, end;
    uint32_t *fresh;
    size_t n_fresh, long_bytes;
    /* when the index was grown: the slots [clear_begin, clear_end) it clears
     * (the first touch of fresh pages, which the kernel zeroes, costs more
     * than the writes), and the old entries [old_begin, old_end) it puts
     * back */
    size_t clear_begin, clear_end, old_begin, old_end;
    /* append: where this share's new entries and long keys go */
    size_t first_id, arena_at;
} MergeShare;

/* The entry of `into` whose key is that of e, an entry of `from` (NULL if
 * absent): bpe_bm_get, comparing a short key as packed (both maps pack
 * alike), so the key is never unpacked and packed again. */
static Entry *
bm_find_entry(const BytesMap *into, const BytesMap *from, const Entry *e)
{
    size_t at = e->hash & into->mask;
    uint32_t id_mask = bpe_bm_id_mask(into), tag = bpe_bm_tag(e->hash, id_mask);
    const unsigned char *key = e->len > INLINE_KEY ? from->arena + e->off : NULL;
    for (;;) {
        uint32_t k = into->index[at];
        if (k == NO_ENTRY) {
            return NULL;
        }
        if ((k & ~id_mask) == tag) {
            Entry *s = &into->entries[k & id_mask];
            if (s->hash == e->hash && s->len == e->len &&
                (key == NULL
                     ? s->off == e->off
                     : bpe_long_key_equal(into->arena + s->off, key, e->len)))
            {
                return s;
            }
        }
        at = (at + 1) & into->mask;
    }
}

/* Put entry `id` (hash h) in the first free slot of its probe sequence,
 * claimed by compare-and-swap where other threads fill the index too. */
static void
put_slot(BytesMap *m, uint64_t h, size_t id)
{
    uint32_t id_mask = bpe_bm_id_mask(m);
    uint32_t slot = bpe_bm_tag(h, id_mask) | (uint32_t)id;
    for (size_t at = h & m->mask;; at = (at + 1) & m->mask) {
        uint32_t free_slot = NO_ENTRY;
        if (__atomic_load_n(&m->index[at], __ATOMIC_RELAXED) == NO_ENTRY &&
            __atomic_compare_exchange_n(&m->index[at], &free_slot, slot, 0,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        {
            return;
        }
    }
}

static void
merge_lookup(MergeShare *sh)
{
    const BytesMap *from = sh->from;
    const BytesMap *into = sh->into;
    for (size_t k = sh->begin; k < sh->end; k++) {
        /* the lookups are independent: their index slots, and then their
         * entries, are fetched ahead */
        if (k + 2 * MERGE_AHEAD < sh->end) {
            __builtin_prefetch(
                &into->index[from->entries[k + 2 * MERGE_AHEAD].hash &
                             into->mask]);
        }
        if (k + MERGE_AHEAD < sh->end) {
            uint32_t slot =
                into->index[from->entries[k + MERGE_AHEAD].hash & into->mask];
            if (slot != NO_ENTRY) {
                __builtin_prefetch(
                    &into->entries[slot & bpe_bm_id_mask(into)]);
            }
        }
        const Entry *e = &from->entries[k];
        Entry *s = bm_find_entry(sh->into, from, e);
        if (s != NULL) {
            s->value = e->value > INT64_MAX - s->value ? INT64_MAX
                                                       : s->value + e->value;
        }
        else {
            sh->fresh[sh->n_fresh++] = (uint32_t)k;
            if (e->len > INLINE_KEY) {
                sh->long_bytes += e->len;
            }
        }
    }
}

static void
merge_append(MergeShare *sh)
{
    BytesMap *into = sh->into;
    const BytesMap *from = sh->from;
    for (size_t k = sh->old_begin; k < sh->old_end; k++) {
        if (k + MERGE_AHEAD < sh->old_end) {
            __builtin_prefetch(
                &into->index[into->entries[k + MERGE_AHEAD].hash & into->mask],
                1);
        }
        put_slot(into, into->entries[k].hash, k);
    }
    size_t arena_at = sh->arena_at;
    for (size_t i = 0; i < sh->n_fresh; i++) {
        if (i + MERGE_AHEAD < sh->n_fresh) {
            const Entry *ahead = &from->entries[sh->fresh[i + MERGE_AHEAD]];
            __builtin_prefetch(&into->index[ahead->hash & into->mask], 1);
            __builtin_prefetch(ahead);
        }
        const Entry *e = &from->entries[sh->fresh[i]];
        Entry *d = &into->entries[sh->first_id + i];
        *d = *e;
        d->aux = 0;
        if (e->len > INLINE_KEY) {
            memcpy(into->arena + arena_at, from->arena + e->off, e->len);
            d->off = arena_at;
            arena_at += e->len;
        }
        put_slot(into, e->hash, sh->first_id + i);
    }
}

static void *
merge_share_run(void *arg)
{
    MergeShare *sh = arg;
    switch (sh->phase) {
    case MERGE_LOOKUP:
        merge_lookup(sh);
        break;
    case MERGE_CLEAR_INDEX:
        memset(sh->into->index + sh->clear_begin, 0xFF,
               (sh->clear_end - sh->clear_begin) * sizeof(uint32_t));
        break;
    case MERGE_APPEND:
        merge_append(sh);
        break;
    }
    return NULL;
}

/* Run fn on each of n shares (consecutive structs of `size` bytes from
 * `shares`): shares 1.. on threads of their own (any that cannot start runs
 * here instead), share 0 on this one. Used by merge() and to_packed(). */
static void
run_shares(void *(*fn)(void *), void *shares, size_t size, size_t n)
{
    unsigned char *share = shares;
#ifdef COUNTER_THREADS
    pthread_t *ids = n > 1 ? malloc((n - 1) * sizeof(pthread_t)) : NULL;
    unsigned char *started = n > 1 ? calloc(n - 1, 1) : NULL;
    if (ids != NULL && started != NULL) {
        for (size_t p = 1; p < n; p++) {
            started[p - 1] =
                pthread_create(&ids[p - 1], NULL, fn, share + p * size) == 0;
        }
    }
    fn(share);
    for (size_t p = 1; p < n; p++) {
        if (started != NULL && started[p - 1]) {
            pthread_join(ids[p - 1], NULL);
        }
        else {
            fn(share + p * size);
        }
    }
    free(ids);
    free(started);
#else
    for (size_t p = 0; p < n; p++) {
        fn(share + p * size);
    }
#endif
}

/* Run every merge share's current phase. */
static void
merge_run_phase(MergeShare *shares, size_t n)
{
    run_shares(merge_share_run, shares, sizeof(MergeShare), n);
}

/* Add from's counts to into's (see above): 0, or -1 when out of memory (into
 * may then hold some of from's counts). */
BPE_INTERNAL int
bpe_bm_merge(BytesMap *into, const BytesMap *from, size_t threads)
{
    if (from->used == 0) {
        return 0;
    }
    size_t n = threads < from->used ? threads : from->used;
    MergeShare *shares = calloc(n, sizeof(MergeShare));
    uint32_t *fresh = malloc(from->used * sizeof(uint32_t));
    int failed = shares == NULL || fresh == NULL;
    for (size_t p = 0; p < n && !failed; p++) {
        shares[p].into = into;
        shares[p].from = from;
        shares[p].phase = MERGE_LOOKUP;
        shares[p].begin = from->used * p / n;
        shares[p].end = from->used * (p + 1) / n;
        shares[p].fresh = fresh + shares[p].begin;
    }
    if (!failed) {
        merge_run_phase(shares, n);
    }
    size_t added = 0, long_bytes = 0;
    for (size_t p = 0; p < n && !failed; p++) {
        shares[p].first_id = into->used + added;
        shares[p].arena_at = into->arena_len + long_bytes;
        added += shares[p].n_fresh;
        long_bytes += shares[p].long_bytes;
    }
    size_t used = into->used + added, capacity = into->mask + 1;
    while (used * 2 > capacity) {
        capacity *= 2;
    }
    failed = failed || used >= NO_ENTRY - 1 ||
             table_reserve(&into->entries, &into->entries_cap, into->used,
                           used, sizeof(Entry), 512) < 0 ||
             table_reserve(&into->arena, &into->arena_cap, into->arena_len,
                           into->arena_len + long_bytes, 1, 4096) < 0;
    if (!failed && added > 0) {
        if (capacity > into->mask + 1) {
            /* a larger index, which every entry goes back into */
            uint32_t *index = table_alloc(capacity * sizeof(uint32_t));
            if (index == NULL) {
                failed = 1;
            }
            else {
                table_free(into->index, (into->mask + 1) * sizeof(uint32_t));
                into->index = index;
                into->mask = capacity - 1;
                for (size_t p = 0; p < n; p++) {
                    shares[p].phase = MERGE_CLEAR_INDEX;
                    shares[p].clear_begin = capacity * p / n;
                    shares[p].clear_end = capacity * (p + 1) / n;
                    shares[p].old_begin = into->used * p / n;
                    shares[p].old_end = into->used * (p + 1) / n;
                }
                merge_run_phase(shares, n);
            }
        }
        for (size_t p = 0; p < n; p++) {
            shares[p].phase = MERGE_APPEND;
        }
        if (!failed) {
            merge_run_phase(shares, n);
            into->used = used;
            into->arena_len += long_bytes;
        }
    }
    free(shares);
    free(fresh);
    return failed ? -1 : 0;
}

/* ---- to_packed, on several threads ----------------------------------------
 *
 * The entries of at least min_count, in first-seen order, as packed word
 * counts (packed.h). Share p of the entries (a range of positions) is read by
 * one thread, in two phases: (1, bpe_pack_plan) how many of its entries are
 * kept and their keys' bytes; then, once the caller has the buffer (the
 * module: a new bytes object, made with the GIL, which no other code holds
 * while it is filled) and the sizes of the shares before each give where its
 * words go, (2, bpe_pack_write) it writes its counts, lengths and keys there.
 * The output is the same for any thread count. */

struct PackShare {
    const BytesMap *m;
    int64_t min_count;
    enum { PACK_SIZE, PACK_WRITE } phase;
    size_t begin, end; /* the entries [begin, end) */
    /* size: how many of them are kept, and their keys' bytes */
    uint64_t n;
    size_t key_bytes;
    /* write: where their counts, lengths and keys go */
    unsigned char *counts, *lengths, *bytes;
};

static void *
pack_share_run(void *arg)
{
    PackShare *sh = arg;
    const BytesMap *m = sh->m;
    if (sh->phase == PACK_SIZE) {
        uint64_t n = 0;
        size_t key_bytes = 0;
        for (size_t k = sh->begin; k < sh->end; k++) {
            if (m->entries[k].value >= sh->min_count) {
                n++;
                key_bytes += m->entries[k].len;
            }
        }
        sh->n = n;
        sh->key_bytes = key_bytes;
        return NULL;
    }
    unsigned char *counts = sh->counts, *lengths = sh->lengths,
                  *bytes = sh->bytes;
    for (size_t k = sh->begin; k < sh->end; k++) { /* in first-seen order */
        const Entry *e = &m->entries[k];
        if (e->value < sh->min_count) {
            continue;
        }
        unsigned char key_buf[INLINE_KEY];
        memcpy(counts, &e->value, 8);
        memcpy(lengths, &e->len, 4);
        memcpy(bytes, bpe_entry_key(m, e, key_buf), e->len);
        counts += 8;
        lengths += 4;
        bytes += e->len;
    }
    return NULL;
}

BPE_INTERNAL int
bpe_pack_plan(PackPlan *plan, const BytesMap *m, int64_t min_count,
              size_t threads, uint64_t *size)
{
    memset(plan, 0, sizeof(*plan));
    size_t n_shares = threads < m->used ? threads : m->used;
    n_shares = n_shares ? n_shares : 1;
    plan->shares = calloc(n_shares, sizeof(PackShare));
    if (plan->shares == NULL) {
        return -1;
    }
    plan->n_shares = n_shares;
    PackShare *shares = plan->shares;
    for (size_t p = 0; p < n_shares; p++) {
        shares[p].m = m;
        shares[p].min_count = min_count;
        shares[p].phase = PACK_SIZE;
        shares[p].begin = m->used * p / n_shares;
        shares[p].end = m->used * (p + 1) / n_shares;
    }
    run_shares(pack_share_run, shares, sizeof(PackShare), n_shares);
    for (size_t p = 0; p < n_shares; p++) {
        plan->n += shares[p].n;
        plan->key_bytes += shares[p].key_bytes;
    }
    /* (no overflow: the keys are in memory, and so are 12 bytes a word) */
    *size = PACKED_HEADER + 12 * plan->n + (uint64_t)plan->key_bytes;
    return 0;
}

BPE_INTERNAL void
bpe_pack_write(PackPlan *plan, unsigned char *buf)
{
    uint64_t n = plan->n;
    uint32_t version = PACKED_VERSION;
    memcpy(buf, PACKED_MAGIC, 4);
    memcpy(buf + 4, &version, 4);
    memcpy(buf + 8, &n, 8);
    unsigned char *counts = buf + PACKED_HEADER, *lengths = counts + 8 * n,
                  *bytes = lengths + 4 * n;
    PackShare *shares = plan->shares;
    for (size_t p = 0; p < plan->n_shares; p++) {
        shares[p].phase = PACK_WRITE;
        shares[p].counts = counts;
        shares[p].lengths = lengths;
        shares[p].bytes = bytes;
        counts += 8 * shares[p].n;
        lengths += 4 * shares[p].n;
        bytes += shares[p].key_bytes;
    }
    run_shares(pack_share_run, shares, sizeof(PackShare), plan->n_shares);
}

BPE_INTERNAL void
bpe_pack_free(PackPlan *plan)
{
    free(plan->shares);
    memset(plan, 0, sizeof(*plan));
}
