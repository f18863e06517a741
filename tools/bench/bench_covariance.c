/* bench_covariance - one epoch of the estimator's covariance mode
   (cfg.aggregator = DPS_AGG_COVARIANCE) through the public API: push time,
   close time (iterative eigenvector sampling) and peak memory, for ONE (d, k)
   per process.

   In this mode there are no buckets: dps_estimator_push normalises each row
   and adds it to C = sum x x^T (d x d double, one dsyrk per 64 rows), and
   dps_estimator_close_epoch runs dps_cov_iterative (k Bingham draws, each
   after an eigendecomposition of the deflated q x q matrix, q = d, d-1, ...).

   Rows: k fixed random directions b_i (random signs / sqrt(d)), each row a
   uniform unit vector of their span plus --noise in random-sign coordinates,
   normalised (b_rows_near_span); generated --batch rows at a time, never the
   whole epoch at once; generation is timed apart and excluded.

   References (same process, after the estimator is freed and the peak RSS was
   taken), with 1 BLAS thread, the library's own setting:
     dsyrk      one cblas_dsyrk of the same N = t*m rows (double, generated
                again from the same seed) into the d x d Gram (upper).
                push / dsyrk is how far the accumulation is from its dominant
                BLAS call.  Also the same dsyrk in 64-row blocks into a warm C
                (the library's call shape without the row admission), which
                splits the push into "blocking" and "the rest".
     dsyevr     one LAPACKE_dsyevr, all eigenpairs, of the Gram just built (the
                epoch's C up to rounding).  close / dsyevr is compared with k:
                each of the k draws does one full eigendecomposition of a
                q x q matrix, q = d - i, so about k x dsyevr is the floor.
   If N*d*8 bytes is above --ref-max-gb, the dsyrk uses the first N' rows and
   is scaled by N/N' (its cost is linear in N); the report says so.

   Memory: getrusage(RUSAGE_SELF).ru_maxrss next to dps_estimator_memory_bound. */
#include "config_internal.h"
#include "bench_common.h"
#include "linalg.h"

#include <lapacke.h>

typedef struct {
    size_t d, k, t, m, rows, batch;
    int workers;
    double noise, rho;
    uint64_t seed;
    int force, ref;
    double ref_max_gb;
} opts;

static const char s_synopsis[] =
    "usage: bench-covariance --d D --k K [options]   (one configuration per process)\n";

/* Rows [0, n) of the epoch as the push loop generates them (same rng state
   sequence), converted to double; only the first n_keep are stored. */
static void s_regen_rows(uint64_t seed0, const float *B, size_t k, size_t d, size_t n, size_t n_keep,
                         size_t batch, double noise, double *out)
{
    b_rng r;
    b_seed(&r, seed0);
    float *X = b_alloc(batch * d * sizeof *X);
    double *g = b_alloc(k * sizeof *g);
    for (size_t done = 0; done < n_keep; done += batch) {
        size_t nb = n - done < batch ? n - done : batch;
        b_rows_near_span(&r, B, k, d, nb, noise, X, g);
        for (size_t i = 0; i < nb && done + i < n_keep; i++)
            for (size_t c = 0; c < d; c++)
                out[(done + i) * d + c] = X[i * d + c];
    }
    free(X);
    free(g);
}

