/* est_args.c - dps-estimate's flags into settings: the checks that need no
   input, the configuration once d is known, and --truth.

   Who owns what: the settings' strings point into argv (main owns them);
   est_load_truth's basis belongs to the caller. */
#include "est_args.h"
#include "est_flags.h"
#include "io.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* 1 if name is an aggregator that takes every row (no buckets): a method of
   its own, one epoch of all rows. */
static int s_row_intake(const char *name)
{
    dps_aggregator agg;
    dps_config *c = NULL;
    int yes = dps_aggregator_from_name(name, &agg) == DPS_OK && dps_config_new(&c, 2, 1) == DPS_OK &&
              dps_config_set_int(c, DPS_PARAM_AGGREGATOR, (uint64_t)agg) == DPS_OK && !dps_config_uses_buckets(c);
    dps_config_destroy(&c);
    return yes;
}

int est_settings_init(est_settings *s)
{
    memset(s, 0, sizeof *s);
    if (dps_config_new(&s->cfg, 2, 1) != DPS_OK) {
        cli_error("out of memory for the configuration");
        return CLI_EXIT_RUNTIME;
    }
    return 0;
}

void est_settings_free(est_settings *s)
{
    dps_config_destroy(&s->cfg);
}

dps_budget est_cap(const est_settings *s)
{
    return (dps_budget){dps_config_real(s->cfg, DPS_PARAM_CAP_RHO), dps_config_real(s->cfg, DPS_PARAM_CAP_EPS),
                        dps_config_real(s->cfg, DPS_PARAM_DELTA_TARGET)};
}

uint64_t est_rows_per_epoch(const est_settings *s)
{
    return dps_config_int(s->cfg, DPS_PARAM_T) * dps_config_int(s->cfg, DPS_PARAM_M);
}

dps_zcdp est_spent_before(const est_settings *s)
{
    return (dps_zcdp){dps_config_real(s->cfg, DPS_PARAM_SPENT_RHO), dps_config_real(s->cfg, DPS_PARAM_SPENT_DELTA)};
}

int est_args_one_epoch(const est_args *a, const cli_opt *opts, size_t n_opts, est_settings *s)
{
    if (!s_row_intake(a->method))
        return -1;
    s->method = EST_ESTIMATOR; /* one epoch of every row through that aggregator */
    s->one_epoch = a->method;
    if (cli_opt_given(opts, n_opts, "--aggregator") || cli_opt_given(opts, n_opts, "--t") ||
        cli_opt_given(opts, n_opts, "--m") || cli_opt_given(opts, n_opts, "--window"))
        CLI_USAGE("--method %s runs one epoch of every row: drop --aggregator, --t, --m and --window (or use "
                  "--method estimator --aggregator %s for epochs of t*m rows)", a->method, a->method);
    return 0;
}

/* The command line's flags, for est_flag_refuse_unread. */
typedef struct {
    const cli_opt *opts;
    size_t n;
} s_given_opts;

static int s_given(const char *flag, void *arg)
{
    const s_given_opts *g = arg;
    return cli_opt_given(g->opts, g->n, flag);
}

/* Checks that need no input: names, required flags, flags that only make
   sense together.  Fills the parts of s that do not depend on d. */
