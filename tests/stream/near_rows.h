/* near_rows.h - the stream tests' rows: n x d, the first k coordinates
   N(0, 1) and the rest N(0, off^2), from a seeded generator (caller frees).
   With off = 1e-7 the rows lie almost exactly in a k-dim subspace, so that
   every bucket mechanism (the histogram's buckets too) releases a basis. */
#ifndef DPS_TEST_NEAR_ROWS_H
#define DPS_TEST_NEAR_ROWS_H

#include "dpsubspace.h"

#include <stdlib.h>

static inline float *near_rows(size_t n, size_t d, size_t k, double off, uint64_t seed)
{
    float *x = malloc(n * d * sizeof *x);
    dps_rng *g = NULL;
    dps_rng_new_seeded(&g, seed);
    for (size_t i = 0; x && i < n; i++)
        for (size_t j = 0; j < d; j++)
            x[i * d + j] = (float)((j < k ? 1.0 : off) * dps_rng_gaussian(g, 1.0));
    dps_rng_destroy(&g);
    return x;
}

#endif
