/* test_linalg - the BLAS/LAPACK module against LAPACK's full SVD / eigensolver. */
#include "check.h"
#include "dpsubspace.h"
#include "linalg.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Reference: top-k right singular vectors of X (m x d) by dgesvd in double. */
static void s_svd_ref(const float *X, size_t m, size_t d, size_t k, float *V, double *s)
{
    double *A = malloc(m * d * sizeof *A), *sv = malloc((m < d ? m : d) * sizeof *sv);
    double *vt = malloc(d * d * sizeof *vt), *sup = malloc(((m < d ? m : d)) * sizeof *sup);
    for (size_t i = 0; i < m * d; i++)
        A[i] = X[i];
    LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'N', 'A', (int)m, (int)d, A, (int)d, sv, NULL, 1, vt, (int)d, sup);
    for (size_t i = 0; i < k * d; i++)
        V[i] = (float)vt[i];
    for (size_t i = 0; i < k + 1 && i < (m < d ? m : d); i++)
        s[i] = sv[i];
    free(A); free(sv); free(vt); free(sup);
}

static double s_orth_err(const float *V, size_t k, size_t d)
{
    double worst = 0;
    for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j < k; j++) {
            double s = 0;
            for (size_t c = 0; c < d; c++)
                s += (double)V[i * d + c] * V[j * d + c];
            worst = fmax(worst, fabs(s - (i == j)));
        }
    return worst;
}

/* The largest ||a_i - Q^T Q a_i|| / ||a_i|| over the k rows a_i of A: how
   far A's rows are from span(Q) (Q: k x d orthonormal rows). */
static double s_span_residual(const float *A, const float *Q, size_t k, size_t d)
{
    double worst = 0, *r = malloc(d * sizeof *r);
    for (size_t i = 0; i < k; i++) {
        double n2 = 0, res = 0;
        for (size_t c = 0; c < d; c++) {
            r[c] = A[i * d + c];
            n2 += r[c] * r[c];
        }
        for (size_t a = 0; a < k; a++) {
            double p = 0;
            for (size_t c = 0; c < d; c++)
                p += Q[a * d + c] * r[c];
            for (size_t c = 0; c < d; c++)
                r[c] -= p * Q[a * d + c];
        }
        for (size_t c = 0; c < d; c++)
            res += r[c] * r[c];
        worst = fmax(worst, sqrt(res / n2));
    }
    free(r);
    return worst;
}

/* X = signal (rank r, singular values sig[]) + noise of size eps, m x d. */
static void s_make(dps_rng *rng, float *X, size_t m, size_t d, size_t r, const double *sig, double eps)
{
    float *U = malloc(m * r * sizeof *U), *W = malloc(r * d * sizeof *W);
    dps_rng_gaussian_fill_f(rng, 1.0, U, m * r);
    dps_rng_gaussian_fill_f(rng, 1.0, W, r * d);
    /* orthonormal columns of U (as rows of U^T) and rows of W */
    float *Ut = malloc(r * m * sizeof *Ut);
    for (size_t i = 0; i < m; i++)
        for (size_t a = 0; a < r; a++)
            Ut[a * m + i] = U[i * r + a];
    la_orthonormalize_rows(Ut, r, m);
    la_orthonormalize_rows(W, r, d);
    for (size_t i = 0; i < m; i++)
        for (size_t c = 0; c < d; c++) {
            double v = 0;
            for (size_t a = 0; a < r; a++)
                v += Ut[a * m + i] * sig[a] * W[a * d + c];
            X[i * d + c] = (float)(v + eps * dps_rng_gaussian(rng, 1.0));
        }
    free(U); free(W); free(Ut);
}

