/* rounding_rows.h - what the rounding tests of the accumulators share
   (test_second_moment.c, test_power_iteration.c): unit rows of the kinds
   whose sums round worst, and Higham's gamma_n. */
#ifndef DPS_TEST_ROUNDING_ROWS_H
#define DPS_TEST_ROUNDING_ROWS_H

#include "dpsubspace.h"

#include <math.h>
#include <stddef.h>

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

/* gamma_n = n u / (1 - n u), u = 2^-53: the bound on a double sum of n terms
   in any order (Higham, Accuracy and Stability, 2nd ed., Lemma 3.1). */
static inline double rounding_gamma(size_t n) { return (double)n * 0x1p-53 / (1.0 - (double)n * 0x1p-53); }

#endif
