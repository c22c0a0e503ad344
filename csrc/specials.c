/* Special tokens: copied into memory the Specials own, longest first, the
 * ones that are not whole UTF-8 recorded. The search itself
 * (bpe_next_special) is inline in scanner.h, in the callers' loops. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scanner.h"

BPE_INTERNAL void
bpe_specials_empty(Specials *sp)
{
    memset(sp, 0, sizeof(*sp));
    sp->bad = -1;
}

BPE_INTERNAL int
bpe_specials_reserve(Specials *sp, size_t count, size_t total)
{
    bpe_specials_empty(sp);
    if (count == 0) { /* (most calls: encode_ordinary) */
        return 0;
    }
    sp->token = calloc(count, sizeof(*sp->token));
    sp->len = calloc(count, sizeof(*sp->len));
    sp->origin = calloc(count, sizeof(*sp->origin));
    sp->bytes = malloc(total ? total : 1);
    if (sp->token == NULL || sp->len == NULL || sp->origin == NULL ||
        sp->bytes == NULL)
    {
        return -1;
    }
    return 0;
}

BPE_INTERNAL void
bpe_specials_add(Specials *sp, const unsigned char *bytes, size_t len)
{
    size_t at = sp->count, k = sp->count;
    unsigned char *token = sp->bytes + sp->used;
    memcpy(token, bytes, len);
    sp->used += len;
    if (sp->bad < 0 && !bpe_utf8_valid(token, len)) {
        sp->bad = (ptrdiff_t)k;
    }
    /* insertion sort, longest first, stable */
    while (at > 0 && sp->len[at - 1] < len) {
        sp->token[at] = sp->token[at - 1];
        sp->len[at] = sp->len[at - 1];
        sp->origin[at] = sp->origin[at - 1];
        at--;
    }
    sp->token[at] = token;
    sp->len[at] = len;
    sp->origin[at] = k;
    sp->count++;
    if (!sp->first[token[0]]) {
        sp->first[token[0]] = 1;
        sp->first_byte = token[0];
        sp->n_first++;
    }
}

BPE_INTERNAL void
bpe_specials_close(Specials *sp)
{
    free(sp->token);
    free(sp->len);
    free(sp->origin);
    free(sp->bytes);
    bpe_specials_empty(sp);
}
