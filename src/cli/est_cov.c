/* est_cov.c - dps-estimate's covariance methods: iterative eigenvector
   sampling (pure eps-DP), cov-laplace (pure eps-DP) and cov-gaussian
   ((eps, delta)-DP), on all rows at once (C = sum x x^T of the rows clipped
   to unit norm, d <= DPS_COV_MAX_D).  Each run is one release: checked
   against the cap and charged (as zCDP: eps^2/2, delta) before noise is
   drawn; --out gets the k x d basis (the sampled directions, or the top-k
   eigenvectors of the noisy C for the baselines), --cov-out the d x d C_hat.

   Who owns what: est_cov_run borrows the settings, the rows and the
   generator; what it leaves in est_result (release, basis, eps_step,
   lambda) is freed by est_result_free. */
#include "args.h"
#include "estimate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *s_name(est_method m)
{
    return m == EST_ITERATIVE ? "iterative" : m == EST_COV_LAPLACE ? "cov-laplace" : "cov-gaussian";
}


int est_cov_check(est_settings *s, const int given[EST_COV_GIVEN_N])
{
    est_cov_settings *c = &s->cov;
    if (!est_is_cov(s->method)) {
        if ((given[EST_COV_GIVEN_EPS] && s->method != EST_EXACT) || given[EST_COV_GIVEN_EPS_VALUES] ||
            given[EST_COV_GIVEN_COV_OUT])
            CLI_USAGE("--eps, --eps-values and --cov-out apply only to --method iterative, cov-laplace, cov-gaussian "
                  "(--eps also to exact); drop them (the other methods take --rho)");
        return 0;
    }
    const char *m = s_name(s->method);
    if (s->task != EST_SUBSPACE)
        CLI_USAGE("--task mean is not available for --method %s; drop --task", m);
    if (given[EST_COV_GIVEN_RHO])
        CLI_USAGE("--method %s is (eps, delta)-DP and takes --eps, not --rho; give --eps", m);
    if (!given[EST_COV_GIVEN_EPS])
        CLI_USAGE("--method %s needs --eps E (its privacy budget, > 0)", m);
    if (!(c->eps > 0) || !isfinite(c->eps))
        CLI_USAGE("--eps must be positive and finite (got %g)", c->eps);
    if (s->method != EST_COV_GAUSSIAN && given[EST_COV_GIVEN_DELTA])
        CLI_USAGE("--method %s is pure eps-DP and takes no --delta; drop it", m);
    if (s->method != EST_ITERATIVE && (given[EST_COV_GIVEN_EPS_VALUES] || given[EST_COV_GIVEN_SPLIT]))
        CLI_USAGE("--eps-values and --split apply to --method iterative only (not %s); drop them", m);
    c->split_v = DPS_SPLIT_UNIFORM;
    if (c->split) {
        if (strcmp(c->split, "uniform") == 0)
            c->split_v = DPS_SPLIT_UNIFORM;
        else if (strcmp(c->split, "adaptive") == 0)
            c->split_v = DPS_SPLIT_ADAPTIVE;
        else
            CLI_USAGE("--split: '%s' is not a split for --method iterative; give uniform or adaptive", c->split);
    }
    c->eps_values_abs = 0;
    if (s->method == EST_ITERATIVE) {
        const char *v = c->eps_values;
        if (!v && (c->cov_out || c->split_v == DPS_SPLIT_ADAPTIVE))
            v = "50%"; /* C_hat and the adaptive split need the eigenvalues */
        if (v) {
            char buf[64];
            size_t len = strlen(v);
            double x;
            int share = len > 0 && v[len - 1] == '%';
            if (len == 0 || len >= sizeof buf)
                CLI_USAGE("--eps-values: '%s' is not a number or a share like 50%%", v);
            memcpy(buf, v, len + 1);
            if (share)
                buf[len - 1] = '\0';
            if (cli_parse_double(buf, &x) || !(x >= 0))
                CLI_USAGE("--eps-values: '%s' is not a non-negative number or a share like 50%%", v);
            c->eps_values_abs = share ? c->eps * x / 100 : x;
            if (!(c->eps_values_abs < c->eps))
                CLI_USAGE("--eps-values %g must be less than --eps %g (the rest samples the directions)",
                      c->eps_values_abs, c->eps);
        }
        if (c->split_v == DPS_SPLIT_ADAPTIVE && !(c->eps_values_abs > 0))
            CLI_USAGE("--split adaptive allocates by the noisy eigenvalues: give --eps-values > 0");
        if (c->cov_out && !(c->eps_values_abs > 0))
            CLI_USAGE("--cov-out needs the eigenvalues: give --eps-values > 0 (e.g. 50%%)");
    }
    if (c->cov_out) {
        cli_msg msg;
        if (cli_check_writable(c->cov_out, "--cov-out", &msg)) {
            cli_error("%s", msg.msg);
            return CLI_EXIT_USAGE;
        }
        if ((s->out && strcmp(s->out, c->cov_out) == 0) || (s->json && strcmp(s->json, c->cov_out) == 0))
            CLI_USAGE("--cov-out names the same file as --out or --json; give different files");
    }
    return 0;
}


