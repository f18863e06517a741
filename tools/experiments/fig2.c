/* fig2.c - dps-fig2: one configuration of the private mean estimation task of
   Tsfadia, "DP subspace estimation", sec. 6, Figure 2 (DESIGN 3.8 and 4).

   For each repetition: n = 2 t k rows (t = 125: n = 250 k) from the paper's
   generator (dps_synth_paper, tau = (tau/d) * d), held in memory, and for each
   method an estimate x_hat of mean(X), with error ||x_hat - mean(X)||_2:

     est    EstSubspace: the streaming estimator (t buckets of m = 2k rows,
            q = 10k reference points, W = t) on all n rows with rho/2 and delta,
            one epoch; x~ = Gaussian mean with rho/2; x_hat = Pi~ x~.
            WFC FAIL: x_hat = 0 (status "fail", counted by the caller).
     ag     Analyze Gauss (DESIGN 3.5) in place of the subspace step; it spends
            (2 rho', delta), so it is called with rho' = rho/4 to spend rho/2.
            FAIL: x_hat = 0.  d x d memory: "skipped" above --ag-max-d.
     gauss  the Gaussian mechanism alone on the full rho.

   Output: CSV on stdout, one line per (rep, method):
     d,k,tau_over_d,rep,method,err_mean,sin_subspace,status,seconds
   sin_subspace is sin of the largest principal angle to the generator's
   subspace (est, ag; empty for gauss and when nothing was released).  Notes
   (failures, diagnostics) go to stderr as lines starting with '#'.

   Randomness: everything is seeded (experiments only).  Repetition r of seed S
   draws its data from the labelled stream (S, "fig2-data", r) and each
   method's noise from its own labelled stream, so the methods see the same
   data and a method's noise does not depend on which other methods run. */
#include <dpsubspace.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    size_t d, k, t;
    double tau_over_d;
    int reps, first_rep;
    uint64_t seed;
    double rho, delta;
    int run_est, run_ag, run_gauss;
    double alpha, tau;       /* 0: library default */
    double split[3];         /* all 0: library default */
    dps_aggregator aggregator;
    int workers;             /* 0: library default */
    int blas_threads;        /* 0: library default (1) */
    size_t ag_max_d;
    int header, verbose;
} options;

static void s_usage(FILE *f)
{
    fprintf(f,
            "usage: dps-fig2 --d D [options]\n"
            "One configuration of Figure 2 (Tsfadia sec. 6): private mean estimation of\n"
            "n = 250k rows (n = 2tk, t = 125) near a k-dim subspace, CSV on stdout:\n"
            "  d,k,tau_over_d,rep,method,err_mean,sin_subspace,status,seconds\n"
            "options:\n"
            "  --d D             dimension (required)\n"
            "  --k K             subspace dimension (default 4)\n"
            "  --tau-over-d X    generator noise level tau = X*d (default 10)\n"
            "  --reps R          repetitions (default 1)\n"
            "  --first-rep I     index of the first repetition (default 0)\n"
            "  --seed S          seed base (default 1)\n"
            "  --rho RHO         total zCDP rho (default 2)\n"
            "  --delta DELTA     delta (default 1e-5)\n"
            "  --methods LIST    comma list of est,ag,gauss (default all)\n"
            "  --alpha A         WFC slope (default: library's, 1/2)\n"
            "  --tau T           radius search target fraction of t (default: 1/2)\n"
            "  --split S:C:M     rho split search:count:mean (default 0.2:0.1:0.7)\n"
            "  --aggregator NAME reference (default) or projection\n"
            "  --t T             buckets per epoch (default 125)\n"
            "  --workers N       estimator worker threads (default: online CPUs)\n"
            "  --blas-threads N  OpenBLAS threads (default 1: the workers give the parallelism)\n"
            "  --ag-max-d D      skip Analyze Gauss above this d (default 20000; it forms d x d)\n"
            "  --no-header       do not print the CSV header\n"
            "  --verbose         per-repetition diagnostics on stderr\n");
}

