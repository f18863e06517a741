/* estimate.c - dps-estimate's main: the flags and their checks, the order of
   the work (open the input, build the configuration, load --truth, run,
   write the outputs), and the exit code.  The flags become settings in
   est_args.c, running is in est_run.c, the progress lines and the JSON in
   est_report.c.

   Who owns what: main owns the settings (strings point into argv), the open
   input reader, the truth basis, the JSON file and the result, and frees them
   all before returning.  Errors: one line on stderr (args.c) and the exit
   codes of args.h; the JSON summary is written whenever the run started. */
#include "args.h"
#include "est_args.h"
#include "est_flags.h"
#include "est_rgrad.h"
#include "estimate.h"
#include "io.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char s_synopsis[] =
    "Usage: dps-estimate [options] --k K INPUT\n"
    "\n"
    "Estimates the k-dimensional subspace that the rows of INPUT lie near, under\n"
    "differential privacy (zCDP), and optionally a private mean inside it; or a\n"
    "private covariance, the exact-case subspace, a low-rank trace regression,\n"
    "or k itself (the methods below, each with its guarantee).\n"
    "INPUT is a .npy (float32 or float64, C order), a CSV (.csv/.txt: numbers\n"
    "separated by commas, one row per line, an optional header line) or raw\n"
    "little-endian float32 (.raw/.f32/.bin, needs --dim); - reads standard input\n"
    "(give --format).  Every row is one unit of privacy.\n"
    "\n"
    "Methods:\n"
    "  estimator      the library's streaming estimator: rows are pushed in\n"
    "                 batches; each full epoch (t buckets of m rows) is closed and\n"
    "                 released as a private snapshot; later rows go to the next\n"
    "                 epoch.  --rho and --delta are per epoch.\n"
    "  gaussian       the Gaussian covariance mechanism on all rows at once (one\n"
    "                 epoch of the estimator with --aggregator gaussian holding\n"
    "                 every row: no --t, --m): sum x x^T plus symmetric Gaussian\n"
    "                 noise of sd 1/sqrt(rho), its top-k eigenvectors; rho-zCDP,\n"
    "                 delta 0; with --param-groups one basis per group for the\n"
    "                 same cost.  The recommended method for per-example\n"
    "                 gradients (docs/mechanisms.md).  Any other aggregator\n"
    "                 that takes every row (no buckets) is a method the same\n"
    "                 way.\n"
    "  topk           NOT PRIVATE: the exact top-k subspace (a baseline).\n"
    "  analyze-gauss  the central Analyze Gauss baseline on all rows.  The library\n"
    "                 function spends (2 rho, delta) for the rho it is given, so it\n"
    "                 is called with --rho/2 (the run spends --rho in all).\n"
    EST_COV_HELP_METHODS
    "  exact          Singhal-Steinke DPESE (Algorithm 1) on all rows: releases\n"
    "                 the k-dim subspace that holds a stable majority of the rows\n"
    "                 EXACTLY (exact rational arithmetic, no tolerance: rows near\n"
    "                 a subspace do not count), or NULL (exit 4).  GAP-MAX with\n"
    "                 truncated Laplace noise over --candidates sampled subspaces.\n"
    "                 Privacy: (eps, delta + (1 + e^eps)(1 - 2^-k)^R)-DP under\n"
    "                 replacing one row (--eps, --delta; R candidates), charged\n"
    "                 as rho = eps^2/2.  Limits: k <= 8, C(n, k-1) n <= 2e9.\n"
    "  rgrad          DP low-rank trace regression (DP-RGrad): INPUT\n"
    "                 rows are observations [vec(X_i) (d1*d2 values, row-major),\n"
    "                 y_i] as dps-gen --trace-regression writes them; y_i =\n"
    "                 <X_i, M> + noise with rank(M) = --r.  A random partition\n"
    "                 into groups; each group's mean of clip(y_i X_i, C0) gives\n"
    "                 top-r left/right subspaces, aggregated privately (reference\n"
    "                 points + weighted FriendlyCore, as the estimator); Sigma~ =\n"
    "                 U~ L^ V~^T + Gaussian noise; then --iters Riemannian gradient\n"
    "                 steps: per-observation gradients projected on the tangent\n"
    "                 space, clipped to --clip, averaged, Gaussian noise inside the\n"
    "                 tangent space, step --eta, rank-r SVD.  Privacy: one\n"
    "                 observation is the unit; delta-approximate rho-zCDP for every\n"
    "                 input (everything is clipped).  --rho is the whole fit: batch\n"
    "                 mode gives the init 0.3 rho and each iteration 0.7 rho/iters\n"
    "                 (they compose); --streaming reads disjoint batches (init +\n"
    "                 one per iteration, each observation used once) and gives every\n"
    "                 part the full rho (the cost is the max, not the sum).  --delta\n"
    "                 is the fit's delta (the two aggregations).  Defaults of the\n"
    "                 clips assume y of unit scale: set them from public knowledge.\n"
    "  choose-k       only choose k privately (needs --k-max; see below).\n"
    "\nChoosing k (--k-max K instead of --k; Tsfadia sec. 2.1): releases the\n"
    "squared singular values sigma_i^2 + Lap(2/eps), i <= K+1, of all rows\n"
    "(clipped to norm 1), pure --eps-k-DP (their l1 sensitivity is 2), and takes\n"
    "k = the number of leading values >= T = (4/eps) ln((K+1)/beta): with\n"
    "probability 1 - beta that is the k with sigma_k^2 >= 1.5 T, sigma_{k+1}^2 < T/2.\n"
    "Then the method runs with that k on the same rows; the choice's cost\n"
    "(rho = eps^2/2) is added to the run's totals and counts against the caps.\n"
    "\nAggregators of the estimator (--aggregator):\n"
    "  reference      (default) WFC average of projected reference points,\n"
    "                 delta-approximate rho-zCDP per epoch.\n"
    "  projection     WFC average of the d x d projections (d <= 10000), same.\n"
    "  histogram      Singhal-Steinke DPASE: each bucket's projected reference\n"
    "                 points fall in a cell of a randomly offset grid of side\n"
    "                 --hist-width; the cell with the largest noisy count\n"
    "                 (Laplace, threshold 1 + (2/eps) ln(1/(2 delta))) is\n"
    "                 released, or FAIL.  (eps, delta)-DP per epoch with\n"
    "                 eps = sqrt(2 --rho), delta = --delta, i.e. it is charged\n"
    "                 (--rho, --delta) like the others.  Needs buckets that agree\n"
    "                 to within a cell: only nearly exact subspaces.\n"
    "  covariance     no buckets: each epoch's C = sum x x^T of its t*m rows and\n"
    "                 iterative eigenvector sampling (as --method iterative, no\n"
    "                 eigenvalues): pure eps-DP per epoch with eps = sqrt(2 --rho),\n"
    "                 i.e. charged (--rho, 0).  d <= 4096 (a d x d matrix).\n"
    "  power          no buckets: noisy power iteration, one step\n"
    "                 Y = C_i X + N(0, 1/rho) per disjoint block of the epoch's\n"
    "                 rows (--power-blocks), b = k + --power-oversample columns,\n"
    "                 started from the last released basis: rho-zCDP per epoch,\n"
    "                 charged (--rho, 0); memory O(b d), any d.  A first (cold)\n"
    "                 epoch is weak with one step (the signal is seen through a\n"
    "                 random start, about sqrt(b/d) of it), so T is 3 until an\n"
    "                 epoch is released and 1 after (warm).  --method power (all\n"
    "                 rows one epoch) cuts a .npy or raw file's rows into those\n"
    "                 T blocks by index; from a pipe or a CSV file, whose row\n"
    "                 count is not known in advance, it takes one step (and\n"
    "                 says so).  The\n"
    "                 steps taken are in the output (power steps, power_steps).\n"
    "  kron           no buckets: as gaussian, but each parameter group written\n"
    "                 RxC in --param-groups (e.g. 128x784,128: a Linear layer's\n"
    "                 weight out x in, then its bias) is read as an R x C matrix\n"
    "                 G and releases sum G G^T (R x R) and sum G^T G (C x C) plus\n"
    "                 symmetric Gaussian noise; its basis is the --group-k\n"
    "                 products u (x) v of their top eigenvectors with the largest\n"
    "                 eigenvalue products: memory R^2 + C^2 where the\n"
    "                 dense covariance needs (R C)^2.  The other groups are as\n"
    "                 gaussian's.  Every group's noise is sd sqrt(2/rho) (the\n"
    "                 two sides move by up to 2 together): rho-zCDP per epoch,\n"
    "                 charged (--rho, 0).  --method kron runs one epoch of all\n"
    "                 rows.\n"
    "\nTask mean (--task mean): --rho is the total; the subspace gets\n"
    "rho/2 (the estimator runs one epoch at rho/2, Analyze Gauss is called with\n"
    "rho/4) and the Gaussian mean of all rows the other rho/2; the output is the\n"
    "noisy mean projected on the released subspace.\n";

