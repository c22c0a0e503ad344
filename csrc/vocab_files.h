/* GPT-2's vocab.json + merges.txt and an HF tokenizer.json's model vocab and
 * merges, read into the tables a Tokenizer runs on (vocab_files.c says what
 * is read and what is left to Python). The caller gives the special tokens
 * first, then the files' bytes:
 *
 *     VocabBuild b = {0};
 *     bpe_vocab_specials_reserve(&b, n, total bytes);
 *     for each token k: bpe_vocab_special_add(&b, bytes, len)
 *                       [hf: bpe_vocab_special_id(&b, k, its id)]
 *     bpe_vocab_specials_done(&b);
 *     bpe_vocab_read(&b, hf, vocab, vocab_size, merges, merges_size);
 *     ... the tables in b ...
 *     bpe_vocab_free(&b);
 *
 * Each step answers 0 (go on), 1 (the files are not read here: the caller
 * reads them in Python, which names the fault or handles the case) or -1
 * (out of memory). */
#ifndef BPE_VOCAB_FILES_H
#define BPE_VOCAB_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "bpe_util.h"
#include "ranks.h"

#define TABLE_END 0x144 /* every character of GPT-2's byte table is below it */

typedef struct {
    Ranks r; /* the tokens, by id once sorted */
    int16_t to_byte[TABLE_END];
    unsigned char *text; /* scratch: a decoded JSON string */
    unsigned char *tok;  /* scratch: a merge's two tokens' bytes */
    unsigned char *made; /* per entry: some merge made it (or it is exempt) */
    uint32_t *merges;    /* (left, right, merged) ids of each merge, in order */
    size_t n_merges, cap_merges;
    size_t keys;    /* the vocab's keys */
    Ranks specials; /* the special tokens' bytes, numbered in order */
    /* per special token: its id, and the id of the vocab key equal to it
     * (NOT_FOUND: none) */
    uint32_t *special_ids, *key_ids;
    /* the results besides r, merges and key_ids: each byte's id, and the
     * merges the encoder takes (a pair listed twice only at its last place,
     * as build_tables' rank table keeps the last rank) */
    uint32_t byte_ids[256];
    uint32_t *encoder;
    size_t n_encoder;
} VocabBuild;

/* Room for n special tokens of `total` bytes in all: 0 or -1. */
BPE_INTERNAL int bpe_vocab_specials_reserve(VocabBuild *b, size_t n,
                                            size_t total);
/* The next special token's bytes: 0, or 1 if it is empty. */
BPE_INTERNAL int bpe_vocab_special_add(VocabBuild *b,
                                       const unsigned char *token, size_t len);
/* hf: special token k's id: 0, or 1 if it is above MAX_RANK. */
BPE_INTERNAL int bpe_vocab_special_id(VocabBuild *b, size_t k, uint64_t id);
/* After the last token: 0, 1 if two are equal, or -1. */
BPE_INTERNAL int bpe_vocab_specials_done(VocabBuild *b);

/* Read the vocab (gpt2: a vocab.json; hf: the model's vocab object) and the
 * merges (gpt2: a merges.txt; hf: the model's merges array) into b: 0, 1 or
 * -1. */
BPE_INTERNAL int bpe_vocab_read(VocabBuild *b, int hf,
                                const unsigned char *vocab, size_t vocab_size,
                                const unsigned char *merges,
                                size_t merges_size);

BPE_INTERNAL void bpe_vocab_free(VocabBuild *b);

/* The bounds of the values of "vocab" and "merges" in the object under the
 * top-level key "model" of a tokenizer.json's bytes: 0 with them in at[0:2]
 * and at[2:4], 1 if the document is not of that shape or one of those keys
 * is there twice. */
BPE_INTERNAL int bpe_vocab_hf_spans(const unsigned char *data, size_t size,
                                    size_t at[4]);

#endif /* BPE_VOCAB_FILES_H */
