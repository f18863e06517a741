/* synth.c - the paper's synthetic near-low-rank generator and a subspace
   distance; evaluation aids, not mechanisms. */
#include "internal.h"
#include "linalg.h"

#include <math.h>
#include <string.h>

int dps_synth_paper(dps_rng *rng, size_t n, size_t d, size_t k, double tau, float *rows, float *basis)
{
    if (!rng || !rows || k == 0 || k >= d || !(tau > 0))
        return DPS_EINVAL;
    dps_blas_init_once();
    float *B = dps_aligned_calloc(k * d, sizeof(float)); /* b_1..b_k in {-1,1}^d */
    float *Q = dps_aligned_calloc(k * d, sizeof(float)); /* orthonormal basis of span(b) */
    double *u = malloc(d * sizeof *u);
    if (!B || !Q || !u) {
        free(B); free(Q); free(u);
        return DPS_ENOMEM;
    }
    for (size_t i = 0; i < k * d; i++)
        B[i] = (dps_rng_u64(rng) & 1) ? 1.0f : -1.0f;
    memcpy(Q, B, k * d * sizeof *Q);
    int rc = la_orthonormalize_rows(Q, k, d);
    for (size_t r = 0; !rc && r < n; r++) {
        /* u uniform on the unit sphere of span(b): Q^T g / ||g|| for g ~ N(0, I_k). */
        double g[k], gn = 0;
        for (size_t a = 0; a < k; a++) {
            g[a] = dps_rng_gaussian(rng, 1.0);
            gn += g[a] * g[a];
        }
        gn = sqrt(gn);
        double ss = 0;
        uint64_t bits = 0;
        for (size_t j = 0; j < d; j++) {
            if ((j & 63) == 0)
                bits = dps_rng_u64(rng);
            double v = 0;
            for (size_t a = 0; a < k; a++)
                v += g[a] * Q[a * d + j];
            v = v / gn + ((bits & 1) ? 1.0 : -1.0) / tau;
            bits >>= 1;
            u[j] = v;
            ss += v * v;
        }
        double inv = 1.0 / sqrt(ss);
        for (size_t j = 0; j < d; j++)
            rows[r * d + j] = (float)(u[j] * inv);
    }
    if (!rc && basis)
        memcpy(basis, Q, k * d * sizeof *Q);
    free(B); free(Q); free(u);
    return rc;
}

double dps_subspace_sin(const float *A, const float *B, size_t k, size_t d, double *fro)
{
    /* E = B - (B A^T) A = B (I - P_A), in double: E E^T = I - C^T C has the
       sin^2 of the principal angles as eigenvalues.  Computing the residual
       directly avoids 1 - cos^2, whose rounding floor on float bases is ~1e-4. */
    double *C = malloc(k * k * sizeof *C), *E = malloc(k * d * sizeof *E);
    double *M = malloc(k * k * sizeof *M), *Z = malloc(k * k * sizeof *Z), *w = malloc(k * sizeof *w);
    double result = NAN;
    if (C && E && M && Z && w) {
        for (size_t a = 0; a < k; a++)
            for (size_t i = 0; i < k; i++) {
                double s = 0;
                for (size_t c = 0; c < d; c++)
                    s += (double)A[a * d + c] * B[i * d + c];
                C[a * k + i] = s;
            }
        for (size_t i = 0; i < k; i++)
            for (size_t c = 0; c < d; c++) {
                double v = B[i * d + c];
                for (size_t a = 0; a < k; a++)
                    v -= C[a * k + i] * A[a * d + c];
                E[i * d + c] = v;
            }
        double tr = 0;
        for (size_t i = 0; i < k; i++)
            for (size_t j = i; j < k; j++) {
                double s = 0;
                for (size_t c = 0; c < d; c++)
                    s += E[i * d + c] * E[j * d + c];
                M[i * k + j] = M[j * k + i] = s;
                if (i == j)
                    tr += s;
            }
        if (la_syevr_top(M, k, 1, w, Z) == DPS_OK) {
            result = sqrt(DPS_MIN(1.0, DPS_MAX(0.0, w[0])));
            if (fro)
                *fro = sqrt(2.0 * tr);
        }
    }
    free(C); free(E); free(M); free(Z); free(w);
    return result;
}
