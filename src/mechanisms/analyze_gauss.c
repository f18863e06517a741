/* analyze_gauss.c - the Analyze Gauss baseline (dps_analyze_gauss): a
   central method on the whole data matrix, rows clipped to unit norm
   (x / max(1, ||x||): rows_clipped) so the guarantee holds for any input.

   GUARANTEE: delta-approximate 2 rho-zCDP under replacing one row (call it
   with half the rho you mean to spend).  The argument follows. */
#include "internal.h"
#include "linalg.h"
#include "rows.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* ANALYZE GAUSS, zCDP (DESIGN 3.5; DTTZ14 Alg. 2 as in Tsfadia sec. 3.8.4).
     g = s_k^2 - s_{k+1}^2 + N(0, 2/rho);  a = g - 2 sqrt(ln(1/delta)/rho);
     if a - 2 <= 0: FAIL;  else W = Pi + E, E symmetric Gaussian, top-k of W.
   Privacy.  Replacing one row x by x' (norms <= 1) changes C = X^T X by
   F = x'x'^T - x x^T, whose eigenvalues lie in [-1, 1].  By Weyl every
   eigenvalue of C moves by at most 1, so the gap s_k^2 - s_{k+1}^2 moves by at
   most 2 and g is rho-zCDP (Gaussian, sd sqrt(2/rho) = 2/sqrt(2 rho)).
   P[N(0, 2/rho) < -2 sqrt(ln(1/delta)/rho)] <= delta, so with probability
   1 - delta the true gap is >= a (the event is a half-line of g, the same for
   both inputs: the argument of wfc.c (d) applies).  Given gap >= a > 2:
   Davis-Kahan sin-theta with X = V^_perp^T V: ||Lam^_2 X - X Lam_1||_F =
   ||V^_perp^T F V||_F, the spectral separation is >= a - 1 (Weyl), and for each
   unit eigenvector e of F, ||V^_perp^T e|| ||V^T e|| <= (1 + s)/2 with
   s = ||sin Theta||_2, so S = ||sin Theta||_F <= (1 + S)/(a - 1), i.e.
   S <= 1/(a - 2), and ||Pi - Pi'||_F = sqrt(2) S <= sqrt(2)/(a - 2).
   Noise: E = (G + G^T)/sqrt(2) with G iid N(0, s^2), i.e. off-diagonal entries
   N(0, s^2) and diagonal N(0, 2 s^2).  The Renyi divergence of the release of
   the upper triangle is alpha ||Pi - Pi'||_F^2 / (4 s^2) <= alpha / (2 s^2 (a-2)^2),
   which is alpha * rho for s = 1 / ((a - 2) sqrt(2 rho)) (DESIGN's s).  Total:
   delta-approximate 2 rho-zCDP.
   NOTE: DESIGN 3.5 says "upper triangle iid N(0, s^2)", i.e. diagonal variance
   s^2.  With that the diagonal's share of ||Pi - Pi'||_F^2 is counted once
   instead of twice and the matrix step is only 2 rho-zCDP in the worst case
   (rotation in the plane of (1,1) and (1,-1)), 3 rho in all: the diagonal
   variance here is 2 s^2 so that the stated (2 rho, delta) holds.
   NUMERICS: for n > d the singular values come from the d x d Gram of the
   clipped rows in double (rows_gram_clipped: no n x d copy, never an n x n
   Gram) and la_sym_topk_d, whose Ritz values are within the residual
   tolerance 1e-6 lambda_1 of eigenvalues (in practice ||r||^2 / gap, far
   less); the argument above is for exact eigenvalues, as for any
   floating-point run of it. */
int dps_analyze_gauss(const float *X, size_t n, size_t d, size_t k, double rho, double delta, dps_rng *rng,
                      float *V, int *released)
{
    if (released)
        *released = 0;
    if (!X || !V || !rng || !released || n == 0 || k == 0 || k >= d || !(rho > 0) || !(delta > 0 && delta < 1))
        return DPS_EINVAL;
    if (d > DPS_ANALYZE_GAUSS_MAX_D)
        return DPS_ELIMIT;
    dps_blas_init_once();
    float *Vt = dps_aligned_calloc(k * d, sizeof(float));
    double sv[k + 1];
    memset(sv, 0, sizeof sv);
    size_t rank = 0;
    int rc = Vt ? DPS_OK : DPS_ENOMEM;
    if (!rc && n > d) { /* the d x d Gram of the clipped rows, block by block: no n x d copy */
        double *G = dps_aligned_calloc(d * d, sizeof(double));
        rc = G ? rows_gram_clipped(X, n, d, G, NULL) : DPS_ENOMEM;
        if (!rc)
            rc = la_topk_gram(G, d, k, Vt, sv, &rank);
        free(G);
    } else if (!rc) {  /* n <= d: the n x n Gram of a clipped copy */
        float *owned = NULL;
        const float *Y = rows_clipped(X, n, d, &owned);
        la_ws *ws = Y ? la_ws_new(n, d, k) : NULL;
        rc = ws ? la_topk_rows(ws, Y, n, d, k, Vt, sv, &rank, NULL) : DPS_ENOMEM;
        la_ws_free(&ws);
        free(owned);
    }
    if (!rc && rank < k) { /* Pi must be a rank-k projection: complete publicly */
        dps_rng *pub = NULL;
        rc = dps_rng_new_labelled(&pub, 0, "analyze-gauss-completion", 0);
        if (!rc)
            la_complete_basis(Vt, rank, k, d, pub);
        dps_rng_destroy(&pub);
    }
    if (rc) {
        free(Vt);
        return rc;
    }
    double s_k1 = n > k ? sv[k] : 0.0;
    double gap = sv[k - 1] * sv[k - 1] - s_k1 * s_k1;
    double g = gap + dps_rng_gaussian(rng, sqrt(2.0 / rho));
    double a = g - 2.0 * sqrt(log(1.0 / delta) / rho);
    if (!(a - 2.0 > 0)) {
        free(Vt);
        return DPS_OK; /* FAIL */
    }
    double s = 1.0 / ((a - 2.0) * sqrt(2.0 * rho));
    float *W = dps_aligned_calloc(d * d, sizeof(float));
    if (!W) {
        free(Vt);
        return DPS_ENOMEM;
    }
    /* W = Vt^T Vt (the projection), then + E. */
    cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)k, 1.0f, Vt, (int)d, 0.0f, W, (int)d);
    for (size_t i = 0; i < d; i++) {
        W[i * d + i] += (float)dps_rng_gaussian(rng, sqrt(2.0) * s);
        for (size_t j = i + 1; j < d; j++) {
            W[i * d + j] += (float)dps_rng_gaussian(rng, s);
            W[j * d + i] = W[i * d + j];
        }
    }
    rc = la_sym_topk(W, d, k, rng, V, NULL, NULL);
    free(W);
    free(Vt);
    if (!rc)
        *released = 1;
    return rc;
}
