/* gen.c - dps-gen: write the paper's synthetic data (dps_synth_paper, Tsfadia
   sec. 6 / DESIGN 4) as a float32 .npy, and optionally its true basis.

   Who owns what: main owns the row and basis buffers and the generator; the
   library fills them.  Errors end the program with one line on stderr and the
   exit codes of args.h. */
#include "args.h"
#include "gen_trace.h"
#include "io.h"

#include "dpsubspace.h"

#include <stdlib.h>
#include <string.h>

static const char s_synopsis[] =
    "Usage: dps-gen --d D [--k K] [--n N] [--tau T | --tau-over-d R] [--seed S]\n"
    "               --out rows.npy [--basis basis.npy]\n"
    "\n"
    "Writes the synthetic data of Tsfadia's evaluation (sec. 6): k random vectors\n"
    "b_1..b_k in {-1,+1}^d; each row is unit(u + nu) with u a uniform unit vector\n"
    "of span(b) and nu uniform in {-1/tau, +1/tau}^d.  Rows go to --out as an\n"
    "n x d float32 .npy; --basis writes an orthonormal basis of span(b) (k x d).\n"
    "Note: the paper's \"n = 250k\" means n = 250 * k rows (1000 for k = 4), not\n"
    "250 thousand.\n"
    "\n"
    "   or: dps-gen --trace-regression --d1 D1 --d2 D2 --r R [--n N] [--noise S]\n"
    "               [--seed S] --out obs.npy [--truth-matrix M.npy]\n"
    "\n"
    "Trace regression (for dps-estimate --method rgrad): M = U diag(s) V^T of rank\n"
    "r with Haar-random U, V and s_j proportional to 1 - j/(2(r-1)) (condition\n"
    "number 2), scaled to ||M||_F = 1; X_i with iid N(0, 1) entries (so <X_i, M>\n"
    "~ N(0, 1)); y_i = <X_i, M> + N(0, S^2).  --out gets the n x (d1*d2 + 1) rows\n"
    "[vec(X_i) row-major, y_i]; --truth-matrix the d1 x d2 M.\n";

static const char s_epilogue[] =
    "Examples:\n"
    "  dps-gen --d 1000 --k 4 --seed 1 --out rows.npy --basis basis.npy\n"
    "  dps-estimate rows.npy --k 4 --truth basis.npy\n"
    "\n"
    "Exit codes: 0 ok; 1 runtime failure (memory, random source, writing);\n"
    "2 usage (unknown flag, missing or bad value); 3 unreadable input (not used\n"
    "by dps-gen); 4 privacy (not used by dps-gen).\n";

/* Settings from the command line. */
typedef struct {
    size_t n, d, k;
    double tau, tau_over_d;
    uint64_t seed;
    const char *out, *basis;
    int help;
    int trace;
    gen_trace_args tr;
} gen_args;

/* Check the parsed values and fill in the defaults that depend on others.
   Returns 0 or CLI_EXIT_USAGE after printing what is wrong. */