int est_args_check(const est_args *a, const cli_opt *opts, size_t n_opts, const char *pos, est_settings *s)
{
    if (a->in && pos)
        CLI_USAGE("give the input once: either --in FILE or a file argument, not both");
    s->input = a->in ? a->in : pos;
    if (!s->input)
        CLI_USAGE("no input: give a .npy, .csv or raw float32 file (or - for standard input); see --help");
    if (est_method_from_name(a->method, &s->method) != 0) {
        int code = est_args_one_epoch(a, opts, n_opts, s);
        if (code < 0)
            CLI_USAGE("--method: '%s' is not a method; give estimator, gaussian, topk, analyze-gauss, iterative, "
                      "cov-laplace, cov-gaussian, exact, rgrad or choose-k", a->method);
        if (code)
            return code;
    }
    if (strcmp(a->task, "subspace") == 0)
        s->task = EST_SUBSPACE;
    else if (strcmp(a->task, "mean") == 0)
        s->task = EST_MEAN;
    else
        CLI_USAGE("--task: '%s' is not a task; give subspace or mean", a->task);
    s->format = CLI_FMT_AUTO;
    if (a->format && cli_format_parse(a->format, &s->format))
        CLI_USAGE("--format: '%s' is not a format; give npy, csv or raw", a->format);
    int k_max = cli_opt_given(opts, n_opts, "--k-max");
    if (cli_opt_given(opts, n_opts, "--k") && k_max)
        CLI_USAGE("give --k K (a known k) or --k-max K (choose k privately), not both");
    if (s->method == EST_CHOOSE_K && !k_max)
        CLI_USAGE("--method choose-k needs --k-max K, the largest k to consider");
    if (!k_max && (cli_opt_given(opts, n_opts, "--eps-k") || cli_opt_given(opts, n_opts, "--beta-k")))
        CLI_USAGE("--eps-k and --beta-k apply only with --k-max (choosing k privately)");
    if (!cli_opt_given(opts, n_opts, "--k") && !k_max)
        CLI_USAGE("--k K is required (the subspace dimension, 1 <= k < d), or --k-max K to choose it; see --help");
    if (!k_max && a->k < 1)
        CLI_USAGE("--k must be at least 1 (got 0)");
    if (k_max && (a->k_max < 1 || a->k_max > EST_K_MAX_LIMIT))
        CLI_USAGE("--k-max must be in 1..%d (got %zu)", EST_K_MAX_LIMIT, a->k_max);
    if (k_max && !(a->eps_k > 0 && isfinite(a->eps_k)))
        CLI_USAGE("--eps-k must be positive (got %g)", a->eps_k);
    if (k_max && !(a->beta_k > 0 && a->beta_k < 1))
        CLI_USAGE("--beta-k must be in (0, 1) (got %g)", a->beta_k);
    if (s->method == EST_CHOOSE_K && s->task == EST_MEAN)
        CLI_USAGE("--method choose-k only chooses k; --task mean needs a subspace method");
    s->k_max = k_max ? a->k_max : 0;
    s->eps_k = a->eps_k;
    s->beta_k = a->beta_k;
    if (a->batch < 1)
        CLI_USAGE("--batch must be at least 1 (got 0)");
    if (!(a->rho > 0))
        CLI_USAGE("--rho must be positive (got %g)", a->rho);
    if (!(a->delta > 0 && a->delta < 1))
        CLI_USAGE("--delta must be in (0, 1) (got %g)", a->delta);
    if (!(a->delta_target > 0 && a->delta_target < 1))
        CLI_USAGE("--delta-target must be in (0, 1) (got %g)", a->delta_target);
    if (a->cap_rho < 0 || a->cap_eps < 0)
        CLI_USAGE("--cap-rho and --cap-eps must be >= 0 (0 means no cap)");
    static const char *const estimator_only[] = {"--t", "--m", "--window", "--q", "--aggregator", "--alpha",
                                                 "--tau", "--split", "--public-seed", "--batch",
                                                 "--close-partial", "--out-prefix", "--param-groups", "--group-k",
                                                 "--power-blocks", "--power-oversample", "--dense-max-d"};
    for (size_t i = 0; i < est_rgrad_n_only_flags; i++)
        if (cli_opt_given(opts, n_opts, est_rgrad_only_flags[i]))
            CLI_USAGE("%s applies only to --method rgrad (not %s); drop it", est_rgrad_only_flags[i], a->method);
    for (size_t i = 0; i < sizeof estimator_only / sizeof estimator_only[0]; i++)
        if (s->method != EST_ESTIMATOR && cli_opt_given(opts, n_opts, estimator_only[i]) &&
            !(s->method == EST_ITERATIVE && strcmp(estimator_only[i], "--split") == 0))
            CLI_USAGE("%s applies only to --method estimator (not %s); drop it", estimator_only[i], a->method);
    if (s->method != EST_EXACT && cli_opt_given(opts, n_opts, "--candidates"))
        CLI_USAGE("--candidates applies only to --method exact (not %s); drop it", a->method);
    if (s->method == EST_EXACT) {
        if (cli_opt_given(opts, n_opts, "--rho"))
            CLI_USAGE("--method exact is (eps, delta)-DP: give --eps, not --rho");
        if (s->task == EST_MEAN)
            CLI_USAGE("--task mean is not available with --method exact");
        if (!(a->eps > 0) || !isfinite(a->eps))
            CLI_USAGE("--eps must be positive (got %g)", a->eps);
        if (!(a->delta <= 0.5))
            CLI_USAGE("--method exact needs --delta <= 0.5 (got %g)", a->delta);
    }
    char unread[300];
    s_given_opts given_opts = {opts, n_opts};
    if (est_flag_refuse_unread(s->one_epoch ? s->one_epoch : a->aggregator, s_given, &given_opts, unread,
                               sizeof unread))
        CLI_USAGE("%s", unread);
    if (!(a->hist_width >= 0) || !isfinite(a->hist_width))
        CLI_USAGE("--hist-width must be a positive cell side (got %g)", a->hist_width);
    if (a->mean_out && s->task != EST_MEAN)
        CLI_USAGE("--mean-out needs --task mean");
    if (s->method == EST_ESTIMATOR && s->task == EST_MEAN && cli_opt_given(opts, n_opts, "--out-prefix"))
        CLI_USAGE("--out-prefix is for several epochs; --task mean uses one: use --out");
    const char *outs[][2] = {{a->out, "--out"}, {a->json, "--json"}, {a->mean_out, "--mean-out"}};
    for (size_t i = 0; i < 3; i++) {
        cli_msg m;
        if (outs[i][0] && cli_check_writable(outs[i][0], outs[i][1], &m)) {
            cli_error("%s", m.msg);
            return CLI_EXIT_USAGE;
        }
        for (size_t j = 0; j < i; j++)
            if (outs[i][0] && outs[j][0] && strcmp(outs[i][0], outs[j][0]) == 0)
                CLI_USAGE("%s and %s name the same file '%s'; give different files", outs[j][1], outs[i][1], outs[i][0]);
    }
    if (a->out_prefix) {
        cli_msg m;
        char probe[4096];
        snprintf(probe, sizeof probe, "%s0.npy", a->out_prefix);
        if (cli_check_writable(probe, "--out-prefix", &m)) {
            cli_error("%s", m.msg);
            return CLI_EXIT_USAGE;
        }
    }
    s->dim = a->dim;
    s->batch = a->batch;
    s->close_partial = a->close_partial;
    s->rho = a->rho;
    s->delta = a->delta;
    s->seeded = cli_opt_given(opts, n_opts, "--seed");
    s->seed = a->seed;
    s->truth = a->truth;
    s->out = a->out;
    s->out_prefix = a->out_prefix;
    s->json = a->json;
    s->mean_out = a->mean_out;
    s->quiet = a->quiet;
    s->eps = a->eps;
    s->candidates = a->candidates;
    if (s->method == EST_EXACT)
        s->rho = NAN; /* not used: config.rho is null in the JSON */
    s->cov.eps = a->eps;
    s->cov.eps_values = a->eps_values;
    s->cov.split = s->method == EST_ITERATIVE ? a->split : NULL;
    s->cov.cov_out = a->cov_out;
    int given[EST_COV_GIVEN_N] = {
        [EST_COV_GIVEN_RHO] = cli_opt_given(opts, n_opts, "--rho"), [EST_COV_GIVEN_DELTA] = cli_opt_given(opts, n_opts, "--delta"),
        [EST_COV_GIVEN_EPS] = cli_opt_given(opts, n_opts, "--eps"),
        [EST_COV_GIVEN_EPS_VALUES] = cli_opt_given(opts, n_opts, "--eps-values"),
        [EST_COV_GIVEN_SPLIT] = cli_opt_given(opts, n_opts, "--split"),
        [EST_COV_GIVEN_COV_OUT] = cli_opt_given(opts, n_opts, "--cov-out")};
    return est_cov_check(s, given);
}

