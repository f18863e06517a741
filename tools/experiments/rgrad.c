/* rgrad.c -> dps-rgrad-exp: one configuration of the DP-RGrad evaluation
   (rgrad.py).  For each repetition: dps_trace_synth data (||M||_F = 1), then
   the private fit (dps_rgrad_fit, batch or streaming, total rho) or, with
   --rho 0, the NON-PRIVATE reference: spectral init (top-r SVD of
   mean(y_i X_i)) and the same Riemannian gradient steps with no clipping and
   no noise.  CSV on stdout:
     d1,d2,r,n,rho,mode,rep,err_rel,status,groups,seconds
   err_rel = ||L - M||_F / ||M||_F; status ok or fail (init FAIL: L = 0). */
#include "args.h"
#include "dpsubspace.h"
#include "linalg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The non-private reference (same steps, no clipping, no noise). */
static int s_nonprivate(const float *X, const float *y, size_t n, size_t d1, size_t d2, size_t r, size_t iters,
                        double eta, float *L)
{
    size_t D = d1 * d2;
    double *A = calloc(D, sizeof *A), *G = malloc(D * sizeof *G), *U = malloc(d1 * r * sizeof *U);
    double *V = malloc(d2 * r * sizeof *V), *s = malloc(r * sizeof *s);
    for (size_t i = 0; i < n; i++)
        for (size_t e = 0; e < D; e++)
            A[e] += (double)y[i] * X[i * D + e] / (double)n;
    int rc = la_svd_top(A, d1, d2, r, U, s, V);
    for (size_t l = 0; !rc && l < iters; l++) {
        rc = dps_rgrad_gradient(X, y, n, d1, d2, r, U, s, V, 1e300, 0, NULL, G, NULL);
        for (size_t a = 0; !rc && a < d1; a++)
            for (size_t b = 0; b < d2; b++) {
                double v = 0;
                for (size_t k = 0; k < r; k++)
                    v += U[a * r + k] * s[k] * V[b * r + k];
                A[a * d2 + b] = v - eta * G[a * d2 + b];
            }
        if (!rc)
            rc = la_svd_top(A, d1, d2, r, U, s, V);
    }
    for (size_t a = 0; !rc && a < d1; a++)
        for (size_t b = 0; b < d2; b++) {
            double v = 0;
            for (size_t k = 0; k < r; k++)
                v += U[a * r + k] * s[k] * V[b * r + k];
            L[a * d2 + b] = (float)v;
        }
    free(A); free(G); free(U); free(V); free(s);
    return rc;
}

int main(int argc, char **argv)
{
    cli_set_program("dps-rgrad-exp");
    dps_rgrad_config lib; /* the library's iterations and step size */
    dps_rgrad_config_init(&lib, 2, 2, 1);
    size_t d1 = 20, d2 = 20, r = 2, n = 20000, iters = lib.iters, reps = 3;
    double rho = 1, noise = 0.1, eta = lib.eta;
    char iters_def[32], eta_def[32];
    snprintf(iters_def, sizeof iters_def, "%zu", lib.iters);
    cli_fmt_double(eta_def, lib.eta);
    int streaming = 0, no_header = 0, help = 0;
    uint64_t seed = 1;
    cli_opt opts[] = {
        {"--d1", CLI_OPT_SIZE, &d1, "N", "20", "rows of each X_i", 0},
        {"--d2", CLI_OPT_SIZE, &d2, "N", "20", "columns of each X_i", 0},
        {"--r", CLI_OPT_SIZE, &r, "N", "2", "rank of M", 0},
        {"--n", CLI_OPT_SIZE, &n, "N", "20000", "observations", 0},
        {"--rho", CLI_OPT_DOUBLE, &rho, "R", "1", "total zCDP rho (0: non-private)", 0},
        {"--noise", CLI_OPT_DOUBLE, &noise, "S", "0.1", "observation noise", 0},
        {"--iters", CLI_OPT_SIZE, &iters, "N", iters_def, "Riemannian gradient iterations", 0},
        {"--eta", CLI_OPT_DOUBLE, &eta, "E", eta_def, "step size", 0},
        {"--streaming", CLI_OPT_FLAG, &streaming, NULL, NULL, "disjoint batches (the streaming fit)", 0},
        {"--reps", CLI_OPT_SIZE, &reps, "N", "3", "repetitions", 0},
        {"--seed", CLI_OPT_U64, &seed, "S", "1", "seed", 0},
        {"--no-header", CLI_OPT_FLAG, &no_header, NULL, NULL, "do not print the CSV header", 0},
        {"--help", CLI_OPT_FLAG, &help, NULL, NULL, "print this help and exit", 0},
    };
    int prc = cli_parse_or_help(argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0, NULL, &help,
                                "usage: dps-rgrad-exp [options]\n"
                                "One configuration of the DP-RGrad evaluation (rgrad.py), CSV on stdout:\n"
                                "  d1,d2,r,n,rho,mode,rep,err_rel,status,groups,seconds\n"
                                "options:\n",
                                NULL);
    if (prc >= 0)
        return prc;
    int header = !no_header;
    size_t D = d1 * d2;
    float *X = malloc(n * D * sizeof *X), *y = malloc(n * sizeof *y), *M = malloc(D * sizeof *M);
    float *L = malloc(D * sizeof *L);
    if (!X || !y || !M || !L) {
        fprintf(stderr, "dps-rgrad-exp: out of memory\n");
        return 1;
    }
    if (header)
        printf("d1,d2,r,n,rho,mode,rep,err_rel,status,groups,seconds\n");
    for (size_t rep = 0; rep < reps; rep++) {
        dps_rng *data = NULL, *noise_rng = NULL;
        dps_rng_new_labelled(&data, seed, "rgrad-exp-data", rep);
        dps_rng_new_labelled(&noise_rng, seed, "rgrad-exp-noise", rep);
        int rc = dps_trace_synth(data, n, d1, d2, r, noise, X, y, M);
        double t0 = s_now();
        const char *status = "ok", *mode = rho > 0 ? (streaming ? "streaming" : "batch") : "nonprivate";
        size_t groups = 0;
        if (!rc && rho > 0) {
            dps_rgrad_config c;
            dps_rgrad_config_init(&c, d1, d2, r);
            c.iters = iters;
            c.eta = eta;
            c.streaming = streaming;
            dps_rgrad_config_budget(&c, rho);
            dps_rgrad_stats st;
            memset(&st, 0, sizeof st);
            rc = dps_rgrad_fit(X, y, n, &c, noise_rng, L, &st);
            groups = st.groups;
            if (!rc && st.init_failed)
                status = "fail";
            if (rc == DPS_EINVAL)
                status = "refused";
        } else if (!rc) {
            rc = s_nonprivate(X, y, n, d1, d2, r, iters, eta, L);
        }
        double err = NAN;
        if (!rc) {
            double e2 = 0, m2 = 0;
            for (size_t e = 0; e < D; e++) {
                e2 += ((double)L[e] - M[e]) * ((double)L[e] - M[e]);
                m2 += (double)M[e] * M[e];
            }
            err = sqrt(e2 / m2);
        } else if (strcmp(status, "refused") != 0) {
            status = "error";
        }
        printf("%zu,%zu,%zu,%zu,%g,%s,%zu,%.6g,%s,%zu,%.3f\n", d1, d2, r, n, rho, mode, rep, err, status, groups,
               s_now() - t0);
        fflush(stdout);
        dps_rng_destroy(&data);
        dps_rng_destroy(&noise_rng);
    }
    free(X); free(y); free(M); free(L);
    return 0;
}
