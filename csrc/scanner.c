/* The parts of the scanners that do not run in the counter's and the
 * encoder's inner loops (see scanner.h): the class table, the text view and
 * the pattern names. UTF-8 validation is in utf8.c, the special tokens in
 * specials.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scan_blocks.h"
#include "scanner.h"

BPE_INTERNAL unsigned char *bpe_char_class = NULL;
BPE_INTERNAL int bpe_ascii_blocks = 0;

BPE_INTERNAL const char *const bpe_pattern_names[N_PATTERNS] = {
    "gpt2", "cl100k", "o200k"};

BPE_INTERNAL int
bpe_char_classes_set(const unsigned char *table, size_t len, size_t *bad)
{
    if (len != N_CODEPOINTS) {
        return BPE_CLASSES_BAD_SIZE;
    }
    /* The entries the scanners rely on (scanner.h): a letter is in one or
     * both of o200k's sets, a mark (other) in both, nothing else in either. */
    static const unsigned char valid[256] = {
        [CLS_OTHER] = 1,
        [CLS_NUMBER] = 1,
        [CLS_SPACE] = 1,
        [CLS_LETTER | CLS_UP] = 1,
        [CLS_LETTER | CLS_LOW] = 1,
        [CLS_LETTER | CLS_UP | CLS_LOW] = 1,
        [CLS_OTHER | CLS_UP | CLS_LOW] = 1,
    };
    for (size_t k = 0; k < len; k++) {
        if (!valid[table[k]]) {
            *bad = k;
            return BPE_CLASSES_BAD_ENTRY;
        }
    }
    /* The table in use is never freed or changed: scans in other threads read
     * it with no lock. The first one set stays; a later call must bring the
     * same table. */
    if (bpe_char_class != NULL) {
        return memcmp(bpe_char_class, table, N_CODEPOINTS) == 0
                   ? BPE_CLASSES_SET
                   : BPE_CLASSES_OTHER;
    }
    unsigned char *copy = malloc(N_CODEPOINTS);
    if (copy == NULL) {
        return BPE_CLASSES_NO_MEMORY;
    }
    memcpy(copy, table, N_CODEPOINTS);
    bpe_ascii_blocks = bpe_blocks_match_classes(copy);
    bpe_char_class = copy;
    return BPE_CLASSES_SET;
}

BPE_INTERNAL void
bpe_text_close(Text *t)
{
    free(t->scratch);
    t->scratch = NULL;
    t->scratch_cap = 0;
}

BPE_INTERNAL int
bpe_pattern_id(const char *name)
{
    for (int k = 0; k < N_PATTERNS; k++) {
        if (strcmp(name, bpe_pattern_names[k]) == 0) {
            return k;
        }
    }
    return -1;
}
