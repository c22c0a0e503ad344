/* A tiktoken rank file (one `base64(token) rank` line per token) read into
 * the tables a Tokenizer runs on, with the merges rebuilt from the ranks, and
 * no Python object per token.
 *
 * The pure-Python twin is formats/tiktoken_file.py's `rank_tables_py`
 * (`load_ranks` then `recover_merges`); tests/test_formats.py proves the two
 * equal. This path reads the plain form of the file only (each line exactly
 * `base64 SP digits LF`, canonical base64 length, ranks up to 2**32 - 2) and
 * only a file the Python path would accept: anything else, a fault included,
 * returns None and the caller reads the file in Python, which names the
 * fault. So it never accepts a file Python refuses nor reads one differently.
 *
 * Rebuilding a token's merge runs tiktoken's BPE on its bytes with the ranks
 * below its own (merge the adjacent pair whose concatenation has the lowest
 * rank, leftmost on a tie) with a heap of (rank, position) over a linked list
 * of pieces: O(L log L) pair lookups for a token of L bytes, where merging one
 * pair per pass was O(L^2). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_util.h"
#include "ranks.h"
#include "u64_heap.h"

/* A base64 character's value, -1 if it is none. (No table to initialise:
 * nothing shared that a thread could see half made.) */
static inline int
b64_digit(unsigned char c)
{
    return c >= 'A' && c <= 'Z'   ? c - 'A'
           : c >= 'a' && c <= 'z' ? c - 'a' + 26
           : c >= '0' && c <= '9' ? c - '0' + 52
           : c == '+'             ? 62
           : c == '/'             ? 63
                                  : -1;
}

/* Decode s[0:len] (len a positive multiple of 4; '=' only as the last one or
 * two characters) to out; the number of bytes, or -1 if it is not of that
 * form. Bits below the last whole byte are ignored, as binascii does. */