static int s_parse_double(const char *s, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

static int s_parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        return -1;
    *out = (size_t)v;
    return 0;
}

static int s_parse_methods(const char *s, options *o)
{
    o->run_est = o->run_ag = o->run_gauss = 0;
    char buf[256];
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (!strcmp(tok, "est"))
            o->run_est = 1;
        else if (!strcmp(tok, "ag"))
            o->run_ag = 1;
        else if (!strcmp(tok, "gauss"))
            o->run_gauss = 1;
        else
            return -1;
    }
    return (o->run_est || o->run_ag || o->run_gauss) ? 0 : -1;
}

static int s_parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->k = 4;
    o->t = 125;
    o->tau_over_d = 10;
    o->reps = 1;
    o->seed = 1;
    o->rho = 2;
    o->delta = 1e-5;
    o->run_est = o->run_ag = o->run_gauss = 1;
    o->aggregator = DPS_AGG_REFERENCE;
    o->ag_max_d = 20000;
    o->header = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        size_t sz;
        double x;
#define NEED()                                                   \
    do {                                                         \
        if (!v) {                                                \
            fprintf(stderr, "dps-fig2: %s needs a value\n", a);  \
            return -1;                                           \
        }                                                        \
        i++;                                                     \
    } while (0)
#define BAD()                                                        \
    do {                                                             \
        fprintf(stderr, "dps-fig2: bad value for %s: %s\n", a, v);   \
        return -1;                                                   \
    } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            s_usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--no-header")) {
            o->header = 0;
        } else if (!strcmp(a, "--verbose")) {
            o->verbose = 1;
        } else if (!strcmp(a, "--d")) {
            NEED();
            if (s_parse_size(v, &o->d))
                BAD();
        } else if (!strcmp(a, "--k")) {
            NEED();
            if (s_parse_size(v, &o->k))
                BAD();
        } else if (!strcmp(a, "--t")) {
            NEED();
            if (s_parse_size(v, &o->t))
                BAD();
        } else if (!strcmp(a, "--tau-over-d")) {
            NEED();
            if (s_parse_double(v, &o->tau_over_d) || !(o->tau_over_d > 0))
                BAD();
        } else if (!strcmp(a, "--reps")) {
            NEED();
            if (s_parse_size(v, &sz) || sz < 1 || sz > 1000000)
                BAD();
            o->reps = (int)sz;
        } else if (!strcmp(a, "--first-rep")) {
            NEED();
            if (s_parse_size(v, &sz) || sz > 1000000000)
                BAD();
            o->first_rep = (int)sz;
        } else if (!strcmp(a, "--seed")) {
            NEED();
            if (s_parse_size(v, &sz))
                BAD();
            o->seed = (uint64_t)sz;
        } else if (!strcmp(a, "--rho")) {
            NEED();
            if (s_parse_double(v, &o->rho) || !(o->rho > 0) || !isfinite(o->rho))
                BAD();
        } else if (!strcmp(a, "--delta")) {
            NEED();
            if (s_parse_double(v, &o->delta) || !(o->delta > 0 && o->delta < 1))
                BAD();
        } else if (!strcmp(a, "--methods")) {
            NEED();
            if (s_parse_methods(v, o))
                BAD();
        } else if (!strcmp(a, "--alpha")) {
            NEED();
            if (s_parse_double(v, &x) || !(x > 0 && x <= 1))
                BAD();
            o->alpha = x;
        } else if (!strcmp(a, "--tau")) {
            NEED();
            if (s_parse_double(v, &x) || !(x > 0 && x <= 1))
                BAD();
            o->tau = x;
        } else if (!strcmp(a, "--split")) {
            NEED();
            char *end = NULL;
            const char *p = v;
            for (int j = 0; j < 3; j++) {
                errno = 0;
                o->split[j] = strtod(p, &end);
                if (errno || end == p || !(o->split[j] > 0) || (j < 2 && *end != ':') || (j == 2 && *end))
                    BAD();
                p = end + 1;
            }
        } else if (!strcmp(a, "--aggregator")) {
            NEED();
            if (!strcmp(v, "reference"))
                o->aggregator = DPS_AGG_REFERENCE;
            else if (!strcmp(v, "projection"))
                o->aggregator = DPS_AGG_PROJECTION;
            else
                BAD();
        } else if (!strcmp(a, "--workers")) {
            NEED();
            if (s_parse_size(v, &sz) || sz < 1 || sz > 256)
                BAD();
            o->workers = (int)sz;
        } else if (!strcmp(a, "--blas-threads")) {
            NEED();
            if (s_parse_size(v, &sz) || sz < 1 || sz > 256)
                BAD();
            o->blas_threads = (int)sz;
        } else if (!strcmp(a, "--ag-max-d")) {
            NEED();
            if (s_parse_size(v, &o->ag_max_d))
                BAD();
        } else {
            fprintf(stderr, "dps-fig2: unknown argument %s (try --help)\n", a);
            return -1;
        }