static const char s_epilogue[] =
    "Progress: one line per release on standard error (on standard output when\n"
    "--json names a file; none with --quiet), for example\n"
    "  epoch 3  released  rows 1000  buckets 125  radius 0.031  noise level 0.04\n"
    "  sin 0.052  ||P-P*||_F 0.12  rho this epoch 1.000  total rho 4.000  eps 12.3 at delta 1e-05\n"
    "  epoch N          the epoch's number, from 0, then its status: released;\n"
    "                   failed (the mechanism said FAIL: budget spent, no basis);\n"
    "                   refused (it would pass the budget cap: nothing spent); the\n"
    "                   reason follows in parentheses when it is not released\n"
    "  rows             rows in the completed buckets that were aggregated\n"
    "  buckets          completed buckets aggregated (at most t)\n"
    "  radius           the radius chosen by the private search (0: not run);\n"
    "                   histogram aggregator: the cell side\n"
    "  noise level      how far the basis is from noise, from released quantities\n"
    "                   only (about <= 0.1 mostly signal, >= 1 random level);\n"
    "                   WEAK follows when it is >= 0.75: a basis of little use;\n"
    "                   with --param-groups it weighs the groups by the energy\n"
    "                   each can hold\n"
    "  WEAK groups      with --param-groups: the groups (from 1) whose own level\n"
    "                   is >= 0.75, each with its level (the JSON has every\n"
    "                   group's: group_noise_level, group_weak)\n"
    "  power steps      power iteration: the noisy steps the release took (one\n"
    "                   per block of rows)\n"
    "  sin              with --truth: sin of the largest principal angle between the\n"
    "                   released and the true subspace (0 same, 1 orthogonal)\n"
    "  ||P-P*||_F       with --truth: Frobenius distance between the two projection\n"
    "                   matrices (at most sqrt(2k))\n"
    "  rho this epoch   zCDP rho spent by this epoch (0 when refused)\n"
    "  total rho        zCDP rho spent by this run so far\n"
    "  eps E at delta D the total as (eps, delta)-DP at D = --delta-target (the\n"
    "                   mechanisms' own deltas are taken out of D first)\n"
    "topk and analyze-gauss print one such line; --task mean adds\n"
    "  mean  released  rows N  rho R  sigma S  error E  subspace bias B ...\n"
    "  sigma            noise sd per coordinate of the Gaussian mean (2/(n sqrt(rho)))\n"
    "  error            ||Pi~ x~ - mean(X)||: released mean vs exact mean of the\n"
    "                   rows (clipped to norm 1, as the mechanism sees them)\n"
    "  subspace bias    ||Pi~ mean(X) - mean(X)||: the part due to the subspace\n"
    "\n"
    "JSON (to --json FILE, else standard output): method, task, private, seeded,\n"
    "d, k, n_rows, config, epochs [ {epoch, status, reason, rows_used, buckets_used,\n"
    "radius, w_hat, noise_level, weak, power_steps, group_noise_level, group_weak\n"
    "(with --param-groups), rho_epoch, delta_epoch, rho_total,\n"
    "delta_total, eps_total, delta_target, sin_to_truth, fro_to_truth} ]\n"
    "(histogram aggregator: radius is the cell side, w_hat the released cell's\n"
    "noisy count; noise_level: how far the basis is from noise, from released\n"
    "quantities, >= 1 random level, 0 not computed; weak: noise_level >= 0.75),\n"
    "rows_nan, rows_inf, rows_zero\n"
    "(rows that entered as zero vectors), rows_discarded (in incomplete buckets),\n"
    "rows_not_closed, batches_dim, batches_empty, mean (task mean), privacy\n"
    "(totals of the run), exit_code, error.  --method exact adds exact {eps, delta,\n"
    "candidates, delta_sampling (the price of sampling), delta_total (the\n"
    "guarantee's delta), noise_bound (B of the truncated Laplace), primes,\n"
    "guarantee}; its one release is the single entry of epochs.\n"
    "Numbers that do not apply are null,\n"
    "and so is an infinite eps (the spent delta is not below --delta-target).\n"
    "eps_total: the gaussian and power releases (and --task mean's Gaussian mean\n"
    "after them) are Gaussian mechanisms, whose total is the Gaussian mechanism of\n"
    "mu = sqrt(2 rho_total), stated by its exact profile (rho 1 at delta 1e-5:\n"
    "6.57); any other charge (the other methods, --k-max's choice of k) makes the\n"
    "total stated by the CKS conversion of rho (7.08).\n"
    "\n"
    "rgrad prints one line (rgrad released|failed, n, groups, iters, mode, error\n"
    "||L-M||_F and relative with --truth-matrix, rho, eps) and its own JSON:\n"
    "program, method, private, seeded, seed, input, d1, d2, r, n_obs, config\n"
    "{iters, eta, clip_init, clip_sigma, clip_grad, streaming, rho_init, rho_iter,\n"
    "split_sigma, delta, public_seed}, status (released or failed: an aggregation\n"
    "said FAIL, budget spent, no estimate), reason, groups, init_obs, batch_obs\n"
    "(the public partition), sd_sigma and sd_iter (noise sd of Sigma~ entries and\n"
    "of each tangent coordinate), radius_u, radius_v (the aggregations' radii),\n"
    "error_fro = ||L - M||_F and error_rel = error_fro/||M||_F (null without\n"
    "--truth-matrix), privacy {rho_total, delta_total, eps_total, delta_target,\n"
    "composition}, truth_matrix, out (L as a d1 x d2 float32 .npy), exit_code, error.\n"
    EST_COV_HELP_JSON
    "\n"
    "Exit codes: 0 every release succeeded; 1 runtime failure (memory, numerics,\n"
    "writing a file); 2 usage (unknown flag, missing or bad value, impossible\n"
    "settings); 3 unreadable or malformed input; 4 privacy: a release failed or\n"
    "was refused, or nothing was released (no epoch closed).\n"
    "\n"
    "Example:\n"
    "  dps-gen --d 1000 --k 4 --seed 1 --out rows.npy --basis basis.npy\n"
    "  dps-estimate rows.npy --k 4 --rho 1 --truth basis.npy --out v.npy --json s.json\n";

