/* bench_gradmech - the gradient mechanisms' work as rows arrive, against the
   BLAS peak measured in the same run (issue 13 item 4):
     cov    second_moment_add (src/mechanisms/second_moment.c): C += x x^T in
            double, the Gaussian and covariance mechanisms' accumulation (why
            not float: second_moment.h);
            nominal flops n d (d + 1) (the upper triangle's multiply-adds);
     power  power_add (src/mechanisms/power_iteration.c): Y += x (x^T X), the
            noisy power iteration's block step, every product in double
            (dgemm; why not float: power_iteration.c); nominal flops 4 n b d.
   Rows are unit vectors fed one at a time, as dps_estimator_push feeds them,
   from a pool of --pool-mb (cycled, so large d does not need n d floats).
   References, same run, 1 BLAS thread (the library's setting for these
   mechanisms: they run on the pushing thread):
     ssyrk / dsyrk peak: one syrk of 2048 rows into a d x d C (best of 3);
     dsyrk at the accumulator's block rows (what its call shape allows);
     sgemm and dgemm peak: 2048^3 (b_sgemm_peak, b_dgemm_peak);
     read bandwidth (b_read_bw): the power step reads its rows twice and
     updates Yd in double per flush, so at large d it is bound by memory as
     well as by dgemm: the table also gives the least bytes it must move
     per second and that as a share of the read bandwidth.
   Each figure is min / median / max of --runs runs. */
#include "bench_common.h"
#include "internal.h"
#include "power_iteration.h"
#include "second_moment.h"

#include <math.h>

static const char s_synopsis[] =
    "usage: bench-gradmech [--cov-d 1000,2000,4000] [--power-d 1e4,1e5,1e6] [--n 4096] [--k 10] [--b 20]\n";

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* min, median, max of v[0..n) (sorted in place) */
static void s_mmm(double *v, size_t n, double out[3])
{
    qsort(v, n, sizeof *v, s_cmp);
    out[0] = v[0];
    out[1] = v[n / 2];
    out[2] = v[n - 1];
}

/* a pool of unit rows, at most pool_bytes (and at least one row) */
static float *s_pool(size_t d, size_t pool_bytes, size_t *rows)
{
    size_t r = pool_bytes / (d * sizeof(float));
    if (r < 1)
        r = 1;
    float *x = b_alloc(r * d * sizeof *x);
    b_rng g;
    b_seed(&g, 7 + d);
    for (size_t i = 0; i < r; i++) {
        double s = 0;
        for (size_t c = 0; c < d; c++) {
            x[i * d + c] = (float)b_gauss(&g);
            s += (double)x[i * d + c] * x[i * d + c];
        }
        float inv = (float)(1.0 / sqrt(s));
        for (size_t c = 0; c < d; c++)
            x[i * d + c] *= inv;
    }
    *rows = r;
    return x;
}

/* best GFLOP/s of a syrk of K rows into a d x d C (upper), float or double */
static double s_syrk_gflops(size_t d, size_t K, int dbl)
{
    size_t es = dbl ? sizeof(double) : sizeof(float);
    void *A = b_alloc(K * d * es), *C = b_alloc(d * d * es);
    b_rng g;
    b_seed(&g, 99);
    if (dbl) {
        b_fill_uniform_d(&g, A, K * d);
        memset(C, 0, d * d * es);
    } else {
        b_fill_uniform_f(&g, A, K * d);
        memset(C, 0, d * d * es);
    }
    double best = 1e30;
    for (int rep = 0; rep < 4; rep++) { /* the first warms the pages */
        double t0 = b_now();
        if (dbl)
            cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)K, 1.0, A, (int)d, 1.0, C, (int)d);
        else
            cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)K, 1.0f, A, (int)d, 1.0f, C, (int)d);
        double dt = b_now() - t0;
        if (rep && dt < best)
            best = dt;
    }
    free(A);
    free(C);
    return (double)K * d * (d + 1) / best / 1e9;
}

/* seconds to add n rows (cycled from the pool) into a fresh accumulator,
   after one untimed pass that touches its pages */
static double s_time_cov(size_t d, const float *pool, size_t prows, size_t n)
{
    second_moment s;
    if (second_moment_init(&s, d, NULL) != DPS_OK)
        return NAN;
    for (size_t i = 0; i < DPS_MIN(n, (size_t)256); i++)
        second_moment_add(&s, pool + (i % prows) * d);
    second_moment_finish(&s);
    second_moment_reset(&s);
    double t0 = b_now();
    for (size_t i = 0; i < n; i++)
        second_moment_add(&s, pool + (i % prows) * d);
    second_moment_finish(&s); /* adds the last partial block (and mirrors: O(d^2), once an epoch) */
    double dt = b_now() - t0;
    second_moment_free(&s);
    return dt;
}

static double s_time_power(size_t d, size_t k, size_t b, const float *pool, size_t prows, size_t n)
{
    power_iteration p;
    dps_rng *pub = NULL;
    if (dps_rng_new_seeded(&pub, 5) != DPS_OK || power_init(&p, d, k, b) != DPS_OK)
        return NAN;
    if (power_start(&p, NULL, pub) != DPS_OK)
        return NAN;
    for (size_t i = 0; i < 2 * p.nb; i++) /* touch B, P, Y, Yd */
        power_add(&p, pool + (i % prows) * d);
    double t0 = b_now();
    for (size_t i = 0; i < n; i++)
        power_add(&p, pool + (i % prows) * d);
    double dt = b_now() - t0;
    power_free(&p);
    dps_rng_destroy(&pub);
    return dt;
}