#undef NEED
#undef BAD
    }
    if (o->d < 2 || o->k < 1 || o->k >= o->d || o->t < 2) {
        fprintf(stderr, "dps-fig2: need --d >= 2, 1 <= --k < d and --t >= 2\n");
        return -1;
    }
    return 0;
}

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double s_dist(const double *a, const double *b, size_t d)
{
    double s = 0;
    for (size_t j = 0; j < d; j++) {
        double v = a[j] - b[j];
        s += v * v;
    }
    return sqrt(s);
}

/* A 64-bit value from the labelled stream (seed, label, index). */
static int s_derive(uint64_t seed, const char *label, uint64_t index, uint64_t *out)
{
    dps_rng *r = NULL;
    int rc = dps_rng_new_labelled(&r, seed, label, index);
    if (rc)
        return rc;
    *out = dps_rng_u64(r);
    dps_rng_destroy(&r);
    return DPS_OK;
}

static void s_row(const options *o, int rep, const char *method, double err, double sin, const char *status,
                  double secs)
{
    char e[32] = "", s[32] = "";
    if (isfinite(err))
        snprintf(e, sizeof e, "%.6e", err);
    if (isfinite(sin))
        snprintf(s, sizeof s, "%.6e", sin);
    printf("%zu,%zu,%g,%d,%s,%s,%s,%s,%.3f\n", o->d, o->k, o->tau_over_d, rep, method, e, s, status, secs);
    fflush(stdout);
}

/* EstSubspace + Gaussian mean on rho/2 each.  Returns a dps_err; *failed = 1
   when the snapshot said FAIL (x_hat = 0 then). */
