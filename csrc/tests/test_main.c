/* The C core's test program: runs every test and ends with the counts (see
 * test_core.h). Exits 1 if any check failed. */
#include <stdio.h>

#include "test_core.h"

long test_passed = 0, test_failed = 0;

int
main(void)
{
    static const struct {
        const char *name;
        void (*run)(void);
    } tests[] = {
        {"classes", test_classes},   {"utf8", test_utf8},
        {"scanners", test_scanners}, {"specials", test_specials},
        {"encoder", test_encoder},   {"counter", test_counter},
        {"packed", test_packed},     {"rank_file", test_rank_file},
        {"trainer", test_trainer},
    };
    for (size_t k = 0; k < sizeof(tests) / sizeof(tests[0]); k++) {
        long before = test_failed;
        tests[k].run();
        printf("%-10s %s\n", tests[k].name,
               test_failed == before ? "ok" : "FAILED");
    }
    printf("test_core: %ld passed, %ld failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}
