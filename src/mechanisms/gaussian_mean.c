/* gaussian_mean.c - the Gaussian mechanism for the mean of the rows
   (dps_gaussian_mean), rows clipped to unit norm (x / max(1, ||x||)) so the
   guarantee holds for any input, and its projection on a released subspace
   (dps_project, post-processing).

   GUARANTEE: rho-zCDP under replacing one row.  The argument follows. */
#include "dpsubspace.h"
#include "internal.h"
#include "rows.h"

#include <math.h>
#include <string.h>

/* GAUSSIAN MEAN: replacing one clipped row moves the mean by at most 2/n in L2,
   so N(0, sigma^2 I) with sigma = (2/n)/sqrt(2 rho) is rho-zCDP (BS16 Prop 1.6). */
int dps_gaussian_mean(const float *X, size_t n, size_t d, double rho, dps_rng *rng, double *out)
{
    if (!X || !rng || !out || n == 0 || d == 0 || !(rho > 0))
        return DPS_EINVAL;
    float *row = malloc(d * sizeof *row); /* one clipped row at a time */
    if (!row)
        return DPS_ENOMEM;
    memset(out, 0, d * sizeof *out);
    for (size_t i = 0; i < n; i++) {
        row_unit(X + i * d, d, ROW_CLIP, row);
        for (size_t j = 0; j < d; j++)
            out[j] += row[j];
    }
    free(row);
    double sigma = (2.0 / (double)n) / sqrt(2.0 * rho);
    for (size_t j = 0; j < d; j++)
        out[j] = out[j] / (double)n + dps_rng_gaussian(rng, sigma);
    return DPS_OK;
}

void dps_project(const float *V, size_t k, size_t d, const double *x, double *out)
{
    double c[k];
    for (size_t a = 0; a < k; a++) {
        double s = 0;
        for (size_t j = 0; j < d; j++)
            s += V[a * d + j] * x[j];
        c[a] = s;
    }
    for (size_t j = 0; j < d; j++) {
        double s = 0;
        for (size_t a = 0; a < k; a++)
            s += c[a] * V[a * d + j];
        out[j] = s;
    }
}
