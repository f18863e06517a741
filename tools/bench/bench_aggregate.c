/* bench_aggregate - one epoch through the public estimator API: push time,
   aggregation (dps_estimator_close_epoch) time and peak memory, for ONE (d, k)
   per process (tools/bench/run-aggregate loops over configurations, so that
   each peak RSS belongs to one configuration).

   Rows: k fixed random directions b_i (random signs / sqrt(d)), each row
   sum_i g_i b_i with g ~ N(0, I_k), plus noise of norm --noise in random-sign
   coordinates, normalised; generated on the fly one bucket (m rows) at a time,
   never t*m*d floats at once.

   Phases timed:
     epoch start  the first push (one row): the library draws the q x d public
                  reference points and opens the window's bucket buffers;
     push         the remaining t*m - 1 rows, pushed m at a time (row generation
                  is timed separately and excluded);
     drain        after the last push, until every bucket's basis is done
                  (polling dps_estimator_get_stats);
     close        dps_estimator_close_epoch: the aggregation (double Gram of
                  the stacked bases, distances, radius search, WFC, the noisy
                  q x d mean, its top-k).
   Reference (same process, after the estimator is freed): one OpenBLAS dsyrk
   of the Gram's shape (t*k rows x d, double) with --workers BLAS threads; the
   headline is close / dsyrk, i.e. how far the aggregation is from its dominant
   BLAS call.  Also the library's own Gram routine alone (agg_gram on the same
   shape, on a pool of --workers threads), which splits close into "Gram" and
   "everything else".  For large shapes the references run on the first d' <= d
   columns (memory cap --ref-max-gb) and are scaled by d/d' (the cost of both is
   linear in d at fixed t*k); the report says when it did.

   Memory: getrusage(RUSAGE_SELF).ru_maxrss, next to dps_estimator_memory_bound
   and the design's t*k*d*4 + q*d*12 bytes (DESIGN 3.3: O(t k d + q d)). */
#include "config_internal.h"
#include "aggregate.h"
#include "bench_common.h"
#include "linalg.h"
#include "pool.h"

typedef struct {
    size_t d, k, t, window, q;
    int workers;
    double noise;
    uint64_t seed;
    int force, ref, lib_gram;
    double ref_max_gb;
} opts;

static const char s_synopsis[] =
    "usage: bench-aggregate --d D --k K [options]   (one configuration per process)\n";