static int s_validate(gen_args *a, const cli_opt *opts, size_t n_opts)
{
    cli_msg m;
    if (!cli_opt_find(opts, n_opts, "--d")->given) {
        cli_error("--d D is required (the row dimension, at least 2); see --help");
        return CLI_EXIT_USAGE;
    }
    if (a->d < 2) {
        cli_error("--d must be at least 2 (got %zu)", a->d);
        return CLI_EXIT_USAGE;
    }
    if (a->k < 1 || a->k >= a->d) {
        cli_error("--k must satisfy 1 <= k < d (got k = %zu, d = %zu); lower --k or raise --d", a->k, a->d);
        return CLI_EXIT_USAGE;
    }
    if (!cli_opt_find(opts, n_opts, "--n")->given) {
        if (a->k > SIZE_MAX / 250) {
            cli_error("--k %zu is too large for the default n = 250*k; give --n", a->k);
            return CLI_EXIT_USAGE;
        }
        a->n = 250 * a->k;
    }
    if (a->n < 1) {
        cli_error("--n must be at least 1 (got 0)");
        return CLI_EXIT_USAGE;
    }
    int tau_given = cli_opt_find(opts, n_opts, "--tau")->given;
    int ratio_given = cli_opt_find(opts, n_opts, "--tau-over-d")->given;
    if (tau_given && ratio_given) {
        cli_error("give either --tau or --tau-over-d, not both");
        return CLI_EXIT_USAGE;
    }
    if (ratio_given) {
        if (!(a->tau_over_d > 0)) {
            cli_error("--tau-over-d must be positive (got %g)", a->tau_over_d);
            return CLI_EXIT_USAGE;
        }
        a->tau = a->tau_over_d * (double)a->d;
    } else if (!tau_given) {
        a->tau = 10.0 * (double)a->d;
    }
    if (!(a->tau > 0)) {
        cli_error("--tau must be positive (got %g)", a->tau);
        return CLI_EXIT_USAGE;
    }
    if (!a->out) {
        cli_error("--out FILE is required (where to write the n x d rows as .npy); see --help");
        return CLI_EXIT_USAGE;
    }
    if (a->basis && strcmp(a->basis, a->out) == 0) {
        cli_error("--basis and --out name the same file '%s'; give two different files", a->out);
        return CLI_EXIT_USAGE;
    }
    if (a->n > SIZE_MAX / sizeof(float) / a->d) {
        cli_error("--n %zu times --d %zu is too large to hold in memory; lower --n or --d", a->n, a->d);
        return CLI_EXIT_USAGE;
    }
    int rc = cli_check_writable(a->out, "--out", &m);
    if (!rc && a->basis)
        rc = cli_check_writable(a->basis, "--basis", &m);
    if (rc) {
        cli_error("%s", m.msg);
        return rc;
    }
    return 0;
}

/* Generate and write.  Returns an exit code (messages printed). */
static int s_run(const gen_args *a, int seeded)
{
    dps_rng *rng = NULL;
    int rc = seeded ? dps_rng_new_seeded(&rng, a->seed) : dps_rng_new_secure(&rng);
    if (rc) {
        cli_error("cannot create the random generator: %s", dps_strerror(rc));
        return CLI_EXIT_RUNTIME;
    }
    float *rows = malloc(a->n * a->d * sizeof *rows);
    float *basis = a->basis ? malloc(a->k * a->d * sizeof *basis) : NULL;
    int code = CLI_EXIT_OK;
    if (!rows || (a->basis && !basis)) {
        cli_error("cannot allocate %.3g GB for %zu x %zu rows; lower --n or --d",
                  (double)a->n * (double)a->d * 4 / 1e9, a->n, a->d);
        code = CLI_EXIT_RUNTIME;
    }
    if (!code && (rc = dps_synth_paper(rng, a->n, a->d, a->k, a->tau, rows, basis)) != DPS_OK) {
        cli_error("generating the data failed: %s", dps_strerror(rc));
        code = CLI_EXIT_RUNTIME;
    }
    cli_msg m;
    if (!code && (code = cli_npy_write(a->out, rows, a->n, a->d, 0, &m)) != 0)
        cli_error("%s", m.msg);
    if (!code && a->basis && (code = cli_npy_write(a->basis, basis, a->k, a->d, 0, &m)) != 0)
        cli_error("%s", m.msg);
    if (!code) {
        printf("wrote %s: %zu x %zu float32 rows (k %zu, tau %.17g, %s", a->out, a->n, a->d, a->k, a->tau,
               seeded ? "seeded generator, seed " : "secure generator");
        if (seeded)
            printf("%llu", (unsigned long long)a->seed);
        printf(")");
        if (a->basis)
            printf("; %s: %zu x %zu orthonormal basis", a->basis, a->k, a->d);
        printf("\n");
    }
    free(rows);
    free(basis);
    dps_rng_destroy(&rng);
    return code;
}

