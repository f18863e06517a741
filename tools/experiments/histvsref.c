/* histvsref.c - dps-histvsref: the histogram aggregator (Singhal-Steinke
   DPASE) against the reference-point aggregator (SS_Agg + WFC) on the paper's
   generator (Tsfadia sec. 6, DESIGN 4), subspace only.

   For each repetition: n = 2 t k rows (t: the library's default) from dps_synth_paper with
   tau = (tau/d) d, held in memory; one epoch of the streaming estimator per
   aggregator with rho_epoch = --rho (histogram: eps = sqrt(2 rho)) and
   delta_epoch = --delta; reports sin of the largest principal angle to the
   generator's subspace and the status.

   Diagnostic (--pairs P, first repetition only, NOT private: it reads the
   buckets): for P random pairs of disjoint m-row buckets, the non-private
   top-k bases V_a, V_b, the items y = Pi P^T with the epoch's public
   reference points, and the probability that two such items share a cell of
   side l under a uniform offset, prod_r max(0, 1 - |y_a,r - y_b,r| / l); also
   ||y_a - y_b||_1 / l.  It says why the histogram fails: the items of two
   buckets of the same subspace must agree to within l in every one of q d
   coordinates.

   Output: CSV on stdout
     d,k,tau_over_d,width_frac,rep,aggregator,sin,status,w_hat,radius,seconds
   and "# pairs ..." lines on stderr.  Everything is seeded (experiments only). */
#include "config_internal.h"
#include "args.h"

#include <dpsubspace.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int s_run(size_t d, size_t k, double tod, double frac, int rep, uint64_t seed, double rho, double delta,
                 dps_aggregator agg, const float *X, size_t n, const float *truth, int workers)
{
    dps_config c;
    dps_config_init(&c, d, k);
    c.aggregator = agg;
    c.rho_epoch = rho;
    c.delta_epoch = delta; /* delta_target: the library's */
    c.seeded = 1;
    c.seed = seed * 1000003u + (uint64_t)rep * 7919u + (uint64_t)agg;
    c.public_seed = seed * 31u + (uint64_t)rep;
    if (workers > 0)
        c.workers = workers;
    if (agg == DPS_AGG_HISTOGRAM)
        c.hist_width = frac * sqrt((double)k / (double)d);
    double t0 = s_now();
    dps_estimator *e = NULL;
    dps_snapshot *s = NULL;
    const char *why = NULL;
    int rc = dps_config_check(&c, &why);
    if (rc) {
        fprintf(stderr, "# config refused: %s\n", why);
        return rc;
    }
    rc = dps_estimator_new(&e, &c);
    size_t taken = 0;
    if (!rc)
        rc = dps_estimator_push(e, X, n, d, &taken);
    if (!rc)
        rc = dps_estimator_close_epoch(e, &s);
    if (!rc) {
        dps_snapshot_info in;
        dps_snapshot_get_info(s, &in);
        const float *V = dps_snapshot_basis(s);
        double sn = V ? dps_subspace_sin(V, truth, k, d, NULL) : NAN;
        char sbuf[32] = "";
        if (isfinite(sn))
            snprintf(sbuf, sizeof sbuf, "%.6e", sn);
        printf("%zu,%zu,%g,%g,%d,%s,%s,%s,%.4g,%.4g,%.3f\n", d, k, tod, agg == DPS_AGG_HISTOGRAM ? frac : 0.0, rep,
               dps_aggregator_name(agg), sbuf, in.status == DPS_SNAP_RELEASED ? "ok" : "fail", in.w_hat, in.radius,
               s_now() - t0);
        fflush(stdout);
    }
    dps_snapshot_destroy(&s);
    dps_estimator_destroy(&e);
    return rc;
}

