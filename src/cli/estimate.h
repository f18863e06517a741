/* estimate.h - the parts of dps-estimate shared by its modules (listed
   with their layers below the types).

   Who owns what: main owns the est_settings (strings point into argv) and the
   est_result; est_result_free releases what the run functions allocated in
   it (the release list and the last basis). */
#ifndef DPS_CLI_ESTIMATE_H
#define DPS_CLI_ESTIMATE_H

#include "est_cov.h"
#include "io.h"
#include "json.h"

#include "dpsubspace.h"

#include <stdio.h>

typedef enum { EST_ESTIMATOR = 0, EST_TOPK, EST_ANALYZE_GAUSS, EST_CHOOSE_K, EST_ITERATIVE, EST_COV_LAPLACE,
               EST_COV_GAUSSIAN, EST_EXACT } est_method;
typedef enum { EST_SUBSPACE = 0, EST_MEAN } est_task;

/* What the command line asked for. */
typedef struct {
    est_method method;
    est_task task;
    const char *input;       /* path or "-"                                     */
    cli_format format;       /* resolved before running                         */
    size_t dim;              /* --dim (0: from the file)                        */
    size_t batch;            /* rows per push                                   */
    int close_partial;
    const char *one_epoch; /* --method NAME of a row-intake aggregator: the estimator with that aggregator and
                              one epoch of every row (NULL: not so) */
    double rho;              /* --rho as given (meaning depends on method/task) */
    double delta;            /* --delta as given                                */
    int seeded;
    uint64_t seed;
    dps_config *cfg;         /* the estimator's configuration, d filled in: a
                                library handle (est_settings_init), set and read
                                by parameter                                    */
    const char *truth, *out, *out_prefix, *json, *mean_out;
    int quiet;
    FILE *progress;          /* where progress lines go (NULL: nowhere)         */
    const float *truth_basis;/* k x d orthonormal rows, or NULL                 */
    cli_reader *reader;      /* the open input (owned by main)                  */
    size_t k_max;            /* --k-max: choose k privately (0: --k was given)   */
    double eps_k, beta_k;    /* its pure eps and failure probability            */
    const float *rows;       /* all rows when they were read before the run      */
    size_t n_rows_read;      /* (for choosing k), else NULL; owned by main       */
    est_cov_settings cov;    /* the covariance methods' flags (est_cov.c)       */
    double eps;              /* --method exact: its (eps, delta) (est_ss.c)     */
    size_t candidates;       /* --method exact: sampled candidates (0: auto)     */
} est_settings;

/* One release (an epoch of the estimator, or the single central release). */
typedef struct {
    uint64_t epoch;
    dps_snapshot_status status;
    char reason[256];
    uint64_t rows_used;
    double buckets_used;     /* NaN when it does not apply (central methods)    */
    double radius, w_hat;    /* NaN when they do not apply                      */
    double noise_level;      /* the snapshot's (dps_snapshot_info); NaN when it
                                does not apply, 0 when not computed           */
    int weak;                /* dps_snapshot_weak of the snapshot               */
    size_t groups;           /* parameter groups (0: one group, the whole row)  */
    double group_level[DPS_MAX_GROUPS]; /* per group: dps_snapshot_group_noise_level
                                (NaN: none)                                     */
    unsigned char group_weak[DPS_MAX_GROUPS]; /* dps_snapshot_group_weak      */
    uint64_t power_steps;    /* dps_snapshot_power_steps: the noisy power steps */
    double rho_epoch, delta_epoch;
    double rho_total, delta_total, eps_total, delta_target; /* NaN: not private */
    double sin_to_truth, fro_to_truth; /* NaN without --truth or a basis        */
} est_release;

/* The private mean in the subspace (DESIGN 3.8). */
typedef struct {
    int ran;                 /* the task asked for it                           */
    const char *status;      /* "released", "refused" or "not run" (static)     */
    char reason[256];
    uint64_t rows;
    double rho, sigma;       /* spent by the Gaussian mean; its noise sd        */
    double error;            /* ||Pi~ x~ - mean(X)||                            */
    double bias;             /* ||Pi~ mean(X) - mean(X)|| (the subspace's part) */
    double *released;        /* d values (owned) or NULL                        */
} est_mean_result;

