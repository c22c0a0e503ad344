/* GPT-2's vocab.json + merges.txt, and the model vocab and merges of an HF
 * tokenizer.json, read into the tables a Tokenizer runs on with no Python
 * object per token: what rank_file.c does for a tiktoken rank file.
 *
 * The pure-Python twins are the readers themselves: formats/gpt2.py's
 * load_tokenizer_files, the Tokenizer's build_tables and
 * check_every_token_made for a gpt2 pair; formats/hf.py's load and
 * build_tables for a tokenizer.json. tests/test_vocab_files.py proves the
 * tables equal. As in rank_file.c, this path reads only what those accept and
 * reads it as they do: anything else (a fault, JSON it does not expect such
 * as an id written -0, two ids with the same bytes, which build_tables sorts
 * out) returns None and the caller reads the files in Python, which names the
 * fault or handles the case.
 *
 * Tokens are stored in GPT-2's printable form: every byte as one character
 * (bytes_to_unicode), all below U+0144, so a token string's UTF-8 is one or
 * two bytes per character. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_util.h"
#include "json_scan.h"
#include "ranks.h"
#include "scanner.h" /* bpe_utf8_valid */
#include "vocab_files.h"

/* ---- GPT-2's byte table ----------------------------------------------- */

/* to_byte[c]: the byte character c stands for, -1 if none. */
static void
byte_table(int16_t to_byte[TABLE_END])
{
    for (int c = 0; c < TABLE_END; c++) {
        to_byte[c] = -1;
    }
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                        (b >= 0xAE && b <= 0xFF);
        to_byte[printable ? b : 0x100 + extra++] = (int16_t)b;
    }
}

/* The bytes that s[0:len] (UTF-8) stands for, written to out: their number,
 * or -1 if a character is outside the table (or s is not such UTF-8). */
static ptrdiff_t
table_bytes(const int16_t *to_byte, const unsigned char *s, size_t len,
            unsigned char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
        }
        else if (c >= 0xC2 && c <= 0xC5 && i + 1 < len && (s[i + 1] & 0xC0) == 0x80) {
            c = (c & 0x1F) << 6 | (s[i + 1] & 0x3F);
            i += 2;
        }
        else {
            return -1;
        }
        if (c >= TABLE_END || to_byte[c] < 0) {
            return -1;
        }
        out[n++] = (unsigned char)to_byte[c];
    }
    return (ptrdiff_t)n;
}

/* ---- JSON, the parts these files use (and json_scan.h's) ---------------- */

/* A JSON integer id at c (after whitespace): 0 with it in *id, or 1 where
 * Python's json would not read a non-negative int (a sign, a fraction, an
 * exponent, a leading zero) or it is above MAX_RANK, which build_tables
 * refuses. */
static int
json_id(Cursor *c, uint32_t *id)
{
    skip_ws(c);
    const unsigned char *start = c->p;
    uint64_t value = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9' && c->p - start <= 10) {
        value = value * 10 + (uint64_t)(*c->p++ - '0');
    }
    size_t digits = (size_t)(c->p - start);
    if (digits == 0 || digits > 10 || (digits > 1 && *start == '0') || value > MAX_RANK) {
        return 1;
    }
    if (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E')) {
        return 1;
    }
    *id = (uint32_t)value;
    return 0;
}

/* Past the JSON value at c (after whitespace), without checking it beyond
 * its strings and brackets (Python's json reads it): 0, or 1 if it ends
 * before the value does. */