/* The non-private diagnostic described at the top. */
static void s_pairs(size_t d, size_t k, double tod, double frac, const float *X, size_t n, int pairs, uint64_t seed)
{
    dps_config lib; /* the epochs' m and q: the library's */
    dps_config_init(&lib, d, k);
    size_t m = lib.m, q = lib.q;
    double l = frac * sqrt((double)k / (double)d);
    float *P = malloc(q * d * sizeof *P), *Va = malloc(k * d * sizeof *Va), *Vb = malloc(k * d * sizeof *Vb);
    double *ya = malloc(q * d * sizeof *ya), *yb = malloc(q * d * sizeof *yb);
    dps_rng *r = NULL;
    dps_rng_new_seeded(&r, seed ^ 0x5a5a);
    dps_reference_points(seed, 0, q, d, P);
    double lsum = 0, psum = 0;
    int np = 0;
    for (int p = 0; p < pairs && p < 1024 && 2 * m <= n; p++) {
        size_t a = dps_rng_below(r, n / m / 2) * 2 * m, b = a + m; /* two disjoint buckets */
        if (dps_topk_basis(X + a * d, m, d, k, Va, NULL) || dps_topk_basis(X + b * d, m, d, k, Vb, NULL))
            continue;
        for (int w = 0; w < 2; w++) {
            const float *V = w ? Vb : Va;
            double *y = w ? yb : ya;
            for (size_t i = 0; i < q; i++) {
                double A[64];
                for (size_t s = 0; s < k; s++) {
                    double v = 0;
                    for (size_t c = 0; c < d; c++)
                        v += (double)V[s * d + c] * P[i * d + c];
                    A[s] = v;
                }
                for (size_t c = 0; c < d; c++) {
                    double v = 0;
                    for (size_t s = 0; s < k; s++)
                        v += A[s] * V[s * d + c];
                    y[i * d + c] = v;
                }
            }
        }
        double l1 = 0, logp = 0;
        for (size_t i = 0; i < q * d; i++) {
            double dd = fabs(ya[i] - yb[i]);
            l1 += dd;
            logp += dd < l ? log1p(-dd / l) : -INFINITY;
        }
        lsum += l1 / l;
        psum += exp(logp);
        np++;
    }
    if (np)
        fprintf(stderr, "# pairs d=%zu k=%zu tau/d=%g width_frac=%g l=%.3g: mean ||y_a - y_b||_1 / l = %.3g, "
                        "mean P[same cell] = %.3g over %d pairs\n",
                d, k, tod, frac, l, lsum / np, psum / np, np);
    dps_rng_destroy(&r);
    free(P); free(Va); free(Vb); free(ya); free(yb);
}

int main(int argc, char **argv)
{
    cli_set_program("dps-histvsref");
    dps_config lib;
    dps_config_init(&lib, 2, 1); /* the library's t (d, k only stored) */
    size_t d = 0, k = 4, reps = 10, pairs = 0, workers = 0;
    double tod = 10, frac = 0.25, rho = 2, delta = 1e-5;
    uint64_t seed = 1;
    int help = 0;
    cli_opt opts[] = {
        {"--d", CLI_OPT_SIZE, &d, "D", "required", "dimension", 0},
        {"--k", CLI_OPT_SIZE, &k, "K", "4", "subspace dimension (at most 64)", 0},
        {"--tau-over-d", CLI_OPT_DOUBLE, &tod, "X", "10", "generator noise level tau = X*d", 0},
        {"--width-frac", CLI_OPT_DOUBLE, &frac, "F", "0.25", "histogram cell side as a fraction of the default's", 0},
        {"--reps", CLI_OPT_SIZE, &reps, "R", "10", "repetitions", 0},
        {"--seed", CLI_OPT_U64, &seed, "S", "1", "seed", 0},
        {"--rho", CLI_OPT_DOUBLE, &rho, "RHO", "2", "rho per epoch", 0},
        {"--delta", CLI_OPT_DOUBLE, &delta, "DELTA", "1e-5", "delta per epoch", 0},
        {"--pairs", CLI_OPT_SIZE, &pairs, "P", "0", "bucket pairs of the (NOT private) cell diagnostic", 0},
        {"--workers", CLI_OPT_SIZE, &workers, "N", "online CPUs", "estimator worker threads", 0},
        {"--help", CLI_OPT_FLAG, &help, NULL, NULL, "print this help and exit", 0},
    };
    int prc = cli_parse_or_help(argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0, NULL, &help,
                                "usage: dps-histvsref --d D [options]\n"
                                "histogram vs reference aggregator, one epoch each per repetition (see histvsref.c)\n"
                                "options:\n",
                                NULL);
    if (prc >= 0)
        return prc;
    if (d < 2 || k < 1 || k >= d || reps < 1 || reps > 1000000 || !(frac > 0) || k > 64 || pairs > 1000000 ||
        workers > 256)
        CLI_USAGE("need --d >= 2, 1 <= --k < d (k <= 64), --reps >= 1, --width-frac > 0");
    size_t n = 2 * lib.t * k;
    float *X = malloc(n * d * sizeof *X), *B = malloc(k * d * sizeof *B);
    if (!X || !B)
        return 1;
    printf("d,k,tau_over_d,width_frac,rep,aggregator,sin,status,w_hat,radius,seconds\n");
    for (int rep = 0; rep < (int)reps; rep++) {
        dps_rng *g = NULL;
        dps_rng_new_labelled(&g, seed, "histvsref-data", (uint64_t)rep);
        dps_synth_paper(g, n, d, k, tod * (double)d, X, B);
        dps_rng_destroy(&g);
        if (rep == 0 && pairs > 0)
            s_pairs(d, k, tod, frac, X, n, (int)pairs, seed);
        if (s_run(d, k, tod, frac, rep, seed, rho, delta, DPS_AGG_REFERENCE, X, n, B, (int)workers) ||
            s_run(d, k, tod, frac, rep, seed, rho, delta, DPS_AGG_HISTOGRAM, X, n, B, (int)workers))
            return 1;
    }
    free(X);
    free(B);
    return 0;
}
