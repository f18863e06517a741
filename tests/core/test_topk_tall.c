/* test_topk_tall - la_topk_rows / dps_topk_basis with more rows than columns
   (m > d): through the d x d Gram X^T X, never an m x m one (issue 11 item 5).

   1. Known answer.  X = G diag(sig) B + N with G (m x k) orthonormal columns,
      B (k x d) orthonormal rows and N iid N(0, eps^2): the signal's top-k
      right singular subspace is span(B), its singular values sig.
      ||N||_2 <= eps (sqrt m + sqrt d + t) with probability >= 1 - e^(-t^2/2)
      (Gordon / Davidson-Szarek; t = 6 here).  Wedin: the top-k right
      singular subspace V of X has sin Theta(V, B) <= ||N|| / (sig_k - ||N||),
      and (Weyl) every singular value of X is within ||N|| of the signal's
      (sig_i for i < k, 0 after).
   2. Against LAPACK's dgesvd in double: the float-Gram path to 1e-4 in
      subspace sine and 1e-4 sig_1 in singular values (float Gram rounding
      ~ sqrt(m) eps_f sig_1^2 per entry, over a gap of 0.3 sig_1^2); the
      double-Gram path (lambda_k < 1e-3 lambda_1) to 1e-5.
   3. Memory: la_ws_bytes depends on min(m, d) only, and in a child process
      whose address space is capped at 512 MB above what it already maps,
      dps_topk_basis on 20 000 x 64 rows succeeds (an m x m float Gram alone
      would need 1.6 GB).  The cap is skipped under AddressSanitizer, whose
      shadow mappings do not fit an address-space limit. */
#include "check.h"
#include "dpsubspace.h"
#include "linalg.h"

#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define S_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define S_ASAN 1
#endif
#endif
#ifndef S_ASAN
#define S_ASAN 0
#endif

/* Top-k right singular vectors and k+1 singular values of X by dgesvd. */
static void s_svd_ref(const float *X, size_t m, size_t d, size_t k, float *V, double *s)
{
    size_t mn = m < d ? m : d;
    double *A = malloc(m * d * sizeof *A), *sv = malloc(mn * sizeof *sv);
    double *vt = malloc(d * d * sizeof *vt), *sup = malloc(mn * sizeof *sup);
    for (size_t i = 0; i < m * d; i++)
        A[i] = X[i];
    LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'N', 'A', (int)m, (int)d, A, (int)d, sv, NULL, 1, vt, (int)d, sup);
    for (size_t i = 0; i < k * d; i++)
        V[i] = (float)vt[i];
    for (size_t i = 0; i <= k && i < mn; i++)
        s[i] = sv[i];
    free(A); free(sv); free(vt); free(sup);
}

/* X (m x d) = G diag(sig) B + N(0, eps^2); B (k x d) returned. */
static void s_make(dps_rng *rng, float *X, float *B, size_t m, size_t d, size_t k, const double *sig, double eps)
{
    float *Gt = malloc(k * m * sizeof *Gt); /* G^T: k orthonormal rows of length m */
    dps_rng_gaussian_fill_f(rng, 1.0, Gt, k * m);
    la_orthonormalize_rows(Gt, k, m);
    dps_rng_gaussian_fill_f(rng, 1.0, B, k * d);
    la_orthonormalize_rows(B, k, d);
    for (size_t i = 0; i < m; i++)
        for (size_t c = 0; c < d; c++) {
            double v = 0;
            for (size_t a = 0; a < k; a++)
                v += (double)Gt[a * m + i] * sig[a] * B[a * d + c];
            X[i * d + c] = (float)(v + dps_rng_gaussian(rng, eps));
        }
    free(Gt);
}

static int s_capped_child(size_t m, size_t d, size_t k)
{
    float *X = malloc(m * d * sizeof *X), *V = malloc(k * d * sizeof *V);
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 5);
    dps_rng_gaussian_fill_f(rng, 1.0, X, m * d);
    dps_topk_basis(X, 8, d, k, V, NULL); /* BLAS set up before the cap */
    FILE *f = fopen("/proc/self/status", "r");
    size_t vm_kb = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %zu kB", &vm_kb) == 1)
            break;
    if (f)
        fclose(f);
    if (!vm_kb)
        return 3;
    struct rlimit rl = {.rlim_cur = (vm_kb << 10) + ((size_t)512 << 20), .rlim_max = RLIM_INFINITY};
    rl.rlim_max = rl.rlim_cur;
    if (setrlimit(RLIMIT_AS, &rl) != 0)
        return 4;
    double sv[4];
    int rc = dps_topk_basis(X, m, d, k, V, sv);
    return rc == DPS_OK ? 0 : 2;
}

