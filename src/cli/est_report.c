/* est_report.c - what dps-estimate shows: one human-readable progress line
   per release (and one for the mean), and the JSON summary at the end.  Below
   the methods: a method with a line or a JSON block of its own passes it in
   (est_line_fn, est_json_fn), so nothing here calls a method's module.

   Who owns what: everything here only reads the settings and the result; the
   FILEs belong to the caller.  The numbers on a progress line are explained
   once in dps-estimate --help (estimate.c); keep the two in step. */
#include "estimate.h"
#include "json.h"

#include <math.h>
#include <string.h>

const char *est_method_name(est_method m)
{
    switch (m) {
    case EST_ESTIMATOR: return "estimator";
    case EST_TOPK: return "topk";
    case EST_ANALYZE_GAUSS: return "analyze-gauss";
    case EST_CHOOSE_K: return "choose-k";
    case EST_ITERATIVE: return "iterative";
    case EST_COV_LAPLACE: return "cov-laplace";
    case EST_COV_GAUSSIAN: return "cov-gaussian";
    case EST_EXACT: return "exact";
    }
    return "unknown";
}

int est_method_from_name(const char *name, est_method *m)
{
    for (int i = EST_ESTIMATOR; i <= EST_EXACT; i++)
        if (strcmp(name, est_method_name((est_method)i)) == 0) {
            *m = (est_method)i;
            return 0;
        }
    return -1;
}

int est_is_cov(est_method m)
{
    return m == EST_ITERATIVE || m == EST_COV_LAPLACE || m == EST_COV_GAUSSIAN;
}

const char *est_task_name(est_task t) { return t == EST_MEAN ? "mean" : "subspace"; }

/* "  sin S  ||P-P*||_F F" when the release was measured against --truth. */
static void s_truth_part(FILE *f, const est_release *rel)
{
    if (!isnan(rel->sin_to_truth))
        fprintf(f, "  sin %.3g  ||P-P*||_F %.3g", rel->sin_to_truth, rel->fro_to_truth);
}

/* "  WEAK groups 1 (level 1), 3 (level 0.82)" (numbered from 1, as
   --param-groups lists them) when some parameter group's own level is
   WEAK, whether or not the release's is. */
static void s_weak_groups(FILE *f, const est_release *rel)
{
    const char *sep = "  WEAK groups ";
    for (size_t g = 0; g < rel->groups; g++)
        if (rel->group_weak[g]) {
            fprintf(f, "%s%zu (level %.3g)", sep, g + 1, rel->group_level[g]);
            sep = ", ";
        }
}

/* "  total rho R  eps E at delta D" for a private release; says why when eps
   is infinite because the mechanisms' deltas use up delta_target. */
void est_report_budget(FILE *f, double rho_total, double delta_total, double eps_total, double delta_target)
{
    fprintf(f, "  total rho %.3f  eps %.3g at delta %g", rho_total, eps_total, delta_target);
    if (isinf(eps_total) && delta_total >= delta_target)
        fprintf(f, " [the spent delta %g is not below --delta-target]", delta_total);
}

void est_report_release(const est_settings *s, const est_release *rel, const est_result *r, est_line_fn line)
{
    FILE *f = s->progress;
    if (!f)
        return;
    if (line) {
        line(f, s, rel, r);
    } else if (s->method == EST_TOPK) {
        fprintf(f, "topk  NOT PRIVATE  rows %llu", (unsigned long long)rel->rows_used);
        s_truth_part(f, rel);
    } else if (s->method == EST_ANALYZE_GAUSS) {
        fprintf(f, "analyze-gauss  %s  rows %llu", dps_snapshot_status_name(rel->status), (unsigned long long)rel->rows_used);
        s_truth_part(f, rel);
        fprintf(f, "  rho %.3f (called with rho %.3g: it spends 2 rho)", rel->rho_epoch, r->analyze_rho);
        est_report_budget(f, rel->rho_total, rel->delta_total, rel->eps_total, rel->delta_target);
    } else {
        fprintf(f, "epoch %llu  %s  rows %llu", (unsigned long long)rel->epoch, dps_snapshot_status_name(rel->status),
                (unsigned long long)rel->rows_used);
        if (dps_config_uses_buckets(s->cfg)) /* no buckets, no radius */
            fprintf(f, "  buckets %.0f  radius %.3g", rel->buckets_used, rel->radius);
        if (rel->status == DPS_SNAP_RELEASED && rel->noise_level > 0)
            fprintf(f, "  noise level %.3g%s", rel->noise_level, rel->weak ? " WEAK" : "");
        if (rel->status == DPS_SNAP_RELEASED)
            s_weak_groups(f, rel);
        if (rel->power_steps > 0)
            fprintf(f, "  power steps %llu", (unsigned long long)rel->power_steps);
        s_truth_part(f, rel);
        fprintf(f, "  rho this epoch %.3f", rel->rho_epoch);
        est_report_budget(f, rel->rho_total, rel->delta_total, rel->eps_total, rel->delta_target);
    }
    if (rel->status != DPS_SNAP_RELEASED)
        fprintf(f, "  (%s)", rel->reason);
    fputc('\n', f);
    fflush(f);
}

