/* est_rgrad.c - dps-estimate --method rgrad: DP-RGrad (dps_rgrad_fit) on a
   file of rows [vec(X_i) (d1*d2 values, row-major), y_i], as dps-gen
   --trace-regression writes them.  One row is one observation and one unit of
   privacy.  See est_rgrad.h. */
#include "est_rgrad.h"
#include "io.h"
#include "json.h"

#include "dpsubspace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const est_rgrad_only_flags[] = {"--d1", "--d2", "--r", "--iters", "--eta", "--clip", "--clip-init",
                                            "--clip-sigma", "--streaming", "--groups", "--init-obs",
                                            "--truth-matrix"};
const size_t est_rgrad_n_only_flags = sizeof est_rgrad_only_flags / sizeof est_rgrad_only_flags[0];

/* Flags of the other methods that rgrad refuses. */
static const char *const s_not_rgrad[] = {"--k", "--k-max", "--eps-k", "--beta-k", "--task", "--t", "--m", "--window", "--q", "--aggregator",
                                          "--alpha", "--tau", "--split", "--batch", "--close-partial",
                                          "--out-prefix", "--mean-out", "--truth", "--cap-rho", "--cap-eps",
                                          "--workers"};



/* Flags to a configuration (d1, d2, r known).  0 or CLI_EXIT_USAGE. */
static int s_config(const est_rgrad_flags *f, const est_rgrad_common *c, const cli_opt *opts, size_t n_opts,
                    dps_rgrad_config *cfg)
{
    for (size_t i = 0; i < sizeof s_not_rgrad / sizeof s_not_rgrad[0]; i++)
        if (cli_opt_given(opts, n_opts, s_not_rgrad[i]))
            CLI_USAGE("%s does not apply to --method rgrad; drop it (rgrad takes --d1 --d2 --r, see --help)",
                  s_not_rgrad[i]);
    if (!cli_opt_given(opts, n_opts, "--d1") || !cli_opt_given(opts, n_opts, "--d2") || !cli_opt_given(opts, n_opts, "--r"))
        CLI_USAGE("--method rgrad needs --d1, --d2 and --r (the shape of X_i and the rank); see --help");
    if (f->r < 1 || f->r >= f->d1 || f->r >= f->d2)
        CLI_USAGE("--r must satisfy 1 <= r < min(d1, d2) (got r = %zu, d1 = %zu, d2 = %zu)", f->r, f->d1, f->d2);
    if (!(c->rho > 0) || !isfinite(c->rho))
        CLI_USAGE("--rho must be positive (got %g)", c->rho);
    if (!(c->delta > 0 && c->delta < 1))
        CLI_USAGE("--delta must be in (0, 1) (got %g)", c->delta);
    if (!(c->delta_target > 0 && c->delta_target < 1))
        CLI_USAGE("--delta-target must be in (0, 1) (got %g)", c->delta_target);
    dps_rgrad_config_init(cfg, f->d1, f->d2, f->r);
    if (cli_opt_given(opts, n_opts, "--iters"))
        cfg->iters = f->iters;
    if (cli_opt_given(opts, n_opts, "--eta"))
        cfg->eta = f->eta;
    if (cli_opt_given(opts, n_opts, "--clip"))
        cfg->clip_grad = f->clip;
    if (cli_opt_given(opts, n_opts, "--clip-init"))
        cfg->clip_init = f->clip_init;
    if (cli_opt_given(opts, n_opts, "--clip-sigma"))
        cfg->clip_sigma = f->clip_sigma;
    if (cli_opt_given(opts, n_opts, "--groups")) {
        if (f->groups < 2)
            CLI_USAGE("--groups must be at least 2 (got %zu); leave it out for the automatic choice", f->groups);
        cfg->groups = f->groups;
    }
    if (cli_opt_given(opts, n_opts, "--init-obs")) {
        if (!f->streaming)
            CLI_USAGE("--init-obs applies only with --streaming (batch mode reads all observations everywhere)");
        if (f->init_obs < 1)
            CLI_USAGE("--init-obs must be at least 1");
        cfg->init_obs = f->init_obs;
    }
    cfg->streaming = f->streaming;
    cfg->delta = c->delta;
    cfg->public_seed = c->public_seed;
    dps_rgrad_config_budget(cfg, c->rho);
    const char *why = NULL;
    int rc = dps_rgrad_config_check(cfg, 1u << 30, &why); /* n is checked after reading */
    if (rc)
        CLI_USAGE("impossible rgrad settings: %s (see --help)", why ? why : dps_strerror(rc));
    return 0;
}

