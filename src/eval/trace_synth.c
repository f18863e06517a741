/* trace_synth.c - trace-regression data with Gaussian design (DESIGN 3.7);
   an evaluation aid, not a mechanism (see dpsubspace_rgrad.h for the scaling). */
#include "internal.h"
#include "linalg.h"

#include <math.h>
#include <string.h>

int dps_trace_synth(dps_rng *rng, size_t n, size_t d1, size_t d2, size_t r, double noise_sd, float *X, float *y,
                    float *M)
{
    if (!rng || !X || !y || n == 0 || r == 0 || r > d1 || r > d2 || !(noise_sd >= 0) || !isfinite(noise_sd) ||
        (double)d1 * (double)d2 > (double)DPS_RGRAD_MAX_ENTRIES)
        return DPS_EINVAL;
    dps_blas_init_once();
    size_t D = d1 * d2;
    float *Ur = dps_aligned_alloc(r * d1, sizeof(float)), *Vr = dps_aligned_alloc(r * d2, sizeof(float));
    double *Md = malloc(D * sizeof *Md), *s = malloc(r * sizeof *s);
    int rc = (Ur && Vr && Md && s) ? DPS_OK : DPS_ENOMEM;
    if (!rc) {
        /* Haar-random orthonormal r-frames: Gaussian rows, orthonormalised. */
        dps_rng_gaussian_fill_f(rng, 1.0, Ur, r * d1);
        dps_rng_gaussian_fill_f(rng, 1.0, Vr, r * d2);
        rc = la_orthonormalize_rows(Ur, r, d1);
        if (!rc)
            rc = la_orthonormalize_rows(Vr, r, d2);
    }
    if (!rc) {
        double ss = 0;
        for (size_t j = 0; j < r; j++) {
            s[j] = 1.0 - 0.5 * (double)j / (double)(r > 1 ? r - 1 : 1);
            ss += s[j] * s[j];
        }
        for (size_t j = 0; j < r; j++)
            s[j] /= sqrt(ss); /* ||M||_F = 1 */
        for (size_t a = 0; a < d1; a++)
            for (size_t b = 0; b < d2; b++) {
                double v = 0;
                for (size_t j = 0; j < r; j++)
                    v += s[j] * (double)Ur[j * d1 + a] * (double)Vr[j * d2 + b];
                Md[a * d2 + b] = v;
            }
        if (M)
            for (size_t e = 0; e < D; e++)
                M[e] = (float)Md[e];
        for (size_t i = 0; i < n; i++) {
            float *x = X + i * D;
            dps_rng_gaussian_fill_f(rng, 1.0, x, D);
            double v = 0;
            for (size_t e = 0; e < D; e++)
                v += (double)x[e] * Md[e];
            y[i] = (float)(v + (noise_sd > 0 ? dps_rng_gaussian(rng, noise_sd) : 0.0));
        }
    }
    free(Ur); free(Vr); free(Md); free(s);
    return rc;
}