/* The settings every method shares: the cap, the seed, the workers. */
static int s_config_common(const est_args *a, const cli_opt *opts, size_t n_opts, const est_settings *s)
{
    dps_config *c = s->cfg;
    int bad = dps_config_set_real(c, DPS_PARAM_CAP_RHO, a->cap_rho) |
              dps_config_set_real(c, DPS_PARAM_CAP_EPS, a->cap_eps) |
              dps_config_set_real(c, DPS_PARAM_DELTA_TARGET, a->delta_target) |
              dps_config_set_int(c, DPS_PARAM_SEEDED, (uint64_t)s->seeded) |
              dps_config_set_int(c, DPS_PARAM_SEED, a->seed);
    if (cli_opt_given(opts, n_opts, "--workers")) {
        if (a->workers < 1 || a->workers > 256)
            CLI_USAGE("--workers must be in 1..256 (got %zu)", a->workers);
        bad |= dps_config_set_int(c, DPS_PARAM_WORKERS, a->workers);
    }
    if (bad) /* the flags' parser bounds every value; a setter refusing one is a bug */
        CLI_USAGE("--cap-rho, --cap-eps, --delta-target, --seed or --workers: a value the configuration cannot hold");
    return 0;
}

/* Build s->cfg for dimension d from the flags; checks it with the library. */
int est_args_config(const est_args *a, const cli_opt *opts, size_t n_opts, size_t d, est_settings *s)
{
    if (s->k_max && s->k_max >= d)
        CLI_USAGE("--k-max %zu must be less than the row dimension d = %zu of the input; lower it", s->k_max, d);
    dps_config *c = s->cfg;
    if (est_is_cov(s->method)) { /* d x d methods: 1 <= k <= d, no estimator configuration */
        if (a->k > d)
            CLI_USAGE("--k %zu must be at most the row dimension d = %zu of the input; lower --k", a->k, d);
        if (d > DPS_COV_MAX_D)
            CLI_USAGE("--method %s forms d x d matrices and refuses d = %zu (limit %d); use --method estimator",
                  a->method, d, DPS_COV_MAX_D);
        dps_config_init(c, d, 1);
        dps_config_set_int(c, DPS_PARAM_K, a->k);
        return s_config_common(a, opts, n_opts, s);
    }
    if (a->k >= d)
        CLI_USAGE("--k %zu must be less than the row dimension d = %zu of the input; lower --k", a->k, d);
    if (s->method == EST_ANALYZE_GAUSS && d > DPS_ANALYZE_GAUSS_MAX_D)
        CLI_USAGE("analyze-gauss forms a d x d matrix and refuses d = %zu (limit %d); use --method estimator", d,
              DPS_ANALYZE_GAUSS_MAX_D);
    if (s->batch > SIZE_MAX / sizeof(float) / d)
        CLI_USAGE("--batch %zu is too large for rows of %zu values; lower it", s->batch, d);
    if (!cli_opt_given(opts, n_opts, "--batch")) { /* the default: 256 rows, at most EST_BATCH_BYTES (or one row) */
        size_t fit = EST_BATCH_BYTES / sizeof(float) / d;
        s->batch = fit < 1 ? 1 : (fit < s->batch ? fit : s->batch);
    }
    dps_config_init(c, d, a->k);
    int code = s_config_common(a, opts, n_opts, s);
    if (code)
        return code;
    /* the flags a user gave; the others keep the library's defaults */
    static const struct {
        const char *flag;
        dps_param p;
    } given_ints[] = {{"--t", DPS_PARAM_T}, {"--m", DPS_PARAM_M}, {"--window", DPS_PARAM_WINDOW},
                      {"--q", DPS_PARAM_Q}, {"--power-blocks", DPS_PARAM_POWER_BLOCKS},
                      {"--power-oversample", DPS_PARAM_POWER_OVERSAMPLE}};
    const size_t given_values[] = {a->t, a->m, a->window, a->q, a->power_blocks, a->power_oversample};
    for (size_t i = 0; i < sizeof given_values / sizeof given_values[0]; i++)
        if (cli_opt_given(opts, n_opts, given_ints[i].flag) &&
            dps_config_set_int(c, given_ints[i].p, given_values[i]) != DPS_OK)
            CLI_USAGE("%s %zu: not a value this setting can hold", given_ints[i].flag, given_values[i]);
    const char *agg_name = s->one_epoch ? s->one_epoch : a->aggregator;
    int agg;
    char agg_err[300];
    if (agg_name && est_flag_aggregator(agg_name, &agg, agg_err, sizeof agg_err))
        CLI_USAGE("%s", agg_err);
    if (agg_name)
        dps_config_set_int(c, DPS_PARAM_AGGREGATOR, (uint64_t)agg);
    char group_err[200];
    if (cli_groups_apply(a->groups, a->group_k, c, group_err, sizeof group_err))
        CLI_USAGE("%s", group_err);
    if (s->one_epoch) { /* every row in one epoch: t * m above any input, the last (partial) epoch closed */
        uint64_t k = dps_config_int(c, DPS_PARAM_K);
        dps_config_set_int(c, DPS_PARAM_M, k);
        size_t t = ((size_t)1 << 38) / k, t_max = SIZE_MAX / sizeof(float) / d / k;
        dps_config_set_int(c, DPS_PARAM_T, t < t_max ? t : t_max);
        s->close_partial = 1;
    }
    if (!dps_config_int(c, DPS_PARAM_WINDOW)) /* the library's default, W = t, stated as a number in the JSON */
        dps_config_set_int(c, DPS_PARAM_WINDOW, dps_config_int(c, DPS_PARAM_T));
    char err[300];
    if (a->split && cli_split_apply(a->split, c, err, sizeof err))
        CLI_USAGE("%s", err);
    int bad = dps_config_set_real(c, DPS_PARAM_HIST_WIDTH, a->hist_width) |
              dps_config_set_int(c, DPS_PARAM_DENSE_MAX_D, a->dense_max_d) |
              dps_config_set_real(c, DPS_PARAM_RHO_EPOCH,
                                  (s->method == EST_ESTIMATOR && s->task == EST_MEAN) ? a->rho / 2 : a->rho) |
              dps_config_set_real(c, DPS_PARAM_DELTA_EPOCH, a->delta) |
              dps_config_set_real(c, DPS_PARAM_ALPHA, a->alpha) | dps_config_set_real(c, DPS_PARAM_TAU, a->tau) |
              dps_config_set_int(c, DPS_PARAM_PUBLIC_SEED, a->public_seed);
    if (bad)
        CLI_USAGE("--hist-width, --dense-max-d, --rho, --delta, --alpha, --tau or --public-seed: a value the "
                  "configuration cannot hold");
    const char *why = NULL;
    int rc = dps_config_check(c, &why);
    if (rc == DPS_ELIMIT)
        CLI_USAGE("%s; use --aggregator reference", why);
    if (rc)
        CLI_USAGE("impossible settings: %s (see --help)", why ? why : dps_strerror(rc));
    return 0;
}

