/* bench_symtopk - top-k eigenpairs of a dense symmetric d x d matrix:
   la_sym_topk_d (restarted block Krylov, src/core/symtopk.c) against
   la_syevr_top (dsyevr on the whole matrix), 1 BLAS thread (the library's
   setting).

   Matrices: the kind the Gaussian covariance mechanism makes, A = L + E,
   L = sum_j l_j b_j b_j^T (k random orthonormal b_j), E symmetric with iid
   N(0, 1) entries (||E|| ~ 2 sqrt(d)):
     gap     l_j = 10 sqrt(d) (1 - j / (2k)): k outliers far above the bulk;
     edge    l_j = 1.5 sqrt(d) (1 - j / (4k)): outliers barely above the bulk
             edge (eigenvalue l + d / l ~ 2.2 sqrt(d) against 2 sqrt(d));
     wigner  L = 0: the top k of pure noise, the bulk edge (the hardest case:
             no gap at all).
   Per (d, case): time and restarts of la_sym_topk_d; time of la_syevr_top
   (for d <= --dense-max); the captured quadratic forms sum_j z_j^T A z_j of
   both (relative difference) and the sine between the two subspaces. */
#include "bench_common.h"
#include "linalg.h"

#include <math.h>

typedef struct {
    size_t d[8], nd, k, dense_max;
    uint64_t seed;
} opts;

static const char s_synopsis[] = "usage: bench-symtopk [--d 2000,7850,16384] [--k 10] [--dense-max 8000]\n";

static void s_matrix(b_rng *r, double *A, size_t d, size_t k, int which)
{
    for (size_t i = 0; i < d; i++)
        for (size_t j = i; j < d; j++)
            A[i * d + j] = A[j * d + i] = b_gauss(r);
    if (which == 2)
        return;
    float *B = b_alloc(k * d * sizeof *B);
    for (size_t i = 0; i < k * d; i++)
        B[i] = (float)b_gauss(r);
    la_orthonormalize_rows(B, k, d);
    for (size_t a = 0; a < k; a++) {
        double l = which == 0 ? 10.0 * sqrt((double)d) * (1.0 - a / (2.0 * k))
                              : 1.5 * sqrt((double)d) * (1.0 - a / (4.0 * k));
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++)
                A[i * d + j] += l * B[a * d + i] * B[a * d + j];
    }
    free(B);
}

/* sum_j z_j^T A z_j for the kk columns of Z (n x kk, column-major). */
static double s_captured(const double *A, size_t n, size_t kk, const double *Z)
{
    double *y = b_alloc(n * sizeof *y), s = 0;
    for (size_t j = 0; j < kk; j++) {
        cblas_dsymv(CblasColMajor, CblasUpper, (int)n, 1.0, A, (int)n, Z + j * n, 1, 0.0, y, 1);
        s += cblas_ddot((int)n, Z + j * n, 1, y, 1);
    }
    free(y);
    return s;
}

int main(int argc, char **argv)
{
    cli_set_program("bench-symtopk");
    opts o = {{2000, 7850, 16384}, 3, 10, 8000, 1};
    const char *dlist = NULL;
    int help = 0;
    cli_opt flags[] = {
        {"--d", CLI_OPT_STRING, &dlist, "D1,D2,..", "2000,7850,16384", "matrix sizes", 0},
        B_SIZE("--k", &o.k, "K", "10", "eigenpairs wanted"),
        B_SIZE("--dense-max", &o.dense_max, "D", "8000", "largest d for the dsyevr reference"),
        {"--seed", CLI_OPT_U64, &o.seed, "S", "1", "seed of the matrices", 0},
        B_HELP(&help),
    };
    int prc = b_parse(argc, argv, flags, sizeof flags / sizeof flags[0], &help, s_synopsis);
    if (prc >= 0)
        return prc;
    if (dlist && (o.nd = b_parse_list(dlist, o.d, 8)) == 0)
        CLI_USAGE("--d: a comma-separated list of sizes");
    if (!o.k)
        CLI_USAGE("--k > 0");
    dps_blas_set_threads(1);
    b_header("bench-symtopk: top-k eigenpairs, block Krylov (la_sym_topk_d) vs dsyevr (la_syevr_top)", 1);
    static const char *names[3] = {"gap", "edge", "wigner"};
    printf("%6s %-7s %4s %9s %8s %9s %12s %12s %10s\n", "d", "case", "k", "krylov_s", "restarts", "dsyevr_s",
           "captured", "exact", "rel_diff");
    for (size_t di = 0; di < o.nd; di++) {
        size_t d = o.d[di], k = o.k;
        double *A0 = b_alloc(d * d * sizeof *A0), *A = b_alloc(d * d * sizeof *A);
        double *Z = b_alloc(d * k * sizeof *Z), *Zr = b_alloc(d * k * sizeof *Zr), w[k], wr[k];
        for (int c = 0; c < 3; c++) {
            b_rng r;
            b_seed(&r, o.seed * 1000 + d * 3 + (size_t)c);
            s_matrix(&r, A0, d, k, c);
            memcpy(A, A0, d * d * sizeof *A);
            int conv = 0;
            double t0 = b_now();
            int rc = la_sym_topk_d(A, d, k, NULL, w, Z, &conv);
            double tk = b_now() - t0;
            double cap = rc ? NAN : s_captured(A0, d, k, Z), exact = NAN, td = NAN;
            if (d <= o.dense_max) {
                memcpy(A, A0, d * d * sizeof *A);
                t0 = b_now();
                if (la_syevr_top(A, d, k, wr, Zr) == DPS_OK) {
                    td = b_now() - t0;
                    exact = s_captured(A0, d, k, Zr);
                }
            }
            printf("%6zu %-7s %4zu %9.2f %8d %9.2f %12.6g %12.6g %10.2e%s\n", d, names[c], k, tk, conv, td, cap,
                   exact, (exact - cap) / fabs(exact), rc ? "  (error)" : "");
            fflush(stdout);
        }
        free(A0); free(A); free(Z); free(Zr);
    }
    b_footer();
    return 0;
}
