/* rgrad_gradient.c - one private iteration of DP-RGrad (rgrad.c has the
   whole method, its partition and its accounting; DESIGN 3.7): the private
   gradient in the tangent space of the rank-r manifold, and the small
   algebra of that space the initialization shares.

   GUARANTEE: rho_iter-zCDP per iteration under replacing one observation of
   its batch, given the earlier releases, for every input (the gradients are
   clipped).

   ARGUMENT.  At L_l = U diag(s) V^T, per observation
   g_i = clip_F(P_T((<X_i, L_l> - y_i) X_i), C), P_T(G) = U U^T G + G V V^T -
   U U^T G V V^T (the tangent space of the rank-r manifold at L_l, of
   dimension r(d1 + d2 - r)); G_l = (1/nb) sum g_i + P_T(Z), Z iid
   N(0, sigma^2) on d1 x d2, which is isotropic N(0, sigma^2) noise on the
   tangent space (P_T is an orthogonal projection, and an isotropic Gaussian
   projected on a subspace is isotropic there).  Given L_l (a function of
   earlier releases), the tangent space is fixed and public, the mean lies
   in it, and one replaced observation moves it by at most 2C/nb in
   Frobenius norm; in orthonormal coordinates of T_l the release is the
   Gaussian mechanism with sensitivity 2C/nb and sd sigma =
   (2C/nb)/sqrt(2 rho_iter): rho_iter-zCDP.  Then L_{l+1} = SVD_r(L_l -
   eta G_l) (post-processing). */
#include "internal.h"
#include "rgrad_internal.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ small algebra */
double rgrad_clip_factor(double norm, double C)
{
    if (!isfinite(norm))
        return 0.0;
    return norm > C ? C / norm : 1.0;
}

void rgrad_factors(const float *x, size_t d1, size_t d2, size_t r, const double *U, const double *Vt, double *A,
                   double *B, double *C)
{
    memset(A, 0, r * d2 * sizeof *A);
    for (size_t a = 0; a < d1; a++) {
        const float *row = x + a * d2;
        for (size_t s = 0; s < r; s++) {
            double u = U[a * r + s], dot = 0;
            double *As = A + s * d2;
            const double *vs = Vt + s * d2;
            for (size_t b = 0; b < d2; b++) {
                As[b] += u * row[b];
                dot += row[b] * vs[b];
            }
            B[a * r + s] = dot;
        }
    }
    for (size_t s = 0; s < r; s++)
        for (size_t t = 0; t < r; t++) {
            double v = 0;
            for (size_t a = 0; a < d1; a++)
                v += U[a * r + s] * B[a * r + t];
            C[s * r + t] = v;
        }
}

double rgrad_norm2(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i] * x[i];
    return s;
}

/* out = U SA + (SB - U SC) V^T  (d1 x d2), the tangent vector with factors
   SA = U^T G (r x d2), SB = G V (d1 x r), SC = U^T G V (r x r).  W: d1 x r. */
static void s_tangent_from_factors(const double *U, const double *V, size_t d1, size_t d2, size_t r, const double *SA,
                                   const double *SB, const double *SC, double *W, double *out)
{
    for (size_t a = 0; a < d1; a++)
        for (size_t s = 0; s < r; s++) {
            double v = SB[a * r + s];
            for (size_t t = 0; t < r; t++)
                v -= U[a * r + t] * SC[t * r + s];
            W[a * r + s] = v;
        }
    for (size_t a = 0; a < d1; a++)
        for (size_t b = 0; b < d2; b++) {
            double v = 0;
            for (size_t s = 0; s < r; s++)
                v += U[a * r + s] * SA[s * d2 + b] + W[a * r + s] * V[b * r + s];
            out[a * d2 + b] = v;
        }
}

int dps_rgrad_tangent_project(const double *U, const double *V, size_t d1, size_t d2, size_t r, const double *G,
                              double *out)
{
    if (!U || !V || !G || !out || r == 0 || d1 == 0 || d2 == 0)
        return DPS_EINVAL;
    double *SA = calloc(r * d2, sizeof *SA), *SB = calloc(d1 * r, sizeof *SB), *SC = calloc(r * r, sizeof *SC);
    double *W = calloc(d1 * r, sizeof *W);
    if (!SA || !SB || !SC || !W) {
        free(SA); free(SB); free(SC); free(W);
        return DPS_ENOMEM;
    }
    for (size_t a = 0; a < d1; a++)
        for (size_t b = 0; b < d2; b++) {
            double g = G[a * d2 + b];
            for (size_t s = 0; s < r; s++) {
                SA[s * d2 + b] += U[a * r + s] * g;
                SB[a * r + s] += g * V[b * r + s];
            }
        }
    for (size_t s = 0; s < r; s++)
        for (size_t t = 0; t < r; t++)
            for (size_t a = 0; a < d1; a++)
                SC[s * r + t] += U[a * r + s] * SB[a * r + t];
    s_tangent_from_factors(U, V, d1, d2, r, SA, SB, SC, W, out); /* reads G only above: aliasing is fine */
    free(SA); free(SB); free(SC); free(W);
    return DPS_OK;
}