int main(int argc, char **argv)
{
    cli_set_program("bench-gradmech");
    size_t cov_v[8] = {1000, 2000, 4000}, pow_v[8] = {10000, 100000, 1000000};
    b_size_list cov_d = {cov_v, 3, 8}, pow_d = {pow_v, 3, 8};
    size_t n = 4096, k = 10, b = 20, pool_mb = 256;
    int runs = 3, help = 0;
    cli_opt flags[] = {
        B_SIZES("--cov-d", &cov_d, "D,..", "1000,2000,4000", "dimensions of the covariance accumulation"),
        B_SIZES("--power-d", &pow_d, "D,..", "1e4,1e5,1e6", "dimensions of the power iteration's block step"),
        B_SIZE("--n", &n, "N", "4096", "rows per measurement"),
        B_SIZE("--k", &k, "K", "10", "the power iteration's rank"),
        B_SIZE("--b", &b, "B", "20", "the power iteration's columns (k + oversampling)"),
        B_SIZE("--pool-mb", &pool_mb, "MB", "256", "distinct rows (cycled) in MB"),
        B_INT("--runs", &runs, "R", "3", "runs per figure (min / median / max)"),
        B_HELP(&help),
    };
    int prc = b_parse(argc, argv, flags, sizeof flags / sizeof flags[0], &help, s_synopsis);
    if (prc >= 0)
        return prc;
    if (runs < 1 || runs > 50)
        CLI_USAGE("--runs between 1 and 50");
    if (b < k)
        CLI_USAGE("--b must be >= --k");
    dps_blas_set_threads(1);
    b_header("bench-gradmech: the gradient mechanisms' accumulation as rows arrive, against BLAS peak", 1);
    double sg = b_sgemm_peak(2048, 3), dg = b_dgemm_peak(2048, 3);
    double bw = b_read_bw((size_t)512 << 20, 1, 3) / 1e9;
    printf("sgemm peak (2048^3, 1 thread): %.1f GFLOP/s   dgemm peak: %.1f GFLOP/s   read bandwidth (sasum over 512 "
           "MiB, 1 thread): %.1f GB/s\n\n",
           sg, dg, bw);

    printf("## cov: second_moment_add, C += x x^T in double (dsyrk blocks of %zu rows; %zu rows a run, one at a "
           "time)\n",
           second_moment_block_rows(), n);
    printf("%7s %24s %10s %10s %10s %10s %10s %12s\n", "d", "GFLOP/s min/med/max", "ssyrk pk", "dsyrk pk",
           "dsyrk@blk", "%ssyrk", "%dsyrk", "%dsyrk@blk");
    for (size_t i = 0; i < cov_d.n; i++) {
        size_t d = cov_d.v[i], prows;
        float *pool = s_pool(d, pool_mb << 20, &prows);
        double t[50], g[3];
        for (int r = 0; r < runs; r++)
            t[r] = (double)n * d * (d + 1) / s_time_cov(d, pool, prows, n) / 1e9;
        s_mmm(t, (size_t)runs, g);
        double ss = s_syrk_gflops(d, 2048, 0), ds = s_syrk_gflops(d, 2048, 1);
        double dblk = s_syrk_gflops(d, second_moment_block_rows(), 1);
        printf("%7zu %8.2f/%6.2f/%6.2f %10.2f %10.2f %10.2f %10.2f %10.2f %12.2f\n", d, g[0], g[1], g[2], ss, ds,
               dblk, g[1] / ss, g[1] / ds, g[1] / dblk);
        printf("RESULT mech=cov d=%zu rows=%zu block=%zu gflops_min=%.3f gflops_med=%.3f gflops_max=%.3f "
               "ssyrk_peak=%.3f dsyrk_peak=%.3f dsyrk_block=%.3f\n",
               d, n, second_moment_block_rows(), g[0], g[1], g[2], ss, ds, dblk);
        fflush(stdout);
        free(pool);
    }

    printf("\n## power: power_add, Y += x (x^T X), b = %zu columns (%zu rows a run, one at a time)\n", b, n);
    printf("%9s %6s %24s %10s %10s %10s %10s\n", "d", "block", "GFLOP/s min/med/max", "%sgemm", "%dgemm", "GB/s",
           "%readBW");
    for (size_t i = 0; i < pow_d.n; i++) {
        size_t d = pow_d.v[i], prows;
        if (d < b) {
            printf("%9zu  skipped: d < b\n", d);
            continue;
        }
        float *pool = s_pool(d, pool_mb << 20, &prows);
        power_iteration probe;
        size_t nb = power_init(&probe, d, k, b) == DPS_OK ? probe.nb : 0;
        power_free(&probe);
        double t[50], g[3];
        for (int r = 0; r < runs; r++)
            t[r] = 4.0 * n * b * d / s_time_power(d, k, b, pool, prows, n) / 1e9;
        s_mmm(t, (size_t)runs, g);
        /* the least memory traffic of a flush of nb rows: both products read
           the rows (2 nb d floats), the first reads X (b d floats), the
           second updates Yd (2 b d doubles) */
        double bytes_per_flop = (8.0 * nb + 4.0 * b + 16.0 * b) / (4.0 * nb * b), gbs = g[1] * bytes_per_flop;
        printf("%9zu %6zu %8.2f/%6.2f/%6.2f %10.3f %10.3f %10.1f %10.2f\n", d, nb, g[0], g[1], g[2], g[1] / sg,
               g[1] / dg, gbs, gbs / bw);
        printf("RESULT mech=power d=%zu b=%zu rows=%zu block=%zu gflops_min=%.3f gflops_med=%.3f gflops_max=%.3f "
               "sgemm_peak=%.3f dgemm_peak=%.3f gbs=%.2f read_bw=%.2f\n",
               d, b, n, nb, g[0], g[1], g[2], sg, dg, gbs, bw);
        fflush(stdout);
        free(pool);
    }
    b_footer();
    return 0;
}
