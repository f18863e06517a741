/* cov_eval.c - dps-cov-eval: the covariance experiment of Amin et al. 2019,
   sec. 4 (Figure 1) on one data set: the normalised Frobenius error
   ||C_hat - C||_F / ||C||_F of private covariance estimates, C = X^T X of
   the rows (clipped to unit norm by the library; the caller normalises them
   first, as covariance.py does), for each method, eps and repetition.

   Methods (all release the full d x d covariance):
     it-u        iterative eigenvector sampling, k = d, eps_values = eps/2,
                 uniform split (the paper's IT-U)            pure eps-DP
     ad          the same with the adaptive split (Cor. 1)   pure eps-DP
     laplace     dps_cov_laplace                              pure eps-DP
     gauss:D     dps_cov_gaussian at delta = D                (eps, D)-DP

   Output: CSV on stdout: method,eps,delta,rep,err,err_n,seconds,proposals
   (err_n = ||C_hat - C||_F / n, the normalisation of the paper's sec. 4).
   Randomness (seeded: an experiment): method M at eps E, repetition r draws
   from the labelled stream (seed, "cov-eval/M/E", r), so methods and eps
   values do not share noise and a point does not depend on what else runs. */
#include "args.h"
#include "io.h"

#include <dpsubspace.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char s_synopsis[] =
    "usage: dps-cov-eval --in X.npy [options]\n"
    "CSV on stdout: method,eps,delta,rep,err,err_n,seconds,proposals\n"
    "err = ||C_hat - C||_F / ||C||_F, err_n = ||C_hat - C||_F / n (the paper's\n"
    "normalisation), C = X^T X of the rows clipped to unit norm.\n"
    "options:\n";

/* A list of doubles "a,b,c" (at most its max) for --eps and --deltas. */
typedef struct {
    double *v;
    int n, max;
} s_doubles;