/* ---------------------------------------------------- the private gradient */
int rgrad_gradient(const float *X, const float *y, const size_t *idx, size_t n, size_t d1, size_t d2, size_t r,
                   const double *U, const double *sv, const double *V, double clip, double sigma, dps_rng *rng,
                   double *G, uint64_t *n_clipped)
{
    size_t D = d1 * d2;
    double *Vt = malloc(r * d2 * sizeof *Vt), *A = malloc(r * d2 * sizeof *A), *B = malloc(d1 * r * sizeof *B);
    double *C = malloc(r * r * sizeof *C), *SA = calloc(r * d2, sizeof *SA), *SB = calloc(d1 * r, sizeof *SB);
    double *SC = calloc(r * r, sizeof *SC), *W = malloc(d1 * r * sizeof *W), *Z = malloc(D * sizeof *Z);
    int rc = (Vt && A && B && C && SA && SB && SC && W && Z) ? DPS_OK : DPS_ENOMEM;
    uint64_t clipped = 0;
    if (!rc) {
        for (size_t b = 0; b < d2; b++)
            for (size_t s = 0; s < r; s++)
                Vt[s * d2 + b] = V[b * r + s];
        for (size_t j = 0; j < n; j++) {
            size_t i = idx ? idx[j] : j;
            rgrad_factors(X + i * D, d1, d2, r, U, Vt, A, B, C);
            double pred = 0;
            for (size_t s = 0; s < r; s++)
                pred += sv[s] * C[s * r + s]; /* <X, U diag(s) V^T> = sum_s s_s (U^T X V)_ss */
            double res = pred - (double)y[i];
            /* ||P_T(X)||_F^2 = ||U^T X||^2 + ||X V||^2 - ||U^T X V||^2 */
            double t2 = rgrad_norm2(A, r * d2) + rgrad_norm2(B, d1 * r) - rgrad_norm2(C, r * r);
            double norm = fabs(res) * sqrt(t2 > 0 ? t2 : 0);
            double f = rgrad_clip_factor(norm, clip);
            if (f < 1)
                clipped++;
            if (f == 0 || !isfinite(res))
                continue;
            double w = res * f;
            for (size_t c = 0; c < r * d2; c++)
                SA[c] += w * A[c];
            for (size_t c = 0; c < d1 * r; c++)
                SB[c] += w * B[c];
            for (size_t c = 0; c < r * r; c++)
                SC[c] += w * C[c];
        }
        double inv = 1.0 / (double)n;
        for (size_t c = 0; c < r * d2; c++)
            SA[c] *= inv;
        for (size_t c = 0; c < d1 * r; c++)
            SB[c] *= inv;
        for (size_t c = 0; c < r * r; c++)
            SC[c] *= inv;
        s_tangent_from_factors(U, V, d1, d2, r, SA, SB, SC, W, G);
        if (sigma > 0) {
            dps_rng_gaussian_fill(rng, sigma, Z, D);
            rc = dps_rgrad_tangent_project(U, V, d1, d2, r, Z, Z);
            for (size_t c = 0; !rc && c < D; c++)
                G[c] += Z[c];
        }
    }
    if (n_clipped)
        *n_clipped = clipped;
    free(Vt); free(A); free(B); free(C); free(SA); free(SB); free(SC); free(W); free(Z);
    return rc;
}

int dps_rgrad_gradient(const float *X, const float *y, size_t n, size_t d1, size_t d2, size_t r, const double *U,
                       const double *s, const double *V, double clip, double sigma, dps_rng *rng, double *G,
                       uint64_t *n_clipped)
{
    if (!X || !y || !U || !s || !V || !G || n == 0 || r == 0 || r > d1 || r > d2 || !rgrad_positive(clip) ||
        !(sigma >= 0) || !isfinite(sigma) || (sigma > 0 && !rng))
        return DPS_EINVAL;
    return rgrad_gradient(X, y, NULL, n, d1, d2, r, U, s, V, clip, sigma, rng, G, n_clipped);
}