/* Decide the privacy outcome: 0 if everything asked for was released, else
   CLI_EXIT_PRIVACY with a sentence in msg. */
static int s_outcome(const est_settings *s, const est_result *r, char *msg, size_t n)
{
    size_t bad = 0;
    const est_release *first = NULL;
    for (size_t i = 0; i < r->n_rel; i++)
        if (r->rel[i].status != DPS_SNAP_RELEASED) {
            bad++;
            if (!first)
                first = &r->rel[i];
        }
    if (first) {
        char what[64];
        if (s->method == EST_ESTIMATOR)
            snprintf(what, sizeof what, "epoch %llu", (unsigned long long)first->epoch);
        else
            snprintf(what, sizeof what, "%s", est_method_name(s->method));
        const char *todo = first->status == DPS_SNAP_REFUSED ? "raise --cap-rho/--cap-eps, or spend less per release"
                           : s->method == EST_EXACT
                               ? "give more rows lying exactly in a k-dimensional subspace, or a larger --eps"
                               : "give more rows per epoch, a larger --rho, or check that the rows lie near a "
                                 "k-dimensional subspace";
        snprintf(msg, n, "%s %s: %s; %s (%zu of %zu releases not made)", what,
                 first->status == DPS_SNAP_REFUSED ? "was refused" : "failed", first->reason, todo, bad, r->n_rel);
        return CLI_EXIT_PRIVACY;
    }
    if (r->n_rel == 0) {
        snprintf(msg, n,
                 "nothing was released: no epoch was closed (%llu rows read; an epoch takes t*m = %zu rows); pass "
                 "--close-partial to close a partial epoch, or lower --t/--m",
                 (unsigned long long)r->n_rows, (size_t)est_rows_per_epoch(s));
        return CLI_EXIT_PRIVACY;
    }
    if (s->task == EST_MEAN && (!r->mean.ran || strcmp(r->mean.status, "released") != 0)) {
        snprintf(msg, n, "the mean was not released: %s", r->mean.reason);
        return CLI_EXIT_PRIVACY;
    }
    return 0;
}

