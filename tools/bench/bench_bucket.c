/* bench_bucket - throughput of the per-bucket basis step (DESIGN 3.1).

   What it times: la_topk_rows (src/core/linalg.h) on m = 2k rows of dimension d:
   float Gram by ssyrk, dsyevr for the top k+1 eigenpairs, sgemm for the basis,
   Householder QR to clean up rounding; and the double-precision fallback taken
   when lambda_k or the gap lambda_k - lambda_{k+1} is below 1e-3 lambda_1.

   Headline figures are ratios against references measured in the same run, so
   they can be compared across machines and across noisy runs:
     - bucket GFLOP/s / sgemm GFLOP/s (a large square sgemm, best of reps, same
       BLAS thread count): how close the bucket step is to the machine's peak;
     - bytes of X read per second / memory read bandwidth (sasum over a buffer
       much larger than the last-level cache): at m = 2k = 8 the step does about
       m flops per byte per pass, so it is bandwidth bound.
   Nominal flops per bucket: m^2 d (syrk) + 2 k m d (gemm) + 4 k^2 d (QR, approx);
   the fallback path is reported with the same nominal count (it does more work).

   Buckets are drawn from a pool of distinct buckets larger than the last-level
   cache ("cold": every call reads X from memory, as in the estimator where a
   bucket's rows were written long before it fills); "hot" repeats one bucket.

   Also: a breakdown of the float path into its BLAS/LAPACK calls, the reference
   projection A_j = V_j P^T the estimator does per bucket for the default
   aggregator (q = 10k, in double), and an end-to-end figure of the estimator
   itself with its own worker threads (see --help). */
#include "config_internal.h"
#include "bench_common.h"
#include "linalg.h"

#include <errno.h>

typedef struct {
    size_t ks[8], nk;
    size_t ds[8], nd;
    double seconds;     /* per measurement */
    size_t pool_bytes;  /* cold pool size */
    int threads;        /* BLAS threads */
    int fallback, hot, breakdown, project, estimator;
    int workers;        /* estimator workers */
    size_t est_t;       /* estimator buckets per epoch */
    double est_max_gb;  /* skip estimator configurations above this memory */
    size_t peak_n;
    int peak_reps;
} opts;

static const char s_synopsis[] = "usage: bench-bucket [options]\n";

/* ------------------------------------------------------------------ data */
/* k fixed directions: random signs / sqrt(d) (nearly orthogonal for large d). */
static void s_directions(b_rng *r, float *B, size_t k, size_t d)
{
    memset(B, 0, k * d * sizeof *B);
    for (size_t i = 0; i < k; i++)
        b_add_signs(r, B + i * d, d, (float)(1.0 / sqrt((double)d)));
}

/* One bucket, m = 2k rows, normalised.  kind 0 (well-conditioned): row j < k is
   b_j, row j >= k is b_{j-k} + 0.3 b_{j-k+1 mod k}, plus noise of norm 1e-2:
   eigenvalues of X X^T about 2.1 + 0.6 cos(2 pi l / k) and a wide gap to the
   noise.  kind 1 (fallback, k >= 2): rows j = k-1 and 2k-1 are b_0 + 1e-2 b_{k-1},
   the other rows mix only b_0..b_{k-2}, noise 1e-4: lambda_k ~ 1e-4 < 1e-3
   lambda_1, still rank k. */
static void s_bucket(b_rng *r, const float *B, size_t k, size_t d, int kind, float *X)
{
    size_t m = 2 * k;
    float noise = (float)((kind ? 1e-4 : 1e-2) / sqrt((double)d));
    for (size_t j = 0; j < m; j++) {
        float *x = X + j * d;
        size_t a = j % k;
        memset(x, 0, d * sizeof *x);
        if (kind == 1 && a == k - 1 && k > 1) {
            for (size_t c = 0; c < d; c++)
                x[c] = B[c] + 1e-2f * B[a * d + c];
        } else {
            /* the fallback kind mixes only among b_0..b_{k-2}: b_{k-1} stays tiny */
            size_t nxt = kind == 1 && k > 1 ? (a + 1) % (k - 1) : (a + 1) % k;
            const float *ba = B + a * d, *bb = B + nxt * d;
            float w = j >= k ? 0.3f : 0.0f;
            for (size_t c = 0; c < d; c++)
                x[c] = ba[c] + w * bb[c];
        }
        b_add_signs(r, x, d, noise);
        double ss = 0;
        for (size_t c = 0; c < d; c++)
            ss += (double)x[c] * x[c];
        float inv = (float)(1.0 / sqrt(ss));
        for (size_t c = 0; c < d; c++)
            x[c] *= inv;
    }
}