int main(void)
{
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 3);

    /* 1-2a. Float Gram path, d = 600 > 512: the Krylov eigensolver inside. */
    {
        size_t m = 2000, d = 600, k = 5;
        double sig[5] = {40, 35, 30, 25, 20}, eps = 0.01;
        float *X = malloc(m * d * sizeof *X), *B = malloc(k * d * sizeof *B);
        float *V = malloc(k * d * sizeof *V), *R = malloc(k * d * sizeof *R);
        s_make(rng, X, B, m, d, k, sig, eps);
        la_ws *ws = la_ws_new(m, d, k);
        double sv[6], sref[6];
        size_t rank = 0;
        int path = -1;
        CHECK(ws && la_topk_rows(ws, X, m, d, k, V, sv, &rank, &path) == DPS_OK, "tall topk");
        CHECK(path == LA_PATH_FLOAT_GRAM && rank == k, "float path, rank %zu", rank);
        double nn = eps * (sqrt((double)m) + sqrt((double)d) + 6.0);
        double wedin = nn / (sig[k - 1] - nn), sn = dps_subspace_sin(V, B, k, d, NULL);
        NOTE("known basis: sin %.3e <= Wedin %.3e (||N|| <= %.3f)", sn, wedin, nn);
        CHECK(sn <= wedin, "Wedin: %g > %g", sn, wedin);
        for (size_t i = 0; i <= k; i++)
            CHECK(fabs(sv[i] - (i < k ? sig[i] : 0.0)) <= nn, "Weyl: sv %zu = %g", i, sv[i]);
        s_svd_ref(X, m, d, k, R, sref);
        double sr = dps_subspace_sin(V, R, k, d, NULL);
        NOTE("float Gram path: sin to dgesvd %.2e", sr);
        CHECK(sr < 1e-4, "vs dgesvd: %g", sr);
        for (size_t i = 0; i <= k; i++)
            CHECK(fabs(sv[i] - sref[i]) < 1e-4 * sref[0], "sv %zu: %g vs %g", i, sv[i], sref[i]);

        /* 2b. lambda_k / lambda_1 = 4e-4: the double Gram (row blocks). */
        double sig2[5] = {1, 0.3, 0.1, 0.04, 0.02};
        s_make(rng, X, B, m, d, k, sig2, 1e-6);
        CHECK(la_topk_rows(ws, X, m, d, k, V, sv, &rank, &path) == DPS_OK, "tall topk, small");
        s_svd_ref(X, m, d, k, R, sref);
        sr = dps_subspace_sin(V, R, k, d, NULL);
        NOTE("double Gram path: sin to dgesvd %.2e", sr);
        CHECK(path == LA_PATH_DOUBLE_GRAM, "double path taken");
        CHECK(sr < 1e-5, "double path vs dgesvd: %g", sr);
        for (size_t i = 0; i <= k; i++)
            CHECK(fabs(sv[i] - sref[i]) < 1e-6 * sref[0], "double sv %zu: %g vs %g", i, sv[i], sref[i]);

        /* rank deficient: two distinct rows repeated */
        memset(X, 0, m * d * sizeof *X);
        for (size_t i = 0; i < m; i++)
            for (size_t c = 0; c < d; c++)
                X[i * d + c] = (float)((i % 2 ? 1.0 : -0.5) * (c % (i % 2 ? 3 : 5) == 0));
        CHECK(la_topk_rows(ws, X, m, d, k, V, sv, &rank, &path) == DPS_OK && rank == 2, "rank 2: %zu", rank);
        la_ws_free(&ws);
        free(X); free(B); free(V); free(R);
    }

    /* 3. Memory: the workspace is min(m, d) square. */
    {
        size_t big = la_ws_bytes(60000, 7850, 10), square = la_ws_bytes(7850, 7850, 10);
        NOTE("la_ws_bytes(60000, 7850, 10) = %.3f GB (an m x m float + double Gram: %.1f GB)", big / 1e9,
             60000.0 * 60000.0 * 12 / 1e9);
        CHECK(big == square, "depends on min(m, d): %zu vs %zu", big, square);
        CHECK(big < (size_t)1000 << 20, "under 1000 MB: %zu", big);
        CHECK(la_ws_bytes(8, 3000, 4) == la_ws_bytes(8, 8, 4), "wide: min(m, d) = m");
        if (S_ASAN) {
            NOTE("address-space cap skipped under AddressSanitizer");
        } else {
            fflush(stdout);
            fflush(stderr);
            pid_t pid = fork();
            if (pid == 0)
                _exit(s_capped_child(20000, 64, 3));
            int status = 0;
            CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork");
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "20000 x 64 under a 512 MB address-space cap: %d",
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        }
    }
    dps_rng_destroy(&rng);
    return check_summary();
}
