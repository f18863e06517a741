/* fig2.c - dps-fig2: one configuration of the private mean estimation task of
   Tsfadia, "DP subspace estimation", sec. 6, Figure 2 (DESIGN 3.8 and 4).

   For each repetition: n = 2 t k rows (t: the library's default, n = 250 k) from the paper's
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
#include "config_internal.h"
#include "args.h"

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

static const char s_synopsis[] =
    "usage: dps-fig2 --d D [options]\n"
    "One configuration of Figure 2 (Tsfadia sec. 6): private mean estimation of\n"
    "n = 2tk rows near a k-dim subspace, CSV on stdout:\n"
    "  d,k,tau_over_d,rep,method,err_mean,sin_subspace,status,seconds\n"
    "options:\n";

static int s_parse_methods(const char *s, void *to)
{
    options *o = to;
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

/* "S:C:M", three positive numbers. */
static int s_parse_split(const char *v, void *to)
{
    double *split = to;
    char *end = NULL;
    const char *p = v;
    for (int j = 0; j < 3; j++) {
        errno = 0;
        split[j] = strtod(p, &end);
        if (errno || end == p || !(split[j] > 0) || (j < 2 && *end != ':') || (j == 2 && *end))
            return -1;
        p = end + 1;
    }
    return 0;
}

static int s_parse_aggregator(const char *v, void *to)
{
    if (!strcmp(v, "reference"))
        *(dps_aggregator *)to = DPS_AGG_REFERENCE;
    else if (!strcmp(v, "projection"))
        *(dps_aggregator *)to = DPS_AGG_PROJECTION;
    else
        return -1;
    return 0;
}

#define BAD(cond, flag)                                                          \
    do {                                                                         \
        if (cond)                                                                \
            CLI_USAGE("bad value for %s (see --help)", flag);                    \
    } while (0)

/* Parse the flags into o (defaults: the library's, dps_config_init, and the
   paper's settings).  Returns -1 to go on, or main's exit code. */
