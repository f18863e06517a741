/* test_second_moment - the row-intake mechanisms' accumulator C = sum x x^T
   (src/mechanisms/second_moment.c: float blocks, double sum) and the bound
   on what its rounding adds to the sensitivity, which the Gaussian and
   covariance mechanisms add to their noise. */
#include "check.h"
#include "dpsubspace.h"
#include "moment_groups.h"
#include "second_moment.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Unit rows: kind 0 Gaussian (uniform on the sphere), kind 1 e_0 plus
   noise of norm ~0.5 (C_00 ~ 0.8 n: the largest entries carry the largest
   rounding), kind 2 entries of mixed magnitude (2^-20 .. 1, random signs). */
static void s_row(dps_rng *g, int kind, size_t d, float *x)
{
    double s = 0;
    for (size_t c = 0; c < d; c++) {
        double v = kind == 2 ? ldexp(dps_rng_uniform(g) < 0.5 ? -1.0 : 1.0, -(int)dps_rng_below(g, 21))
                             : dps_rng_gaussian(g, kind == 1 ? 0.5 / sqrt((double)d) : 1.0) + (kind == 1 && c == 0);
        x[c] = (float)v;
        s += (double)x[c] * x[c];
    }
    float inv = (float)(1.0 / sqrt(s));
    for (size_t c = 0; c < d; c++)
        x[c] *= inv;
}

static void s_accumulate(second_moment *sm, const float *X, size_t n, size_t d)
{
    second_moment_reset(sm);
    for (size_t r = 0; r < n; r++)
        second_moment_add(sm, X + r * d);
    second_moment_finish(sm);
}

/* 1. Every entry against the exact sum.  A float product of floats is exact
   in double (48 bits), so ref = sum_r x_ri x_rj in double is exact up to
   its own n 2^-53 relative; A_ij = sum_r |x_ri x_rj|.  The argument of
   second_moment.c bounds each entry's error by gamma_b A_ij (one block's
   float sum) plus 2^-25 per block (the rounding to C's quantum 2^-24) plus
   the final conversion to double: accept |C_ij - ref_ij| <=
   (gamma_b + 2 (n + 2) 2^-53) (1 + gamma_b) A_ij + blocks 2^-25.  A missed or doubled
   tile, a wrong mirror or a lost partial block is off by about A_ij itself,
   10^4 times the tolerance.  The shapes cover d below, at and above the
   tile, d not a multiple of it, n below, at and above the block and n not
   a multiple of it. */
static void s_test_entries(void)
{
    const size_t ds[] = {1, 5, 127, 128, 300}, ns[] = {1, 255, 256, 257, 700};
    size_t b = second_moment_block_rows();
    double gb = b * 0x1p-24 / (1.0 - b * 0x1p-24);
    dps_rng *g = NULL;
    dps_rng_new_seeded(&g, 11);
    for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (int kind = 0; kind < 3; kind++) {
                size_t d = ds[di], n = ns[ni];
                float *X = malloc(n * d * sizeof *X);
                for (size_t r = 0; r < n; r++)
                    s_row(g, kind, d, X + r * d);
                second_moment sm;
                CHECK(second_moment_init(&sm, d) == DPS_OK, "init d %zu", d);
                s_accumulate(&sm, X, n, d);
                double worst = 0; /* largest error / tolerance */
                for (size_t i = 0; i < d; i++)
                    for (size_t j = 0; j < d; j++) {
                        double ref = 0, A = 0;
                        for (size_t r = 0; r < n; r++) {
                            double p = (double)X[r * d + i] * X[r * d + j];
                            ref += p;
                            A += fabs(p);
                        }
                        double tol = (gb + 2.0 * (double)(n + 2) * 0x1p-53) * (1.0 + gb) * A +
                                     (double)((n + b - 1) / b) * 0x1p-25;
                        worst = fmax(worst, fabs(sm.C[i * d + j] - ref) / tol);
                    }
                CHECK(worst <= 1.0, "d %zu n %zu kind %d: error %.3g x the entrywise bound", d, n, kind, worst);
                second_moment_free(&sm);
                free(X);
            }
    dps_rng_destroy(&g);
}

/* 2. The sensitivity: D' = D with row j replaced; the computed difference
   minus the exact y y^T - x x^T must have Frobenius norm at most
   second_moment_excess(d) (the bound the mechanisms add to sqrt 2).
   The replaced row at the start, inside and at the end of a block, and in
   the last, partial block; every row kind.  (The bound is a worst case:
   measured values are far below it; the test guards the argument's
   structure -- blocks without the row must give the same bits, so the
   difference outside the row's block is double rounding only; a C that
   dropped or doubled a row would be off by ~1.) */