/* The private choice of k (dps_choose_k). */
#define EST_K_MAX_LIMIT 64
typedef struct {
    int ran;
    size_t k, k_max;         /* chosen k (0: nothing above the noise)           */
    double eps, beta, threshold;
    double noisy_sq[EST_K_MAX_LIMIT + 1]; /* the released sigma_i^2 + noise     */
} est_choice;

/* Everything a run produced. */
typedef struct {
    size_t d, k;
    uint64_t n_rows;         /* rows read                                       */
    uint64_t rows_subspace;  /* rows given to the subspace method               */
    uint64_t rows_not_closed;/* rows left in an epoch that was not closed        */
    uint64_t rows_nan, rows_inf, rows_zero, rows_discarded, batches_dim, batches_empty;
    double analyze_rho;      /* rho passed to dps_analyze_gauss (NaN otherwise) */
    est_release *rel;        /* owned                                           */
    size_t n_rel, cap_rel;
    float *basis;            /* k x d: the last released basis (owned) or NULL  */
    est_mean_result mean;
    est_choice choice;
    dps_zcdp spent;          /* the whole run, mean included                    */
    dps_charge_kind spent_kind; /* what spent was charged as (0: zCDP; Gaussian
                                only when every charge was)                    */
    double eps_total;        /* spent as eps at delta_target                    */
    int input_error;         /* the input failed mid-stream (exit code 3)       */
    char note[512];          /* a sentence shown in the JSON (may be empty)     */
    const char *out_written; /* set by main: the --out / --mean-out files that  */
    const char *mean_written;/* were written (NULL if not)                      */
    est_cov_result cov;      /* the covariance methods' numbers                 */
    dps_exact_stats exact;   /* --method exact: the run's bookkeeping            */
} est_result;

/* The modules, top to bottom; each calls only modules below it:
     estimate.c / est_args.c   main: flags -> settings, the order of work, exit codes
     est_run.c                 dispatch to the method, then the mean task
     est_stream.c est_central.c est_cov.c est_ss.c est_choose_k.c   the methods
     est_report.c              progress lines, the JSON summary
     est_release.c             the result: releases, the kept basis, row counts
   (est_rgrad.c is a program of its own, reached from main only.) */

/* ---- est_run.c: run the settings' method on the input; progress lines as
   it goes.  Returns an exit code: 0, CLI_EXIT_RUNTIME, CLI_EXIT_INPUT
   (message printed; the result holds what was done before).  Privacy
   outcomes (failed, refused) are in the result, not in the return value. */
int est_run(const est_settings *s, est_result *r);
/* Empty settings with a configuration handle of their own (CLI_EXIT_RUNTIME
   if it cannot be had); est_settings_free frees the handle. */
int est_settings_init(est_settings *s);
void est_settings_free(est_settings *s);
/* The budget cap, and what was spent before the method (choosing k), as the
   configuration holds them: the central methods' accountant starts from them. */
dps_budget est_cap(const est_settings *s);
dps_zcdp est_spent_before(const est_settings *s);
/* Rows an epoch of the configuration takes, t * m. */
uint64_t est_rows_per_epoch(const est_settings *s);
/* The JSON block of a method's own (NULL: none), for est_report_json. */
typedef void (*est_json_fn)(cli_json *j, const est_settings *s, const est_result *r);
est_json_fn est_method_json(est_method m);

/* ---- the methods.  Each returns an exit code (message printed) and fills
   r; the rows X are the caller's. */
/* est_stream.c: --method estimator on the open reader (rows streamed), or on
   n rows in memory (the mean task). */
int est_stream_run_reader(const est_settings *s, est_result *r);
int est_stream_run_rows(const est_settings *s, est_result *r, const float *X, size_t n);
/* The noisy power steps an epoch of every input row takes: its T blocks
   (capped at the n rows) when the row count is known in advance, else one
   step on every row.  What est_stream.c cuts and --plan prints. */
uint64_t est_one_epoch_steps(uint64_t T, int rows_known, uint64_t n);
/* est_central.c: the non-private top-k (NaN/Inf rows of X are zeroed),
   Analyze Gauss and its JSON members, the private mean task. */
int est_central_topk(const est_settings *s, est_result *r, float *X, size_t n);
int est_central_analyze(const est_settings *s, est_result *r, const float *X, size_t n, dps_rng *rng);
void est_central_json(cli_json *j, const est_settings *s, const est_result *r);
int est_mean_run(const est_settings *s, est_result *r, const float *X, size_t n, dps_rng *rng);
/* est_choose_k.c: choose k privately from the n rows X: fills r->choice,
   sets r->spent to its cost, prints a progress line. */