int main(int argc, char **argv)
{
    cli_set_program("bench-covariance");
    opts o = {0, 0, b_lib_t(), 0, 0, 64, 2, 1e-3, 1.0, 1, 0, 1, 2.0};
    int no_ref = 0, help = 0;
    char t_def[24];
    cli_opt flags[] = {
        B_SIZE("--d", &o.d, "D", "required", "dimension (<= 4096, DPS_COV_MAX_D; e.g. 256, 1024, 4096)"),
        B_SIZE("--k", &o.k, "K", "required", "subspace dimension (eigenvectors sampled)"),
        B_SIZE("--t", &o.t, "T", b_lib_t_text(t_def, sizeof t_def), "'buckets' per epoch: the epoch is t*m rows"),
        B_SIZE("--m", &o.m, "M", "2k", "rows per 'bucket'"),
        B_SIZE("--rows", &o.rows, "N", NULL, "epoch size N = t*m: sets t = ceil(N/m) (overrides --t)"),
        B_SIZE("--batch", &o.batch, "B", "64, the library's block", "rows per dps_estimator_push call"),
        B_INT("--workers", &o.workers, "N", "2; idle in this mode", "estimator worker threads"),
        {"--rho", CLI_OPT_DOUBLE, &o.rho, "R", "1: eps = sqrt(2 rho)", "per-epoch rho", 0},
        {"--noise", CLI_OPT_DOUBLE, &o.noise, "X", "1e-3", "norm of the per-row noise before normalisation", 0},
        {"--seed", CLI_OPT_U64, &o.seed, "S", "1", "seed of the data and of the (seeded) estimator", 0},
        {"--ref-max-gb", CLI_OPT_DOUBLE, &o.ref_max_gb, "X", "2", "memory cap for the reference dsyrk's rows", 0},
        {"--no-ref", CLI_OPT_FLAG, &no_ref, NULL, NULL, "skip the references", 0},
        {"--force", CLI_OPT_FLAG, &o.force, NULL, NULL, "run even if the library's memory bound exceeds MemAvailable",
         0},
        B_HELP(&help),
    };
    int prc = b_parse(argc, argv, flags, sizeof flags / sizeof flags[0], &help, s_synopsis);
    if (prc >= 0)
        return prc;
    o.ref = !no_ref;
    if (!o.d || !o.k || o.workers < 1 || !(o.noise >= 0) || !(o.rho > 0) || !(o.ref_max_gb > 0) || !o.batch)
        CLI_USAGE("give --d and --k, --workers >= 1, --noise >= 0, --rho > 0, --ref-max-gb > 0 and --batch > 0");

    dps_blas_set_threads(1); /* the library's setting (push and close run in the calling thread) */
    b_header("bench-covariance: one epoch of the estimator's covariance mode (iterative eigenvector sampling)", 1);

    size_t d = o.d, k = o.k;
    dps_config cfg;
    dps_config_init(&cfg, d, k);
    cfg.aggregator = DPS_AGG_COVARIANCE;
    if (o.m)
        cfg.m = o.m;
    cfg.t = o.rows ? (o.rows + cfg.m - 1) / cfg.m : o.t;
    cfg.window = cfg.t;
    cfg.workers = o.workers;
    cfg.rho_epoch = o.rho;
    cfg.seeded = 1;
    cfg.seed = o.seed;
    cfg.public_seed = o.seed;
    const char *why = NULL;
    int rc = dps_config_check(&cfg, &why);
    if (rc) {
        fprintf(stderr, "bench-covariance: configuration refused: %s (%s)\n", dps_strerror(rc), why);
        return 2;
    }
    size_t t = cfg.t, m = cfg.m, N = t * m, batch = o.batch;
    double eps = sqrt(2.0 * cfg.rho_epoch);
    double bound = (double)dps_estimator_memory_bound(&cfg);
    double dd8 = (double)d * d * 8;
    double avail = (double)b_mem_available();
    printf("# config: d=%zu k=%zu t=%zu m=%zu epoch N=t*m=%zu rows%s batch=%zu workers=%d (idle in this mode) "
           "aggregator=%s rho=%g (eps=%.3g, pure) noise=%g seeded(seed=%llu)\n",
           d, k, t, m, N, o.rows && N != o.rows ? " (--rows rounded up to a multiple of m)" : "", batch,
           cfg.workers, dps_aggregator_name(cfg.aggregator), cfg.rho_epoch, eps, o.noise,
           (unsigned long long)o.seed);
    printf("# memory: library bound %.3f GB | one d x d double %.3f GB | MemAvailable %.2f GB\n", bound / 1e9,
           dd8 / 1e9, avail / 1e9);
    fflush(stdout);
    if (avail > 0 && bound > 0.9 * avail && !o.force) {
        printf("# REFUSED: the library's memory bound is above 90%% of MemAvailable (use --force to try anyway)\n");
        printf("RESULT d=%zu k=%zu status=refused-memory bound_gb=%.3f avail_gb=%.2f\n", d, k, bound / 1e9,
               avail / 1e9);
        return 3;
    }

    /* ---- data: k directions, truth basis for the sanity check ---- */
    b_rng r;
    b_seed(&r, o.seed * 1000003 + d * 31 + k);
    float *B = b_alloc(k * d * sizeof *B), *truth = b_alloc(k * d * sizeof *truth);
    memset(B, 0, k * d * sizeof *B);
    for (size_t i = 0; i < k; i++)
        b_add_signs(&r, B + i * d, d, (float)(1.0 / sqrt((double)d)));
    memcpy(truth, B, k * d * sizeof *B);
    la_orthonormalize_rows(truth, k, d);
    uint64_t row_seed = b_u64(&r); /* the rows' own stream, so that the reference can regenerate them */
    b_rng rr;
    b_seed(&rr, row_seed);
    float *X = b_alloc(batch * d * sizeof *X);
    double *g = b_alloc(k * sizeof *g);
    double rss_base = b_rss_bytes();

    /* ---- estimator ---- */
    dps_estimator *est = NULL;
    double t_new0 = b_now();
    rc = dps_estimator_new(&est, &cfg);
    double t_new = b_now() - t_new0;
    if (rc) {
        printf("# dps_estimator_new: %s\n", dps_strerror(rc));
        printf("RESULT d=%zu k=%zu status=error-new\n", d, k);
        return 1;
    }
    double maxrss_new = b_peak_rss_bytes();

    /* ---- push one epoch ---- */
    double tp0 = b_now(), t_gen = 0, t_push = 0, t_first = 0;
    double last_report = tp0;
    size_t pushed = 0, first_n = 0, nb_total = (N + batch - 1) / batch;
    fprintf(stderr, "progress: d=%zu k=%zu: pushing %zu rows in %zu calls of <= %zu\n", d, k, N, nb_total, batch);
    for (size_t b = 0; b < nb_total && !rc; b++) {
        size_t nb = N - pushed < batch ? N - pushed : batch;
        double g0 = b_now();
        b_rows_near_span(&rr, B, k, d, nb, o.noise, X, g);
        double g1 = b_now();
        size_t taken = 0;
        rc = dps_estimator_push(est, X, nb, d, &taken);
        double g2 = b_now();
        t_gen += g1 - g0;
        t_push += g2 - g1;
        if (b == 0) {
            t_first = g2 - g1;
            first_n = taken;
        }
        pushed += taken;
        if (b_now() - last_report > 2.0 || b + 1 == nb_total) {
            fprintf(stderr, "progress: pushed %zu of %zu rows (%.1f s)\n", pushed, N, b_now() - tp0);
            fflush(stderr);
            last_report = b_now();
        }
    }
    double tp1 = b_now();
    if (rc) {
        printf("# push failed: %s\n", dps_strerror(rc));
        printf("RESULT d=%zu k=%zu status=error-push\n", d, k);
        return 1;
    }
    if (!dps_estimator_epoch_full(est) || pushed != N)
        printf("# WARNING: the epoch is not full after %zu rows (expected %zu)\n", pushed, N);
    double maxrss_push = b_peak_rss_bytes(), rss_push = b_rss_bytes();

    /* ---- close: iterative eigenvector sampling ---- */
    fprintf(stderr, "progress: d=%zu k=%zu: closing the epoch (iterative sampling, k=%zu draws)... (%.1f s)\n", d,
            k, k, b_now() - tp0);
    b_closed cl = b_close_epoch_timed(&est, truth, k, d);
    if (cl.rc)
        return 1;
    double t_close = cl.seconds, c_close = cl.cpu, maxrss_close = cl.maxrss, sinv = cl.sin;
    dps_snapshot_info info = cl.info;

    /* Each row is (nearly) a uniform unit vector of a k-dim span: lambda_i ~ N/k.
       Amin et al.: direction i is found when eps_i lambda_i / 2 is well above d. */
    double signal = eps / (double)k * ((double)N / (double)k) / 2.0;
    printf("# snapshot: %s, rows_used %llu, sin(angle to the true span) %.3g   (sanity only: eps_i*lambda/2 ~ "
           "(eps/k)(N/k)/2 = %.0f vs d = %zu%s)\n",
           dps_snapshot_status_name(info.status), (unsigned long long)info.rows_used, sinv, signal, d,
           signal > 4.0 * (double)d ? ": expect a small sin" : signal < (double)d ? ": expect sin near 1" : "");
    double push_gflop = (double)N * d * (d + 1) / 1e9; /* syrk: N d (d+1) flops (upper triangle, mul+add) */
    printf("# times: new %.3f s | push %.3f s (%.3g rows/s, %.2f GB/s of float rows, %.1f GFLOP/s nominal N d^2) | "
           "first call (%zu rows, first touch of C) %.3f s | row generation %.3f s (excluded) | close %.3f s "
           "(cpu %.0f%% of 1 thread)\n",
           t_new, t_push, (double)N / t_push, (double)N * d * 4 / t_push / 1e9, push_gflop / t_push, first_n,
           t_first, t_gen, t_close, 100 * c_close / t_close);
    printf("# push wall (first call to last return, incl. generation) %.3f s\n", tp1 - tp0);
    if (nb_total > 1)
        printf("# push after the first call: %.3f s (%.3g rows/s)\n", t_push - t_first,
               (double)(N - first_n) / (t_push - t_first));
    printf("# memory: ru_maxrss %.3f GB (before new %.3f VmRSS, after new %.3f, after push %.3f; VmRSS then %.3f) | "
           "library bound %.3f GB (maxrss/bound %.2f; (maxrss - base)/bound %.2f) | maxrss / (d*d*8) %.1f\n",
           maxrss_close / 1e9, rss_base / 1e9, maxrss_new / 1e9, maxrss_push / 1e9, rss_push / 1e9, bound / 1e9,
           maxrss_close / bound, (maxrss_close - rss_base) / bound, maxrss_close / dd8);
    fflush(stdout);

    /* ---- references (after the peak RSS was taken: they allocate) ---- */
    double ft = b_first_touch_bw(128u << 20);
    printf("# reference: first touch (memset of freshly allocated 128 MiB) %.2f GB/s = %.3g s per fresh d x d "
           "double\n",
           ft / 1e9, dd8 / ft);

    double ref_syrk = 0, ref_blk = 0, ref_evr = 0;
    size_t nref = N;
    if (o.ref) {
        fprintf(stderr, "progress: d=%zu k=%zu: reference dsyrk...\n", d, k);
        double cap = o.ref_max_gb * 1e9;
        if ((double)N * d * 8 > cap) {
            nref = (size_t)(cap / ((double)d * 8)) / 64 * 64;
            if (nref < 64)
                nref = N < 64 ? N : 64;
        }
        double *Ad = b_alloc(nref * d * sizeof *Ad), *C = b_alloc(d * d * sizeof *C);
        s_regen_rows(row_seed, B, k, d, N, nref, batch, o.noise, Ad);
        memset(C, 0, d * d * sizeof *C);
        /* one dsyrk of all rows: C = A^T A (the library's call: upper, A row-major N x d) */
        int reps = 0;
        double best = 1e30, spent = 0;
        while (reps < 2 || (spent < 1.0 && reps < 5)) {
            double s0 = b_now();
            cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)nref, 1.0, Ad, (int)d, 0.0, C, (int)d);
            double dt = b_now() - s0;
            spent += dt;
            if (dt < best)
                best = dt;
            reps++;
            if (dt > 3.0)
                break;
        }
        ref_syrk = best * (double)N / (double)nref;
        printf("# reference: dsyrk d=%zu from %zu rows%s, 1 BLAS thread (the library's), best of %d: %.4f s "
               "(%.1f GFLOP/s nominal)\n",
               d, nref, nref < N ? " (scaled to N)" : "", reps, ref_syrk, push_gflop / ref_syrk);
        /* the same rows in 64-row blocks, beta = 1, into the warm C: the library's call shape */
        {
            double *Cb = b_alloc(d * d * sizeof *Cb);
            memset(Cb, 0, d * d * sizeof *Cb);
            double s0 = b_now();
            for (size_t i = 0; i < nref; i += 64) {
                size_t nb = nref - i < 64 ? nref - i : 64;
                cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)nb, 1.0, Ad + i * d, (int)d, 1.0, Cb,
                            (int)d);
            }
            ref_blk = (b_now() - s0) * (double)N / (double)nref;
            free(Cb);
        }
        printf("# reference: the same rows as dsyrk calls of 64 rows into a warm (already touched) C: %.4f s = "
               "%.2fx the one dsyrk\n",
               ref_blk, ref_blk / ref_syrk);
        free(Ad);

        /* one dsyevr, all eigenpairs, of the Gram just built (symmetrised) */
        fprintf(stderr, "progress: d=%zu k=%zu: reference dsyevr...\n", d, k);
        for (size_t i = 0; i < d; i++)
            for (size_t j = i + 1; j < d; j++)
                C[j * d + i] = C[i * d + j];
        double *A = b_alloc(d * d * sizeof *A), *Z = b_alloc(d * d * sizeof *Z), *w = b_alloc(d * sizeof *w);
        lapack_int *isuppz = b_alloc(2 * d * sizeof *isuppz);
        memset(Z, 0, d * d * sizeof *Z);
        reps = 0;
        best = 1e30;
        spent = 0;
        while (reps < 1 || (spent < 1.0 && reps < 5)) {
            memcpy(A, C, d * d * sizeof *A);
            lapack_int found = 0;
            double s0 = b_now();
            lapack_int info_l = LAPACKE_dsyevr(LAPACK_COL_MAJOR, 'V', 'A', 'U', (lapack_int)d, A, (lapack_int)d, 0.0,
                                               0.0, 0, 0, LAPACKE_dlamch('S'), &found, w, Z, (lapack_int)d, isuppz);
            double dt = b_now() - s0;
            if (info_l != 0 || (size_t)found != d) {
                printf("# reference dsyevr failed: info %d, found %d\n", (int)info_l, (int)found);
                break;
            }
            spent += dt;
            if (dt < best)
                best = dt;
            reps++;
        }
        ref_evr = reps ? best : 0;
        printf("# reference: LAPACKE_dsyevr d=%zu, all eigenpairs, of that Gram, 1 BLAS thread, best of %d: %.4f s "
               "(lambda_1 %.4g, lambda_%zu %.4g, lambda_%zu %.4g)\n",
               d, reps, ref_evr, w[d - 1], k, w[d - k], k + 1, d > k ? w[d - k - 1] : 0.0);
        free(A); free(Z); free(w); free(isuppz); free(C);

        printf("# HEADLINE: push / dsyrk = %.2f (rest of push beyond the 64-row dsyrk calls %.4f s)   "
               "close / dsyevr = %.2f with k = %zu (close / (k dsyevr) = %.2f)\n",
               t_push / ref_syrk, t_push - ref_blk, ref_evr > 0 ? t_close / ref_evr : 0, k,
               ref_evr > 0 ? t_close / (k * ref_evr) : 0);
    }
    printf("RESULT d=%zu k=%zu t=%zu m=%zu rows=%zu status=%s push_s=%.4f push_rows_per_s=%.4g dsyrk_s=%.4f "
           "push_over_dsyrk=%.2f dsyrk64_s=%.4f close_s=%.4f dsyevr_s=%.4f close_over_dsyevr=%.2f "
           "close_over_k_dsyevr=%.2f maxrss_gb=%.3f bound_gb=%.3f maxrss_over_bound=%.2f sin=%.3g\n",
           d, k, t, m, N, dps_snapshot_status_name(info.status), t_push, (double)N / t_push, ref_syrk,
           ref_syrk > 0 ? t_push / ref_syrk : 0, ref_blk, t_close, ref_evr, ref_evr > 0 ? t_close / ref_evr : 0,
           ref_evr > 0 ? t_close / (k * ref_evr) : 0, maxrss_close / 1e9, bound / 1e9, maxrss_close / bound, sinv);
    b_footer();
    free(B); free(truth); free(X); free(g);
    return 0;
}
