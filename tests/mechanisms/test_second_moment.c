/* test_second_moment - the row-intake mechanisms' accumulator C = sum x x^T
   (src/mechanisms/second_moment.c: double, dsyrk blocks): every entry is the
   exact sum up to double rounding, and rounding adds next to nothing to the
   sensitivity the mechanisms' arguments use -- under replacing one row
   (sqrt 2, the library's adjacency) and under adding one row, which moves
   every later row to another block (1, the adjacency of DP-SGD's accounting,
   SubspaceEstimator.rho_add_remove; the reason C is not summed in float
   blocks: second_moment.h). */
#include "check.h"
#include "dpsubspace.h"
#include "rounding_rows.h"
#include "second_moment.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void s_accumulate(second_moment *sm, const float *X, size_t n, size_t d)
{
    second_moment_reset(sm);
    for (size_t r = 0; r < n; r++)
        second_moment_add(sm, X + r * d);
    second_moment_finish(sm);
}

/* The largest error of an entry of sm's C against the reference of 1.
   below, as a multiple of its tolerance 2 gamma_n A_ij. */
static double s_worst_entry(const second_moment *sm, const float *X, size_t n, size_t d)
{
    double worst = 0;
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++) {
            double ref = 0, A = 0;
            for (size_t r = 0; r < n; r++) {
                double p = (double)X[r * d + i] * X[r * d + j];
                ref += p;
                A += fabs(p);
            }
            worst = fmax(worst, fabs(sm->C[i * d + j] - ref) / (2.0 * rounding_gamma(n) * A + 1e-300));
        }
    return worst;
}

/* 1. Every entry against the exact sum.  A product of floats is exact in
   double, so both C_ij and the reference ref_ij = sum_r x_ri x_rj (double,
   in row order) are within gamma_n A_ij of it, A_ij = sum_r |x_ri x_rj|:
   accept |C_ij - ref_ij| <= 2 gamma_n A_ij.  A lost partial block, a wrong
   mirror or a doubled row is off by about A_ij itself.  Shapes: n below, at
   and above the block and not a multiple of it. */
static void s_test_entries(void)
{
    size_t b = second_moment_block_rows();
    const size_t ds[] = {1, 5, 130}, ns[] = {1, b - 1, b, b + 1, 3 * b + 5};
    dps_rng *g = NULL;
    dps_rng_new_seeded(&g, 11);
    for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (int kind = 0; kind < 3; kind++) {
                size_t d = ds[di], n = ns[ni];
                float *X = malloc(n * d * sizeof *X);
                rounding_fill_rows(g, kind, n, d, X);
                second_moment sm;
                CHECK(second_moment_init(&sm, d, NULL) == DPS_OK, "init d %zu", d);
                s_accumulate(&sm, X, n, d);
                double worst = s_worst_entry(&sm, X, n, d);
                CHECK(worst <= 1.0, "d %zu n %zu kind %d: error %.3g x the entrywise bound", d, n, kind, worst);
                second_moment_free(&sm);
                free(X);
            }
    dps_rng_destroy(&g);
}

/* 2. The sensitivity's rounding.  By 1., each computed C is within
   gamma_n ||A||_F <= gamma_n n (unit rows) of its exact sum in Frobenius
   norm, so the computed difference of neighbours is within
   2 gamma_{n+1} (n + 1) of the exact one: 2.2e-10 here, against sqrt 2 and
   1.  Replacing row j (inside, at the end of, and after a block), and
   inserting a row at position j, which shifts every later row to the next
   slot of its block or to the next block: measured excess
   ||(C(D') - C(D)) - exact||_F <= the bound.  (Float blocks of 256 rows
   fail it: their measured excess was 1.6e-5 for a replaced row; an
   inserted one lets every later block round differently.) */
static void s_test_neighbours(void)
{
    size_t d = 100, n = 1000, b = second_moment_block_rows();
    const size_t js[] = {0, b / 2, b - 1, b, n - 1};
    dps_rng *g = NULL;
    dps_rng_new_seeded(&g, 12);
    float *X = malloc((n + 1) * d * sizeof *X), *Y = malloc((n + 1) * d * sizeof *Y), *y = malloc(d * sizeof *y);
    second_moment a, c;
    CHECK(second_moment_init(&a, d, NULL) == DPS_OK && second_moment_init(&c, d, NULL) == DPS_OK, "init");
    double bound = 2.0 * rounding_gamma(n + 1) * (double)(n + 1), worst = 0;
    for (int kind = 0; kind < 3; kind++)
        for (size_t ji = 0; ji < sizeof js / sizeof js[0]; ji++)
            for (int insert = 0; insert <= 1; insert++) {
                size_t j = js[ji];
                rounding_neighbours(g, kind, n, d, j, insert, X, y, Y);
                s_accumulate(&a, X, n, d);
                s_accumulate(&c, Y, n + (size_t)insert, d);
                const float *x = X + j * d;
                double ex = 0;
                for (size_t p = 0; p < d; p++)
                    for (size_t q = 0; q < d; q++) {
                        double D = (double)y[p] * y[q] - (insert ? 0.0 : (double)x[p] * x[q]);
                        double e = (c.C[p * d + q] - a.C[p * d + q]) - D;
                        ex += e * e;
                    }
                rounding_check_move(sqrt(ex), bound, &worst, kind, j, insert);
            }
    NOTE("rounding's share of the sensitivity: measured at most %.3g, bound %.3g (n %zu, block %zu)", worst, bound,
         n, b);
    second_moment_free(&a);
    second_moment_free(&c);
    free(X);
    free(Y);
    free(y);
    dps_rng_destroy(&g);
}

/* 1b. On the workers: d = 300 (above the width below which a block is one
   dsyrk), a full block and a partial one, with 2 and 3 workers (each block
   cut into column ranges): every entry within the bound of 1., and the same
   sum again on a second run (reproducible for a given number of workers). */
static void s_test_workers(void)
{
    size_t d = 300, n = second_moment_block_rows() + 7;
    dps_rng *g = NULL;
    dps_rng_new_seeded(&g, 12);
    float *X = malloc(n * d * sizeof *X);
    for (int workers = 2; workers <= 3; workers++) {
        dps_pool *pool = pool_new(workers);
        CHECK(second_moment_parts(d, workers) == (size_t)workers && second_moment_parts(d, 1) == 1 &&
                  second_moment_parts(8, workers) == 1,
              "a block cut into one range per worker above the width");
        for (int kind = 0; kind < 3; kind++) {
            rounding_fill_rows(g, kind, n, d, X);
            second_moment sm, again;
            CHECK(second_moment_init(&sm, d, pool) == DPS_OK && second_moment_init(&again, d, pool) == DPS_OK,
                  "init");
            s_accumulate(&sm, X, n, d);
            s_accumulate(&again, X, n, d);
            double worst = s_worst_entry(&sm, X, n, d);
            CHECK(worst <= 1.0, "%d workers kind %d: error %.3g x the entrywise bound", workers, kind, worst);
            CHECK(memcmp(sm.C, again.C, d * d * sizeof *sm.C) == 0, "%d workers kind %d: the same sum twice",
                  workers, kind);
            second_moment_free(&sm);
            second_moment_free(&again);
        }
        pool_free(&pool);
    }
    free(X);
    dps_rng_destroy(&g);
}

int main(void)
{
    s_test_entries();
    s_test_workers();
    s_test_neighbours();
    return check_summary();
}
