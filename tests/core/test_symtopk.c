/* test_symtopk - la_sym_topk_d / la_sym_topk (restarted block Krylov,
   src/core/symtopk.c) against la_syevr_top (dense dsyevr) on the matrices
   the Gaussian mechanisms make: low rank + Wigner noise, with a clear gap,
   with outliers barely above the bulk edge, and pure noise (no gap).

   What is checked and why the bounds hold:
   - Captured quadratic form F(Z) = sum_j z_j^T A z_j of the k vectors.  The
     Ritz vectors are orthonormal, so F(Z) <= sum of the top k eigenvalues
     (Ky Fan); the solver stops when every residual ||A z_j - w_j z_j|| <=
     1e-6 ||A||_2, and then each w_j is within that residual of an
     eigenvalue.  With no eigenvalue missed the sums differ by at most
     k 1e-6 ||A||_2; the test allows k 1e-5 ||A||_2 (rounding: n eps_d ||A||
     per product, 1e-12 relative here).  A missed eigenvector costs at least
     the spacing of the top eigenvalues (>= 1e-2 of ||A|| at these sizes:
     Wigner edge spacing ~ d^(-2/3) ||A||), so the test can fail.
   - The eigenvalues one by one, within the same tolerance.
   - The gap case: sin Theta to dsyevr's subspace <= ||R||_F / gap (Davis-Kahan,
     residual form) <= sqrt(k) 1e-6 ||A|| / (lambda_k - lambda_(k+1)).
   - The fallback: with the restarts capped at 1 the pure-noise case cannot
     converge; the answer is then dsyevr's (to rounding), converged = 0. */
#include "check.h"
#include "dpsubspace.h"
#include "linalg.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A = sum_j l_j b_j b_j^T + E, E symmetric iid N(0, 1); l_j = scale sqrt(n)
   (1 - j/(2k)), scale 0 for pure noise. */
static void s_matrix(dps_rng *rng, double *A, size_t n, size_t k, double scale)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = i; j < n; j++)
            A[i * n + j] = A[j * n + i] = dps_rng_gaussian(rng, 1.0);
    if (scale == 0)
        return;
    float *B = malloc(k * n * sizeof *B);
    dps_rng_gaussian_fill_f(rng, 1.0, B, k * n);
    la_orthonormalize_rows(B, k, n);
    for (size_t a = 0; a < k; a++) {
        double l = scale * sqrt((double)n) * (1.0 - a / (2.0 * k));
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++)
                A[i * n + j] += l * B[a * n + i] * B[a * n + j];
    }
    free(B);
}

static double s_captured(const double *A, size_t n, size_t k, const double *Z)
{
    double *y = malloc(n * sizeof *y), s = 0;
    for (size_t j = 0; j < k; j++) {
        cblas_dgemv(CblasColMajor, CblasNoTrans, (int)n, (int)n, 1.0, A, (int)n, Z + j * n, 1, 0.0, y, 1);
        s += cblas_ddot((int)n, Z + j * n, 1, y, 1);
    }
    free(y);
    return s;
}

static double s_orth_err(const double *Z, size_t n, size_t k)
{
    double worst = 0;
    for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j < k; j++)
            worst = fmax(worst, fabs(cblas_ddot((int)n, Z + i * n, 1, Z + j * n, 1) - (i == j)));
    return worst;
}

/* sin of the largest principal angle between span(Z1) and span(Z2) (n x k
   column-major, orthonormal), through the float routine of the library. */
static double s_sin(const double *Z1, const double *Z2, size_t n, size_t k)
{
    float *a = malloc(k * n * sizeof *a), *b = malloc(k * n * sizeof *b);
    for (size_t i = 0; i < k * n; i++) {
        a[i] = (float)Z1[i];
        b[i] = (float)Z2[i];
    }
    double s = dps_subspace_sin(a, b, k, n, NULL);
    free(a); free(b);
    return s;
}