static void s_progress(const char *fmt, double t0, size_t a, size_t b)
{
    fprintf(stderr, "progress: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, " (%.1f s)\n", b_now() - t0);
    fflush(stderr);
}

/* Columns for a reference of n rows at elem bytes each within the cap; a
   multiple of LA_CHUNK unless d itself fits. */
static size_t s_ref_cols(size_t n, size_t d, size_t elem, double cap_gb)
{
    double cap = cap_gb * 1e9;
    if ((double)n * d * elem <= cap)
        return d;
    size_t c = (size_t)(cap / ((double)n * elem));
    c = c / LA_CHUNK * LA_CHUNK;
    return c < LA_CHUNK ? (LA_CHUNK < d ? LA_CHUNK : d) : c;
}

int main(int argc, char **argv)
{
    cli_set_program("bench-aggregate");
    opts o = {0, 0, b_lib_t(), 0, 0, 2, 1e-3, 1, 0, 1, 1, 2.0};
    int no_ref = 0, no_lib_gram = 0, help = 0;
    char t_def[24];
    cli_opt flags[] = {
        B_SIZE("--d", &o.d, "D", "required", "dimension (e.g. 1e4, 1e5, 1e6)"),
        B_SIZE("--k", &o.k, "K", "required", "subspace dimension (m = 2k, q = 10k)"),
        B_SIZE("--t", &o.t, "T", b_lib_t_text(t_def, sizeof t_def), "buckets per epoch"),
        B_SIZE("--window", &o.window, "W", "t, the library default", "open buckets"),
        B_INT("--workers", &o.workers, "N", "2", "estimator worker threads"),
        {"--noise", CLI_OPT_DOUBLE, &o.noise, "X", "1e-3", "norm of the per-row noise before normalisation", 0},
        {"--seed", CLI_OPT_U64, &o.seed, "S", "1", "seed of the data and of the (seeded) estimator", 0},
        {"--ref-max-gb", CLI_OPT_DOUBLE, &o.ref_max_gb, "X", "2", "memory cap for the reference dsyrk / Gram", 0},
        {"--no-ref", CLI_OPT_FLAG, &no_ref, NULL, NULL, "skip the references", 0},
        {"--no-lib-gram", CLI_OPT_FLAG, &no_lib_gram, NULL, NULL, "skip the library-Gram reference", 0},
        {"--force", CLI_OPT_FLAG, &o.force, NULL, NULL, "run even if the library's memory bound exceeds MemAvailable",
         0},
        B_HELP(&help),
    };
    int prc = b_parse(argc, argv, flags, sizeof flags / sizeof flags[0], &help, s_synopsis);
    if (prc >= 0)
        return prc;
    o.ref = !no_ref;
    o.lib_gram = !no_lib_gram;
    if (!o.d || !o.k || o.workers < 1 || !(o.noise >= 0) || !(o.ref_max_gb > 0))
        CLI_USAGE("give --d and --k, --workers >= 1, --noise >= 0 and --ref-max-gb > 0 (see --help)");

    dps_blas_set_threads(1); /* the library's setting: its workers give the parallelism */
    b_header("bench-aggregate: one epoch through the estimator (reference aggregator)", 1);

    size_t d = o.d, k = o.k;
    dps_config cfg;
    dps_config_init(&cfg, d, k);
    cfg.t = o.t;
    cfg.window = o.window ? o.window : o.t;
    cfg.workers = o.workers;
    cfg.seeded = 1;
    cfg.seed = o.seed;
    cfg.public_seed = o.seed;
    const char *why = NULL;
    int rc = dps_config_check(&cfg, &why);
    if (rc) {
        fprintf(stderr, "bench-aggregate: configuration refused: %s (%s)\n", dps_strerror(rc), why);
        return 2;
    }
    size_t t = cfg.t, m = cfg.m, q = cfg.q, n = t * k;
    double bound = (double)dps_estimator_memory_bound(&cfg);
    double design = (double)t * k * d * 4 + (double)q * d * 12;
    double rows_live = (double)cfg.window * m * d * 4;
    double avail = (double)b_mem_available();
    printf("# config: d=%zu k=%zu t=%zu m=%zu q=%zu window=%zu workers=%d aggregator=%s rho=%g delta=%g noise=%g "
           "seeded(seed=%llu)\n",
           d, k, t, m, q, cfg.window, cfg.workers, dps_aggregator_name(cfg.aggregator), cfg.rho_epoch,
           cfg.delta_epoch, o.noise, (unsigned long long)o.seed);
    printf("# memory: library bound %.3f GB | design t*k*d*4 + q*d*12 = %.3f GB | bucket buffers W*m*d*4 = %.3f GB "
           "| MemAvailable %.2f GB\n",
           bound / 1e9, design / 1e9, rows_live / 1e9, avail / 1e9);
    fflush(stdout);
    if (avail > 0 && bound > 0.9 * avail && !o.force) {
        printf("# REFUSED: the library's memory bound is above 90%% of MemAvailable (use --force to try anyway)\n");
        printf("RESULT d=%zu k=%zu status=refused-memory bound_gb=%.3f avail_gb=%.2f\n", d, k, bound / 1e9,
               avail / 1e9);
        return 3;
    }

    /* ---- data: k directions, truth basis for a sanity check ---- */
    b_rng r;
    b_seed(&r, o.seed * 1000003 + d * 31 + k);
    float *B = b_alloc(k * d * sizeof *B), *truth = b_alloc(k * d * sizeof *truth);
    memset(B, 0, k * d * sizeof *B);
    for (size_t i = 0; i < k; i++)
        b_add_signs(&r, B + i * d, d, (float)(1.0 / sqrt((double)d)));
    memcpy(truth, B, k * d * sizeof *B);
    la_orthonormalize_rows(truth, k, d);
    float *X = b_alloc(m * d * sizeof *X);
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

    double tp0 = b_now(), t_gen = 0, t_push = 0, t_start = 0;
    size_t pushed = 0, step = t / 10 ? t / 10 : 1;
    fprintf(stderr, "progress: d=%zu k=%zu: pushing %zu rows in %zu batches of %zu\n", d, k, t * m, t, m);
    for (size_t b = 0; b < t && !rc; b++) {
        double g0 = b_now();
        b_rows_near_span(&r, B, k, d, m, o.noise, X, g);
        double g1 = b_now();
        t_gen += g1 - g0;
        size_t taken = 0;
        if (b == 0) { /* the first row opens the epoch */
            rc = dps_estimator_push(est, X, 1, d, &taken);
            double g2 = b_now();
            t_start = g2 - g1;
            if (!rc)
                rc = dps_estimator_push(est, X + d, m - 1, d, &taken);
            t_push += b_now() - g2;
            pushed += m;
        } else {
            rc = dps_estimator_push(est, X, m, d, &taken);
            t_push += b_now() - g1;
            pushed += taken;
        }
        if ((b + 1) % step == 0 || b + 1 == t)
            s_progress("pushed %zu of %zu buckets' rows", tp0, b + 1, t);
    }
    double tp1 = b_now();
    if (rc && rc != DPS_EFULL) {
        printf("# push failed: %s\n", dps_strerror(rc));
        printf("RESULT d=%zu k=%zu status=error-push\n", d, k);
        return 1;
    }
    dps_estimator_stats st;
    dps_estimator_get_stats(est, &st);
    size_t done_at_push = st.buckets_done_epoch, last = done_at_push;
    double last_report = b_now();
    while (st.buckets_done_epoch < t) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
        dps_estimator_get_stats(est, &st);
        if (b_now() - last_report > 5 && st.buckets_done_epoch != last) {
            s_progress("buckets done %zu of %zu", tp0, st.buckets_done_epoch, t);
            last = st.buckets_done_epoch;
            last_report = b_now();
        }
    }
    double tp2 = b_now();
    double maxrss_push = b_peak_rss_bytes(), rss_push = b_rss_bytes();

    fprintf(stderr, "progress: d=%zu k=%zu: closing the epoch (aggregation)... (%.1f s)\n", d, k, b_now() - tp0);
    b_closed cl = b_close_epoch_timed(&est, truth, k, d);
    if (cl.rc)
        return 1;
    double t_close = cl.seconds, c_close = cl.cpu, maxrss_close = cl.maxrss, sinv = cl.sin;
    dps_snapshot_info info = cl.info;

    printf("# epoch: %zu rows pushed, %zu buckets (%zu done when the last push returned)\n", pushed, t,
           done_at_push);
    printf("# snapshot: %s, radius %.4g, W^ %.2f of t=%zu, sin(angle to the true span) %.3g%s\n",
           dps_snapshot_status_name(info.status), info.radius, info.w_hat, t, sinv,
           info.status == DPS_SNAP_RELEASED ? "" : "  (NOT released: the timed close skipped the noisy mean!)");
    printf("# times: new %.3f s | epoch start (first row: P + buffers) %.3f s | push %.3f s (%.3g rows/s, "
           "%.2f GB/s of rows) | row generation %.3f s (excluded) | drain %.3f s | close %.3f s (cpu %.0f%% of "
           "%d workers)\n",
           t_new, t_start, t_push, (double)(pushed - 1) / t_push,
           (double)(pushed - 1) * d * 4 / t_push / 1e9, t_gen, tp2 - tp1, t_close,
           100 * c_close / (t_close * cfg.workers), cfg.workers);
    printf("# push wall (first row to last push return, incl. generation) %.3f s\n", tp1 - tp0);
    printf("# memory: ru_maxrss %.3f GB (after new %.3f, after push+drain %.3f; VmRSS then %.3f; before new %.3f)"
           " | library bound %.3f GB (maxrss/bound %.2f) | design t*k*d*4+q*d*12 %.3f GB (maxrss/design %.2f)\n",
           maxrss_close / 1e9, maxrss_new / 1e9, maxrss_push / 1e9, rss_push / 1e9, rss_base / 1e9, bound / 1e9,
           maxrss_close / bound, design / 1e9, maxrss_close / design);
    fflush(stdout);

    /* ---- references (after the peak RSS was taken: they allocate) ---- */
    double ft = b_first_touch_bw(128u << 20);
    printf("# reference: first touch (memset of freshly allocated 128 MiB: page faults + kernel zeroing) %.2f GB/s\n",
           ft / 1e9);

    double ref_dsyrk = 0, ref_gram = 0, ref_gram_cold = 0, dgemm_pk = 0;
    size_t dref = 0, dgram = 0;
    if (o.ref) {
        fprintf(stderr, "progress: d=%zu k=%zu: reference dsyrk...\n", d, k);
        dps_blas_set_threads(o.workers);
        dgemm_pk = b_dgemm_peak(1024, 3);
        dref = s_ref_cols(n, d, sizeof(double), o.ref_max_gb);
        double *Ad = b_alloc(n * dref * sizeof *Ad), *C = b_alloc(n * n * sizeof *C);
        b_fill_uniform_d(&r, Ad, n * dref);
        int reps = 0;
        double best = 1e30, spent = 0;
        while (reps < 2 || (spent < 1.0 && reps < 5)) {
            double s0 = b_now();
            cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)n, (int)dref, 1.0, Ad, (int)dref, 0.0, C,
                        (int)n);
            double dt = b_now() - s0;
            spent += dt;
            if (dt < best)
                best = dt;
            reps++;
            if (dt > 3.0 && reps >= 1)
                break;
        }
        ref_dsyrk = best * (double)d / (double)dref;
        free(Ad);
        free(C);
        dps_blas_set_threads(1);
        printf("# reference: dsyrk %zu x %zu%s, %d BLAS threads, best of %d: %.3f s (%.1f GFLOP/s; dgemm 1024^3 "
               "peak %.1f GFLOP/s, same threads)\n",
               n, dref, dref < d ? " (scaled to d)" : "", o.workers, reps, ref_dsyrk,
               (double)n * n * d / ref_dsyrk / 1e9, dgemm_pk);
        if (o.lib_gram) {
            fprintf(stderr, "progress: d=%zu k=%zu: library Gram (agg_gram)...\n", d, k);
            dgram = s_ref_cols(n, d, sizeof(float), o.ref_max_gb);
            float *Af = b_alloc(n * dgram * sizeof *Af);
            double *G = b_alloc(n * n * sizeof *G);
            b_fill_uniform_f(&r, Af, n * dgram);
            dps_pool *pool = pool_new(o.workers);
            agg_ws *gws = agg_ws_new(n / k, k, 0, dgram, o.workers, 0);
            /* the first call pays the workspace's first touches (once per
               collector: later epochs reuse it); best of reps after it, as
               the dsyrk */
            double s0 = b_now(), best = 1e30;
            agg_gram(pool, gws, Af, n, dgram, G);
            double cold = b_now() - s0;
            for (int i = 0; i < reps; i++) {
                s0 = b_now();
                agg_gram(pool, gws, Af, n, dgram, G);
                best = fmin(best, b_now() - s0);
            }
            ref_gram = best * (double)d / (double)dgram;
            ref_gram_cold = cold * (double)d / (double)dgram;
            agg_ws_free(&gws);
            pool_free(&pool);
            free(Af);
            free(G);
            printf("# reference: library Gram agg_gram %zu x %zu%s on %d workers, best of %d after a first call: "
                   "%.3f s (%.1f GFLOP/s) = %.2fx the dsyrk; the first call (fresh workspace) %.3f s\n",
                   n, dgram, dgram < d ? " (scaled to d)" : "", o.workers, reps, ref_gram,
                   (double)n * n * d / ref_gram / 1e9, ref_gram / ref_dsyrk, ref_gram_cold);
        }
        printf("# HEADLINE: close / dsyrk = %.2f", t_close / ref_dsyrk);
        if (ref_gram > 0)
            printf("   (Gram share of close ~ %.0f%%, the rest %.3f s: this close is the first epoch's, on fresh "
                   "buffers, so against the Gram's first call)",
                   100 * ref_gram_cold / t_close, t_close - ref_gram_cold);
        printf("\n");
    }
    printf("RESULT d=%zu k=%zu t=%zu q=%zu workers=%d status=%s start_s=%.3f push_s=%.3f drain_s=%.3f "
           "close_s=%.3f dsyrk_s=%.3f close_over_dsyrk=%.2f libgram_s=%.3f maxrss_gb=%.3f bound_gb=%.3f "
           "design_gb=%.3f maxrss_over_bound=%.2f maxrss_over_design=%.2f sin=%.3g\n",
           d, k, t, q, cfg.workers, dps_snapshot_status_name(info.status), t_start, t_push, tp2 - tp1, t_close, ref_dsyrk,
           ref_dsyrk > 0 ? t_close / ref_dsyrk : 0, ref_gram, maxrss_close / 1e9, bound / 1e9, design / 1e9,
           maxrss_close / bound, maxrss_close / design, sinv);
    b_footer();
    free(B); free(truth); free(X); free(g);
    return 0;
}