static int
skip_value(Cursor *c)
{
    skip_ws(c);
    size_t depth = 0;
    while (c->p < c->end) {
        unsigned char ch = *c->p;
        if (ch == '"') {
            for (c->p++; c->p < c->end && *c->p != '"'; c->p++) {
                c->p += *c->p == '\\';
            }
            if (c->p >= c->end) {
                return 1;
            }
            c->p++;
        }
        else if (ch == '{' || ch == '[') {
            depth++;
            c->p++;
        }
        else if (ch == '}' || ch == ']') {
            if (depth == 0) {
                return 0; /* the end of the enclosing value */
            }
            depth--;
            c->p++;
        }
        else if (depth == 0 && (ch == ',' || ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')) {
            return 0;
        }
        else {
            c->p++;
        }
        if (depth == 0 && (ch == '"' || ch == '}' || ch == ']')) {
            return 0;
        }
    }
    return depth != 0;
}

/* The next object key at c (after whitespace), its raw text (between the
 * quotes, escapes as written: such a key never equals a plain name, and
 * Python's check for a key given twice then sees both) in key[0:*len]; c is
 * left after its ':'. 0, or 1 if there is none. */
static int
object_key(Cursor *c, const unsigned char **key, size_t *len)
{
    skip_ws(c);
    const unsigned char *start = c->p;
    if (c->p >= c->end || *c->p != '"' || skip_value(c)) {
        return 1;
    }
    *key = start + 1;
    *len = (size_t)(c->p - start) - 2;
    return expect(c, ':');
}

static int
is_name(const unsigned char *key, size_t len, const char *name)
{
    return len == strlen(name) && memcmp(key, name, len) == 0;
}

/* ---- the tables --------------------------------------------------------- */

BPE_INTERNAL void
bpe_vocab_free(VocabBuild *b)
{
    ranks_free(&b->r);
    ranks_free(&b->specials);
    free(b->text);
    free(b->tok);
    free(b->made);
    free(b->merges);
    free(b->special_ids);
    free(b->key_ids);
    free(b->encoder);
    memset(b, 0, sizeof(*b));
}

/* Arrays for n entries of `bytes` bytes in all: 0, or -1 if out of memory. */
static int
entries_alloc(Ranks *r, size_t n, size_t bytes)
{
    r->blob = malloc(bytes + 1);
    r->off = malloc((n + 1) * sizeof(size_t));
    r->rank = malloc((n + 1) * sizeof(uint32_t));
    if (r->blob == NULL || r->off == NULL || r->rank == NULL) {
        return -1;
    }
    r->off[0] = 0;
    r->n = 0;
    return 0;
}

/* Append an entry of `len` bytes (already at blob + off[n]) with number id. */
static void
entry_added(Ranks *r, size_t len, uint32_t id)
{
    r->rank[r->n] = id;
    r->off[r->n + 1] = r->off[r->n] + len;
    r->n++;
}

/* Read the vocab object at c (token string -> id) into b->r, sorted by id
 * and indexed with room for `extra` more entries of `extra_bytes` in all: 0,
 * 1 if it is not read as the Python reader reads it, -1 if out of memory.
 * Keys are in GPT-2's form, except (`hf`) a key equal to a special token
 * whose id is that token's, which stands for its own UTF-8 (hf.py's load). */
static int
read_vocab(VocabBuild *b, Cursor *c, int hf, size_t extra, size_t extra_bytes)
{
    /* Each entry takes at least 4 bytes of text ("":0), and a token's bytes
     * are no more than its key's. */
    size_t room = (size_t)(c->end - c->p);
    Ranks *r = &b->r;
    if (entries_alloc(r, room / 4 + extra, room + extra_bytes) < 0) {
        return -1;
    }
    if (expect(c, '{')) {
        return 1;
    }
    skip_ws(c);
    int more = c->p >= c->end || *c->p != '}';
    c->p += !more;
    while (more) {
        size_t len;
        uint32_t id;
        if (json_string(c, b->text, &len) || len == 0 || expect(c, ':') || json_id(c, &id)) {
            return 1;
        }
        uint32_t special = hf && b->specials.n ? ranks_find(&b->specials, b->text, len) : NOT_FOUND;
        unsigned char *at = r->blob + r->off[r->n];
        if (special != NOT_FOUND) {
            if (b->key_ids[special] != NOT_FOUND) {
                return 1; /* the key twice */
            }
            b->key_ids[special] = id;
        }
        if (special != NOT_FOUND && id == b->special_ids[special]) {
            memcpy(at, b->text, len);
            entry_added(r, len, id);
        }
        else {
            ptrdiff_t got = table_bytes(b->to_byte, b->text, len, at);
            if (got <= 0) {
                return 1;
            }
            entry_added(r, (size_t)got, id);
        }
        b->keys++;
        if (expect(c, ',') != 0) {
            if (expect(c, '}')) {
                return 1;
            }
            more = 0;
        }
    }
    int status = ranks_sort(r, extra, extra_bytes);
    if (status == 0) {
        /* Two keys with the same bytes: the same key twice (refused), or in
         * hf a special token's text beside the GPT-2 form of its bytes (left
         * to Python). */
        status = ranks_index(r, extra);
    }
    if (status == 0) {
        b->made = calloc(r->n + extra + 1, 1);
        status = b->made == NULL ? -1 : 0;
    }
    return status;
}

/* Check the merge of b->tok[0:left_len] and the right_len bytes after them
 * against the tokens and the earlier merges, and add it, as build_tables and
 * check_merge do: 0, 1 if they refuse it, -1 if out of memory. */
static int
add_merge(VocabBuild *b, size_t left_len, size_t right_len)
{
    const Ranks *r = &b->r;
    const unsigned char *tok = b->tok;
    uint32_t kl = ranks_find(r, tok, left_len), kr = ranks_find(r, tok + left_len, right_len);
    uint32_t km = ranks_find(r, tok, left_len + right_len);
    if (kl == NOT_FOUND || kr == NOT_FOUND || km == NOT_FOUND || (left_len > 1 && !b->made[kl]) ||
        (right_len > 1 && !b->made[kr]))
    {
        return 1;
    }
    b->made[km] = 1;
    if (bpe_reserve(&b->merges, &b->cap_merges, 3 * (b->n_merges + 1), sizeof(uint32_t), 3 * 4096) < 0) {
        return -1;
    }
    uint32_t *m = b->merges + 3 * b->n_merges++;
    m[0] = r->rank[kl];
    m[1] = r->rank[kr];
    m[2] = r->rank[km];
    return 0;
}

/* A merge written "left right" (UTF-8 s[0:len], not in b->tok): one space
 * with a token on each side, as `text.split(" ")` must give two. */
static int
add_text_merge(VocabBuild *b, const unsigned char *s, size_t len)
{
    const unsigned char *space = len ? memchr(s, ' ', len) : NULL;
    if (space == NULL || space == s || space == s + len - 1 ||
        memchr(space + 1, ' ', len - (size_t)(space - s) - 1) != NULL)
    {
        return 1;
    }
    size_t left_text = (size_t)(space - s);
    ptrdiff_t left_len = table_bytes(b->to_byte, s, left_text, b->tok);
    ptrdiff_t right_len = left_len <= 0 ? -1
        : table_bytes(b->to_byte, space + 1, len - left_text - 1, b->tok + left_len);
    return right_len <= 0 ? 1 : add_merge(b, (size_t)left_len, (size_t)right_len);
}

/* merges.txt: lines cut at \n, \r\n or \r (Python reads the text with
 * universal newlines); a first line starting "#version" skipped, blank lines
 * skipped, every other line a merge. */
static int
read_merges_txt(VocabBuild *b, const unsigned char *data, size_t size)
{
    size_t pos = 0;
    for (size_t number = 1; pos < size; number++) {
        const unsigned char *line = data + pos;
        size_t len = 0;
        while (pos + len < size && line[len] != '\n' && line[len] != '\r') {
            len++;
        }
        pos += len + 1;
        if (pos < size && line[len] == '\r' && data[pos] == '\n') {
            pos++;
        }
        if (number == 1 && len >= 8 && memcmp(line, "#version", 8) == 0) {
            if (!bpe_utf8_valid(line, len)) {
                return 1;
            }
            continue;
        }
        if (len > 0) {
            int status = add_text_merge(b, line, len);
            if (status != 0) {
                return status;
            }
        }
    }
    return 0;
}

/* A tokenizer.json's model merges: a JSON array of [left, right] string
 * pairs or "left right" strings. */
static int
read_merges_json(VocabBuild *b, Cursor *c)
{
    if (expect(c, '[')) {
        return 1;
    }
    skip_ws(c);
    if (c->p < c->end && *c->p == ']') {
        c->p++;
        return 0;
    }
    for (;;) {
        size_t len;
        int status = 1;
        skip_ws(c);
        if (c->p < c->end && *c->p == '[') {
            c->p++;
            ptrdiff_t left_len = -1, right_len = -1;
            if (json_string(c, b->text, &len) == 0) {
                left_len = table_bytes(b->to_byte, b->text, len, b->tok);
            }
            if (left_len > 0 && expect(c, ',') == 0 && json_string(c, b->text, &len) == 0) {
                right_len = table_bytes(b->to_byte, b->text, len, b->tok + left_len);
            }
            if (right_len > 0 && expect(c, ']') == 0) {
                status = add_merge(b, (size_t)left_len, (size_t)right_len);
            }
        }
        else if (json_string(c, b->text, &len) == 0) {
            status = add_text_merge(b, b->text, len);
        }
        if (status != 0) {
            return status;
        }
        if (expect(c, ',') != 0) {
            return expect(c, ']');
        }
    }
}

/* The entry of each byte's token into byte_ids: 0, or 1 if a byte has none. */
static int
find_byte_ids(const VocabBuild *b, uint32_t byte_ids[256])
{
    for (int k = 0; k < 256; k++) {
        unsigned char c = (unsigned char)k;
        uint32_t e = ranks_find(&b->r, &c, 1);
        if (e == NOT_FOUND) {
            return 1;
        }
        byte_ids[k] = b->r.rank[e];
    }
    return 0;
}

/* Append special token k (its bytes not a token yet) with id `id`, above
 * every id so far (else 1: the order by id would break, left to Python). */
static int
append_special(VocabBuild *b, size_t k, uint32_t id)
{
    Ranks *r = &b->r;
    if (r->n > 0 && id <= r->rank[r->n - 1]) {
        return 1;
    }
    size_t len = b->specials.off[k + 1] - b->specials.off[k];
    memcpy(r->blob + r->off[r->n], b->specials.blob + b->specials.off[k], len);
    entry_added(r, len, id);
    return ranks_insert(r, r->n - 1);
}

/* gpt2: the rest of load_tokenizer_files, build_tables and
 * check_every_token_made after the vocab and merges are read. */
static int
finish_gpt2(VocabBuild *b)
{
    Ranks *r = &b->r, *sp = &b->specials;
    for (size_t k = 0; k < sp->n; k++) {
        uint32_t e = ranks_find(r, sp->blob + sp->off[k], sp->off[k + 1] - sp->off[k]);
        if (e != NOT_FOUND) {
            b->made[e] = 1; /* a special token needs no merge */
        }
    }
    for (size_t e = 0; e < r->n; e++) {
        if (r->off[e + 1] - r->off[e] > 1 && !b->made[e]) {
            return 1;
        }
    }
    /* build_tables: a special token's id is its bytes' token's, else the
     * next after the largest id */
    uint64_t next = r->n ? (uint64_t)r->rank[r->n - 1] + 1 : 0;
    for (size_t k = 0; k < sp->n; k++) {
        uint32_t e = ranks_find(r, sp->blob + sp->off[k], sp->off[k + 1] - sp->off[k]);
        if (e != NOT_FOUND) {
            b->special_ids[k] = r->rank[e];
            continue;
        }
        if (next > MAX_RANK || append_special(b, k, (uint32_t)next)) {
            return 1;
        }
        b->special_ids[k] = (uint32_t)next++;
    }
    return 0;
}

/* hf: each special token not a key of the vocab gets its bytes under its id;
 * then each must be found under its id (else the file's ids are not what
 * Python's checks accept, which they then name). */
static int
place_hf_specials(VocabBuild *b)
{
    Ranks *r = &b->r, *sp = &b->specials;
    for (size_t k = 0; k < sp->n; k++) {
        if (b->key_ids[k] == NOT_FOUND && append_special(b, k, b->special_ids[k])) {
            return 1;
        }
    }
    for (size_t k = 0; k < sp->n; k++) {
        uint32_t e = ranks_find(r, sp->blob + sp->off[k], sp->off[k + 1] - sp->off[k]);
        if (e == NOT_FOUND || r->rank[e] != b->special_ids[k]) {
            return 1;
        }
    }
    return 0;
}

/* The merges the encoder takes: a pair listed twice only at its last place
 * (build_tables' rank table keeps the last rank), into out: their number, or
 * -1 if out of memory. */
static ptrdiff_t
encoder_merges(const VocabBuild *b, uint32_t *out)
{
    size_t n = b->n_merges, cap = 16;
    while (cap < 2 * n + 2) {
        cap *= 2;
    }
    uint64_t *seen = malloc(cap * sizeof(uint64_t));
    unsigned char *keep = malloc(n + 1);
    if (seen == NULL || keep == NULL) {
        free(seen);
        free(keep);
        return -1;
    }
    memset(seen, 0xFF, cap * sizeof(uint64_t)); /* ids are below 2**32 - 1 */
    for (size_t i = n; i-- > 0;) {
        uint64_t key = (uint64_t)b->merges[3 * i] << 32 | b->merges[3 * i + 1];
        size_t at = (size_t)(bpe_hash_bytes((const unsigned char *)&key, 8) & (cap - 1));
        while (seen[at] != UINT64_MAX && seen[at] != key) {
            at = (at + 1) & (cap - 1);
        }
        keep[i] = seen[at] == UINT64_MAX;
        seen[at] = key;
    }
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (keep[i]) {
            memcpy(out + 3 * kept++, b->merges + 3 * i, 3 * sizeof(uint32_t));
        }
    }
    free(seen);
    free(keep);
    return (ptrdiff_t)kept;
}