/* ------------------------------------------------------------- topk runs */
typedef struct {
    size_t calls;
    double wall, cpu;
    size_t path_count[2];
    size_t rank_min;
    int err;
} run_result;

/* Call la_topk_rows on pool buckets in rotation until `seconds` have passed
   (at least 3 calls, after one warm-up call). */
static run_result s_run_topk(la_ws *ws, const float *pool, size_t nb, size_t m, size_t d, size_t k, float *V,
                             double seconds)
{
    run_result res;
    memset(&res, 0, sizeof res);
    res.rank_min = k;
    size_t rank = 0;
    int path = 0;
    la_topk_rows(ws, pool, m, d, k, V, NULL, &rank, &path); /* warm-up */
    double t0 = b_now(), c0 = b_cpu(), t = t0;
    size_t i = 1 % nb;
    while (res.calls < 3 || t - t0 < seconds) {
        int rc = la_topk_rows(ws, pool + i * m * d, m, d, k, V, NULL, &rank, &path);
        if (rc)
            res.err = rc;
        res.path_count[path & 1]++;
        if (rank < res.rank_min)
            res.rank_min = rank;
        res.calls++;
        i = (i + 1) % nb;
        t = b_now();
    }
    res.wall = t - t0;
    res.cpu = b_cpu() - c0;
    return res;
}

typedef struct {
    double sgemm_gflops, read_bw, read_bw_w, memcpy_bw;
} refs;

static double s_flops(size_t m, size_t k, size_t d)
{
    return ((double)m * m + 2.0 * k * m + 4.0 * k * k) * (double)d;
}

static void s_print_row(const char *label, size_t k, size_t d, size_t m, size_t nb, const run_result *r,
                        const refs *ref, int threads)
{
    double per = r->wall / (double)r->calls;
    double bps = 1.0 / per;
    double gf = s_flops(m, k, d) * bps / 1e9;
    double xbw = (double)m * d * sizeof(float) * bps;
    printf("%-12s %3zu %8zu %3zu %6zu %7zu %11.1f %10.1f %11.3g %8.2f %7.1f%% %8.2f %6.1f%% %5.0f%%  %zu/%zu%s\n",
           label, k, d, m, nb, r->calls, per * 1e6, bps, (double)m * bps, gf, 100.0 * gf / ref->sgemm_gflops,
           xbw / 1e9, 100.0 * xbw / ref->read_bw, 100.0 * r->cpu / (r->wall * threads), r->path_count[0],
           r->path_count[1], r->err ? "  ERROR" : (r->rank_min < k ? "  (rank < k seen)" : ""));
    fflush(stdout);
}

/* ------------------------------------------------------------- breakdown */
typedef struct {
    double syrk, syevr, gemm, qr, proj, copy;
} parts;