static ptrdiff_t
b64_decode(const unsigned char *s, size_t len, unsigned char *out)
{
    if (len == 0 || len % 4 != 0) {
        return -1;
    }
    size_t pad = s[len - 1] == '=' ? (s[len - 2] == '=' ? 2 : 1) : 0;
    size_t n = 0;
    for (size_t i = 0; i < len; i += 4) {
        int last = i + 4 == len;
        int v[4];
        for (int k = 0; k < 4; k++) {
            if (last && k >= 4 - (int)pad) {
                v[k] = 0;
                continue;
            }
            v[k] = b64_digit(s[i + k]);
            if (v[k] < 0) {
                return -1;
            }
        }
        out[n++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
        if (!last || pad < 2) {
            out[n++] = (unsigned char)((v[1] & 15) << 4 | v[2] >> 2);
        }
        if (!last || pad < 1) {
            out[n++] = (unsigned char)((v[2] & 3) << 6 | v[3]);
        }
    }
    return (ptrdiff_t)n;
}

/* Parse the file into r (entries in rank order, a rank given twice a fault): 0, 1 if the file is not of
 * the plain form or holds a fault, -1 if out of memory. */
static int
ranks_parse(Ranks *r, const unsigned char *data, size_t size)
{
    size_t lines = 1;
    for (const unsigned char *p = data; (p = memchr(p, '\n', size - (size_t)(p - data))) != NULL; p++) {
        lines++;
    }
    unsigned char *blob = malloc(size / 4 * 3 + 1);
    size_t *off = malloc((lines + 1) * sizeof(size_t));
    uint32_t *rank = malloc(lines * sizeof(uint32_t));
    int result = -1;
    if (blob == NULL || off == NULL || rank == NULL) {
        goto done;
    }
    size_t n = 0, used = 0, pos = 0;
    result = 1;
    while (pos < size) {
        const unsigned char *line = data + pos;
        const unsigned char *eol = memchr(line, '\n', size - pos);
        size_t len = eol ? (size_t)(eol - line) : size - pos;
        pos += len + 1;
        if (len == 0) {
            continue;
        }
        const unsigned char *space = memchr(line, ' ', len);
        if (space == NULL) {
            goto done;
        }
        size_t digits = len - (size_t)(space - line) - 1;
        if (digits == 0 || digits > 10) {
            goto done;
        }
        uint64_t value = 0;
        for (size_t k = 0; k < digits; k++) {
            unsigned char c = space[1 + k];
            if (c < '0' || c > '9') {
                goto done;
            }
            value = value * 10 + (uint64_t)(c - '0');
        }
        ptrdiff_t got = b64_decode(line, (size_t)(space - line), blob + used);
        if (got <= 0 || value > MAX_RANK) {
            goto done;
        }
        off[n] = used;
        rank[n] = (uint32_t)value;
        used += (size_t)got;
        n++;
    }
    off[n] = used;
    r->blob = blob;
    r->off = off;
    r->rank = rank;
    r->n = n;
    blob = NULL;
    off = NULL;
    rank = NULL;
    result = ranks_sort(r, 0, 0);
done:
    free(blob);
    free(off);
    free(rank);
    return result;
}

/* Scratch for token_merge, for tokens of up to cap bytes. */
typedef struct {
    uint32_t *next, *prev, *pair;
    uint64_t *heap;
    size_t cap;
    /* pair2[x << 8 | y]: the rank of the two-byte token xy, NOT_FOUND if
     * none: the first round's lookups, without hashing */
    uint32_t *pair2;
} Work;

static int
work_reserve(Work *w, size_t len)
{
    if (len <= w->cap) {
        return 0;
    }
    free(w->next);
    free(w->prev);
    free(w->pair);
    free(w->heap);
    w->cap = len;
    w->next = malloc((len + 1) * sizeof(uint32_t));
    w->prev = malloc((len + 1) * sizeof(uint32_t));
    w->pair = malloc((len + 1) * sizeof(uint32_t));
    /* len - 1 pairs at first, then at most two pushes per merge */
    w->heap = malloc((3 * len + 1) * sizeof(uint64_t));
    return w->next && w->prev && w->pair && w->heap ? 0 : -1;
}

static void
work_free(Work *w)
{
    free(w->next);
    free(w->prev);
    free(w->pair);
    free(w->heap);
    free(w->pair2);
}

/* The rank of s[a:b] if it is a token ranked below `below`, else NOT_FOUND. */
static uint32_t
rank_below(const Ranks *r, const unsigned char *s, size_t a, size_t b,
           uint32_t below)
{
    uint32_t k = ranks_find(r, s + a, b - a);
    return k != NOT_FOUND && r->rank[k] < below ? r->rank[k] : NOT_FOUND;
}

/* tiktoken's BPE on s[0:len] (len >= 2) with the ranks below `below`: 1
 * with the split point in *split if it ends in exactly two pieces, else 0.
 * pair[i] is the rank of the pair starting at piece i (NOT_FOUND: none
 * below `below`), kept current, so a heap entry is stale exactly when it
 * differs; prev[i] == len marks a piece merged into its left neighbour. */
static int
token_merge(const Ranks *r, const unsigned char *s, size_t len,
            uint32_t below, Work *w, size_t *split)
{
    if (len == 2) {
        *split = 1; /* the only pair is the token itself, not below it */
        return 1;
    }
    uint32_t *next = w->next, *prev = w->prev, *pair = w->pair;
    uint64_t *heap = w->heap;
    size_t count = 0, pieces = len;
    for (size_t i = 0; i < len; i++) {
        next[i] = (uint32_t)(i + 1);
        prev[i] = (uint32_t)i - 1; /* UINT32_MAX for the first */
        pair[i] = NOT_FOUND;
    }
    for (size_t i = 0; i + 1 < len; i++) {
        uint32_t rank = w->pair2[s[i] << 8 | s[i + 1]];
        if (rank < below) {
            pair[i] = rank;
            u64_heap_push(heap, &count, (uint64_t)rank << 32 | i);
        }
    }
    while (count > 0) {
        uint64_t top = u64_heap_pop(heap, &count);
        uint32_t rank = (uint32_t)(top >> 32), i = (uint32_t)top;
        if (prev[i] == (uint32_t)len || pair[i] != rank) {
            continue; /* stale: merged away, or a neighbour merged since */
        }
        uint32_t j = next[i], end = next[j];
        next[i] = end;
        prev[j] = (uint32_t)len;
        pieces--;
        pair[i] = NOT_FOUND;
        if (end < len) {
            prev[end] = i;
            pair[i] = rank_below(r, s, i, next[end], below);
            if (pair[i] != NOT_FOUND) {
                u64_heap_push(heap, &count, (uint64_t)pair[i] << 32 | i);
            }
        }
        uint32_t p = prev[i];
        if (p != UINT32_MAX) {
            pair[p] = rank_below(r, s, p, end, below);
            if (pair[p] != NOT_FOUND) {
                u64_heap_push(heap, &count, (uint64_t)pair[p] << 32 | p);
            }
        }
    }
    if (pieces != 2) {
        return 0;
    }
    *split = next[0];
    return 1;
}

BPE_INTERNAL int
bpe_rank_file_read(RankFile *rf, const unsigned char *data, size_t size)
{
    memset(rf, 0, sizeof(*rf));
    Ranks *r = &rf->r;
    Work w;
    memset(&w, 0, sizeof(w));
    int status = ranks_parse(r, data, size);
    if (status == 0) {
        status = ranks_index(r, 0);
    }
    for (int b = 0; status == 0 && b < 256; b++) {
        unsigned char c = (unsigned char)b;
        uint32_t k = ranks_find(r, &c, 1);
        if (k == NOT_FOUND) {
            status = 1;
        }
        else {
            rf->byte_ids[b] = r->rank[k];
        }
    }
    if (status == 0) {
        rf->merges = malloc((r->n - 256 + 1) * 3 * sizeof(uint32_t));
        w.pair2 = malloc(65536 * sizeof(uint32_t));
        status = rf->merges == NULL || w.pair2 == NULL ? -1 : 0;
    }
    for (size_t k = 0; status == 0 && k < 65536; k++) {
        unsigned char two[2] = {(unsigned char)(k >> 8), (unsigned char)k};
        uint32_t e = ranks_find(r, two, 2);
        w.pair2[k] = e == NOT_FOUND ? NOT_FOUND : r->rank[e];
    }
    for (size_t k = 0; status == 0 && k < r->n; k++) {
        const unsigned char *s = r->blob + r->off[k];
        size_t len = r->off[k + 1] - r->off[k], split;
        if (len == 1) {
            continue;
        }
        if (len >= UINT32_MAX || work_reserve(&w, len) < 0) {
            status = -1;
        }
        else if (!token_merge(r, s, len, r->rank[k], &w, &split)) {
            status = 1;
        }
        else {
            uint32_t *m = rf->merges + 3 * rf->n_merges++;
            m[0] = r->rank[ranks_find(r, s, split)];
            m[1] = r->rank[ranks_find(r, s + split, len - split)];
            m[2] = r->rank[k];
        }
    }
    work_free(&w);
    return status;
}

BPE_INTERNAL void
bpe_rank_file_free(RankFile *rf)
{
    ranks_free(&rf->r);
    free(rf->merges);
    memset(rf, 0, sizeof(*rf));
}