static int s_run_est(const options *o, int rep, const float *X, size_t n, const float *truth, double *xhat,
                     double *sin_out, int *failed)
{
    size_t d = o->d, k = o->k;
    *failed = 0;
    *sin_out = NAN;
    dps_config cfg;
    dps_config_init(&cfg, d, k);
    cfg.t = o->t;
    cfg.m = 2 * k;
    cfg.window = cfg.t;
    cfg.q = 10 * k;
    cfg.aggregator = o->aggregator;
    cfg.rho_epoch = o->rho / 2;
    cfg.delta_epoch = o->delta;
    cfg.cap.delta_target = o->delta;
    if (o->alpha > 0)
        cfg.alpha = o->alpha;
    if (o->tau > 0)
        cfg.tau = o->tau;
    if (o->split[0] > 0) {
        cfg.split_search = o->split[0];
        cfg.split_count = o->split[1];
        cfg.split_mean = o->split[2];
    }
    if (o->workers > 0)
        cfg.workers = o->workers;
    cfg.seeded = 1;
    int rc = s_derive(o->seed, "fig2-est-noise", (uint64_t)rep, &cfg.seed);
    if (!rc)
        rc = s_derive(o->seed, "fig2-est-public", (uint64_t)rep, &cfg.public_seed);
    const char *why = NULL;
    if (!rc && (rc = dps_config_check(&cfg, &why)) != DPS_OK) {
        fprintf(stderr, "# est: configuration refused: %s\n", why);
        return rc;
    }
    dps_estimator *est = NULL;
    dps_snapshot *snap = NULL;
    dps_rng *mrng = NULL;
    double *xt = malloc(d * sizeof *xt);
    if (!xt)
        return DPS_ENOMEM;
    if (!rc)
        rc = dps_estimator_new(&est, &cfg);
    if (!rc) {
        size_t taken = 0;
        rc = dps_estimator_push(est, X, n, d, &taken);
        if (rc == DPS_EFULL)
            fprintf(stderr, "# est: epoch full after %zu of %zu rows (n != t*m?)\n", taken, n);
    }
    if (!rc)
        rc = dps_estimator_close_epoch(est, &snap);
    if (!rc)
        rc = dps_rng_new_labelled(&mrng, o->seed, "fig2-est-mean", (uint64_t)rep);
    if (!rc)
        rc = dps_gaussian_mean(X, n, d, o->rho / 2, mrng, xt);
    if (!rc) {
        dps_snapshot_info info;
        dps_snapshot_get_info(snap, &info);
        const float *V = dps_snapshot_basis(snap);
        if (o->verbose)
            fprintf(stderr, "# rep %d est: status %s radius %.3g w_hat %.2f buckets %zu rho %.3g delta %.3g %s\n",
                    rep, dps_status_name(info.status), info.radius, info.w_hat, info.buckets_used,
                    info.epoch_cost.rho, info.epoch_cost.delta, info.reason);
        if (info.status == DPS_SNAP_RELEASED && V) {
            dps_project(V, k, d, xt, xhat);
            *sin_out = dps_subspace_sin(V, truth, k, d, NULL);
        } else {
            *failed = 1;
            memset(xhat, 0, d * sizeof *xhat);
            fprintf(stderr, "# d=%zu k=%zu tau/d=%g rep %d est: %s (%s); x_hat = 0\n", d, k, o->tau_over_d, rep,
                    dps_status_name(info.status), info.reason);
        }
    }
    dps_snapshot_destroy(&snap);
    dps_estimator_destroy(&est);
    dps_rng_destroy(&mrng);
    free(xt);
    return rc;
}

/* Analyze Gauss with rho/4 (spends rho/2) + Gaussian mean on rho/2. */
static int s_run_ag(const options *o, int rep, const float *X, size_t n, const float *truth, double *xhat,
                    double *sin_out, int *failed)
{
    size_t d = o->d, k = o->k;
    *failed = 0;
    *sin_out = NAN;
    dps_rng *rng = NULL, *mrng = NULL;
    float *V = malloc(k * d * sizeof *V);
    double *xt = malloc(d * sizeof *xt);
    int released = 0;
    int rc = (V && xt) ? DPS_OK : DPS_ENOMEM;
    if (!rc)
        rc = dps_rng_new_labelled(&rng, o->seed, "fig2-ag-noise", (uint64_t)rep);
    if (!rc)
        rc = dps_rng_new_labelled(&mrng, o->seed, "fig2-ag-mean", (uint64_t)rep);
    if (!rc)
        rc = dps_analyze_gauss(X, n, d, k, o->rho / 4, o->delta, rng, V, &released);
    if (!rc)
        rc = dps_gaussian_mean(X, n, d, o->rho / 2, mrng, xt);
    if (!rc) {
        if (released) {
            dps_project(V, k, d, xt, xhat);
            *sin_out = dps_subspace_sin(V, truth, k, d, NULL);
        } else {
            *failed = 1;
            memset(xhat, 0, d * sizeof *xhat);
            fprintf(stderr, "# d=%zu k=%zu tau/d=%g rep %d ag: FAIL (noisy gap too small); x_hat = 0\n", d, k,
                    o->tau_over_d, rep);
        }
    }
    dps_rng_destroy(&rng);
    dps_rng_destroy(&mrng);
    free(V);
    free(xt);
    return rc;
}

