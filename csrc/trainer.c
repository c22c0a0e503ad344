/* The merge loop of the "native" trainer (bpe_impls._native_train), in C.
 *
 * bpe_impls/trainers/native.py is the Python side, py/trainer_module.c the
 * module (train(): its arguments, the words read from a mapping, the merges
 * run in batches without the GIL with a check for signals and on_merges(k)
 * between them, the merges as bytes). This is route_b.py's algorithm
 * (in-place merges found through an append-only occurrence index, lazy
 * max-heap) on flat C arrays; nothing in the trainer's core touches a Python
 * object.
 *
 * Data structures:
 * - cells: every distinct word of two or more bytes, one byte per cell, in
 *   one int32 array, `val`, each word preceded by a boundary cell and the last
 *   one followed by a final boundary (BOUNDARY). A word's boundary holds
 *   BOUNDARY + its count, or, for a count of count_limit or more (count_limit
 *   is about 2**31 less the longest word and the number of words), BOUNDARY +
 *   count_limit + the count's index in a side table (big_counts). A token
 *   covers consecutive cells (its bytes): its first cell holds its id, its
 *   last cell (if it has several) the offset back to its first, -(len - 1),
 *   and any cell between is dead (negative, never read). Every boundary lies
 *   below every offset, so `v <= last_boundary` tells them apart. So the next
 *   token starts at `cell + len(token)`, the previous one is read off the
 *   cell before, and a merge walks back to the boundary for the word's count
 *   (in a word of 32 bytes or more it bisects the long words' boundary
 *   positions instead): the words need no prev/next links and no array of
 *   counts. About 4 bytes per byte of distinct words.
 * - tokens: every token's bytes back to back, plus a hash table bytes -> id.
 *   One id per byte string: a merge whose bytes already exist as a token
 *   (`a`+`bc` after `ab`+`c`) reuses that id, because the naive trainer
 *   compares tokens by their bytes.
 * - pairs: an open-addressing hash table (left id, right id) -> pair record
 *   (32 bytes): the pair's int64 count and its occurrence list, the cells
 *   where the pair was seen. A slot is 4 bytes: the record's id and, in the
 *   bits the id does not need, a tag of the key's hash, so a probe reads a
 *   record only when the tag matches. Lists are append-only, as in route_b: an
 *   entry is live only if the cell still starts the left token and the next
 *   token is the right one; stale and repeated entries are skipped on use. A
 *   list of one entry holds it in the record, the next few come from a shared
 *   arena, and one of 16384 entries or more gets pages of its own (on Linux),
 *   returned as soon as it shrinks or dies. Memory follows the live pairs, not
 *   all pairs ever made: a pair counted down to 0 frees its list at once and
 *   leaves the table after the merge (its record is reused), and a list whose
 *   pair's count falls below a quarter of its entries drops its stale ones
 *   (each live entry weighs >= 1, so the work is at most 4/3 of the entries
 *   dropped). Freed heap memory goes back to the system (malloc_trim) before
 *   the words' pairs are indexed and whenever 16 MB of lists have been freed.
 * - shifts: two arrays indexed by token id, filled once per merge of (a, b):
 *   for a neighbour token t, the ids of (t, a) and (t, new) on the left, (b,
 *   t) and (new, t) on the right. A merge's many occurrences share few
 *   neighbours, so most pair lookups are an array read, not a hash probe.
 * - heap: a binary max-heap of (count, left id, right id), ordered by
 *   `merge_priority` (count, then left bytes, then right bytes, as Python
 *   compares bytes; each token's first 8 bytes, kept as one integer, settle
 *   most ties). Lazy, as in route_b: an entry's count is an upper bound of the
 *   pair's count, which the pop checks against the table. It holds only the
 *   pairs at or above a floor: when it reaches its limit (65536 entries to
 *   start) the floor rises to keep about a quarter of them; when it runs dry
 *   the floor falls and the pairs above it are pushed again. Most of a web
 *   corpus's millions of pairs are too rare ever to be merged and never enter
 *   it.
 *
 * One merge of (a, b) costs O(len(occurrences of (a, b))) cell and array
 * updates -- each entry once, live or stale; a run of a's is walked once more
 * for a == b -- plus a hash probe per distinct neighbour token, and O(log
 * heap) per pair whose count grew and per stale entry popped later: route_b's
 * bounds, without its Python objects; plus the compactions (bounded by the
 * entries appended) and the floor's moves (a pass over the pairs each time the
 * heap runs dry, a few times a run). Counts are int64: word counts whose pair
 * occurrences sum past 2**63 - 1 raise OverflowError instead of wrapping.
 *
 * It takes word counts as a mapping or as PackedCounts
 * (bpe_impls.corpus.tally), which it reads directly (train_load_packed,
 * trainer_load.c): `train_bpe` counts into packed form for this trainer, so a
 * corpus's millions of distinct pre-tokens never become Python objects on
 * the way from the counter to the merge loop, and hands them over
 * (PackedCounts.disposable), so the packed bytes are freed once the words are
 * laid out, before the merges.
 */
