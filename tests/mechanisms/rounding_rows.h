/* rounding_rows.h - what the rounding tests of the accumulators share
   (test_second_moment.c, test_power_iteration.c): unit rows of the kinds
   whose sums round worst, and Higham's gamma_n. */
#ifndef DPS_TEST_ROUNDING_ROWS_H
#define DPS_TEST_ROUNDING_ROWS_H

#include "check.h"
#include "dpsubspace.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* A unit row: kind 0 Gaussian (uniform on the sphere), kind 1 e_0 plus
   noise of norm ~0.5 (the largest entries carry the largest rounding),
   kind 2 entries of mixed magnitude (2^-20 .. 1, random signs). */
static inline void rounding_unit_row(dps_rng *g, int kind, size_t d, float *x)
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

/* n unit rows of the kind into X (n x d). */
static inline void rounding_fill_rows(dps_rng *g, int kind, size_t n, size_t d, float *X)
{
    for (size_t r = 0; r < n; r++)
        rounding_unit_row(g, kind, d, X + r * d);
}

/* gamma_n = n u / (1 - n u), u = 2^-53: the bound on a double sum of n terms
   in any order (Higham, Accuracy and Stability, 2nd ed., Lemma 3.1). */
static inline double rounding_gamma(size_t n) { return (double)n * 0x1p-53 / (1.0 - (double)n * 0x1p-53); }

/* A neighbouring pair: n fresh rows X of the kind, a new row y (for kind 1,
   spikes, an unlike Gaussian one), and Y = X with row j replaced by y
   (insert 0: n rows) or y inserted before row j (insert 1: n + 1 rows, every
   later row shifted by one).  X and Y hold n + 1 rows. */
static inline void rounding_neighbours(dps_rng *g, int kind, size_t n, size_t d, size_t j, int insert, float *X,
                                       float *y, float *Y)
{
    rounding_fill_rows(g, kind, n, d, X);
    rounding_unit_row(g, kind == 1 ? 0 : kind, d, y);
    memcpy(Y, X, j * d * sizeof *X);
    memcpy(Y + j * d, y, d * sizeof *y);
    memcpy(Y + (j + 1) * d, X + (j + !insert) * d, (n - j - !insert) * d * sizeof *X);
}

/* ex = the Frobenius norm of (computed move - exact move) for one pair:
   within bound, and the largest so far in *worst. */
static inline void rounding_check_move(double ex, double bound, double *worst, int kind, size_t j, int insert)
{
    *worst = fmax(*worst, ex);
    CHECK(ex <= bound, "kind %d row %zu %s: rounding adds %.3g, above the bound %.3g", kind, j,
          insert ? "inserted" : "replaced", ex, bound);
}

#endif