static int s_run_gauss(const options *o, int rep, const float *X, size_t n, double *xhat)
{
    dps_rng *rng = NULL;
    int rc = dps_rng_new_labelled(&rng, o->seed, "fig2-gauss", (uint64_t)rep);
    if (!rc)
        rc = dps_gaussian_mean(X, n, o->d, o->rho, rng, xhat);
    dps_rng_destroy(&rng);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    if (s_parse_args(argc, argv, &o)) {
        s_usage(stderr);
        return 2;
    }
    if (o.blas_threads > 0)
        dps_blas_set_threads(o.blas_threads);
    size_t d = o.d, k = o.k, n = 2 * o.t * k;
    double tau = o.tau_over_d * (double)d;
    float *X = malloc(n * d * sizeof *X);
    float *truth = malloc(k * d * sizeof *truth);
    double *mean = malloc(d * sizeof *mean), *xhat = malloc(d * sizeof *xhat);
    if (!X || !truth || !mean || !xhat) {
        fprintf(stderr, "dps-fig2: out of memory for n = %zu rows of d = %zu\n", n, d);
        return 1;
    }
    if (o.header)
        printf("d,k,tau_over_d,rep,method,err_mean,sin_subspace,status,seconds\n");
    if (o.verbose)
        fprintf(stderr, "# dps-fig2: d=%zu k=%zu n=%zu tau=%g rho=%g delta=%g seed=%llu openblas core %s\n", d, k, n,
                tau, o.rho, o.delta, (unsigned long long)o.seed, dps_blas_corename());
    int status = 0;
    for (int rep = o.first_rep; rep < o.first_rep + o.reps; rep++) {
        dps_rng *drng = NULL;
        int rc = dps_rng_new_labelled(&drng, o.seed, "fig2-data", (uint64_t)rep);
        if (!rc)
            rc = dps_synth_paper(drng, n, d, k, tau, X, truth);
        dps_rng_destroy(&drng);
        if (rc) {
            fprintf(stderr, "dps-fig2: data generation failed: %s\n", dps_strerror(rc));
            return 1;
        }
        memset(mean, 0, d * sizeof *mean);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < d; j++)
                mean[j] += X[i * d + j];
        for (size_t j = 0; j < d; j++)
            mean[j] /= (double)n;

        for (int m = 0; m < 3; m++) {
            const char *name = m == 0 ? "est" : (m == 1 ? "ag" : "gauss");
            if ((m == 0 && !o.run_est) || (m == 1 && !o.run_ag) || (m == 2 && !o.run_gauss))
                continue;
            if (m == 1 && d > o.ag_max_d) {
                s_row(&o, rep, name, NAN, NAN, "skipped", 0);
                continue;
            }
            double sin = NAN;
            int failed = 0;
            double t0 = s_now();
            if (m == 0)
                rc = s_run_est(&o, rep, X, n, truth, xhat, &sin, &failed);
            else if (m == 1)
                rc = s_run_ag(&o, rep, X, n, truth, xhat, &sin, &failed);
            else
                rc = s_run_gauss(&o, rep, X, n, xhat);
            double secs = s_now() - t0;
            if (rc) {
                char st[64];
                snprintf(st, sizeof st, "error:%d", rc);
                fprintf(stderr, "dps-fig2: rep %d %s: %s\n", rep, name, dps_strerror(rc));
                s_row(&o, rep, name, NAN, NAN, st, secs);
                status = 1;
                continue;
            }
            s_row(&o, rep, name, s_dist(xhat, mean, d), sin, failed ? "fail" : "ok", secs);
        }
    }
    free(X);
    free(truth);
    free(mean);
    free(xhat);
    return status;
}
