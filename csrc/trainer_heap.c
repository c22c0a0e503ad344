/* The lazy max-heap of pairs above a moving floor: cut when full, refilled
 * from the pair table when dry; pop checks an entry against the table. */
#include "trainer_internal.h"

/* ---- the heap ----------------------------------------------------------- */

/* A max-heap of Entry: highest count first, ties to the greatest (left bytes,
 * right bytes). Not u64_heap.h's (the encoder's and the rank file reader's):
 * that one orders plain uint64 keys, and a generic heap would call
 * ranks_before through a pointer once per level of every sift. */

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

BPE_INTERNAL void
heapify(State *s)
{
    for (size_t i = s->heap_len / 2; i-- > 0;) {
        sift_down(s, i);
    }
}

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
BPE_INTERNAL int
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
BPE_INTERNAL int32_t
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