/* ---- the special tokens ------------------------------------------------- */

BPE_INTERNAL int
bpe_vocab_specials_reserve(VocabBuild *b, size_t n, size_t total)
{
    b->special_ids = malloc((n + 1) * sizeof(uint32_t));
    b->key_ids = malloc((n + 1) * sizeof(uint32_t));
    if (b->special_ids == NULL || b->key_ids == NULL ||
        entries_alloc(&b->specials, n, total) < 0)
    {
        return -1;
    }
    return 0;
}

BPE_INTERNAL int
bpe_vocab_special_add(VocabBuild *b, const unsigned char *token, size_t len)
{
    size_t k = b->specials.n;
    memcpy(b->specials.blob + b->specials.off[k], token, len);
    entry_added(&b->specials, len, (uint32_t)k);
    b->key_ids[k] = NOT_FOUND;
    b->special_ids[k] = NOT_FOUND;
    return len == 0;
}

BPE_INTERNAL int
bpe_vocab_special_id(VocabBuild *b, size_t k, uint64_t id)
{
    if (id > MAX_RANK) {
        return 1;
    }
    b->special_ids[k] = (uint32_t)id;
    return 0;
}

BPE_INTERNAL int
bpe_vocab_specials_done(VocabBuild *b)
{
    return ranks_index(&b->specials, 0);
}

