/* est_plan.c - dps-estimate --plan: what the estimator would do with the
   flags' configuration (rows per epoch t*m, d from --dim or the input's
   header, the groups, k, rho), from public facts only, without reading a
   row: the mechanism of each group, the memory, the noise floor, and a
   warning when the basis would be near random.  Exit 0, or 2 for settings
   the estimator refuses. */
#include "est_args.h"

#include <string.h>

int est_plan_main(const est_args *a, const cli_opt *opts, size_t n_opts, const char *pos)
{
    if (strcmp(a->method, "estimator") != 0)
        CLI_USAGE("--plan is for --method estimator (the streaming estimator's epochs); drop --method %s", a->method);
    size_t d = a->dim;
    uint64_t rows = 0; /* the input's rows, if its header says */
    const char *input = a->in ? a->in : pos;
    if (!d && !input)
        CLI_USAGE("--plan needs the row dimension: --dim D (or an input file whose header gives it)");
    if (!d) {
        cli_reader *r = NULL;
        cli_msg m;
        cli_format fmt = CLI_FMT_AUTO;
        if (a->format && cli_format_parse(a->format, &fmt))
            CLI_USAGE("--format: '%s' is not a format; give npy, csv or raw", a->format);
        int code = cli_reader_open(&r, input, fmt, 0, &m);
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
    est_settings s;
    memset(&s, 0, sizeof s);
    s.method = EST_ESTIMATOR;
    s.task = EST_SUBSPACE;
    s.batch = a->batch;
    int code = est_args_config(a, opts, n_opts, d, &s);
    if (code)
        return code;
    char lines[DPS_MAX_GROUPS + 1][CLI_PLAN_LINE];
    int near_random = 0;
    size_t n = cli_plan_lines(&s.cfg, lines, DPS_MAX_GROUPS + 1, &near_random);
    for (size_t i = 0; i < n; i++)
        printf("%s\n", lines[i]);
    uint64_t per = (uint64_t)s.cfg.t * s.cfg.m;
    if (rows)
        printf("the input's %llu rows make %llu full epoch%s%s\n", (unsigned long long)rows,
               (unsigned long long)(rows / per), rows / per == 1 ? "" : "s",
               rows % per ? " and a partial one (released only with --close-partial)" : "");
    if (near_random)
        printf("WARNING: at least one group's basis would be near random with these settings\n");
    return 0;
}
