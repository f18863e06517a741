/* est_args.h - dps-estimate's command line before it becomes settings: the
   raw flag values (filled by the option table in estimate.c) and the checks
   that turn them into est_settings (est_args.c). */
#ifndef DPS_CLI_EST_ARGS_H
#define DPS_CLI_EST_ARGS_H

#include "args.h"
#include "est_rgrad.h"
#include "estimate.h"

/* The default batch's most bytes (its 256 rows are fewer for wide rows: a
   batch of 256 rows of d = 1e6 would be 1 GB, twice the power mechanism's
   own memory; at 64 MB the batch alone was 0.12 of that memory, at 16 MB it
   is 0.03 and four rows of d = 1e6 still go in one push).  Changes only
   d > 16 384 (256 rows of 4 bytes). */
#define EST_BATCH_BYTES ((size_t)16 << 20)

/* Raw values from the command line, before they become a configuration. */
typedef struct {
    const char *in, *format, *method, *task, *aggregator, *split, *groups, *group_k;
    size_t dim, k, t, m, window, q, batch, workers, k_max, candidates;
    double rho, delta, alpha, tau, cap_rho, cap_eps, delta_target, eps_k, beta_k, hist_width;
    size_t power_blocks, power_oversample, dense_max_d; /* --aggregator power (and gaussian's wide groups) */
    uint64_t seed, public_seed;
    int close_partial, quiet, help, plan;
    const char *truth, *out, *out_prefix, *json, *mean_out;
    est_rgrad_flags rg;
    double eps;                             /* covariance methods (est_cov.c) */
    const char *eps_values, *cov_out;
} est_args;

/* Checks that need no input: names, required flags, flags that only make
   sense together.  Fills the parts of s that do not depend on d.  pos is the
   file argument (or NULL).  Returns 0 or an exit code (message printed). */
int est_args_check(const est_args *a, const cli_opt *opts, size_t n_opts, const char *pos, est_settings *s);
/* --method NAME of an aggregator that takes every row (gaussian, power,
   covariance): one epoch of every input row through it.  Sets s->method
   (EST_ESTIMATOR) and s->one_epoch, and refuses the flags of epochs of t*m
   rows.  -1 if NAME is no such aggregator (nothing set), else 0 or an exit
   code (message printed). */
int est_args_one_epoch(const est_args *a, const cli_opt *opts, size_t n_opts, est_settings *s);
/* The estimator's configuration for rows of dimension d, into s->cfg, and
   the checks that need d.  Returns 0 or an exit code (message printed). */
int est_args_config(const est_args *a, const cli_opt *opts, size_t n_opts, size_t d, est_settings *s);
/* dps-estimate --plan (est_plan.c): print what the flags' configuration
   would do, read no row; the exit code. */
int est_plan_main(const est_args *a, const cli_opt *opts, size_t n_opts, const char *pos);
/* Load --truth (k x d, orthonormalised) into *out (the caller frees it).
   Returns 0 or an exit code (message printed). */
int est_load_truth(const est_settings *s, float **out);

#endif
