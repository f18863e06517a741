/* est_plan.c - dps-estimate --plan: what a run would do with the flags'
   configuration, from public facts only, without reading a row (d from
   --dim or the input's header, the groups, k, rho; the input's row count
   when its header gives it).  --method estimator: an epoch of t*m rows.  A
   method that runs one epoch of every input row (gaussian, power,
   covariance): that epoch.  Both say the mechanism of each group (dense or
   the noisy power iteration), the memory, the cost charged, the noise floor
   and a warning when the basis would be near random; the one-epoch methods
   also say how many noisy power steps the epoch takes.  What needs the row
   count is said to be unknown when the input's header does not give it.
   Exit 0, or 2 for settings the estimator refuses.

   Who owns what: everything is on the stack; strings point into argv. */
#include "est_args.h"

#include <string.h>

/* The method dps_config_plan names a group of the power aggregator by: a
   group with this method (the power aggregator's, or a gaussian group wider
   than dense_max_d) takes the noisy power steps.  A static string. */
static const char *s_power_method(void)
{
    dps_config *c = NULL;
    dps_plan p;
    int ok = dps_config_new(&c, 64, 1) == DPS_OK &&
             dps_config_set_int(c, DPS_PARAM_AGGREGATOR, DPS_AGG_POWER) == DPS_OK &&
             dps_config_plan(c, &p) == DPS_OK;
    dps_config_destroy(&c);
    return ok ? p.method[0] : "";
}

/* An epoch of every input row (est_args_config: t*m above any input).  Its
   power groups take one noisy step per block: the input's rows are cut into
   the T blocks of a first epoch (dps_config_power_blocks)
   by index when the reader knows their count in advance, which est_stream.c
   asks the same reader; one step on every row when it does not (CSV, a
   pipe).  rows: the input's count, 0 if not known; input: 1 if
   an input was named (0: --dim alone, the input yet to come). */
static int s_plan_one_epoch(const est_settings *s, uint64_t rows, int input)
{
    dps_config *c = s->cfg;
    dps_plan p;
    if (dps_config_plan(c, &p) != DPS_OK)
        CLI_USAGE("impossible settings for --method %s (see --help)", s->one_epoch);
    const char *power_method = s_power_method();
    int power = 0;
    for (size_t g = 0; g < p.groups; g++)
        power |= strcmp(p.method[g], power_method) == 0;
    uint64_t blocks = dps_config_power_blocks(c), blocks_set = dps_config_int(c, DPS_PARAM_POWER_BLOCKS);
    uint64_t steps = rows || input ? est_one_epoch_steps(blocks, rows != 0, rows) : blocks; /* --dim alone: a file's */
    if (power) { /* the floors of those steps */
        dps_config_set_int(c, DPS_PARAM_POWER_BLOCKS, steps);
        int planned = dps_config_plan(c, &p);
        dps_config_set_int(c, DPS_PARAM_POWER_BLOCKS, blocks_set);
        if (planned != DPS_OK)
            CLI_USAGE("impossible settings for --method %s (see --help)", s->one_epoch);
    }
    char count[96];
    if (rows)
        snprintf(count, sizeof count, "%llu rows, from the input's header", (unsigned long long)rows);
    else
        snprintf(count, sizeof count, "their count not known before the input is read");
    printf("plan: --method %s: one epoch of every input row (%s), d %zu, k %zu, rho %g (charged rho %g, delta %g); "
           "memory %.1f MB\n",
           s->one_epoch, count, (size_t)dps_config_int(c, DPS_PARAM_D), (size_t)dps_config_int(c, DPS_PARAM_K),
           dps_config_real(c, DPS_PARAM_RHO_EPOCH), p.cost.rho, p.cost.delta, (double)p.memory / 1e6);
    size_t dense_max_d = dps_config_int(c, DPS_PARAM_DENSE_MAX_D);
    if (dps_config_int(c, DPS_PARAM_AGGREGATOR) == DPS_AGG_GAUSSIAN)
        printf("  --method gaussian: a group (or d) of at most --dense-max-d = %zu columns is released densely (its "
               "d x d covariance), a wider one by the noisy power iteration\n",
               dense_max_d ? dense_max_d : (size_t)DPS_DENSE_MAX_D);
    char lines[DPS_MAX_GROUPS][CLI_PLAN_LINE];
    int near_random = 0;
    size_t n = cli_plan_group_lines(c, &p, rows, lines, DPS_MAX_GROUPS, &near_random);
    for (size_t i = 0; i < n; i++)
        printf("%s\n", lines[i]);
    char T[64]; /* where the blocks' number comes from */
    snprintf(T, sizeof T, "--power-blocks %zu%s", (size_t)blocks_set, blocks_set ? "" : ": 3 for a first epoch");
    if (!power)
        printf("  noisy power steps: none (no group is a power iteration)\n");
    else if (rows)
        printf("  noisy power steps: %llu, one per block: the input's %llu rows cut by index into %llu blocks of "
               "%llu%s rows (%s%s)\n",
               (unsigned long long)steps, (unsigned long long)rows, (unsigned long long)steps,
               (unsigned long long)(rows / steps), rows % steps ? " or one more" : "", T,
               steps < blocks ? ", at most one block a row" : "");
    else if (input)
        printf("  noisy power steps: 1 on every row: the input's row count is not known in advance (CSV, a pipe), "
               "so its rows are not cut into %llu blocks (%s); give a .npy or raw file for them\n",
               (unsigned long long)blocks, T);
    else
        printf("  noisy power steps: %llu (%s), one per block of the input's rows cut by index, when the input's "
               "header gives their count (.npy, raw float32); 1 when it does not (CSV, a pipe).  The "
               "noise floor above is that of %llu steps\n",
               (unsigned long long)blocks, T, (unsigned long long)steps);
    if (near_random)
        printf("WARNING: at least one group's basis would be near random with these settings\n");
    return 0;
}