int est_choose_k(const est_settings *s, const float *X, size_t n, size_t d, dps_rng *rng, est_result *r);
/* est_ss.c: --method exact on all rows; its progress line and JSON block. */
int est_run_exact(const est_settings *s, est_result *r, const float *X, size_t n, dps_rng *rng);
void est_ss_report_line(FILE *f, const est_settings *s, const est_release *rel, const est_result *r);
void est_ss_json(cli_json *j, const est_settings *s, const est_result *r);
/* est_cov.c: the covariance methods.  est_cov_check: flag checks that need no input
   (given[] says which generic flags were on the command line: see
   EST_COV_GIVEN_*); returns 0 or CLI_EXIT_USAGE (message printed).
   est_cov_run: the run on all n rows.  est_cov_report / est_cov_json: its
   progress line and "dp" JSON member. */
enum { EST_COV_GIVEN_RHO, EST_COV_GIVEN_DELTA, EST_COV_GIVEN_EPS, EST_COV_GIVEN_EPS_VALUES, EST_COV_GIVEN_SPLIT,
       EST_COV_GIVEN_COV_OUT, EST_COV_GIVEN_N };
int est_cov_check(est_settings *s, const int given[EST_COV_GIVEN_N]);
int est_cov_run(const est_settings *s, est_result *r, float *X, size_t n, dps_rng *rng);
void est_cov_report(FILE *f, const est_settings *s, const est_release *rel, const est_result *r);
void est_cov_json(cli_json *j, const est_settings *s, const est_result *r);

/* ---- est_report.c: what is shown.  A method with a progress line of its
   own passes it as an est_line_fn (it prints everything but the reason and
   the newline); NULL gives the generic line of the estimator, topk and
   Analyze Gauss. */
typedef void (*est_line_fn)(FILE *f, const est_settings *s, const est_release *rel, const est_result *r);
void est_report_release(const est_settings *s, const est_release *rel, const est_result *r, est_line_fn line);
/* "  total rho R  eps E at delta D" (and why eps is infinite, if it is). */
void est_report_budget(FILE *f, double rho_total, double delta_total, double eps_total, double delta_target);
/* The end of a central (one-release) method: the run's totals from acc into r
   and rel, and the progress line when code is 0.  Returns code. */
int est_release_finish(const est_settings *s, est_result *r, est_release *rel, const dps_accountant *acc, int code,
                       est_line_fn line);
/* Print the mean task's progress line. */
void est_report_mean(const est_settings *s, const est_result *r);
/* Write the JSON summary to f (method_json: the method's own block, or NULL),
   ending with the exit code the program is about to return and its error
   message (NULL if none).  Returns 0 or -1 on a write error. */
int est_report_json(FILE *f, const est_settings *s, const est_result *r, int exit_code, const char *error,
                    est_json_fn method_json);
/* Name of a method / task as used on the command line. */
const char *est_method_name(est_method m);
/* The method named name (rgrad excepted: main dispatches it first) into *m;
   0, or -1 for another name. */
int est_method_from_name(const char *name, est_method *m);
const char *est_task_name(est_task t);
/* 1 for the covariance methods: iterative, cov-laplace, cov-gaussian. */
int est_is_cov(est_method m);

/* ---- est_release.c: the result. */
est_release *est_release_new(est_result *r);
int est_basis_keep(const est_settings *s, est_result *r, est_release *rel, const float *V);
/* The end of a central method's release (dps_release_decide, then the
   mechanism, then dps_release_outcome): est_release_decide charges cost of
   kind and returns 1 (run the mechanism), or fills rel as refused ("running
   <who> would pass the privacy budget cap") and returns 0, nothing spent.
   est_release_outcome gives rel its status after the charge: the
   mechanism's error rc (FAILED, naming who and rc), its FAIL (released 0:
   FAILED with fail_reason), or RELEASED. */
int est_release_decide(est_release *rel, dps_accountant *acc, dps_zcdp cost, dps_charge_kind kind, const char *who);
void est_release_outcome(est_release *rel, int rc, int released, const char *fail_reason, const char *who);
/* Count rows with NaN, Inf (and no NaN) or zero norm into r's counters. */
void est_count_rows(const float *X, size_t n, size_t d, est_result *r);
/* Free what the run allocated in r. */
void est_result_free(est_result *r);

#endif