int est_release_finish(const est_settings *s, est_result *r, est_release *rel, const dps_accountant *acc, int code,
                       est_line_fn line)
{
    r->spent = dps_accountant_spent(acc);
    r->spent_kind = dps_accountant_kind(acc);
    r->eps_total = dps_accountant_eps(acc, est_cap(s).delta_target);
    rel->rho_total = r->spent.rho;
    rel->delta_total = r->spent.delta;
    rel->eps_total = r->eps_total;
    if (!code)
        est_report_release(s, rel, r, line);
    return code;
}

void est_report_mean(const est_settings *s, const est_result *r)
{
    FILE *f = s->progress;
    const est_mean_result *m = &r->mean;
    if (!f)
        return;
    fprintf(f, "mean  %s%s  rows %llu", m->status, s->method == EST_TOPK ? "  NOT PRIVATE (topk subspace)" : "",
            (unsigned long long)m->rows);
    if (m->released)
        fprintf(f, "  rho %.3f  sigma %.3g  error %.3g  subspace bias %.3g", m->rho, m->sigma, m->error, m->bias);
    est_report_budget(f, r->spent.rho, r->spent.delta, r->eps_total, est_cap(s).delta_target);
    if (m->reason[0])
        fprintf(f, "  (%s)", m->reason);
    fputc('\n', f);
    fflush(f);
}

/* The configuration block: what the method actually used. */
static void s_json_config(cli_json *j, const est_settings *s)
{
    const dps_config *c = s->cfg;
    cli_json_object_begin(j, "config");
    if (!est_is_cov(s->method)) { /* those state eps (and delta) in "dp" */
        cli_json_num(j, "rho", s->rho);
        cli_json_num(j, "delta", s->delta);
    }
    if (s->method == EST_ESTIMATOR) {
        cli_json_u64(j, "t", dps_config_int(c, DPS_PARAM_T));
        cli_json_u64(j, "m", dps_config_int(c, DPS_PARAM_M));
        cli_json_u64(j, "window", dps_config_int(c, DPS_PARAM_WINDOW));
        cli_json_u64(j, "q", dps_config_int(c, DPS_PARAM_Q));
        cli_json_str(j, "aggregator", dps_aggregator_name((dps_aggregator)dps_config_int(c, DPS_PARAM_AGGREGATOR)));
        if ((dps_aggregator)dps_config_int(c, DPS_PARAM_AGGREGATOR) == DPS_AGG_POWER) {
            cli_json_u64(j, "power_blocks", dps_config_int(c, DPS_PARAM_POWER_BLOCKS));
            cli_json_u64(j, "power_oversample", dps_config_int(c, DPS_PARAM_POWER_OVERSAMPLE));
        }
        cli_json_num(j, "rho_epoch", dps_config_real(c, DPS_PARAM_RHO_EPOCH));
        cli_json_num(j, "delta_epoch", dps_config_real(c, DPS_PARAM_DELTA_EPOCH));
        cli_json_num(j, "alpha", dps_config_real(c, DPS_PARAM_ALPHA));
        cli_json_num(j, "tau", dps_config_real(c, DPS_PARAM_TAU));
        cli_json_array_begin(j, "split");
        cli_json_num(j, NULL, dps_config_real(c, DPS_PARAM_SPLIT_SEARCH));
        cli_json_num(j, NULL, dps_config_real(c, DPS_PARAM_SPLIT_COUNT));
        cli_json_num(j, NULL, dps_config_real(c, DPS_PARAM_SPLIT_MEAN));
        cli_json_array_end(j);
        cli_json_u64(j, "public_seed", dps_config_int(c, DPS_PARAM_PUBLIC_SEED));
        cli_json_u64(j, "batch", s->batch);
        cli_json_bool(j, "close_partial", s->close_partial);
        size_t groups = dps_config_int(c, DPS_PARAM_GROUPS), width, rank;
        if (groups > 1) { /* the parameter groups (widths, ranks), in row order */
            cli_json_array_begin(j, "param_groups");
            for (size_t g = 0; g < groups; g++)
                if (dps_config_get_group(c, g, &width, &rank, NULL) == DPS_OK)
                    cli_json_u64(j, NULL, width);
            cli_json_array_end(j);
            cli_json_array_begin(j, "group_k");
            for (size_t g = 0; g < groups; g++)
                if (dps_config_get_group(c, g, &width, &rank, NULL) == DPS_OK)
                    cli_json_u64(j, NULL, rank);
            cli_json_array_end(j);
        }
    }
    cli_json_num(j, "cap_rho", dps_config_real(c, DPS_PARAM_CAP_RHO));
    cli_json_num(j, "cap_eps", dps_config_real(c, DPS_PARAM_CAP_EPS));
    cli_json_num(j, "delta_target", dps_config_real(c, DPS_PARAM_DELTA_TARGET));
    cli_json_u64(j, "workers", dps_config_int(c, DPS_PARAM_WORKERS));
    cli_json_str(j, "blas_core", dps_blas_corename()); /* the OpenBLAS kernel the run used */
    cli_json_object_end(j);
}

