/* check.h - the tests' harness: CHECK counts, the last line is "N passed, N failed".
   Each test program is one module's self-test; it exits 1 if anything failed. */
#ifndef DPS_TEST_CHECK_H
#define DPS_TEST_CHECK_H

#include <stdio.h>

static int g_pass, g_fail;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            g_pass++;                                                      \
        } else {                                                           \
            g_fail++;                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
        }                                                                  \
    } while (0)

/* Print a line of what a test measured, for the log. */
#define NOTE(...)              \
    do {                       \
        printf("  ");          \
        printf(__VA_ARGS__);   \
        printf("\n");          \
    } while (0)

static inline int check_summary(void)
{
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}

#endif