/* Write --out and --mean-out when there is something to write. */
static int s_write_outputs(const est_settings *s, est_result *r)
{
    cli_msg m;
    if (s->out && r->basis) {
        if (cli_npy_write(s->out, r->basis, r->k, r->d, 0, &m)) {
            cli_error("--out: %s", m.msg);
            return CLI_EXIT_RUNTIME;
        }
        r->out_written = s->out;
    }
    if (s->mean_out && r->mean.released) {
        float *v = malloc(r->d * sizeof *v);
        if (!v) {
            cli_error("out of memory writing --mean-out");
            return CLI_EXIT_RUNTIME;
        }
        for (size_t j = 0; j < r->d; j++)
            v[j] = (float)r->mean.released[j];
        int rc = cli_npy_write(s->mean_out, v, 1, r->d, 1, &m);
        free(v);
        if (rc) {
            cli_error("--mean-out: %s", m.msg);
            return CLI_EXIT_RUNTIME;
        }
        r->mean_written = s->mean_out;
    }
    return 0;
}

/* --k-max: read all rows, choose k privately (est_choose_k.c) into *k, and
   keep the rows in *rows for the method that follows.  For --method choose-k
   write the JSON summary and return -1 (done); else 0 or an exit code. */
static int s_choose_k(const est_args *a, est_settings *s, float **rows, est_result *r, size_t *k)
{
    size_t d = cli_reader_dim(s->reader), n = 0;
    if (s->k_max >= d)
        CLI_USAGE("--k-max %zu must be less than the row dimension d = %zu of the input; lower it", s->k_max, d);
    dps_config *c = s->cfg; /* what the JSON and the cap need before the full configuration */
    dps_config_set_int(c, DPS_PARAM_D, d);
    dps_budget cap = {a->cap_rho, a->cap_eps, a->delta_target};
    if (dps_config_set_real(c, DPS_PARAM_CAP_RHO, cap.rho_cap) ||
        dps_config_set_real(c, DPS_PARAM_CAP_EPS, cap.eps_cap) ||
        dps_config_set_real(c, DPS_PARAM_DELTA_TARGET, cap.delta_target) ||
        dps_config_set_int(c, DPS_PARAM_WORKERS, a->workers ? a->workers : 1))
        CLI_USAGE("--cap-rho, --cap-eps, --delta-target or --workers: a value the configuration cannot hold");
    dps_accountant *acc = NULL;
    if (dps_accountant_new(&acc, &cap, NULL))
        return CLI_EXIT_RUNTIME;
    int fits = dps_accountant_fits(acc, dps_zcdp_from_pure(s->eps_k));
    dps_accountant_destroy(&acc);
    if (!fits)
        CLI_USAGE("choosing k with --eps-k %g (rho %g) alone would pass the budget cap; lower --eps-k or raise the cap",
              s->eps_k, dps_zcdp_from_pure(s->eps_k).rho);
    cli_msg m;
    int code = cli_reader_read_all(s->reader, rows, &n, &m);
    if (code) {
        cli_error("%s", m.msg);
        return code;
    }
    s->rows = *rows;
    s->n_rows_read = n;
    r->n_rows = n;
    r->d = d;
    s->progress = s->quiet ? NULL : (a->json ? stdout : stderr);
    dps_rng *rng = NULL;
    int rc = s->seeded ? dps_rng_new_labelled(&rng, s->seed, "dps-estimate choose-k", 0) : dps_rng_new_secure(&rng);
    if (rc) {
        cli_error("cannot create the random generator: %s", dps_strerror(rc));
        return CLI_EXIT_RUNTIME;
    }
    if (a->workers)
        dps_blas_set_threads((int)a->workers);
    code = est_choose_k(s, *rows, n, d, rng, r);
    dps_rng_destroy(&rng);
    if (code)
        return code;
    r->k = r->choice.k;
    r->eps_total = dps_zcdp_eps_total(r->spent, cap.delta_target);
    *k = r->choice.k;
    if (s->method == EST_CHOOSE_K) {
        FILE *jf = a->json ? fopen(a->json, "w") : stdout;
        if (!jf) {
            cli_error("--json: cannot create '%s'; check the path and permissions", a->json);
            return CLI_EXIT_USAGE;
        }
        int bad = est_report_json(jf, s, r, 0, NULL, NULL) != 0;
        if (jf != stdout)
            bad |= fclose(jf) != 0;
        if (bad) {
            cli_error("cannot write the JSON summary");
            return CLI_EXIT_RUNTIME;
        }
        return -1;
    }
    if (r->choice.k == 0) {
        cli_error("no k was found: no squared singular value stands above the noise threshold %.3g at --eps-k %g "
                  "(the data may not lie near a low-dimensional subspace, or give more rows / a larger --eps-k); "
                  "nothing else was run, eps %g was spent",
                  r->choice.threshold, s->eps_k, s->eps_k);
        return CLI_EXIT_PRIVACY;
    }
    return 0;
}

