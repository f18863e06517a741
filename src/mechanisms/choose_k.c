/* choose_k.c - the private choice of the subspace dimension k
   (dps_choose_k) from the squared singular values of the rows, clipped to
   unit norm (x / max(1, ||x||)) so the guarantee holds for any input.

   GUARANTEE: pure eps-DP under replacing one row.  The argument follows. */
#include "internal.h"
#include "linalg.h"
#include "rows.h"

#include <math.h>
#include <string.h>

/* PRIVATE CHOICE OF k (Tsfadia, the remark on unknown k in sec. 2.1).
   Release s_i = sigma_i^2 + Lap(2/eps), i = 1..k_max+1, where sigma_i are the
   singular values of the clipped rows (sigma_i = 0 beyond min(n, d)); k is the
   first index i with s_i >= T and s_{i+1} < T (the number of leading s_i >= T),
   T = 2h, h = (2/eps) ln((k_max+1)/beta).
   Privacy: pure eps-DP.  Replacing a row x by x' (norms <= 1) changes
   C = X^T X by F = x'x'^T - x x^T, whose eigenvalues are one in [0, 1], one in
   [-1, 0] and the rest 0.  By Lidskii's theorem lambda(C') - lambda(C) is
   majorized by lambda(F), so sum_i |lambda_i(C') - lambda_i(C)| <= sum |lambda(F)|
   <= 2: the whole vector of squared singular values, and so any prefix of it,
   has l1 sensitivity 2, and Laplace noise of scale 2/eps on each entry is
   eps-DP (Dwork-Roth Thm 3.6).  The rule reads only the noisy values
   (post-processing).
   Utility: P(|Lap(2/eps)| >= h) = exp(-h eps/2) = beta/(k_max+1), so with
   probability >= 1 - beta every draw is within h (union bound), and then the
   rule returns k whenever sigma_k^2 >= 3h and sigma_{k+1}^2 < h.
   DEPARTURE: the remark uses thresholds ln(i/beta)/eps with Lap(2/eps); a
   draw crosses such a margin with probability sqrt(beta/i), not beta/i, so
   its 1 - beta does not follow.  T above makes the stated guarantee true. */
double dps_choose_k_threshold(size_t k_max, double eps, double beta)
{
    return 4.0 / eps * log((double)(k_max + 1) / beta);
}

int dps_choose_k(const float *X, size_t n, size_t d, size_t k_max, double eps, double beta, dps_rng *rng,
                 size_t *k_out, double *noisy_sq)
{
    if (!X || !rng || !k_out || n == 0 || d < 2 || k_max == 0 || k_max >= d || !(eps > 0) || !isfinite(eps) ||
        !(beta > 0 && beta < 1))
        return DPS_EINVAL;
    size_t s = n < d ? n : d; /* the Gram we form: n x n (rows) or d x d (columns) */
    if (n <= d ? n > DPS_CHOOSE_K_MAX_DIM : d > DPS_COV_MAX_D)
        return DPS_ELIMIT;
    dps_blas_init_once();
    size_t kk = k_max + 1 < s ? k_max + 1 : s; /* eigenvalues beyond s are exactly 0 */
    size_t chunk = 256;
    float *owned = NULL;
    const float *Y = n <= d ? rows_clipped(X, n, d, &owned) : X;
    double *G = calloc(s * s, sizeof *G);
    double *buf = n <= d ? malloc(chunk * n * sizeof *buf) : NULL;
    double *w = malloc((k_max + 1) * sizeof *w);
    double *Z = malloc(s * kk * sizeof *Z);
    int rc = (!Y || !G || (n <= d && !buf) || !w || !Z) ? DPS_ENOMEM : DPS_OK;
    if (!rc && n <= d) { /* G = Y Y^T over blocks of columns, both triangles */
        for (size_t c0 = 0; c0 < d; c0 += chunk)
            la_gram_add(Y, n, d, c0, DPS_MIN(d, c0 + chunk), G, buf);
        for (size_t i = 0; i < s; i++)
            for (size_t j = i + 1; j < s; j++)
                G[j * s + i] = G[i * s + j];
    } else if (!rc) {    /* G = sum of the clipped x x^T (d x d) */
        rc = dps_cov_accumulate(X, n, d, G, NULL);
    }
    if (!rc)
        rc = la_sym_topk_d(G, s, kk, NULL, w, Z, NULL); /* G is full (both triangles) */
    if (!rc) {
        for (size_t i = 0; i <= k_max; i++) {
            double sq = i < kk && w[i] > 0 ? w[i] : 0.0;
            w[i] = sq + dps_rng_laplace(rng, 2.0 / eps);
        }
        double T = dps_choose_k_threshold(k_max, eps, beta);
        size_t k = 0;
        while (k < k_max && w[k] >= T)
            k++;
        *k_out = k;
        if (noisy_sq)
            memcpy(noisy_sq, w, (k_max + 1) * sizeof *w);
    }
    free(owned); free(G); free(buf); free(w); free(Z);
    return rc;
}