/* Parse the flags, print --help, or generate; returns the exit code. */
int main(int argc, char **argv)
{
    cli_set_program("dps-gen");
    gen_args a = {.k = 4, .tr = {.noise = 0.1}};
    cli_opt opts[] = {
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Data:", 0},
        {"--n", CLI_OPT_SIZE, &a.n, "N", "250*k", "number of rows (the paper's n = 250k means 250*k)", 0},
        {"--d", CLI_OPT_SIZE, &a.d, "D", "required", "row dimension, at least 2", 0},
        {"--k", CLI_OPT_SIZE, &a.k, "K", "4", "dimension of the true subspace, 1 <= k < d", 0},
        {"--tau", CLI_OPT_DOUBLE, &a.tau, "T", "10*d",
         "noise scale: every coordinate of nu is +-1/tau (larger tau = closer to the subspace)", 0},
        {"--tau-over-d", CLI_OPT_DOUBLE, &a.tau_over_d, "R", "10",
         "set tau = R*d instead of giving --tau (the paper's tau/d axis)", 0},
        {"--seed", CLI_OPT_U64, &a.seed, "S", "none: the secure generator",
         "use the seeded (reproducible, NOT secure) generator with this 64-bit seed", 0},
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Output:", 0},
        {"--out", CLI_OPT_STRING, &a.out, "FILE", "required", "write the n x d rows here as float32 .npy", 0},
        {"--basis", CLI_OPT_STRING, &a.basis, "FILE", "not written",
         "also write the true k x d orthonormal basis as float32 .npy (for dps-estimate --truth)", 0},
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Trace regression (--trace-regression):", 0},
        {"--trace-regression", CLI_OPT_FLAG, &a.trace, NULL, NULL,
         "write trace-regression observations instead (the --n, --seed and --out flags apply)", 0},
        {"--d1", CLI_OPT_SIZE, &a.tr.d1, "D1", "required", "rows of each X_i", 0},
        {"--d2", CLI_OPT_SIZE, &a.tr.d2, "D2", "required", "columns of each X_i", 0},
        {"--r", CLI_OPT_SIZE, &a.tr.r, "R", "required", "rank of M, 1 <= r < min(d1, d2)", 0},
        {"--noise", CLI_OPT_DOUBLE, &a.tr.noise, "S", "0.1", "sd of the response noise", 0},
        {"--truth-matrix", CLI_OPT_STRING, &a.tr.truth_matrix, "FILE", "not written",
         "also write M (d1 x d2 float32 .npy, for dps-estimate --truth-matrix)", 0},
        {"--help", CLI_OPT_FLAG, &a.help, NULL, NULL, "print this help and exit", 0},
    };
    size_t n_opts = sizeof opts / sizeof opts[0];
    int rc = cli_parse_or_help(argc, argv, opts, n_opts, NULL, 0, NULL, &a.help, s_synopsis, s_epilogue);
    if (rc >= 0)
        return rc;
    static const char *const trace_only[] = {"--d1", "--d2", "--r", "--noise", "--truth-matrix"};
    static const char *const paper_only[] = {"--d", "--k", "--tau", "--tau-over-d", "--basis"};
    for (size_t i = 0; i < 5; i++) {
        if (!a.trace && cli_opt_find(opts, n_opts, trace_only[i])->given) {
            cli_error("%s applies only with --trace-regression", trace_only[i]);
            return CLI_EXIT_USAGE;
        }
        if (a.trace && cli_opt_find(opts, n_opts, paper_only[i])->given) {
            cli_error("%s does not apply with --trace-regression (use --d1 --d2 --r)", paper_only[i]);
            return CLI_EXIT_USAGE;
        }
    }
    if (a.trace) {
        if (!cli_opt_find(opts, n_opts, "--d1")->given || !cli_opt_find(opts, n_opts, "--d2")->given ||
            !cli_opt_find(opts, n_opts, "--r")->given) {
            cli_error("--trace-regression needs --d1, --d2 and --r; see --help");
            return CLI_EXIT_USAGE;
        }
        a.tr.n = cli_opt_find(opts, n_opts, "--n")->given ? a.n : 10000;
        a.tr.seeded = cli_opt_find(opts, n_opts, "--seed")->given;
        a.tr.seed = a.seed;
        a.tr.out = a.out;
        return gen_trace_run(&a.tr);
    }
    if ((rc = s_validate(&a, opts, n_opts)) != 0)
        return rc;
    return s_run(&a, cli_opt_find(opts, n_opts, "--seed")->given);
}