static int s_list(const char *s, void *to)
{
    s_doubles *l = to;
    int n = 0;
    char *end;
    while (*s && n < l->max) {
        l->v[n++] = strtod(s, &end);
        if (end == s)
            return -1;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    l->n = n;
    return n > 0 ? 0 : -1;
}

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static double s_fro_diff(const double *A, const double *B, size_t d)
{
    double s = 0;
    for (size_t i = 0; i < d * d; i++)
        s += (A[i] - B[i]) * (A[i] - B[i]);
    return sqrt(s);
}

int main(int argc, char **argv)
{
    cli_set_program("dps-cov-eval");
    const char *in = NULL, *methods = "it-u,ad,laplace,gauss";
    double eps[32] = {0.01, 0.1, 0.2, 0.5, 1, 2, 4}, deltas[8] = {1e-16, 1e-10, 1e-3};
    s_doubles eps_l = {eps, 7, 32}, del_l = {deltas, 3, 8};
    size_t reps = 50;
    uint64_t seed = 1;
    int help = 0;
    cli_opt opts[] = {
        {"--in", CLI_OPT_STRING, &in, "X.npy", "required", "the rows (float32 .npy)", 0},
        {"--eps", CLI_OPT_PARSE, &(cli_parse_to){s_list, &eps_l}, "LIST", "0.01,0.1,0.2,0.5,1,2,4",
         "eps values, comma-separated", 0},
        {"--reps", CLI_OPT_SIZE, &reps, "R", "50", "repetitions", 0},
        {"--seed", CLI_OPT_U64, &seed, "S", "1", "seed", 0},
        {"--methods", CLI_OPT_STRING, &methods, "LIST", "it-u,ad,laplace,gauss", "methods, comma-separated", 0},
        {"--deltas", CLI_OPT_PARSE, &(cli_parse_to){s_list, &del_l}, "LIST", "1e-16,1e-10,1e-3",
         "the Gaussian mechanism's deltas", 0},
        {"--help", CLI_OPT_FLAG, &help, NULL, NULL, "print this help and exit", 0},
    };
    int prc = cli_parse_or_help(argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0, NULL, &help, s_synopsis,
                                NULL);
    if (prc >= 0)
        return prc;
    int neps = eps_l.n, ndel = del_l.n;
    if (!in || reps < 1 || reps > 1000000000)
        CLI_USAGE("give --in X.npy and --reps >= 1 (see --help)");
    float *X = NULL;
    size_t n = 0, d = 0;
    cli_msg m;
    if (cli_read_all(in, CLI_FMT_NPY, 0, &X, &n, &d, &m)) {
        fprintf(stderr, "dps-cov-eval: %s\n", m.msg);
        return 3;
    }
    double *C = calloc(d * d, sizeof *C), *Ch = malloc(d * d * sizeof *Ch), *lam = malloc(d * sizeof *lam);
    float *V = malloc(d * d * sizeof *V);
    if (!C || !Ch || !lam || !V || dps_cov_accumulate(X, n, d, C, NULL)) {
        fprintf(stderr, "dps-cov-eval: cannot form C (d = %zu)\n", d);
        return 1;
    }
    double normC = 0;
    for (size_t i = 0; i < d * d; i++)
        normC += C[i] * C[i];
    normC = sqrt(normC);
    fprintf(stderr, "# %s: n = %zu, d = %zu, ||C||_F = %.4g, OpenBLAS %s\n", in, n, d, normC, dps_blas_corename());
    printf("method,eps,delta,rep,err,err_n,seconds,proposals\n");
    char mlist[256];
    snprintf(mlist, sizeof mlist, "%s", methods);
    for (char *tok = strtok(mlist, ","); tok; tok = strtok(NULL, ",")) {
        int is_g = strcmp(tok, "gauss") == 0;
        if (!is_g && strcmp(tok, "it-u") && strcmp(tok, "ad") && strcmp(tok, "laplace")) {
            fprintf(stderr, "dps-cov-eval: unknown method '%s'\n", tok);
            return 2;
        }
        for (int id = 0; id < (is_g ? ndel : 1); id++)
            for (int ie = 0; ie < neps; ie++)
                for (int r = 0; r < (int)reps; r++) {
                    char label[96], name[48];
                    if (is_g)
                        snprintf(name, sizeof name, "gauss:%g", deltas[id]);
                    else
                        snprintf(name, sizeof name, "%s", tok);
                    snprintf(label, sizeof label, "cov-eval/%s/%g", name, eps[ie]);
                    dps_rng *rng = NULL;
                    if (dps_rng_new_labelled(&rng, seed, label, (uint64_t)r))
                        return 1;
                    double t0 = s_now();
                    uint64_t props = 0;
                    int rc;
                    if (is_g) {
                        rc = dps_cov_gaussian(C, n, d, eps[ie], deltas[id], rng, Ch);
                    } else if (strcmp(tok, "laplace") == 0) {
                        rc = dps_cov_laplace(C, n, d, eps[ie], rng, Ch);
                    } else {
                        dps_iterative_params p = {d, eps[ie], eps[ie] / 2,
                                                  strcmp(tok, "ad") == 0 ? DPS_SPLIT_ADAPTIVE : DPS_SPLIT_UNIFORM};
                        dps_iterative_stats st = {0};
                        rc = dps_cov_iterative(C, n, d, &p, rng, V, lam, Ch, &st);
                        props = st.proposals;
                    }
                    double dt = s_now() - t0;
                    dps_rng_destroy(&rng);
                    if (rc) {
                        fprintf(stderr, "dps-cov-eval: %s eps %g rep %d: %s\n", name, eps[ie], r, dps_strerror(rc));
                        return 1;
                    }
                    double fe = s_fro_diff(Ch, C, d);
                    printf("%s,%g,%s,%d,%.6g,%.6g,%.4g,%llu\n", is_g ? "gauss" : tok, eps[ie],
                           is_g ? strchr(name, ':') + 1 : "", r, fe / normC, fe / (double)n, dt,
                           (unsigned long long)props);
                }
        fflush(stdout);
    }
    free(X); free(C); free(Ch); free(lam); free(V);
    return 0;
}