/* ---- the whole read ------------------------------------------------------ */

BPE_INTERNAL int
bpe_vocab_read(VocabBuild *b, int hf, const unsigned char *vocab,
               size_t vocab_size, const unsigned char *merges,
               size_t merges_size)
{
    size_t longest = vocab_size > merges_size ? vocab_size : merges_size;
    byte_table(b->to_byte);
    /* a decoded string or a merge's bytes is never longer than its text */
    b->text = malloc(longest + 1);
    b->tok = malloc(longest + 1);
    int status = b->text == NULL || b->tok == NULL ? -1 : 0;
    if (status == 0) {
        Cursor c = {vocab, vocab + vocab_size};
        status = read_vocab(b, &c, hf, b->specials.n,
                            b->specials.off[b->specials.n]);
        if (status == 0) {
            skip_ws(&c);
            status = c.p != c.end;
        }
    }
    if (status == 0 && hf) {
        status = place_hf_specials(b);
    }
    if (status == 0) {
        status = find_byte_ids(b, b->byte_ids);
    }
    if (status == 0 && hf) {
        Cursor c = {merges, merges + merges_size};
        status = read_merges_json(b, &c);
        if (status == 0) {
            skip_ws(&c);
            status = c.p != c.end;
        }
    }
    else if (status == 0) {
        status = read_merges_txt(b, merges, merges_size);
        if (status == 0) {
            status = finish_gpt2(b);
        }
    }
    if (status == 0) {
        b->encoder = malloc((3 * b->n_merges + 1) * sizeof(uint32_t));
        ptrdiff_t n = b->encoder == NULL ? -1 : encoder_merges(b, b->encoder);
        status = n < 0 ? -1 : 0;
        b->n_encoder = n < 0 ? 0 : (size_t)n;
    }
    return status;
}