static int s_plan(const est_args *a, const cli_opt *opts, size_t n_opts, const char *pos, est_settings *s)
{
    s->method = EST_ESTIMATOR;
    s->task = EST_SUBSPACE;
    s->batch = a->batch;
    if (strcmp(a->method, "estimator") != 0) {
        int code = est_args_one_epoch(a, opts, n_opts, s);
        if (code < 0)
            CLI_USAGE("--plan is for --method estimator and the methods that run one epoch of every row "
                      "(gaussian, power, covariance); drop --method %s", a->method);
        if (code)
            return code;
    }
    size_t d = a->dim;
    uint64_t rows = 0; /* the input's rows, if its header says */
    const char *input = a->in ? a->in : pos;
    if (!d && !input)
        CLI_USAGE("--plan needs the row dimension: --dim D (or an input file whose header gives it)");
    if (input) {
        cli_reader *r = NULL;
        cli_msg m;
        cli_format fmt = CLI_FMT_AUTO;
        if (a->format && cli_format_parse(a->format, &fmt))
            CLI_USAGE("--format: '%s' is not a format; give npy, csv or raw", a->format);
        int code = cli_reader_open(&r, input, fmt, d, &m);
        if (code) {
            cli_error("%s", m.msg);
            return code;
        }
        d = cli_reader_dim(r);
        if (!cli_reader_rows(r, &rows))
            rows = 0;
        cli_reader_close(&r);
    }
    if (d < 2)
        CLI_USAGE("--dim must be at least 2 (got %zu)", d);
    if (!cli_opt_given(opts, n_opts, "--k"))
        CLI_USAGE("--plan needs --k K (with --param-groups: each group's rank, or give --group-k)");
    int code = est_args_config(a, opts, n_opts, d, s);
    if (code)
        return code;
    if (s->one_epoch)
        return s_plan_one_epoch(s, rows, input != NULL);
    char lines[DPS_MAX_GROUPS + 1][CLI_PLAN_LINE];
    int near_random = 0;
    size_t n = cli_plan_lines(s->cfg, lines, DPS_MAX_GROUPS + 1, &near_random);
    for (size_t i = 0; i < n; i++)
        printf("%s\n", lines[i]);
    uint64_t per = est_rows_per_epoch(s);
    if (rows)
        printf("the input's %llu rows make %llu full epoch%s%s\n", (unsigned long long)rows,
               (unsigned long long)(rows / per), rows / per == 1 ? "" : "s",
               rows % per ? " and a partial one (released only with --close-partial)" : "");
    if (near_random)
        printf("WARNING: at least one group's basis would be near random with these settings\n");
    return 0;
}

int est_plan_main(const est_args *a, const cli_opt *opts, size_t n_opts, const char *pos)
{
    est_settings s;
    int code = est_settings_init(&s);
    if (!code)
        code = s_plan(a, opts, n_opts, pos, &s);
    est_settings_free(&s);
    return code;
}
