/* The bounds of a batch's runs (encode_batch's threads each take one): the
 * arithmetic of tokenizer._batch_runs, which the module's batch_runs() feeds
 * with the items' sizes. */
#include <stddef.h>
#include <stdint.h>

#include "encoder_internal.h"

/* The index of the item whose end is nearest target (the earlier one on a
 * tie), as the twin's bisect_left and comparison give it. Python's float
 * arithmetic, so the bounds are the twin's exactly (every integer here is
 * below 2**53, so exact as a double). */
static size_t
nearest_end(const int64_t *ends, size_t count, double target)
{
    size_t lo = 0, hi = count; /* bisect_left(ends, target) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((double)ends[mid] < target) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    if (lo == count ||
        (lo > 0 && target - (double)ends[lo - 1] < (double)ends[lo] - target))
    {
        lo--;
    }
    return lo;
}

BPE_INTERNAL size_t
bpe_run_bounds(const int64_t *ends, size_t count, int64_t total, size_t parts,
               size_t *bounds)
{
    size_t n = 0, last = 0;
    bounds[n++] = 0;
    for (size_t k = 1; k < parts; k++) {
        double target = (double)(total * (int64_t)k) / (double)parts;
        size_t i = nearest_end(ends, count, target);
        if (i + 1 > last && i + 1 < count) {
            bounds[n++] = i + 1;
            last = i + 1;
        }
    }
    bounds[n++] = count;
    return n;
}
