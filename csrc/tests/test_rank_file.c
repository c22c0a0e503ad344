/* The rank file reader (rank_file.c): the tiny vocab's rank file read into
 * the tables rank_tables_py gives (expected.h), merges rebuilt from the ranks;
 * and files the Python reader refuses, which the C reader must leave to it. */
#include <stdlib.h>
#include <string.h>

#include "ranks.h"
#include "test_core.h"

#include "expected.h"

#define COUNT(array) (sizeof(array) / sizeof((array)[0]))

void
test_rank_file(void)
{
    RankFile rf;
    const unsigned char *good = (const unsigned char *)rank_file_good;
    size_t size = strlen(rank_file_good);
    int status = bpe_rank_file_read(&rf, good, size);
    CHECK(status == 0, "the good file is read (%d)", status);
    CHECK(rf.r.n == RANK_FILE_TOKENS, "%zu tokens", rf.r.n);
    for (size_t k = 0; status == 0 && k < rf.r.n; k++) {
        CHECK(rf.r.rank[k] == k, "token %zu has rank %u", k,
              (unsigned)rf.r.rank[k]);
    }
    CHECK(memcmp(rf.byte_ids, rank_file_byte_ids, sizeof(rf.byte_ids)) == 0,
          "the bytes' ranks");
    CHECK(rf.n_merges == COUNT(rank_file_merges) &&
              memcmp(rf.merges, rank_file_merges, sizeof(rank_file_merges)) ==
                  0,
          "%zu merges, as rank_tables_py rebuilds them", rf.n_merges);
    /* a token's bytes are found by ranks_find */
    uint32_t e = ranks_find(&rf.r, (const unsigned char *)"a", 1);
    CHECK(e != NOT_FOUND && rf.r.rank[e] == rank_file_byte_ids['a'],
          "the token 'a'");
    CHECK(ranks_find(&rf.r, (const unsigned char *)"xyz!", 4) == NOT_FOUND,
          "no token 'xyz!'");
    bpe_rank_file_free(&rf);
    for (size_t k = 0; k < COUNT(rank_file_bad); k++) {
        const BadRankFile *bad = &rank_file_bad[k];
        size_t tail = strlen(bad->tail), len = bad->keep - bad->skip;
        unsigned char *text = malloc(len + tail + 1);
        REQUIRE(text != NULL, "out of memory");
        memcpy(text, good + bad->skip, len);
        memcpy(text + len, bad->tail, tail);
        /* (exactly len + tail bytes: the reader must not look past them) */
        status = bpe_rank_file_read(&rf, text, len + tail);
        CHECK(status == 1, "a file with %s is left to Python (%d)", bad->what,
              status);
        bpe_rank_file_free(&rf);
        free(text);
    }
}