static int s_write_cov(const char *path, const double *C, size_t d)
{
    float *F = malloc(d * d * sizeof *F);
    if (!F) {
        cli_error("out of memory writing --cov-out");
        return CLI_EXIT_RUNTIME;
    }
    for (size_t i = 0; i < d * d; i++)
        F[i] = (float)C[i];
    cli_msg m;
    int rc = cli_npy_write(path, F, d, d, 0, &m);
    free(F);
    if (rc) {
        cli_error("--cov-out: %s", m.msg);
        return CLI_EXIT_RUNTIME;
    }
    return 0;
}

int est_cov_run(const est_settings *s, est_result *r, float *X, size_t n, dps_rng *rng)
{
    const est_cov_settings *c = &s->cov;
    est_cov_result *cr = &r->cov;
    size_t d = r->d, k = r->k;
    cr->ran = 1;
    cr->eps = c->eps;
    cr->delta = s->method == EST_COV_GAUSSIAN ? s->delta : NAN;
    cr->eps_values = s->method == EST_ITERATIVE ? c->eps_values_abs : NAN;
    cr->noise = s->method == EST_COV_LAPLACE    ? dps_cov_laplace_scale(d, c->eps)
                : s->method == EST_COV_GAUSSIAN ? dps_cov_gaussian_sigma(c->eps, s->delta)
                                                : NAN;
    est_count_rows(X, n, d, r);
    r->rows_subspace = n;
    if (n == 0) {
        cli_error("the input has no rows");
        return CLI_EXIT_INPUT;
    }
    dps_zcdp cost = s->method == EST_COV_GAUSSIAN ? dps_zcdp_from_dp(c->eps, s->delta) : dps_zcdp_from_pure(c->eps);
    double *C = calloc(d * d, sizeof *C);
    double *Ch = (c->cov_out || s->method != EST_ITERATIVE) ? calloc(d * d, sizeof *Ch) : NULL;
    float *V = malloc(k * d * sizeof *V);
    est_release *rel = est_release_new(r);
    dps_budget cap = est_cap(s);
    dps_zcdp before = est_spent_before(s);
    dps_accountant *acc = NULL;
    int rc = (C && V && rel && (Ch || !(c->cov_out || s->method != EST_ITERATIVE)))
                 ? dps_accountant_new(&acc, &cap, &before)
                 : DPS_ENOMEM;
    int code = 0;
    if (!rc)
        rc = dps_cov_accumulate(X, n, d, C, NULL);
    if (rc) {
        cli_error("cannot set up --method %s: %s", s_name(s->method), dps_strerror(rc));
        code = CLI_EXIT_RUNTIME;
        goto out;
    }
    rel->rows_used = n;
    rel->delta_target = dps_config_real(s->cfg, DPS_PARAM_DELTA_TARGET);
    if (est_release_decide(rel, acc, cost, DPS_CHARGE_ZCDP, s_name(s->method))) { /* charged before any noise */
        if (s->method == EST_ITERATIVE) {
            cr->eps_step = calloc(k, sizeof *cr->eps_step);
            cr->lambda = c->eps_values_abs > 0 ? calloc(k, sizeof *cr->lambda) : NULL;
            dps_iterative_params p = {k, c->eps, c->eps_values_abs, c->split_v};
            dps_iterative_stats st = {.eps_step = cr->eps_step};
            rc = (!cr->eps_step || (c->eps_values_abs > 0 && !cr->lambda))
                     ? DPS_ENOMEM
                     : dps_cov_iterative(C, n, d, &p, rng, V, cr->lambda, c->cov_out ? Ch : NULL, &st);
            cr->proposals = st.proposals;
            cr->proposals_max = st.proposals_max;
            cr->draws = st.draws;
        } else {
            rc = s->method == EST_COV_LAPLACE ? dps_cov_laplace(C, n, d, c->eps, rng, Ch)
                                              : dps_cov_gaussian(C, n, d, c->eps, s->delta, rng, Ch);
            if (!rc)
                rc = dps_cov_topk(Ch, d, k, V, NULL);
        }
        est_release_outcome(rel, rc, 1, NULL, s_name(s->method));
        if (!rc) {
            code = est_basis_keep(s, r, rel, V);
            if (!code && c->cov_out && !(code = s_write_cov(c->cov_out, Ch, d)))
                cr->cov_written = c->cov_out;
        }
    }
    code = est_release_finish(s, r, rel, acc, code, est_cov_report);
out:
    dps_accountant_destroy(&acc);
    free(C);
    free(Ch);
    free(V);
    return code;
}

