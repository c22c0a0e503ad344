/* Merging: one merge of a pair at every live occurrence, the neighbours'
 * counts moved, and the loop of merges. */
#include "trainer_internal.h"

/* ---- merging ------------------------------------------------------------ */

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
 * when out of memory. Touches only s: the module runs it without the GIL. */
BPE_INTERNAL int32_t
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
BPE_INTERNAL int
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

BPE_INTERNAL void
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