/* Open the input, configure, run, write; returns the exit code.  a and opts
   are the parsed command line. */
static int s_run(const est_args *a, const cli_opt *opts, size_t n_opts, const char *pos, est_settings *s)
{
    int code = est_args_check(a, opts, n_opts, pos, s);
    if (code)
        return code;
    cli_msg m;
    code = cli_reader_open(&s->reader, s->input, s->format, s->dim, &m);
    if (code) {
        cli_error("%s", m.msg);
        return code;
    }
    s->format = cli_reader_format(s->reader);
    float *truth = NULL, *rows = NULL;
    FILE *jf = NULL;
    est_result r;
    memset(&r, 0, sizeof r);
    est_args chosen = *a;
    if (s->k_max && (code = s_choose_k(a, s, &rows, &r, &chosen.k)) != 0) {
        cli_reader_close(&s->reader);
        free(rows);
        return code == -1 ? 0 : code; /* -1: --method choose-k is done */
    }
    code = est_args_config(&chosen, opts, n_opts, cli_reader_dim(s->reader), s);
    dps_config_set_real(s->cfg, DPS_PARAM_SPENT_RHO, r.spent.rho); /* the choice of k, if it ran */
    dps_config_set_real(s->cfg, DPS_PARAM_SPENT_DELTA, r.spent.delta);
    if (!code && s->truth && !(code = est_load_truth(s, &truth)))
        s->truth_basis = truth;
    if (!code && s->json && !(jf = fopen(s->json, "w"))) {
        cli_error("--json: cannot create '%s'; check the path and permissions", s->json);
        code = CLI_EXIT_USAGE;
    }
    if (code) {
        cli_reader_close(&s->reader);
        free(truth);
        free(rows);
        return code;
    }
    s->progress = s->quiet ? NULL : (jf ? stdout : stderr);

    code = est_run(s, &r);
    const char *error = code ? cli_last_error() : NULL;
    char msg[1024];
    int wcode = s_write_outputs(s, &r);
    if (!code && wcode) {
        code = wcode;
        error = cli_last_error();
    }
    if (!code && (code = s_outcome(s, &r, msg, sizeof msg)) != 0)
        error = msg;
    char saved[1024];
    if (error) { /* keep it: printing below may reuse cli_last_error's buffer */
        snprintf(saved, sizeof saved, "%s", error);
        error = saved;
    }
    if (est_report_json(jf ? jf : stdout, s, &r, code, error, est_method_json(s->method)) != 0) {
        cli_error("cannot write the JSON summary%s%s", s->json ? " to " : "", s->json ? s->json : "");
        if (!code)
            code = CLI_EXIT_RUNTIME;
    }
    if (code == CLI_EXIT_PRIVACY)
        cli_error("%s", msg);
    if (jf && fclose(jf) != 0 && !code) {
        cli_error("cannot write the JSON summary to '%s'", s->json);
        code = CLI_EXIT_RUNTIME;
    }
    est_result_free(&r);
    free(truth);
    free(rows);
    cli_reader_close(&s->reader);
    return code;
}

