/* plan_text.c - dps_config_plan in words, one line at a time: what
   dps-estimate --plan prints and the collector logs at start-up (part of
   dps_args, so that both say it the same way). */
#include "args.h"

#include <stdio.h>
#include <string.h>

size_t cli_plan_lines(const dps_config *c, char lines[][CLI_PLAN_LINE], size_t max, int *near_random)
{
    dps_plan p;
    size_t n = 0;
    *near_random = 0;
    if (dps_config_plan(c, &p) != DPS_OK || max < 2)
        return 0;
    double rho = 0;
    dps_config_get_real(c, DPS_PARAM_RHO_EPOCH, &rho);
    snprintf(lines[n++], CLI_PLAN_LINE,
             "plan: an epoch of %llu rows (t %zu x m %zu), d %zu, k %zu, aggregator %s, rho %g per release "
             "(charged rho %g, delta %g); memory %.1f MB for an epoch, %.1f MB while one is released and the "
             "next fills (the collector)",
             (unsigned long long)p.rows, (size_t)dps_config_int(c, DPS_PARAM_T), (size_t)dps_config_int(c, DPS_PARAM_M), (size_t)dps_config_int(c, DPS_PARAM_D),
             (size_t)dps_config_int(c, DPS_PARAM_K), dps_aggregator_name((dps_aggregator)(size_t)dps_config_int(c, DPS_PARAM_AGGREGATOR)), rho,
             p.cost.rho, p.cost.delta, (double)p.memory / 1e6, (double)dps_estimator_memory_bound_pipelined(c) / 1e6);
    return n + cli_plan_group_lines(c, &p, p.rows, lines + n, max - n, near_random);
}

size_t cli_plan_group_lines(const dps_config *c, const dps_plan *p, uint64_t rows, char lines[][CLI_PLAN_LINE],
                            size_t max, int *near_random)
{
    size_t n = 0;
    *near_random = 0;
    for (size_t g = 0, col = 0; g < p->groups && n < max; g++) {
        size_t dg = (size_t)dps_config_int(c, DPS_PARAM_D), kg = (size_t)dps_config_int(c, DPS_PARAM_K);
        if ((size_t)dps_config_int(c, DPS_PARAM_GROUPS) > 1)
            dps_config_get_group(c, g, &dg, &kg, NULL);
        char where[64] = "";
        if (p->groups > 1)
            snprintf(where, sizeof where, "group %zu (columns %zu..%zu), ", g + 1, col, col + dg - 1);
        col += dg;
        /* the floor as an eigenvalue of sum x_g x_g^T (p->floor is a share of p->rows) */
        double eigen = p->floor[g] * (double)p->rows;
        if (eigen > 0 && kg > 0 && !rows) {
            snprintf(lines[n++], CLI_PLAN_LINE,
                     "  %sd %zu, k %zu: %s; noise floor: a direction needs an eigenvalue of sum x x^T above %.3g "
                     "(as a share of the epoch's energy: that over its rows, not known before the input is read)",
                     where, dg, kg, p->method[g], eigen);
        } else if (eigen > 0 && kg > 0) {
            /* k_g directions that shared the energy evenly would each hold 1/k_g of it: a floor above that
               leaves nothing a k_g-dim basis could find above the noise */
            double floor = rows == p->rows ? p->floor[g] : eigen / (double)rows;
            int weak = floor * (double)kg >= 1.0;
            *near_random |= weak;
            snprintf(lines[n++], CLI_PLAN_LINE,
                     "  %sd %zu, k %zu: %s; noise floor %.3g of the epoch's energy per direction%s", where, dg, kg,
                     p->method[g], floor,
                     weak ? " - WARNING: above 1/k, the basis will be near random (more rows per epoch, a "
                            "larger rho, or smaller groups)"
                          : "");
        } else {
            snprintf(lines[n++], CLI_PLAN_LINE, "  %sd %zu, k %zu: %s%s", where, dg, kg, p->method[g],
                     kg == 0 || dps_config_uses_buckets(c) == 0
                         ? ""
                         : "; no noise floor rule: the sample-and-aggregate estimators need rows that agree at "
                           "the scale of a bucket of m rows (on per-example gradients every release up to m = "
                           "3000 was at random level: use the gaussian aggregator)");
        }
    }
    return n;
}