int main(void)
{
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 1);

    /* 1. Well-conditioned bucket: float Gram path, matches the SVD. */
    {
        size_t m = 8, d = 3000, k = 4;
        double sig[8] = {3, 2.5, 2, 1.5, 0.01, 0.01, 0.01, 0.01};
        float *X = malloc(m * d * sizeof *X), *V = malloc(k * d * sizeof *V), *R = malloc(k * d * sizeof *R);
        s_make(rng, X, m, d, 8, sig, 0);
        la_ws *ws = la_ws_new(m, d, k);
        double sv[5], sref[5];
        size_t rank = 0;
        int path = -1;
        CHECK(la_topk_rows(ws, X, m, d, k, V, sv, &rank, &path) == DPS_OK, "topk");
        s_svd_ref(X, m, d, k, R, sref);
        double fro = 0, sn = dps_subspace_sin(V, R, k, d, &fro);
        NOTE("float path: sin(angle) to SVD %.2e, orthonormality %.2e", sn, s_orth_err(V, k, d));
        CHECK(path == LA_PATH_FLOAT_GRAM, "float path taken");
        CHECK(rank == k, "rank %zu", rank);
        /* Float Gram: eigenvector error ~ m eps_f lambda_1 / gap = 8 * 6e-8 * 9 / 2.2 ~ 2e-6. */
        CHECK(sn < 1e-5, "float path subspace %g", sn);
        CHECK(s_orth_err(V, k, d) < 1e-5, "orthonormal");
        for (size_t i = 0; i < 5; i++)
            CHECK(fabs(sv[i] - sref[i]) < 1e-4 * sref[0], "singular value %zu: %g vs %g", i, sv[i], sref[i]);

        /* 2. lambda_k tiny: the double path, still matching the SVD. */
        double sig2[8] = {1, 1e-2, 3e-3, 1e-3, 1e-7, 1e-7, 1e-7, 1e-7};
        s_make(rng, X, m, d, 8, sig2, 0);
        CHECK(la_topk_rows(ws, X, m, d, k, V, sv, &rank, &path) == DPS_OK, "topk small");
        s_svd_ref(X, m, d, k, R, sref);
        sn = dps_subspace_sin(V, R, k, d, NULL);
        NOTE("double path (lambda_k/lambda_1 = 1e-6): sin to SVD %.2e", sn);
        CHECK(path == LA_PATH_DOUBLE_GRAM, "double path taken");
        /* Double Gram: error ~ eps_d lambda_1/gap + float rounding of V (~1e-7). */
        CHECK(sn < 1e-5, "double path subspace %g", sn);

        /* 3. Rank deficient: 2 distinct rows repeated, rest zero. */
        memset(X, 0, m * d * sizeof *X);
        for (size_t c = 0; c < d; c++) {
            X[0 * d + c] = X[3 * d + c] = (float)dps_rng_gaussian(rng, 1.0);
            X[1 * d + c] = (float)dps_rng_gaussian(rng, 1.0);
        }
        CHECK(la_topk_rows(ws, X, m, d, k, V, sv, &rank, &path) == DPS_OK, "topk deficient");
        CHECK(rank == 2, "rank 2 found: %zu", rank);
        la_complete_basis(V, rank, k, d, rng);
        CHECK(s_orth_err(V, k, d) < 1e-5, "completed basis orthonormal: %g", s_orth_err(V, k, d));
        memset(X, 0, m * d * sizeof *X);
        CHECK(la_topk_rows(ws, X, m, d, k, V, sv, &rank, &path) == DPS_OK && rank == 0, "all-zero bucket: rank 0");
        la_ws_free(&ws);
        free(X); free(V); free(R);
    }

    /* 4. Fewer columns than rows (d < m). */
    {
        size_t m = 12, d = 6, k = 3;
        float X[72], V[18], R[18];
        double sv[4], sref[6];
        dps_rng_gaussian_fill_f(rng, 1.0, X, m * d);
        la_ws *ws = la_ws_new(m, d, k);
        size_t rank;
        CHECK(la_topk_rows(ws, X, m, d, k, V, sv, &rank, NULL) == DPS_OK && rank == k, "d < m");
        s_svd_ref(X, m, d, k, R, sref);
        CHECK(dps_subspace_sin(V, R, k, d, NULL) < 1e-4, "d < m subspace");
        la_ws_free(&ws);
    }

    /* 5. Mixed-precision Gram and combine against naive double loops. */
    {
        size_t n = 7, d = 5000;
        float *A = malloc(n * d * sizeof *A);
        dps_rng_gaussian_fill_f(rng, 1.0, A, n * d);
        double *G = calloc(n * n, sizeof *G), *buf = malloc(n * LA_CHUNK * sizeof *buf);
        for (size_t c0 = 0; c0 < d; c0 += LA_CHUNK)
            la_gram_add(A, n, d, c0, c0 + LA_CHUNK < d ? c0 + LA_CHUNK : d, G, buf);
        double worst = 0;
        for (size_t i = 0; i < n; i++)
            for (size_t j = i; j < n; j++) {
                double s = 0;
                for (size_t c = 0; c < d; c++)
                    s += (double)A[i * d + c] * A[j * d + c];
                worst = fmax(worst, fabs(s - G[i * n + j]));
            }
        CHECK(worst < 1e-9, "gram_add exact in double: %g", worst);
        double B[7 * 3];
        for (int i = 0; i < 21; i++)
            B[i] = dps_rng_gaussian(rng, 1.0);
        double *C = malloc(3 * 100 * sizeof *C);
        la_combine_rows(B, n, 3, A, d, 200, 300, C, 100, buf);
        worst = 0;
        for (size_t a = 0; a < 3; a++)
            for (size_t c = 0; c < 100; c++) {
                double s = 0;
                for (size_t j = 0; j < n; j++)
                    s += B[j * 3 + a] * A[j * d + 200 + c];
                worst = fmax(worst, fabs(s - C[a * 100 + c]));
            }
        CHECK(worst < 1e-12, "combine_rows: %g", worst);
        free(A); free(G); free(buf); free(C);
    }

    /* 6. Symmetric top-k: dense path (n = 300) and block Krylov (n = 900)
       against dsyevr on the same matrix: Pi (rank k) + symmetric noise. */
    size_t sizes[2] = {300, 900};
    for (int si = 0; si < 2; si++) {
        size_t n = sizes[si], k = 4;
        float *S = malloc(n * n * sizeof *S), *V = malloc(k * n * sizeof *V), *R = malloc(k * n * sizeof *R);
        float *B = malloc(k * n * sizeof *B);
        dps_rng_gaussian_fill_f(rng, 1.0, B, k * n);
        la_orthonormalize_rows(B, k, n);
        for (size_t i = 0; i < n; i++)
            for (size_t j = i; j < n; j++) {
                double v = 0;
                for (size_t a = 0; a < k; a++)
                    v += (double)B[a * n + i] * B[a * n + j];
                v += dps_rng_gaussian(rng, 0.01);
                S[i * n + j] = S[j * n + i] = (float)v;
            }
        double w[4], wr[4];
        int conv = 0;
        CHECK(la_sym_topk(S, n, k, rng, V, w, &conv) == DPS_OK && conv, "sym_topk %zu converged", n);
        double *Ad = malloc(n * n * sizeof *Ad), *Z = malloc(n * k * sizeof *Z);
        for (size_t i = 0; i < n * n; i++)
            Ad[i] = S[i];
        la_syevr_top(Ad, n, k, wr, Z);
        for (size_t a = 0; a < k; a++)
            for (size_t j = 0; j < n; j++)
                R[a * n + j] = (float)Z[a * n + j];
        double sn = dps_subspace_sin(V, R, k, n, NULL);
        NOTE("sym_topk n=%zu: sin to dsyevr %.2e, top eigenvalue %.5f vs %.5f", n, sn, w[0], wr[0]);
        /* gap ~ 1 - 2*0.01*sqrt(n) >= 0.4; Krylov residual tol 1e-5 -> angle <~ 1e-5/0.4 */
        CHECK(sn < 1e-4, "sym_topk subspace %g", sn);
        CHECK(fabs(w[0] - wr[0]) < 1e-3, "top eigenvalue");
        CHECK(s_orth_err(V, k, n) < 1e-5, "sym_topk orthonormal");
        free(S); free(V); free(R); free(B); free(Ad); free(Z);
    }

    /* 7c. One Cholesky-QR pass when V V^T is within 0.1 of I (Gershgorin),
       two when farther.  Rows near orthonormal (perturbations of norm off
       <= 0.15: one pass) and rows A = M Q with M of condition kappa (10,
       1e3, 1e4: two passes): orthonormal to 2 sqrt(k) 2^-24 kappa(U) <= 4.2e-7
       either way (kappa(U) <= 1.11 for the pass that decides; accept 1e-6),
       the span kept (each input row's residual after projection on the
       output, relative to its norm, < 1e-5).  One pass alone leaves 6e-6 at
       kappa 1e3: a path that skipped the second pass there fails. */
    {
        size_t k = 10, d = 2000;
        const double off[] = {1e-6, 1e-4, 3e-3, 0.15, -10, -1e3, -1e4}; /* negative: -kappa */
        float *Q = malloc(k * d * sizeof *Q), *A = malloc(k * d * sizeof *A), *E = malloc(k * d * sizeof *E);
        for (size_t o = 0; o < sizeof off / sizeof off[0]; o++) {
            dps_rng_gaussian_fill_f(rng, 1.0, Q, k * d);
            la_orthonormalize_rows(Q, k, d);
            dps_rng_gaussian_fill_f(rng, fabs(off[o]) / sqrt((double)d), E, k * d); /* rows of norm ~off */
            if (off[o] > 0) {
                for (size_t i = 0; i < k * d; i++)
                    A[i] = Q[i] + E[i];
            } else { /* A = M Q, M = R1 diag(1 .. 1/kappa) R2 with R1, R2 random orthogonal */
                float R1[100], R2[100];
                double M[100];
                dps_rng_gaussian_fill_f(rng, 1.0, R1, k * k);
                dps_rng_gaussian_fill_f(rng, 1.0, R2, k * k);
                la_orthonormalize_rows(R1, k, k);
                la_orthonormalize_rows(R2, k, k);
                for (size_t i = 0; i < k; i++)
                    for (size_t j = 0; j < k; j++) {
                        M[i * k + j] = 0;
                        for (size_t a = 0; a < k; a++)
                            M[i * k + j] += R1[a * k + i] * pow(-off[o], -(double)a / (double)(k - 1)) * R2[a * k + j];
                    }
                for (size_t i = 0; i < k; i++)
                    for (size_t c = 0; c < d; c++) {
                        double v = 0;
                        for (size_t j = 0; j < k; j++)
                            v += M[i * k + j] * Q[j * d + c];
                        A[i * d + c] = (float)v;
                    }
            }
            memcpy(Q, A, k * d * sizeof *Q);
            CHECK(la_orthonormalize_rows(Q, k, d) == DPS_OK, "near orthonormal %g", off[o]);
            double orth = s_orth_err(Q, k, d), span = s_span_residual(A, Q, k, d);
            CHECK(orth < 1e-6 && span < 1e-5, "%g off orthonormal: after %.3g, span residual %.3g", off[o], orth,
                  span);
        }
        free(Q);
        free(A);
        free(E);
    }

    /* 7b. Nearly dependent rows: Cholesky QR cannot factor their Gram, the
       Householder fallback must still return orthonormal rows of the same span. */
    {
        size_t k = 3, d = 64;
        float A[192];
        dps_rng_gaussian_fill_f(rng, 1.0, A, k * d);
        for (size_t c = 0; c < d; c++)
            A[2 * d + c] = A[0 * d + c] + 1e-7f * (float)dps_rng_gaussian(rng, 1.0);
        CHECK(la_orthonormalize_rows(A, k, d) == DPS_OK, "dependent rows");
        CHECK(s_orth_err(A, k, d) < 1e-5, "fallback orthonormal: %g", s_orth_err(A, k, d));
    }

    /* 7. Orthonormalisation keeps the span. */
    {
        size_t k = 3, d = 50;
        float A[150], Q[150];
        dps_rng_gaussian_fill_f(rng, 1.0, A, k * d);
        memcpy(Q, A, sizeof A);
        CHECK(la_orthonormalize_rows(Q, k, d) == DPS_OK, "qr");
        CHECK(s_orth_err(Q, k, d) < 1e-6, "orthonormal");
        /* each row of A lies in span(Q): relative residual after projection ~ 0 */
        double worst = s_span_residual(A, Q, k, d);
        CHECK(worst < 1e-5, "span kept: %g", worst);
    }
    dps_rng_destroy(&rng);
    return check_summary();
}
