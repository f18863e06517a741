/* est_ss.c - dps-estimate's Singhal-Steinke method: --method exact (DPESE,
   the library's dps_exact_subspace) - run, progress line, JSON block.  The
   histogram aggregator needs nothing here but its flags (estimate.c): it runs
   inside the streaming estimator.

   Who owns what: borrows the settings and the rows; fills the caller's
   est_result (one release; the basis through est_basis_keep). */
#include "estimate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int est_run_exact(const est_settings *s, est_result *r, const float *X, size_t n, dps_rng *rng)
{
    r->rows_subspace = n;
    est_count_rows(X, n, r->d, r); /* the library treats NaN/Inf rows as zero rows */
    est_release *rel = est_release_new(r);
    float *V = malloc(r->k * r->d * sizeof *V);
    dps_budget cap = est_cap(s);
    dps_accountant *acc = NULL;
    int rc = (rel && V) ? dps_accountant_new(&acc, &cap, NULL) : DPS_ENOMEM;
    if (rc) {
        free(V);
        cli_error("cannot set up the exact method: %s", dps_strerror(rc));
        return CLI_EXIT_RUNTIME;
    }
    rel->rows_used = n;
    rel->delta_target = dps_config_real(s->cfg, DPS_PARAM_DELTA_TARGET);
    /* The cost depends only on public values (eps, delta, k, R). */
    dps_exact_stats plan;
    dps_exact_plan(r->k, s->eps, s->delta, s->candidates, &plan);
    r->exact = plan;
    dps_zcdp cost = plan.cost;
    int code = 0;
    if (dps_exact_check_limits(n, r->d, r->k) != DPS_OK) { /* public sizes: checked before the charge */
        cli_error("--method exact: n = %zu rows with k = %zu is above its limit (k <= %d, C(n, k-1) * n <= %.0e, "
                  "n d <= 2^26): use fewer rows or --method estimator",
                  n, r->k, DPS_EXACT_MAX_K, DPS_EXACT_MAX_WORK);
        dps_accountant_destroy(&acc);
        free(V);
        return CLI_EXIT_USAGE;
    }
    if (est_release_decide(rel, acc, cost, DPS_CHARGE_ZCDP, "DPESE")) { /* charged before any noise */
        int released = 0;
        rc = dps_exact_subspace(X, n, r->d, r->k, s->eps, s->delta, s->candidates, rng, V, &released, &r->exact);
        char fail[160];
        snprintf(fail, sizeof fail, "DPESE released NULL: no %zu-dimensional subspace holds a stable majority of the "
                 "rows exactly; budget spent", r->k);
        est_release_outcome(rel, rc, released, fail, "DPESE");
        if (rel->status == DPS_SNAP_RELEASED)
            code = est_basis_keep(s, r, rel, V);
    }
    code = est_release_finish(s, r, rel, acc, code, est_ss_report_line);
    dps_accountant_destroy(&acc);
    free(V);
    return code;
}

void est_ss_report_line(FILE *f, const est_settings *s, const est_release *rel, const est_result *r)
{
    (void)s;
    fprintf(f, "exact  %s  rows %llu", dps_snapshot_status_name(rel->status), (unsigned long long)rel->rows_used);
    if (!isnan(rel->sin_to_truth))
        fprintf(f, "  sin %.3g  ||P-P*||_F %.3g", rel->sin_to_truth, rel->fro_to_truth);
    fprintf(f, "  (eps %.3g, delta %.3g)-DP  candidates %zu", sqrt(2 * rel->rho_epoch), rel->delta_epoch,
            r->exact.candidates);
    est_report_budget(f, rel->rho_total, rel->delta_total, rel->eps_total, rel->delta_target);
}

void est_ss_json(cli_json *j, const est_settings *s, const est_result *r)
{
    const dps_exact_stats *e = &r->exact;
    cli_json_object_begin(j, "exact");
    cli_json_num(j, "eps", s->eps);
    cli_json_num(j, "delta", s->delta);
    cli_json_u64(j, "candidates", e->candidates);
    cli_json_num(j, "delta_sampling", e->delta_sampling);
    cli_json_num(j, "delta_total", e->delta_total);
    cli_json_num(j, "noise_bound", e->bound);
    cli_json_u64(j, "primes", e->primes);
    cli_json_str(j, "guarantee",
                 "(eps, delta_total)-DP under replacing one row; charged as rho = eps^2/2 with delta_total");
    cli_json_object_end(j);
}