int main(void)
{
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 11);
    const size_t n = 900, k = 6;
    double *A0 = malloc(n * n * sizeof *A0), *A = malloc(n * n * sizeof *A);
    double *Z = malloc(n * (k + 1) * sizeof *Z), *Zr = malloc(n * (k + 1) * sizeof *Zr);
    double w[7], wr[7];
    static const char *names[3] = {"gap", "edge", "wigner"};
    const double scales[3] = {10.0, 1.5, 0.0};

    for (int c = 0; c < 3; c++) {
        s_matrix(rng, A0, n, k, scales[c]);
        memcpy(A, A0, n * n * sizeof *A);
        la_syevr_top(A, n, k + 1, wr, Zr);
        double norm = fabs(wr[0]); /* ||A||_2 = max(lambda_1, -lambda_n) */
        double wneg[1]; /* -lambda_n: the top eigenvalue of -A */
        for (size_t i = 0; i < n * n; i++)
            A[i] = -A0[i];
        la_syevr_top(A, n, 1, wneg, Z);
        norm = fmax(norm, wneg[0]);
        memcpy(A, A0, n * n * sizeof *A);
        int conv = -1;
        CHECK(la_sym_topk_d(A, n, k, rng, w, Z, &conv) == DPS_OK, "%s: la_sym_topk_d", names[c]);
        double cap = s_captured(A0, n, k, Z), exact = s_captured(A0, n, k, Zr);
        double tol = (double)k * 1e-5 * norm;
        NOTE("%s: n %zu k %zu restarts %d captured %.9g exact %.9g (diff %.2e, tol %.2e), w_k %.4f vs %.4f", names[c],
             n, k, conv, cap, exact, exact - cap, tol, w[k - 1], wr[k - 1]);
        CHECK(conv > 0, "%s: the Krylov iteration converged (restarts %d)", names[c], conv);
        CHECK(fabs(exact - cap) <= tol, "%s: captured form %g vs %g", names[c], cap, exact);
        for (size_t i = 0; i < k; i++)
            CHECK(fabs(w[i] - wr[i]) <= tol, "%s: eigenvalue %zu: %g vs %g", names[c], i, w[i], wr[i]);
        CHECK(s_orth_err(Z, n, k) < 1e-12, "%s: orthonormal %g", names[c], s_orth_err(Z, n, k));
        if (c == 0) {
            double gap = wr[k - 1] - wr[k], bound = sqrt((double)k) * 1e-6 * norm / gap;
            double sn = s_sin(Z, Zr, n, k);
            NOTE("gap: sin to dsyevr %.2e <= %.2e (Davis-Kahan, residual form) + float rounding 1e-6", sn, bound);
            CHECK(sn <= bound + 1e-6, "gap: sin %g", sn);
        }
        /* The float entry point on the same matrix (tolerance 20 sqrt(n)
           eps_f = 3.6e-5 here: 36 times the double one). */
        if (c == 1) {
            float *S = malloc(n * n * sizeof *S), *V = malloc(k * n * sizeof *V);
            double *Zf = malloc(n * k * sizeof *Zf), wf[6];
            for (size_t i = 0; i < n * n; i++)
                S[i] = (float)A0[i];
            CHECK(la_sym_topk(S, n, k, rng, V, wf, &conv) == DPS_OK && conv > 0, "float: converged");
            for (size_t j = 0; j < k; j++)
                for (size_t i = 0; i < n; i++)
                    Zf[j * n + i] = V[j * n + i];
            double capf = s_captured(A0, n, k, Zf), tolf = (double)k * 36e-5 * norm;
            NOTE("float entry point: captured %.9g (diff %.2e, tol %.2e)", capf, exact - capf, tolf);
            CHECK(fabs(exact - capf) <= tolf, "float: captured %g vs %g", capf, exact);
            free(S); free(V); free(Zf);
        }
    }

    /* The fallback: one restart cannot converge on pure noise. */
    {
        s_matrix(rng, A0, n, k, 0.0);
        memcpy(A, A0, n * n * sizeof *A);
        la_syevr_top(A, n, k, wr, Zr);
        memcpy(A, A0, n * n * sizeof *A);
        la_sym_topk_restart_cap = 1;
        int conv = -1;
        CHECK(la_sym_topk_d(A, n, k, NULL, w, Z, &conv) == DPS_OK, "fallback: ok");
        la_sym_topk_restart_cap = 0;
        CHECK(conv == 0, "fallback taken: %d", conv);
        double worst = 0;
        for (size_t i = 0; i < k; i++)
            worst = fmax(worst, fabs(w[i] - wr[i]));
        CHECK(worst < 1e-9, "fallback = dsyevr: %g", worst);
    }

    /* Small matrices take the dense path; bad arguments are refused. */
    {
        size_t m = 40;
        s_matrix(rng, A0, m, 3, 2.0);
        memcpy(A, A0, m * m * sizeof *A);
        int conv = -1;
        CHECK(la_sym_topk_d(A, m, 3, NULL, w, Z, &conv) == DPS_OK && conv == 1, "dense path");
        CHECK(la_sym_topk_d(A, m, 0, NULL, w, Z, NULL) == DPS_EINVAL, "kk = 0");
        CHECK(la_sym_topk_d(A, m, m + 1, NULL, w, Z, NULL) == DPS_EINVAL, "kk > n");
    }
    free(A0); free(A); free(Z); free(Zr);
    dps_rng_destroy(&rng);
    return check_summary();
}