void est_cov_report(FILE *f, const est_settings *s, const est_release *rel, const est_result *r)
{
    const est_cov_result *cr = &r->cov;
    fprintf(f, "%s  %s  rows %llu  eps %g", s_name(s->method), dps_snapshot_status_name(rel->status),
            (unsigned long long)rel->rows_used, cr->eps);
    if (s->method == EST_COV_GAUSSIAN)
        fprintf(f, " delta %g (noise sd %.3g)", cr->delta, cr->noise);
    else if (s->method == EST_COV_LAPLACE)
        fprintf(f, " pure (Laplace scale %.3g)", cr->noise);
    else
        fprintf(f, " pure (values %g, split %s)  draws %zu proposals %llu", cr->eps_values,
                s->cov.split_v == DPS_SPLIT_ADAPTIVE ? "adaptive" : "uniform", cr->draws,
                (unsigned long long)cr->proposals);
    if (!isnan(rel->sin_to_truth))
        fprintf(f, "  sin %.3g  ||P-P*||_F %.3g", rel->sin_to_truth, rel->fro_to_truth);
    /* The run's total as the ledger composes it (zCDP); for this one release
       the guarantee above is the tighter statement. */
    fprintf(f, "  as zCDP: rho %.4g  total rho %.4g  eps %.3g at delta %g", rel->rho_epoch, rel->rho_total,
            rel->eps_total, rel->delta_target);
}

void est_cov_json(cli_json *j, const est_settings *s, const est_result *r)
{
    const est_cov_result *cr = &r->cov;
    cli_json_object_begin(j, "dp");
    cli_json_str(j, "guarantee", s->method == EST_COV_GAUSSIAN ? "(eps, delta)-DP" : "pure eps-DP");
    cli_json_num(j, "eps", cr->eps);
    cli_json_num(j, "delta", cr->delta);
    cli_json_num(j, "eps_values", cr->eps_values);
    cli_json_str(j, "split", s->method != EST_ITERATIVE ? NULL
                             : s->cov.split_v == DPS_SPLIT_ADAPTIVE ? "adaptive"
                                                                   : "uniform");
    if (cr->eps_step) {
        cli_json_array_begin(j, "eps_step");
        for (size_t i = 0; i < r->k; i++)
            cli_json_num(j, NULL, cr->eps_step[i]);
        cli_json_array_end(j);
    } else {
        cli_json_null(j, "eps_step");
    }
    if (cr->lambda) {
        cli_json_array_begin(j, "lambda");
        for (size_t i = 0; i < r->k; i++)
            cli_json_num(j, NULL, cr->lambda[i]);
        cli_json_array_end(j);
    } else {
        cli_json_null(j, "lambda");
    }
    cli_json_u64(j, "draws", cr->draws);
    cli_json_u64(j, "proposals", cr->proposals);
    cli_json_u64(j, "proposals_max", cr->proposals_max);
    cli_json_num(j, "noise", cr->noise);
    cli_json_str(j, "cov_out", cr->cov_written);
    cli_json_object_end(j);
}