/* Per-call seconds of each step of the float path, cold (rotating) buckets. */
static parts s_breakdown(la_ws *ws, const float *pool, size_t nb, size_t m, size_t d, size_t k, float *V,
                         double seconds, const float *P, size_t q, float *A)
{
    parts p;
    memset(&p, 0, sizeof p);
    float *G = b_alloc(m * m * sizeof *G);
    double *Gd = b_alloc(m * m * sizeof *Gd), *Gc = b_alloc(m * m * sizeof *Gc);
    double *w = b_alloc((m + 1) * sizeof *w), *Z = b_alloc(m * (k + 1) * sizeof *Z);
    float *Zs = b_alloc(m * k * sizeof *Zs);
    b_rng r;
    b_seed(&r, 99);
    b_fill_uniform_f(&r, Zs, m * k);
    double budget = seconds / 5;
    size_t n, i;
    double t0;

#define LOOP(field, body)                                                    \
    do {                                                                     \
        i = 0;                                                               \
        { body; } /* warm-up */                                              \
        n = 0;                                                               \
        i = 0;                                                               \
        t0 = b_now();                                                        \
        while (n < 3 || b_now() - t0 < budget) {                             \
            body;                                                            \
            n++;                                                             \
            i = (i + 1) % nb;                                                \
        }                                                                    \
        p.field = (b_now() - t0) / (double)n;                                \
    } while (0)

    LOOP(syrk, cblas_ssyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)m, (int)d, 1.0f, pool + i * m * d, (int)d,
                           0.0f, G, (int)m));
    for (size_t a = 0; a < m; a++)
        for (size_t b = a; b < m; b++)
            Gd[a * m + b] = Gd[b * m + a] = G[a * m + b];
    LOOP(syevr, {
        memcpy(Gc, Gd, m * m * sizeof *Gc);
        la_syevr_top(Gc, m, k + 1 < m ? k + 1 : m, w, Z);
    });
    LOOP(gemm, cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)k, (int)d, (int)m, 1.0f, Zs, (int)k,
                           pool + i * m * d, (int)d, 0.0f, V, (int)d));
    la_topk_rows(ws, pool, m, d, k, V, NULL, NULL, NULL); /* an orthonormal V */
    LOOP(qr, la_orthonormalize_rows(V, k, d));
    /* the Gram copy + symmetrisation loop of la_topk_rows, for completeness */
    LOOP(copy, {
        for (size_t a = 0; a < m; a++)
            for (size_t b = a; b < m; b++)
                Gd[a * m + b] = Gd[b * m + a] = G[a * m + b];
    });
    if (P) {
        double save = budget;
        budget = seconds / 2;
        LOOP(proj, la_project_reference(V, k, d, P, q, A));
        budget = save;
    }
#undef LOOP
    free(G); free(Gd); free(Gc); free(w); free(Z); free(Zs);
    return p;
}

/* ------------------------------------------------------------- estimator */
/* End to end through the public API with the library's own workers: push t*m
   pre-generated rows in one call, then wait (polling the stats) until every
   bucket's basis is done.  The epoch is not closed (no aggregation here). */
static void s_estimator(const opts *o, size_t k, size_t d, double topk_proj_rate, const refs *ref)
{
    size_t m = 2 * k, t = o->est_t;
    dps_config cfg;
    dps_config_init(&cfg, d, k);
    cfg.t = t;
    cfg.window = t;
    cfg.workers = o->workers;
    cfg.seeded = 1;
    cfg.seed = 1;
    size_t bound = dps_estimator_memory_bound(&cfg);
    double need = (double)bound + (double)t * m * d * sizeof(float);
    if (need > o->est_max_gb * 1e9) {
        printf("estimator    %3zu %8zu   skipped: memory bound %.2f GB + rows %.2f GB > --est-max-gb %.1f\n", k, d,
               bound / 1e9, (double)t * m * d * 4 / 1e9, o->est_max_gb);
        return;
    }
    float *B = b_alloc(k * d * sizeof *B);
    float *rows = b_alloc(t * m * d * sizeof *rows);
    b_rng r;
    b_seed(&r, 4242 + d + k);
    s_directions(&r, B, k, d);
    for (size_t b = 0; b < t; b++)
        s_bucket(&r, B, k, d, 0, rows + b * m * d);
    dps_estimator *est = NULL;
    int rc = dps_estimator_new(&est, &cfg);
    if (rc) {
        printf("estimator    %3zu %8zu   dps_estimator_new: %s\n", k, d, dps_strerror(rc));
        free(B); free(rows);
        return;
    }
    double c0 = b_cpu();
    double t0 = b_now();
    size_t taken = 0;
    rc = dps_estimator_push(est, rows, 1, d, &taken); /* opens the epoch: P, buffers */
    double t1 = b_now();
    if (!rc)
        rc = dps_estimator_push(est, rows + d, t * m - 1, d, &taken);
    double t2 = b_now();
    dps_estimator_stats st;
    dps_estimator_get_stats(est, &st);
    size_t done_at_push = st.buckets_done_epoch;
    while (st.buckets_done_epoch < t) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
        dps_estimator_get_stats(est, &st);
    }
    double t3 = b_now();
    double cpu = b_cpu() - c0;
    dps_estimator_destroy(&est);
    if (rc && rc != DPS_EFULL)
        printf("estimator    %3zu %8zu   push: %s\n", k, d, dps_strerror(rc));
    double drain = t3 - t2, total = t3 - t0;
    double drain_rate = drain > 0 ? (double)(t - done_at_push) / drain : 0;
    double e2e = (double)t / total;
    double drain_bw = drain_rate * m * d * sizeof(float);
    printf("estimator    %3zu %8zu %3zu %4zu %2d | epoch start %8.1f ms | push %8.1f ms (%zu/%zu buckets done) | drain %8.1f "
           "ms: %9.1f buckets/s = %.2fx the 1-thread topk+proj rate, X %6.2f GB/s = %5.1f%% of %d-thread read BW | "
           "end-to-end %9.1f buckets/s %10.3g rows/s | cpu %3.0f%% of %d cores\n",
           k, d, m, t, o->workers, (t1 - t0) * 1e3, (t2 - t1) * 1e3, done_at_push, t, drain * 1e3, drain_rate,
           topk_proj_rate > 0 ? drain_rate / topk_proj_rate : 0, drain_bw / 1e9, 100 * drain_bw / ref->read_bw_w,
           o->workers, e2e, e2e * m, 100 * cpu / (total * (double)sysconf(_SC_NPROCESSORS_ONLN)),
           (int)sysconf(_SC_NPROCESSORS_ONLN));
    fflush(stdout);
    free(B);
    free(rows);
}