/* One entry of "epochs". */
static void s_json_release(cli_json *j, const est_release *e)
{
    cli_json_object_begin(j, NULL);
    cli_json_u64(j, "epoch", e->epoch);
    cli_json_str(j, "status", dps_snapshot_status_name(e->status));
    cli_json_str(j, "reason", e->reason);
    cli_json_u64(j, "rows_used", e->rows_used);
    cli_json_num(j, "buckets_used", e->buckets_used);
    cli_json_num(j, "radius", e->radius);
    cli_json_num(j, "w_hat", e->w_hat);
    cli_json_num(j, "noise_level", e->noise_level);
    cli_json_bool(j, "weak", e->weak);
    cli_json_u64(j, "power_steps", e->power_steps);
    if (e->groups) { /* per parameter group, in row order (null: no level, a group of rank 0) */
        cli_json_array_begin(j, "group_noise_level");
        for (size_t g = 0; g < e->groups; g++)
            cli_json_num(j, NULL, e->group_level[g]);
        cli_json_array_end(j);
        cli_json_array_begin(j, "group_weak");
        for (size_t g = 0; g < e->groups; g++)
            cli_json_bool(j, NULL, e->group_weak[g]);
        cli_json_array_end(j);
    }
    cli_json_num(j, "rho_epoch", e->rho_epoch);
    cli_json_num(j, "delta_epoch", e->delta_epoch);
    cli_json_num(j, "rho_total", e->rho_total);
    cli_json_num(j, "delta_total", e->delta_total);
    cli_json_num(j, "eps_total", e->eps_total);
    cli_json_num(j, "delta_target", e->delta_target);
    cli_json_num(j, "sin_to_truth", e->sin_to_truth);
    cli_json_num(j, "fro_to_truth", e->fro_to_truth);
    cli_json_object_end(j);
}