/* The JSON summary. */
static int s_json(FILE *fp, const est_rgrad_common *c, const dps_rgrad_config *cfg, const dps_rgrad_stats *st,
                  size_t n, int ran, double err, double rel, const char *truth, const char *out, int code,
                  const char *error)
{
    cli_json j;
    cli_json_init(&j, fp);
    cli_json_object_begin(&j, NULL);
    cli_json_str(&j, "program", "dps-estimate");
    cli_json_str(&j, "library_version", dps_version());
    cli_json_str(&j, "method", "rgrad");
    cli_json_bool(&j, "private", 1);
    cli_json_bool(&j, "seeded", c->seeded);
    if (c->seeded)
        cli_json_u64(&j, "seed", c->seed);
    else
        cli_json_null(&j, "seed");
    cli_json_str(&j, "input", c->input);
    cli_json_u64(&j, "d1", cfg->d1);
    cli_json_u64(&j, "d2", cfg->d2);
    cli_json_u64(&j, "r", cfg->r);
    cli_json_u64(&j, "n_obs", n);
    cli_json_object_begin(&j, "config");
    cli_json_u64(&j, "iters", cfg->iters);
    cli_json_num(&j, "eta", cfg->eta);
    cli_json_num(&j, "clip_init", cfg->clip_init);
    cli_json_num(&j, "clip_sigma", cfg->clip_sigma);
    cli_json_num(&j, "clip_grad", cfg->clip_grad);
    cli_json_bool(&j, "streaming", cfg->streaming);
    cli_json_num(&j, "rho_init", cfg->rho_init);
    cli_json_num(&j, "rho_iter", cfg->rho_iter);
    cli_json_num(&j, "split_sigma", cfg->split_sigma);
    cli_json_num(&j, "delta", cfg->delta);
    cli_json_u64(&j, "public_seed", cfg->public_seed);
    cli_json_object_end(&j);
    cli_json_str(&j, "status", !ran ? "not run" : st->init_failed ? "failed" : "released");
    cli_json_str(&j, "reason", ran ? st->reason : "");
    cli_json_num(&j, "groups", ran ? (double)st->groups : NAN);
    cli_json_num(&j, "init_obs", ran ? (double)st->init_obs : NAN);
    cli_json_num(&j, "batch_obs", ran ? (double)st->batch_obs : NAN);
    cli_json_num(&j, "sd_sigma", ran ? st->sd_sigma : NAN);
    cli_json_num(&j, "sd_iter", ran ? st->sd_iter : NAN);
    cli_json_num(&j, "radius_u", ran ? st->radius_u : NAN);
    cli_json_num(&j, "radius_v", ran ? st->radius_v : NAN);
    cli_json_num(&j, "error_fro", err);
    cli_json_num(&j, "error_rel", rel);
    cli_json_object_begin(&j, "privacy");
    cli_json_num(&j, "rho_total", ran ? st->spent.rho : 0);
    cli_json_num(&j, "delta_total", ran ? st->spent.delta : 0);
    cli_json_num(&j, "eps_total", ran ? st->eps : 0);
    cli_json_num(&j, "delta_target", c->delta_target);
    cli_json_str(&j, "composition", cfg->streaming ? "streaming: disjoint batches, the cost is the max of the parts"
                                                   : "batch: the init and every iteration compose (sum)");
    cli_json_object_end(&j);
    cli_json_str(&j, "truth_matrix", truth);
    cli_json_str(&j, "out", out);
    cli_json_u64(&j, "exit_code", (uint64_t)code);
    cli_json_str(&j, "error", error);
    cli_json_object_end(&j);
    return cli_json_finish(&j);
}