static int s_parse_args(int argc, char **argv, options *o)
{
    dps_config lib;
    dps_config_init(&lib, 2, 1); /* the library's defaults (d, k only stored) */
    memset(o, 0, sizeof *o);
    o->k = 4;
    o->t = lib.t;
    o->tau_over_d = 10;
    o->seed = 1;
    o->rho = 2;
    o->delta = 1e-5;
    o->run_est = o->run_ag = o->run_gauss = 1;
    o->aggregator = DPS_AGG_REFERENCE;
    o->ag_max_d = 20000;
    size_t reps = 1, first_rep = 0, workers = 0, blas_threads = 0;
    int no_header = 0, help = 0;
    char t_def[32], alpha_def[48], tau_def[48], split_def[112], a[32], b[32], c[32];
    snprintf(t_def, sizeof t_def, "%zu", lib.t);
    snprintf(alpha_def, sizeof alpha_def, "library's, %s", cli_fmt_double(a, lib.alpha));
    snprintf(tau_def, sizeof tau_def, "library's, %s", cli_fmt_double(a, lib.tau));
    snprintf(split_def, sizeof split_def, "%s:%s:%s", cli_fmt_double(a, lib.split_search),
             cli_fmt_double(b, lib.split_count), cli_fmt_double(c, lib.split_mean));
    cli_opt opts[] = {
        {"--d", CLI_OPT_SIZE, &o->d, "D", "required", "dimension", 0},
        {"--k", CLI_OPT_SIZE, &o->k, "K", "4", "subspace dimension", 0},
        {"--tau-over-d", CLI_OPT_DOUBLE, &o->tau_over_d, "X", "10", "generator noise level tau = X*d", 0},
        {"--reps", CLI_OPT_SIZE, &reps, "R", "1", "repetitions", 0},
        {"--first-rep", CLI_OPT_SIZE, &first_rep, "I", "0", "index of the first repetition", 0},
        {"--seed", CLI_OPT_U64, &o->seed, "S", "1", "seed base", 0},
        {"--rho", CLI_OPT_DOUBLE, &o->rho, "RHO", "2", "total zCDP rho", 0},
        {"--delta", CLI_OPT_DOUBLE, &o->delta, "DELTA", "1e-5", "delta", 0},
        {"--methods", CLI_OPT_PARSE, &(cli_parse_to){s_parse_methods, o}, "LIST", "all",
         "comma list of est,ag,gauss", 0},
        {"--alpha", CLI_OPT_DOUBLE, &o->alpha, "A", alpha_def, "WFC slope", 0},
        {"--tau", CLI_OPT_DOUBLE, &o->tau, "T", tau_def, "radius search target fraction of t", 0},
        {"--split", CLI_OPT_PARSE, &(cli_parse_to){s_parse_split, o->split}, "S:C:M", split_def,
         "rho split search:count:mean", 0},
        {"--aggregator", CLI_OPT_PARSE, &(cli_parse_to){s_parse_aggregator, &o->aggregator}, "NAME", "reference",
         "reference or projection", 0},
        {"--t", CLI_OPT_SIZE, &o->t, "T", t_def, "buckets per epoch", 0},
        {"--workers", CLI_OPT_SIZE, &workers, "N", "online CPUs", "estimator worker threads", 0},
        {"--blas-threads", CLI_OPT_SIZE, &blas_threads, "N", "1", "OpenBLAS threads (the workers give the parallelism)",
         0},
        {"--ag-max-d", CLI_OPT_SIZE, &o->ag_max_d, "D", "20000", "skip Analyze Gauss above this d (it forms d x d)", 0},
        {"--no-header", CLI_OPT_FLAG, &no_header, NULL, NULL, "do not print the CSV header", 0},
        {"--verbose", CLI_OPT_FLAG, &o->verbose, NULL, NULL, "per-repetition diagnostics on stderr", 0},
        {"--help", CLI_OPT_FLAG, &help, NULL, NULL, "print this help and exit", 0},
    };
    size_t n_opts = sizeof opts / sizeof opts[0];
    int rc = cli_parse_or_help(argc, argv, opts, n_opts, NULL, 0, NULL, &help, s_synopsis, NULL);
    if (rc >= 0)
        return rc;
    o->header = !no_header;
    BAD(!(o->tau_over_d > 0), "--tau-over-d");
    BAD(reps < 1 || reps > 1000000, "--reps");
    BAD(first_rep > 1000000000, "--first-rep");
    BAD(!(o->rho > 0), "--rho");
    BAD(!(o->delta > 0 && o->delta < 1), "--delta");
    BAD(cli_opt_given(opts, n_opts, "--alpha") && !(o->alpha > 0 && o->alpha <= 1), "--alpha");
    BAD(cli_opt_given(opts, n_opts, "--tau") && !(o->tau > 0 && o->tau <= 1), "--tau");
    BAD(cli_opt_given(opts, n_opts, "--workers") && (workers < 1 || workers > 256), "--workers");
    BAD(cli_opt_given(opts, n_opts, "--blas-threads") && (blas_threads < 1 || blas_threads > 256), "--blas-threads");
    o->reps = (int)reps;
    o->first_rep = (int)first_rep;
    o->workers = (int)workers;
    o->blas_threads = (int)blas_threads;
    if (o->d < 2 || o->k < 1 || o->k >= o->d || o->t < 2)
        CLI_USAGE("need --d >= 2, 1 <= --k < d and --t >= 2");
    return -1;
}
#undef BAD

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
    cfg.t = o->t; /* m = 2k and q = 10k: the library's */
    cfg.window = cfg.t;
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
                    rep, dps_snapshot_status_name(info.status), info.radius, info.w_hat, info.buckets_used,
                    info.epoch_cost.rho, info.epoch_cost.delta, info.reason);
        if (info.status == DPS_SNAP_RELEASED && V) {
            dps_project(V, k, d, xt, xhat);
            *sin_out = dps_subspace_sin(V, truth, k, d, NULL);
        } else {
            *failed = 1;
            memset(xhat, 0, d * sizeof *xhat);
            fprintf(stderr, "# d=%zu k=%zu tau/d=%g rep %d est: %s (%s); x_hat = 0\n", d, k, o->tau_over_d, rep,
                    dps_snapshot_status_name(info.status), info.reason);
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
    cli_set_program("dps-fig2");
    options o;
    int prc = s_parse_args(argc, argv, &o);
    if (prc >= 0)
        return prc;
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