int est_report_json(FILE *f, const est_settings *s, const est_result *r, int exit_code, const char *error,
                    est_json_fn method_json)
{
    cli_json j;
    cli_json_init(&j, f);
    cli_json_object_begin(&j, NULL);
    cli_json_str(&j, "program", "dps-estimate");
    cli_json_str(&j, "library_version", dps_version());
    cli_json_str(&j, "method", s->one_epoch ? s->one_epoch : est_method_name(s->method));
    cli_json_str(&j, "task", est_task_name(s->task));
    cli_json_bool(&j, "private", s->method != EST_TOPK);
    if (s->method == EST_TOPK)
        cli_json_str(&j, "warning", "NOT PRIVATE: --method topk releases the exact top-k subspace of the data");
    cli_json_bool(&j, "seeded", s->seeded);
    if (s->seeded)
        cli_json_u64(&j, "seed", s->seed);
    else
        cli_json_null(&j, "seed");
    cli_json_str(&j, "input", s->input);
    cli_json_str(&j, "format", cli_format_name(s->format));
    cli_json_u64(&j, "d", r->d);
    cli_json_u64(&j, "k", r->k);
    cli_json_u64(&j, "n_rows", r->n_rows);
    cli_json_u64(&j, "rows_subspace", r->rows_subspace);
    s_json_config(&j, s);
    if (method_json)
        method_json(&j, s, r);
    cli_json_array_begin(&j, "epochs");
    for (size_t i = 0; i < r->n_rel; i++)
        s_json_release(&j, &r->rel[i]);
    cli_json_array_end(&j);
    cli_json_u64(&j, "rows_nan", r->rows_nan);
    cli_json_u64(&j, "rows_inf", r->rows_inf);
    cli_json_u64(&j, "rows_zero", r->rows_zero);
    cli_json_u64(&j, "rows_discarded", r->rows_discarded);
    cli_json_u64(&j, "rows_not_closed", r->rows_not_closed);
    cli_json_u64(&j, "batches_dim", r->batches_dim);
    cli_json_u64(&j, "batches_empty", r->batches_empty);
    if (s->task == EST_MEAN) {
        const est_mean_result *m = &r->mean;
        cli_json_object_begin(&j, "mean");
        cli_json_str(&j, "status", m->ran ? m->status : "not run");
        cli_json_str(&j, "reason", m->reason);
        cli_json_u64(&j, "rows", m->rows);
        cli_json_num(&j, "rho", m->rho);
        cli_json_num(&j, "sigma", m->sigma);
        cli_json_num(&j, "error", m->error);
        cli_json_num(&j, "subspace_bias", m->bias);
        cli_json_str(&j, "note",
                     "error = ||Pi~ x~ - mean(X)||, x~ the Gaussian mean with rho/2, Pi~ the released subspace "
                     "(itself from rho/2); mean(X) is the exact mean of the rows clipped to norm 1; "
                     "subspace_bias = ||Pi~ mean(X) - mean(X)||");
        cli_json_object_end(&j);
    }
    if (r->choice.ran) {
        const est_choice *c = &r->choice;
        cli_json_object_begin(&j, "choose_k");
        cli_json_u64(&j, "k", c->k);
        cli_json_u64(&j, "k_max", c->k_max);
        cli_json_num(&j, "eps", c->eps);
        cli_json_num(&j, "beta", c->beta);
        cli_json_num(&j, "threshold", c->threshold);
        cli_json_array_begin(&j, "noisy_sq");
        for (size_t i = 0; i <= c->k_max; i++)
            cli_json_num(&j, NULL, c->noisy_sq[i]);
        cli_json_array_end(&j);
        cli_json_str(&j, "guarantee", "pure eps-DP (Laplace on the squared singular values, l1 sensitivity 2)");
        cli_json_object_end(&j);
    }
    cli_json_object_begin(&j, "privacy");
    int any_private = s->method != EST_TOPK || s->task == EST_MEAN || r->choice.ran;
    cli_json_num(&j, "rho_total", any_private ? r->spent.rho : NAN);
    cli_json_num(&j, "delta_total", any_private ? r->spent.delta : NAN);
    cli_json_num(&j, "eps_total", any_private ? r->eps_total : NAN);
    cli_json_num(&j, "delta_target", est_cap(s).delta_target);
    cli_json_object_end(&j);
    cli_json_str(&j, "truth", s->truth);
    cli_json_str(&j, "out", r->out_written);
    cli_json_str(&j, "out_prefix", s->out_prefix);
    cli_json_str(&j, "mean_out", r->mean_written);
    cli_json_str(&j, "note", r->note[0] ? r->note : NULL);
    cli_json_u64(&j, "exit_code", (uint64_t)exit_code);
    cli_json_str(&j, "error", error);
    cli_json_object_end(&j);
    return cli_json_finish(&j);
}