int est_rgrad_main(const est_rgrad_flags *f, const est_rgrad_common *c, const cli_opt *opts, size_t n_opts)
{
    dps_rgrad_config cfg;
    int code = s_config(f, c, opts, n_opts, &cfg);
    if (code)
        return code;
    cli_msg m;
    const char *outs[][2] = {{c->out, "--out"}, {c->json, "--json"}};
    for (size_t i = 0; i < 2; i++)
        if (outs[i][0] && cli_check_writable(outs[i][0], outs[i][1], &m)) {
            cli_error("%s", m.msg);
            return CLI_EXIT_USAGE;
        }
    if (c->out && c->json && strcmp(c->out, c->json) == 0)
        CLI_USAGE("--out and --json name the same file '%s'; give different files", c->out);
    if (!c->input)
        CLI_USAGE("no input: give a .npy of rows [vec(X_i), y_i] (dps-gen --trace-regression); see --help");
    cli_format fmt = CLI_FMT_AUTO;
    if (c->format && cli_format_parse(c->format, &fmt))
        CLI_USAGE("--format: '%s' is not a format; give npy, csv or raw", c->format);
    if (fmt == CLI_FMT_AUTO)
        fmt = cli_format_from_path(c->input);
    size_t D = cfg.d1 * cfg.d2, n = 0, d = 0;
    float *rows = NULL, *M = NULL;
    if ((code = cli_read_all(c->input, fmt == CLI_FMT_AUTO ? CLI_FMT_NPY : fmt, c->dim, &rows, &n, &d, &m)) != 0) {
        cli_error("%s", m.msg);
        return code;
    }
    if (d != D + 1) {
        free(rows);
        cli_error("'%s' has rows of %zu values but --d1 %zu --d2 %zu needs d1*d2 + 1 = %zu ([vec(X_i), y_i]); check "
                  "the shape flags",
                  c->input, d, cfg.d1, cfg.d2, D + 1);
        return CLI_EXIT_INPUT;
    }
    const char *why = NULL;
    if (dps_rgrad_config_check(&cfg, n, &why) != DPS_OK) {
        free(rows);
        cli_error("impossible rgrad settings for %zu observations: %s", n, why);
        return CLI_EXIT_USAGE;
    }
    if (f->truth_matrix) {
        size_t tn = 0, td = 0;
        cli_format tf = cli_format_from_path(f->truth_matrix);
        if ((code = cli_read_all(f->truth_matrix, tf == CLI_FMT_AUTO ? CLI_FMT_NPY : tf, 0, &M, &tn, &td, &m)) != 0) {
            free(rows);
            cli_error("--truth-matrix: %s", m.msg);
            return code;
        }
        if (tn * td != D || tn != cfg.d1) {
            free(rows); free(M);
            cli_error("--truth-matrix '%s' is %zu x %zu but the estimate is d1 x d2 = %zu x %zu", f->truth_matrix, tn,
                      td, cfg.d1, cfg.d2);
            return CLI_EXIT_INPUT;
        }
    }
    FILE *jf = NULL;
    if (c->json && !(jf = fopen(c->json, "w"))) {
        free(rows); free(M);
        cli_error("--json: cannot create '%s'; check the path and permissions", c->json);
        return CLI_EXIT_USAGE;
    }
    /* Split [vec(X_i), y_i] into X (n x D) and y. */
    float *X = malloc(n * D * sizeof *X), *y = malloc(n * sizeof *y), *L = malloc(D * sizeof *L);
    dps_rng *rng = NULL;
    dps_rgrad_stats st;
    memset(&st, 0, sizeof st);
    st.delta_target = c->delta_target;
    int ran = 0, rc = 0;
    const char *error = NULL, *written = NULL;
    char msg[512];
    if (!X || !y || !L) {
        cli_error("out of memory for %zu observations of %zu values", n, D);
        code = CLI_EXIT_RUNTIME;
    }
    if (!code) {
        for (size_t i = 0; i < n; i++) {
            memcpy(X + i * D, rows + i * (D + 1), D * sizeof *X);
            y[i] = rows[i * (D + 1) + D];
        }
        rc = c->seeded ? dps_rng_new_seeded(&rng, c->seed) : dps_rng_new_secure(&rng);
        if (rc) {
            cli_error("cannot create the random generator: %s", dps_strerror(rc));
            code = CLI_EXIT_RUNTIME;
        }
    }
    free(rows);
    if (!code) {
        rc = dps_rgrad_fit(X, y, n, &cfg, rng, L, &st);
        ran = 1;
        if (rc) { /* after spending: reported like a FAIL, exit 4 (dps_release_outcome) */
            snprintf(msg, sizeof msg,
                     "rgrad stopped on an internal error after spending (%s): published as failed, nothing "
                     "released; budget spent", dps_strerror(rc));
            st.init_failed = 1;
            code = CLI_EXIT_PRIVACY;
        }
    }
    double err = NAN, rel = NAN;
    if (!code && M && !st.init_failed) {
        double e2 = 0, m2 = 0;
        for (size_t i = 0; i < D; i++) {
            e2 += ((double)L[i] - M[i]) * ((double)L[i] - M[i]);
            m2 += (double)M[i] * M[i];
        }
        err = sqrt(e2);
        rel = m2 > 0 ? err / sqrt(m2) : NAN;
    }
    if (!code && st.init_failed) {
        snprintf(msg, sizeof msg, "rgrad failed: %s; give more observations or a larger --rho", st.reason);
        code = CLI_EXIT_PRIVACY;
    }
    if (!code && c->out) {
        if (cli_npy_write(c->out, L, cfg.d1, cfg.d2, 0, &m)) {
            cli_error("--out: %s", m.msg);
            code = CLI_EXIT_RUNTIME;
        } else {
            written = c->out;
        }
    }
    if (code == CLI_EXIT_PRIVACY)
        error = msg;
    else if (code)
        error = cli_last_error();
    char saved[512];
    if (error) {
        snprintf(saved, sizeof saved, "%s", error);
        error = saved;
    }
    FILE *progress = c->quiet ? NULL : (jf ? stdout : stderr);
    if (progress && ran)
        fprintf(progress,
                "rgrad  %s  n %zu  groups %zu  iters %zu  %s  error ||L-M||_F %.4g  relative %.4g  rho %.4g  "
                "eps %.4g at delta %g\n",
                st.init_failed ? "failed" : "released", n, st.groups, cfg.iters, cfg.streaming ? "streaming" : "batch",
                err, rel, st.spent.rho, st.eps, c->delta_target);
    if (s_json(jf ? jf : stdout, c, &cfg, &st, n, ran, err, rel, f->truth_matrix, written, code, error) != 0 && !code) {
        cli_error("cannot write the JSON summary");
        code = CLI_EXIT_RUNTIME;
    }
    if (code == CLI_EXIT_PRIVACY)
        cli_error("%s", msg);
    if (jf && fclose(jf) != 0 && !code) {
        cli_error("cannot write the JSON summary to '%s'", c->json);
        code = CLI_EXIT_RUNTIME;
    }
    dps_rng_destroy(&rng);
    free(X); free(y); free(L); free(M);
    return code;
}