BPE_INTERNAL int
bpe_vocab_hf_spans(const unsigned char *data, size_t size, size_t at[4])
{
    Cursor c = {data, data + size};
    int models = 0, seen[2] = {0, 0};
    if (expect(&c, '{')) {
        return 1;
    }
    skip_ws(&c);
    for (int more = c.p < c.end && *c.p != '}'; more;) {
        const unsigned char *key;
        size_t len;
        if (object_key(&c, &key, &len)) {
            return 1;
        }
        if (!is_name(key, len, "model")) {
            if (skip_value(&c)) {
                return 1;
            }
        }
        else {
            if (models++ || expect(&c, '{')) {
                return 1;
            }
            skip_ws(&c);
            int inner = c.p < c.end && *c.p != '}';
            c.p += !inner;
            while (inner) {
                if (object_key(&c, &key, &len)) {
                    return 1;
                }
                int which = is_name(key, len, "vocab") ? 0 : is_name(key, len, "merges") ? 1 : -1;
                skip_ws(&c);
                size_t start = (size_t)(c.p - data);
                if (which >= 0 && (seen[which]++ || c.p >= c.end || *c.p != (which ? '[' : '{'))) {
                    return 1;
                }
                if (skip_value(&c)) {
                    return 1;
                }
                if (which >= 0) {
                    at[2 * which] = start;
                    at[2 * which + 1] = (size_t)(c.p - data);
                }
                if (expect(&c, ',')) {
                    if (expect(&c, '}')) {
                        return 1;
                    }
                    inner = 0;
                }
            }
        }
        if (expect(&c, ',')) {
            if (expect(&c, '}')) {
                return 1;
            }
            more = 0;
        }
    }
    return !(seen[0] && seen[1]);
}

