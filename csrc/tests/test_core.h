/* The C core's test program (csrc/tests/): a tiny harness, no framework.
 * Each test_*.c checks one component against expectations derived from the
 * Python path (expected.h, written by tools/c_core_expectations.py); main
 * (test_main.c) runs them all and ends with "test_core: N passed, N failed".
 * It links only the core's .c files: no Python.h anywhere. */
#ifndef BPE_TEST_CORE_H
#define BPE_TEST_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern long test_passed, test_failed;

/* Count a check; a failure prints where and the message (printf style), the
 * first 40 of them, and the run goes on. */
#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (cond) {                                                          \
            test_passed++;                                                   \
        }                                                                    \
        else if (++test_failed <= 40) {                                      \
            fprintf(stderr, "%s:%d: check failed: ", __FILE__, __LINE__);    \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)

/* A precondition of the rest of a test (out of memory, say): a failed
 * check, and the test returns. */
#define REQUIRE(cond, ...)                                                   \
    do {                                                                     \
        long failed_before = test_failed;                                    \
        CHECK(cond, __VA_ARGS__);                                            \
        if (test_failed != failed_before) {                                  \
            return;                                                          \
        }                                                                    \
    } while (0)

/* The shapes of expected.h's tables. */
typedef struct {
    int pattern;         /* PAT_* */
    size_t text;         /* in scan_texts */
    size_t n;            /* pre-tokens */
    const size_t *bytes; /* their ends, in bytes of the UTF-8 */
    const size_t *chars; /* their ends, in code points */
} ScanCase;

typedef struct {
    int pattern;
    const char *text;
    size_t n;
    const uint32_t *ids;
} EncodeCase;

typedef struct {
    const char *word;
    size_t len;
    int64_t count;
} WordCount;

typedef struct {
    const char *left;
    size_t left_len;
    const char *right;
    size_t right_len;
} MergeCase;

typedef struct {
    int pattern;
    const WordCount *words;
    size_t n;
} CountCase;

typedef struct {
    const char *what;
    size_t skip, keep;
    const char *tail;
} BadRankFile;

typedef struct {
    const int64_t *ends; /* the items' cumulative sizes */
    size_t count;
    size_t parts;
    const size_t *bounds;
    size_t n;
} BatchCase;

/* The tests, one or more per component. test_classes installs the class
 * table the scanners read, from expected.h; the others need it first. */
void test_classes(void);
void test_utf8(void);
void test_scanners(void);
void test_specials(void);
void test_encoder(void);
void test_counter(void);
void test_packed(void);
void test_rank_file(void);
void test_trainer(void);

#endif /* BPE_TEST_CORE_H */