/* ------------------------------------------------------------------ main */
int main(int argc, char **argv)
{
    cli_set_program("bench-bucket");
    opts o = {{4, 10}, 2, {1000, 10000, 100000, 1000000}, 4, 0.4, 256u << 20, 1, 1, 1, 1, 1, 1, 2, b_lib_t(), 4.0,
              2048, 5};
    b_size_list ks = {o.ks, o.nk, 8}, ds = {o.ds, o.nd, 8};
    size_t pool_mb = o.pool_bytes >> 20;
    int no_fallback = 0, no_hot = 0, no_breakdown = 0, no_project = 0, no_estimator = 0, quick = 0, help = 0;
    char t_def[24];
    cli_opt flags[] = {
        B_SIZES("--k", &ks, "LIST", "4,10", "subspace dimensions; m = 2k rows per bucket"),
        B_SIZES("--d", &ds, "LIST", "1e3,1e4,1e5,1e6", "dimensions"),
        {"--time", CLI_OPT_DOUBLE, &o.seconds, "S", "0.4", "seconds per measurement", 0},
        {"--pool-mb", CLI_OPT_SIZE, &pool_mb, "N", "256", "size of the cold pool of distinct buckets", 0},
        B_INT("--threads", &o.threads, "N", "1: the library runs its own workers, each single-threaded",
              "OpenBLAS threads for the bucket step and the sgemm peak"),
        {"--no-fallback", CLI_OPT_FLAG, &no_fallback, NULL, NULL, "skip the double-precision fallback path", 0},
        {"--no-hot", CLI_OPT_FLAG, &no_hot, NULL, NULL, "skip the hot (one bucket, cache-resident) figure", 0},
        {"--no-breakdown", CLI_OPT_FLAG, &no_breakdown, NULL, NULL, "skip the per-call breakdown", 0},
        {"--no-project", CLI_OPT_FLAG, &no_project, NULL, NULL, "skip the reference projection V_j P^T (q = 10k)", 0},
        {"--no-estimator", CLI_OPT_FLAG, &no_estimator, NULL, NULL, "skip the estimator end-to-end figure", 0},
        B_INT("--workers", &o.workers, "N", "2", "estimator worker threads"),
        B_SIZE("--est-t", &o.est_t, "N", b_lib_t_text(t_def, sizeof t_def), "estimator buckets per epoch"),
        {"--est-max-gb", CLI_OPT_DOUBLE, &o.est_max_gb, "X", "4",
         "skip estimator configurations whose memory bound plus the pre-generated rows exceed X GB", 0},
        B_SIZE("--peak-n", &o.peak_n, "N", "2048", "sgemm reference size n^3"),
        {"--quick", CLI_OPT_FLAG, &quick, NULL, NULL, "--d 1e3,1e4,1e5 --time 0.2", 0},
        B_HELP(&help),
    };
    size_t n_flags = sizeof flags / sizeof flags[0];
    int prc = b_parse(argc, argv, flags, n_flags, &help, s_synopsis);
    if (prc >= 0)
        return prc;
    o.nk = ks.n;
    o.nd = ds.n;
    o.pool_bytes = pool_mb << 20;
    o.fallback = !no_fallback;
    o.hot = !no_hot;
    o.breakdown = !no_breakdown;
    o.project = !no_project;
    o.estimator = !no_estimator;
    if (quick && !cli_opt_given(flags, n_flags, "--d")) {
        o.ds[0] = 1000, o.ds[1] = 10000, o.ds[2] = 100000;
        o.nd = 3;
    }
    if (quick && !cli_opt_given(flags, n_flags, "--time"))
        o.seconds = 0.2;
    if (!o.nk || !o.nd || !(o.seconds > 0) || o.threads < 1 || o.workers < 1 || o.est_t < 2 || o.peak_n < 64)
        CLI_USAGE("bad option value (see --help)");
    for (size_t i = 0; i < o.nk; i++)
        if (o.ks[i] < 1 || 2 * o.ks[i] > 4096) {
            fprintf(stderr, "bench-bucket: k out of range\n");
            return 2;
        }

    dps_blas_set_threads(o.threads);
    b_header("bench-bucket: per-bucket basis step la_topk_rows (m = 2k)", o.threads);

    refs ref;
    printf("# references (same run, same BLAS thread count):\n");
    fflush(stdout);
    ref.sgemm_gflops = b_sgemm_peak(o.peak_n, o.peak_reps);
    printf("#   sgemm %zu^3, best of %d: %.1f GFLOP/s (%d thread%s)\n", o.peak_n, o.peak_reps, ref.sgemm_gflops,
           o.threads, o.threads > 1 ? "s" : "");
    fflush(stdout);
    ref.read_bw = b_read_bw(512u << 20, 1, 3);
    ref.read_bw_w = o.workers > 1 ? b_read_bw(512u << 20, o.workers, 3) : ref.read_bw;
    ref.memcpy_bw = b_memcpy_bw(256u << 20, 3);
    printf("#   memory read (sasum over 512 MiB), best of 3: %.2f GB/s 1 thread, %.2f GB/s %d threads\n",
           ref.read_bw / 1e9, ref.read_bw_w / 1e9, o.workers);
    printf("#   memcpy 256 MiB, 1 thread: %.2f GB/s copied (traffic ~2-3x that)\n", ref.memcpy_bw / 1e9);
    printf("#\n# flops/bucket = m^2 d + 2 k m d + 4 k^2 d (nominal; the double path does more)."
           "  X GB/s = m*d*4 bytes per bucket / time.\n");
    printf("# %%sgemm = bucket GFLOP/s / sgemm GFLOP/s;  %%readBW = X GB/s / 1-thread read BW;"
           "  cpu = process cpu / (wall * threads);  paths = float/double calls\n");
    printf("%-12s %3s %8s %3s %6s %7s %11s %10s %11s %8s %8s %8s %7s %6s  %s\n", "path", "k", "d", "m", "pool",
           "calls", "us/bucket", "buckets/s", "rows/s", "GFLOP/s", "%sgemm", "X GB/s", "%readBW", "cpu", "paths");
    fflush(stdout);

    double summary_ratio[8][8], summary_bw[8][8], topkproj_rate[8][8];
    memset(topkproj_rate, 0, sizeof topkproj_rate);
    for (size_t ik = 0; ik < o.nk; ik++) {
        for (size_t id = 0; id < o.nd; id++) {
            size_t k = o.ks[ik], d = o.ds[id], m = 2 * k;
            summary_ratio[ik][id] = summary_bw[ik][id] = 0;
            if (k >= d) {
                printf("%-12s %3zu %8zu   skipped: k >= d\n", "-", k, d);
                continue;
            }
            size_t bucket_bytes = m * d * sizeof(float);
            size_t nb = o.pool_bytes / bucket_bytes;
            if (nb < 2)
                nb = 2;
            b_rng r;
            b_seed(&r, 1000 * k + d);
            float *B = b_alloc(k * d * sizeof *B);
            float *pool = b_alloc(nb * bucket_bytes);
            float *V = b_alloc(k * d * sizeof *V);
            s_directions(&r, B, k, d);
            for (size_t b = 0; b < nb; b++)
                s_bucket(&r, B, k, d, 0, pool + b * m * d);
            la_ws *ws = la_ws_new(m, d, k);
            if (!ws) {
                fprintf(stderr, "la_ws_new failed\n");
                return 1;
            }
            run_result rc = s_run_topk(ws, pool, nb, m, d, k, V, o.seconds);
            s_print_row("float/cold", k, d, m, nb, &rc, &ref, o.threads);
            double per_topk = rc.wall / (double)rc.calls;
            summary_ratio[ik][id] = s_flops(m, k, d) / per_topk / 1e9 / ref.sgemm_gflops;
            summary_bw[ik][id] = (double)bucket_bytes / per_topk / ref.read_bw;
            if (o.hot) {
                run_result rh = s_run_topk(ws, pool, 1, m, d, k, V, o.seconds / 2);
                s_print_row("float/hot", k, d, m, 1, &rh, &ref, o.threads);
            }
            if (o.fallback && k >= 2) {
                /* a smaller pool of fallback buckets (the path is slower) */
                size_t nf = nb < 64 ? nb : 64;
                if (nf * bucket_bytes < o.pool_bytes / 2)
                    nf = o.pool_bytes / 2 / bucket_bytes;
                if (nf > nb)
                    nf = nb;
                if (nf < 2)
                    nf = 2;
                float *fpool = b_alloc(nf * bucket_bytes);
                for (size_t b = 0; b < nf; b++)
                    s_bucket(&r, B, k, d, 1, fpool + b * m * d);
                run_result rf = s_run_topk(ws, fpool, nf, m, d, k, V, o.seconds);
                s_print_row("double/cold", k, d, m, nf, &rf, &ref, o.threads);
                free(fpool);
            }
            float *P = NULL, *A = NULL;
            size_t q = 10 * k;
            if (o.project) {
                P = b_alloc(q * d * sizeof *P);
                A = b_alloc(k * q * sizeof *A);
                b_fill_uniform_f(&r, P, q * d);
            }
            if (o.breakdown || o.project) {
                parts p = s_breakdown(ws, pool, nb, m, d, k, V, o.seconds, o.project ? P : NULL, q, A);
                double sum = p.syrk + p.syevr + p.gemm + p.qr + p.copy;
                double bytesX = (double)bucket_bytes;
                printf("  breakdown k=%zu d=%zu (us/call, cold): ssyrk %.1f (%.1f GB/s of X, %.1f GFLOP/s) | dsyevr "
                       "%.1f | Gram copy %.2f | sgemm %.1f (%.1f GB/s of X) | clean-up %.1f (la_orthonormalize_rows: Cholesky QR, %zux%zu) | "
                       "sum %.1f vs whole %.1f",
                       k, d, p.syrk * 1e6, bytesX / p.syrk / 1e9, (double)m * m * d / p.syrk / 1e9, p.syevr * 1e6,
                       p.copy * 1e6, p.gemm * 1e6, bytesX / p.gemm / 1e9, p.qr * 1e6, d, k, sum * 1e6,
                       per_topk * 1e6);
                if (o.project && p.proj > 0) {
                    double pf = 2.0 * k * q * d;
                    printf(" | reference projection V P^T (q=%zu, double) %.1f us = %.2fx the topk step, %.2f "
                           "GFLOP/s, P read %.2f GB/s (%.0f%% of read BW)",
                           q, p.proj * 1e6, p.proj / per_topk, pf / p.proj / 1e9,
                           (double)q * d * sizeof(double) / p.proj / 1e9,
                           100.0 * q * d * sizeof(double) / p.proj / ref.read_bw);
                    topkproj_rate[ik][id] = 1.0 / (per_topk + p.proj);
                    printf("\n  bucket job (topk + projection, 1 thread): %.1f buckets/s, %.3g rows/s",
                           topkproj_rate[ik][id], topkproj_rate[ik][id] * m);
                }
                printf("\n");
                fflush(stdout);
            }
            la_ws_free(&ws);
            free(pool);
            free(V);
            free(B);
            free(P);
            free(A);
            if (o.estimator)
                s_estimator(&o, k, d, topkproj_rate[ik][id], &ref);
        }
    }
    printf("#\n# headline (float path, cold): bucket GFLOP/s / sgemm GFLOP/s   |   X read rate / memory read BW\n");
    for (size_t ik = 0; ik < o.nk; ik++)
        for (size_t id = 0; id < o.nd; id++)
            if (summary_ratio[ik][id] > 0)
                printf("#   k=%-3zu d=%-8zu  %6.3f   |   %6.3f\n", o.ks[ik], o.ds[id], summary_ratio[ik][id],
                       summary_bw[ik][id]);
    b_footer();
    return 0;
}
