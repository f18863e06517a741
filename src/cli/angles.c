/* angles.c - principal angles and a QR for dps-watch (see angles.h).
   LAPACKE in column-major views of the row-major buffers, as the library's
   linalg module does: a row-major k x d matrix is a column-major d x k one. */
#include "angles.h"

#include "dpsubspace.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>

#define S_PI 3.14159265358979323846

int cli_principal_angles(const float *A, const float *B, size_t k, size_t d, double *deg, double *sin_max)
{
    double *M = malloc(k * k * sizeof *M), *sv = malloc(k * sizeof *sv);
    int rc = -1;
    if (M && sv) {
        for (size_t i = 0; i < k; i++)
            for (size_t j = 0; j < k; j++) {
                double s = 0;
                for (size_t c = 0; c < d; c++)
                    s += (double)A[i * d + c] * B[j * d + c];
                M[i * k + j] = s; /* read column-major it is (A B^T)^T: the same singular values */
            }
        lapack_int n = (lapack_int)k;
        if (LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', n, n, M, n, sv, NULL, 1, NULL, 1) == 0) {
            for (size_t i = 0; i < k; i++) { /* sv is largest first: angles come out smallest first */
                double c = sv[i] > 1 ? 1 : sv[i] < 0 ? 0 : sv[i];
                deg[i] = acos(c) * 180.0 / S_PI;
            }
            *sin_max = dps_subspace_sin(A, B, k, d, NULL);
            rc = isnan(*sin_max) ? -1 : 0;
        }
    }
    free(M);
    free(sv);
    return rc;
}

int cli_orthonormalize_rows(float *B, size_t k, size_t d)
{
    double *Q = malloc(k * d * sizeof *Q), *tau = malloc(k * sizeof *tau);
    int rc = -1;
    if (Q && tau && k <= d) {
        for (size_t i = 0; i < k * d; i++)
            Q[i] = B[i]; /* column-major d x k: column i is row i of B */
        lapack_int m = (lapack_int)d, n = (lapack_int)k;
        if (LAPACKE_dgeqrf(LAPACK_COL_MAJOR, m, n, Q, m, tau) == 0) {
            double rmax = 0, rmin = INFINITY;
            for (size_t i = 0; i < k; i++) {
                double r = fabs(Q[i * d + i]);
                rmax = r > rmax ? r : rmax;
                rmin = r < rmin ? r : rmin;
            }
            if (rmax > 0 && rmin > 1e-6 * rmax && LAPACKE_dorgqr(LAPACK_COL_MAJOR, m, n, n, Q, m, tau) == 0) {
                for (size_t i = 0; i < k * d; i++)
                    B[i] = (float)Q[i];
                rc = 0;
            }
        }
    }
    free(Q);
    free(tau);
    return rc;
}

double cli_orthonormality_error(const float *B, size_t k, size_t d)
{
    double worst = 0;
    for (size_t i = 0; i < k; i++)
        for (size_t j = i; j < k; j++) {
            double s = 0;
            for (size_t c = 0; c < d; c++)
                s += (double)B[i * d + c] * B[j * d + c];
            double e = fabs(s - (i == j ? 1.0 : 0.0));
            worst = e > worst ? e : worst;
        }
    return worst;
}