/* Make the k rows of V orthonormal (Gram-Schmidt, twice, in double).
   Returns -1 if they are (numerically) linearly dependent. */
static int s_orthonormalize(float *V, size_t k, size_t d)
{
    double *W = malloc(k * d * sizeof *W);
    if (!W)
        return -1;
    for (size_t i = 0; i < k * d; i++)
        W[i] = V[i];
    int rc = 0;
    for (size_t a = 0; a < k && !rc; a++) {
        double *w = W + a * d;
        double n0 = 0;
        for (size_t j = 0; j < d; j++)
            n0 += w[j] * w[j];
        for (int pass = 0; pass < 2; pass++)
            for (size_t b = 0; b < a; b++) {
                const double *v = W + b * d;
                double dot = 0;
                for (size_t j = 0; j < d; j++)
                    dot += v[j] * w[j];
                for (size_t j = 0; j < d; j++)
                    w[j] -= dot * v[j];
            }
        double nn = 0;
        for (size_t j = 0; j < d; j++)
            nn += w[j] * w[j];
        if (!(nn > 1e-10 * n0) || !(nn > 0) || !isfinite(nn)) {
            rc = -1;
            break;
        }
        double inv = 1 / sqrt(nn);
        for (size_t j = 0; j < d; j++)
            w[j] *= inv;
    }
    for (size_t i = 0; !rc && i < k * d; i++)
        V[i] = (float)W[i];
    free(W);
    return rc;
}

/* Load --truth as a k x d orthonormal basis into *out (malloc'ed). */
int est_load_truth(const est_settings *s, float **out)
{
    cli_format f = cli_format_from_path(s->truth);
    float *V = NULL;
    size_t n = 0, d = 0;
    cli_msg m;
    int rc = cli_read_all(s->truth, f == CLI_FMT_AUTO ? CLI_FMT_NPY : f, 0, &V, &n, &d, &m);
    if (rc) {
        cli_error("--truth: %s", m.msg);
        return rc;
    }
    size_t k = dps_config_int(s->cfg, DPS_PARAM_K), dim = dps_config_int(s->cfg, DPS_PARAM_D);
    if (n != k || d != dim) {
        free(V);
        cli_error("--truth '%s' is %zu x %zu but the estimate is k x d = %zu x %zu; give the true k x d basis",
                  s->truth, n, d, k, dim);
        return CLI_EXIT_INPUT;
    }
    if (s_orthonormalize(V, n, d)) {
        free(V);
        cli_error("--truth '%s': its %zu rows are linearly dependent (or not finite); give a basis of rank k",
                  s->truth, n);
        return CLI_EXIT_INPUT;
    }
    *out = V;
    return 0;
}