#include "trainer_internal.h"

/* ---- a run --------------------------------------------------------------- */

BPE_INTERNAL int
train_prepare(State *s, int64_t num_merges)
{
    /* Each merge shortens some word by a cell, so no run makes more than
     * num_cells merges; this also bounds every token and merge id below
     * 2**31. */
    s->max_merges =
        num_merges < s->num_cells ? (int32_t)num_merges : s->num_cells;
    size_t ids = (size_t)s->max_merges + 1, tokens = 256 + (size_t)s->max_merges;
    s->merge_left = malloc(ids * sizeof *s->merge_left);
    s->merge_right = malloc(ids * sizeof *s->merge_right);
    s->left_shift = calloc(tokens, sizeof *s->left_shift);
    s->right_shift = calloc(tokens, sizeof *s->right_shift);
    if (!s->merge_left || !s->merge_right || !s->left_shift ||
        !s->right_shift)
    {
        return -1;
    }
#if defined(__GLIBC__)
    /* What the caller freed (the packed counts just read, the counter's
     * tables) stays in the process until asked for, under the lists about to
     * be made. */
    malloc_trim(0);
#endif
    return tokens_init(&s->tok, 256 + s->max_merges) < 0 ||
                   initial_pairs(s) < 0
               ? -1
               : 0;
}

BPE_INTERNAL int32_t
train_batch(State *s, int64_t batch)
{
    int32_t made = run_merges(s, BATCH);
#if defined(__GLIBC__)
    /* The lists freed as pairs are merged or counted down to 0 leave holes
     * that later, smaller lists fill only in part: glibc returns their pages
     * only when asked. */
    if (batch % TRIM_EVERY == 0) {
        malloc_trim(0);
        s->arena.released = 0;
    }
#endif
    return made;
}

BPE_INTERNAL void
train_stats(const State *s, TrainStat out[TRAIN_STATS])
{
    size_t list_bytes = 0;
    for (size_t p = 0; p < s->num_pairs; p++) {
        if (s->pairs[p].seen.cap > SMALL_LIST) {
            list_bytes += s->pairs[p].seen.cap * sizeof(int32_t);
        }
    }
    list_bytes += s->arena.num_blocks * ARENA_BLOCK * sizeof(int32_t);
    size_t pair_bytes =
        s->pairs_cap * sizeof(Pair) + (sizeof(uint32_t) << s->slot_bits);
    const TrainStat items[TRAIN_STATS] = {
        {"words", s->num_words},
        {"cells", s->num_cells},
        {"pairs", (long long)s->pairs_created},
        {"pair_records", (long long)s->num_pairs},
        {"occurrences_visited", s->visited},
        {"occurrences_merged", s->merged},
        {"occurrences_compacted", s->compacted},
        {"heap_pushes", s->pushes},
        {"heap_pops", s->pops},
        {"heap_peak", (long long)s->heap_peak},
        {"heap_cuts", s->cuts},
        {"heap_refills", s->refills},
        {"trims", s->trims},
        {"pair_bytes", (long long)pair_bytes},
        {"list_bytes", (long long)list_bytes},
        {"heap_bytes", (long long)(s->heap_cap * sizeof(Entry))},
    };
    memcpy(out, items, sizeof(items));
}