static void s_test_neighbours(void)
{
    size_t d = 200, n = 1000, b = second_moment_block_rows();
    const size_t js[] = {0, b / 2, b - 1, b, n - 1};
    dps_rng *g = NULL;
    dps_rng_new_seeded(&g, 12);
    float *X = malloc(n * d * sizeof *X), *Y = malloc(n * d * sizeof *Y);
    second_moment a, c;
    CHECK(second_moment_init(&a, d) == DPS_OK && second_moment_init(&c, d) == DPS_OK, "init");
    double bound = second_moment_excess(d), worst = 0;
    for (int kind = 0; kind < 3; kind++)
        for (size_t ji = 0; ji < sizeof js / sizeof js[0]; ji++) {
            size_t j = js[ji];
            for (size_t r = 0; r < n; r++)
                s_row(g, kind, d, X + r * d);
            memcpy(Y, X, n * d * sizeof *X);
            s_row(g, kind == 1 ? 0 : kind, d, Y + j * d); /* a different row (for spikes: an unlike one) */
            s_accumulate(&a, X, n, d);
            s_accumulate(&c, Y, n, d);
            const float *x = X + j * d, *y = Y + j * d;
            double ex = 0;
            for (size_t p = 0; p < d; p++)
                for (size_t q = 0; q < d; q++) {
                    double D = (double)y[p] * y[q] - (double)x[p] * x[q];
                    double e = (c.C[p * d + q] - a.C[p * d + q]) - D;
                    ex += e * e;
                }
            ex = sqrt(ex);
            worst = fmax(worst, ex);
            CHECK(ex <= bound, "kind %d row %zu: rounding adds %.3g, above the bound %.3g", kind, j, ex, bound);
        }
    NOTE("sensitivity excess: measured at most %.3g, bound %.3g (n %zu, block %zu)", worst, bound, n, b);
    second_moment_free(&a);
    second_moment_free(&c);
    free(X);
    free(Y);
    dps_rng_destroy(&g);
}

/* 3. The bound's value: 2 (gamma_b b + d 2^-25), about 2 b^2 2^-24
   (0.0078 at b = 256) plus d 2^-24 (6e-5 at d = 1000); and the Gaussian mechanism's noise includes it exactly
   when a group is dense: s = (sqrt 2 + e) / sqrt(2 rho), 1 / sqrt(rho)
   when every group is the power iteration's (whose flushes are not float
   blocks of this accumulator). */
static void s_test_bound_and_noise(void)
{
    double b = (double)second_moment_block_rows();
    double e0 = second_moment_excess(1000);
    double want = 2.0 * b * b * 0x1p-24 + 1000 * 0x1p-24;
    CHECK(fabs(e0 - want) < 1e-4 * e0, /* gamma_b = b u (1 + ~b u) */ "excess %.6g vs 2 b^2 u + d u %.6g", e0,
          want);
    CHECK(e0 < 0.01 * sqrt(2.0), "the excess %.3g is below 1%% of sqrt 2", e0);

    dps_config c;
    dps_config_init(&c, 500, 4);
    c.aggregator = DPS_AGG_GAUSSIAN;
    c.rho_epoch = 0.5;
    double e = second_moment_excess(c.d);
    double s = moment_noise_sd(&c);
    CHECK(fabs(s - (sqrt(2.0) + e) / sqrt(2.0 * c.rho_epoch)) < 1e-12, "dense: s %.12g, want (sqrt 2 + e)/sqrt(2 rho)",
          s);
    c.dense_max_d = 100; /* d = 500 is then one power group */
    s = moment_noise_sd(&c);
    CHECK(fabs(s - 1.0 / sqrt(c.rho_epoch)) < 1e-12, "power only: s %.12g, want 1/sqrt(rho)", s);

    /* an epoch whose integers could overflow is refused */
    const char *why = NULL;
    c.dense_max_d = 0;
    c.m = 8;
    c.t = (size_t)1 << 25; /* 2^28 rows: the most */
    CHECK(moment_check(&c, &why) == DPS_OK, "t m = 2^28 accepted");
    c.t++;
    CHECK(moment_check(&c, &why) == DPS_ELIMIT && why, "t m above 2^28 refused");
}

int main(void)
{
    s_test_entries();
    s_test_neighbours();
    s_test_bound_and_noise();
    return check_summary();
}
