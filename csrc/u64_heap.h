/* A binary min-heap of uint64_t keys in a caller-owned array, used as
 * (rank << 32 | position): pops the lowest rank, the leftmost position on a
 * tie. Shared by the encoder's BPE of long pre-tokens and the rank file
 * reader's rebuilding of merges. Not trainer.c's heap: that one orders structs
 * through a comparison function; plain integer comparisons keep this one cheap. */
#ifndef BPE_U64_HEAP_H
#define BPE_U64_HEAP_H

#include <stddef.h>
#include <stdint.h>

/* The array must have room for one more key. */
static inline void
u64_heap_push(uint64_t *heap, size_t *size, uint64_t v)
{
    size_t k = (*size)++;
    while (k > 0) {
        size_t parent = (k - 1) / 2;
        if (heap[parent] <= v) {
            break;
        }
        heap[k] = heap[parent];
        k = parent;
    }
    heap[k] = v;
}

/* The heap must not be empty. */
static inline uint64_t
u64_heap_pop(uint64_t *heap, size_t *size)
{
    uint64_t top = heap[0];
    uint64_t last = heap[--(*size)];
    size_t k = 0, n = *size;
    for (;;) {
        size_t child = 2 * k + 1;
        if (child >= n) {
            break;
        }
        if (child + 1 < n && heap[child + 1] < heap[child]) {
            child++;
        }
        if (last <= heap[child]) {
            break;
        }
        heap[k] = heap[child];
        k = child;
    }
    if (n) {
        heap[k] = last;
    }
    return top;
}

#endif
