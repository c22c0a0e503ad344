/* The pair table: (left id, right id) -> pair record, open addressing with
 * 4-byte slots; pair records reused when a pair dies; the shifts that turn
 * most of a merge's pair lookups into array reads; stale lists compacted. */
#include "trainer_internal.h"

/* ---- pairs -------------------------------------------------------------- */

BPE_INTERNAL int
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
BPE_INTERNAL size_t
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
BPE_INTERNAL int32_t
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
BPE_INTERNAL int
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
BPE_INTERNAL int
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
BPE_INTERNAL int
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
BPE_INTERNAL int
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