static int s_main(const est_args *a, const cli_opt *opts, size_t n_opts, const char *pos)
{
    if (a->plan)
        return est_plan_main(a, opts, n_opts, pos);
    est_settings s;
    int code = est_settings_init(&s);
    if (!code)
        code = s_run(a, opts, n_opts, pos, &s);
    est_settings_free(&s);
    return code;
}

/* Parse the flags, print --help, or run; returns the exit code. */
int main(int argc, char **argv)
{
    cli_set_program("dps-estimate");
    /* The estimator's defaults are the library's (dps_config_init; in --help
       through src/args/est_flags.h), rgrad's dps_rgrad_config_init's. */
    dps_config *lib = NULL;
    if (dps_config_new(&lib, 2, 1) != DPS_OK) {
        cli_error("out of memory for the configuration");
        return CLI_EXIT_RUNTIME;
    }
    dps_rgrad_config rg;
    dps_rgrad_config_init(&rg, 2, 2, 1);
    est_args a = {.method = "estimator", .task = "subspace", .batch = 256,
                  .rho = dps_config_real(lib, DPS_PARAM_RHO_EPOCH), .delta = dps_config_real(lib, DPS_PARAM_DELTA_EPOCH),
                  .alpha = dps_config_real(lib, DPS_PARAM_ALPHA), .tau = dps_config_real(lib, DPS_PARAM_TAU),
                  .delta_target = dps_config_real(lib, DPS_PARAM_DELTA_TARGET), .eps_k = 0.1, .beta_k = 0.05,
                  .eps = 1.0};
    dps_config_destroy(&lib);
    char iters_def[32], eta_def[32];
    snprintf(iters_def, sizeof iters_def, "%zu", rg.iters);
    cli_fmt_double(eta_def, rg.eta);
    /* the estimator's settings: names, help and defaults from the one table (src/args/est_flags.h) */
    char notes[6][600]; /* the noted helps, one buffer each */
#define EST_FLAG(flag, kind, dest) \
    {"--" flag, kind, dest, est_flag_metavar(flag), est_flag_default(flag), est_flag_help(flag), 0}
#define EST_FLAG_NOTED(flag, kind, dest, i, note)                                                           \
    {"--" flag, kind, dest, est_flag_metavar(flag), est_flag_default(flag),                                   \
     est_flag_help_noted(flag, note, notes[i], sizeof notes[0]), 0}
    cli_opt opts[] = {
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Input:", 0},
        {"--in", CLI_OPT_STRING, &a.in, "FILE", "the file argument", "the input (instead of the file argument)", 0},
        {"--format", CLI_OPT_STRING, &a.format, "npy|csv|raw", "from the extension",
         "input format (.npy; .csv .txt; .raw .f32 .bin)", 0},
        {"--dim", CLI_OPT_SIZE, &a.dim, "D", "from the file",
         "row length; required for raw, checked against the file otherwise", 0},
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Method:", 0},
        {"--method", CLI_OPT_STRING, &a.method, "NAME", "estimator",
         "estimator, gaussian (one epoch of all rows), topk (NOT PRIVATE), analyze-gauss, iterative, cov-laplace, cov-gaussian, exact, rgrad or "
         "choose-k", 0},
        {"--task", CLI_OPT_STRING, &a.task, "NAME", "subspace",
         "subspace, or mean: also release the private mean projected on the subspace", 0},
        EST_FLAG_NOTED("k", CLI_OPT_SIZE, &a.k, 0, "(k <= d: the covariance methods)"),
        {"--plan", CLI_OPT_FLAG, &a.plan, NULL, NULL,
         "read no row: print what an epoch of this configuration would do (each group's mechanism, the memory, "
         "the noise floor: the least share of an epoch's energy a direction needs to stand above the noise) and "
         "warn when the basis would be near random; for --method gaussian, power or covariance (one epoch of "
         "every row) also the input's row count, the noisy power steps and the cost; d from --dim or the "
         "input's header", 0},
        {"--k-max", CLI_OPT_SIZE, &a.k_max, "K", "none: --k is given",
         "choose k privately among 1..K (instead of --k), then run the method with it", 0},
        {"--eps-k", CLI_OPT_DOUBLE, &a.eps_k, "E", "0.1", "pure eps spent on choosing k (with --k-max)", 0},
        {"--beta-k", CLI_OPT_DOUBLE, &a.beta_k, "B", "0.05",
         "failure probability of the choice of k (sets its threshold)", 0},
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Privacy:", 0},
        EST_FLAG_NOTED("rho", CLI_OPT_DOUBLE, &a.rho, 1, "dps-estimate: the whole run for analyze-gauss (it is called with R/2), for --task mean (R/2 subspace + R/2 mean) and for rgrad (the whole fit)"),
        EST_FLAG_NOTED("delta", CLI_OPT_DOUBLE, &a.delta, 2, "dps-estimate: also Analyze Gauss's delta and rgrad's fit's"),
        EST_FLAG("cap-rho", CLI_OPT_DOUBLE, &a.cap_rho),
        EST_FLAG("cap-eps", CLI_OPT_DOUBLE, &a.cap_eps),
        EST_FLAG("delta-target", CLI_OPT_DOUBLE, &a.delta_target),
        EST_FLAG("seed", CLI_OPT_U64, &a.seed),
        EST_FLAG("public-seed", CLI_OPT_U64, &a.public_seed),
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Covariance methods (iterative, cov-laplace, cov-gaussian):", 0},
        {"--eps", CLI_OPT_DOUBLE, &a.eps, "E", "required (exact: 1)",
         "the DP budget of the whole run: pure eps-DP (iterative, cov-laplace); (eps, --delta)-DP (cov-gaussian, "
         "exact)", 0},
        {"--eps-values", CLI_OPT_STRING, &a.eps_values, "X|P%", "0, or 50% with --cov-out / --split adaptive",
         "iterative: the part of --eps for the k eigenvalues, an amount or a share (0: subspace only)", 0},
        {"--cov-out", CLI_OPT_STRING, &a.cov_out, "FILE", "not written",
         "the released d x d covariance as float32 .npy (iterative: sum lambda_i theta_i theta_i', rank k)", 0},
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Estimator (--method estimator only):", 0},
        EST_FLAG("t", CLI_OPT_SIZE, &a.t),
        EST_FLAG("m", CLI_OPT_SIZE, &a.m),
        EST_FLAG("window", CLI_OPT_SIZE, &a.window),
        EST_FLAG("q", CLI_OPT_SIZE, &a.q),
        EST_FLAG("aggregator", CLI_OPT_STRING, &a.aggregator),
        EST_FLAG("power-blocks", CLI_OPT_SIZE, &a.power_blocks),
        EST_FLAG("power-oversample", CLI_OPT_SIZE, &a.power_oversample),
        EST_FLAG("dense-max-d", CLI_OPT_SIZE, &a.dense_max_d),
        EST_FLAG("hist-width", CLI_OPT_DOUBLE, &a.hist_width),
        EST_FLAG("param-groups", CLI_OPT_STRING, &a.groups),
        EST_FLAG("group-k", CLI_OPT_STRING, &a.group_k),
        EST_FLAG("alpha", CLI_OPT_DOUBLE, &a.alpha),
        EST_FLAG("tau", CLI_OPT_DOUBLE, &a.tau),
        EST_FLAG_NOTED("split", CLI_OPT_STRING, &a.split, 3, "for --method iterative: uniform (default) or adaptive (Amin et al. Cor. 1, by the noisy eigenvalues)"),
        {"--batch", CLI_OPT_SIZE, &a.batch, "B", "256",
         "rows per push into the estimator (by default fewer for wide rows: at most 16 MB a batch, or one row)", 0},
        {"--close-partial", CLI_OPT_FLAG, &a.close_partial, NULL, NULL,
         "at the end of the input, close a partial epoch too (default: its rows are dropped)", 0},
        EST_FLAG_NOTED("workers", CLI_OPT_SIZE, &a.workers, 4, "dps-estimate: the estimator's workers, or the BLAS threads of topk and analyze-gauss"),
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Exact case (--method exact only):", 0},
        {"--candidates", CLI_OPT_SIZE, &a.candidates, "R", "auto",
         "sampled candidate subspaces; auto: the fewest with (1 + e^eps)(1 - 2^-k)^R <= delta/100", 0},
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Output:", 0},
        {"--out", CLI_OPT_STRING, &a.out, "FILE", "not written", "the last released k x d basis as float32 .npy", 0},
        {"--out-prefix", CLI_OPT_STRING, &a.out_prefix, "P", "not written",
         "every released epoch's basis as P<epoch>.npy", 0},
        {"--json", CLI_OPT_STRING, &a.json, "FILE", "standard output", "the JSON summary", 0},
        {"--mean-out", CLI_OPT_STRING, &a.mean_out, "FILE", "not written",
         "--task mean: the released mean (d values) as float32 .npy", 0},
        {"--truth", CLI_OPT_STRING, &a.truth, "FILE", "none",
         "the true k x d basis (.npy, e.g. from dps-gen --basis): report the error against it; with "
         "--param-groups the release has k = the sum of --group-k rows, and the truth needs as many (a group-wise "
         "one compares like with like: each group's rows zero outside its columns, as the release's)", 0},
        {"--quiet", CLI_OPT_FLAG, &a.quiet, NULL, NULL, "no progress lines", 0},
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Trace regression (--method rgrad only):", 0},
        {"--d1", CLI_OPT_SIZE, &a.rg.d1, "D1", "required", "rows of each X_i", 0},
        {"--d2", CLI_OPT_SIZE, &a.rg.d2, "D2", "required", "columns of each X_i", 0},
        {"--r", CLI_OPT_SIZE, &a.rg.r, "R", "required", "rank of M, 1 <= r < min(d1, d2)", 0},
        {"--iters", CLI_OPT_SIZE, &a.rg.iters, "N", iters_def, "Riemannian gradient iterations", 0},
        {"--eta", CLI_OPT_DOUBLE, &a.rg.eta, "E", eta_def, "step size", 0},
        {"--clip", CLI_OPT_DOUBLE, &a.rg.clip, "C", "3 sqrt(r(d1+d2-r))",
         "clip of each observation's tangent gradient (Frobenius)", 0},
        {"--clip-init", CLI_OPT_DOUBLE, &a.rg.clip_init, "C0", "3 sqrt(d1 d2)", "clip of ||y_i X_i||_F in the init",
         0},
        {"--clip-sigma", CLI_OPT_DOUBLE, &a.rg.clip_sigma, "CS", "3 r",
         "clip of each observation's r x r contribution to Sigma~", 0},
        {"--streaming", CLI_OPT_FLAG, &a.rg.streaming, NULL, NULL,
         "disjoint batches: each observation used once, the cost is the max of the parts", 0},
        {"--groups", CLI_OPT_SIZE, &a.rg.groups, "T", "auto",
         "sample-and-aggregate groups (auto: enough for the aggregation's noisy count to succeed with 6 sd of margin)", 0},
        {"--init-obs", CLI_OPT_SIZE, &a.rg.init_obs, "N", "n/(iters+1)", "--streaming: observations of the init", 0},
        {"--truth-matrix", CLI_OPT_STRING, &a.rg.truth_matrix, "FILE", "none",
         "the true d1 x d2 M (.npy, dps-gen --truth-matrix): report ||L - M||_F", 0},
        {"--help", CLI_OPT_FLAG, &a.help, NULL, NULL, "print this help and exit", 0},
    };
    size_t n_opts = sizeof opts / sizeof opts[0];
    const char *pos[1] = {NULL};
    size_t n_pos = 0;
    /* sklearn's word for k; the collector's former name of --rho (per epoch, as here) */
    static const cli_alias aliases[] = {{"--k", "--n-components", 1}, {"--rho", "--rho-epoch", 0},
                                        {"--delta", "--delta-epoch", 0}};
    cli_set_aliases(aliases, sizeof aliases / sizeof *aliases);
    int rc = cli_parse_or_help(argc, argv, opts, n_opts, pos, 1, &n_pos, &a.help, s_synopsis, s_epilogue);
    if (rc >= 0)
        return rc;
    if (strcmp(a.method, "rgrad") == 0) {
        if (a.in && n_pos)
            CLI_USAGE("give the input once: either --in FILE or a file argument, not both");
        est_rgrad_common c = {.input = a.in ? a.in : (n_pos ? pos[0] : NULL), .format = a.format, .out = a.out,
                              .json = a.json, .dim = a.dim, .rho = a.rho, .delta = a.delta,
                              .delta_target = a.delta_target, .seeded = cli_opt_find(opts, n_opts, "--seed")->given,
                              .quiet = a.quiet, .seed = a.seed, .public_seed = a.public_seed};
        return est_rgrad_main(&a.rg, &c, opts, n_opts);
    }
    return s_main(&a, opts, n_opts, n_pos ? pos[0] : NULL);
}
