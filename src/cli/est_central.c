/* est_central.c - dps-estimate's central methods on all rows at once: the
   non-private top-k (a baseline), Analyze Gauss (its progress line is the
   generic one, its JSON members est_central_json), and the private mean in
   the released subspace (the mean task, DESIGN 3.8).

   Who owns what: borrows the settings, the rows and the generator; what a
   run keeps (release, basis, released mean) goes to the caller's est_result. */
#include "estimate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Non-private top-k of all rows (NaN/Inf rows zeroed first). */
int est_central_topk(const est_settings *s, est_result *r, float *X, size_t n)
{
    est_count_rows(X, n, r->d, r);
    for (size_t i = 0; i < n; i++) /* NaN/Inf rows as zero rows, as the estimator sees them */
        for (size_t j = 0; j < r->d; j++)
            if (!isfinite(X[i * r->d + j])) {
                memset(X + i * r->d, 0, r->d * sizeof *X);
                break;
            }
    r->rows_subspace = n;
    float *V = malloc(r->k * r->d * sizeof *V);
    est_release *rel = est_release_new(r);
    if (!V || !rel) {
        free(V);
        cli_error("out of memory for the basis");
        return CLI_EXIT_RUNTIME;
    }
    int rc = dps_topk_basis(X, n, r->d, r->k, V, NULL);
    if (rc) {
        free(V);
        cli_error("the top-k SVD failed: %s", dps_strerror(rc));
        return CLI_EXIT_RUNTIME;
    }
    rel->status = DPS_SNAP_RELEASED;
    snprintf(rel->reason, sizeof rel->reason, "NOT PRIVATE: the exact top-%zu subspace of the rows, no noise", r->k);
    rel->rows_used = n;
    int code = est_basis_keep(s, r, rel, V);
    free(V);
    est_report_release(s, rel, r, NULL);
    return code;
}

/* Analyze Gauss on all rows: it spends (2 rho', delta) for the rho' it is
   called with, so it gets half of the subspace's budget. */
int est_central_analyze(const est_settings *s, est_result *r, const float *X, size_t n, dps_rng *rng)
{
    est_count_rows(X, n, r->d, r); /* the library zeroes NaN/Inf rows and clips norms */
    r->rows_subspace = n;
    double rho_sub = s->task == EST_MEAN ? s->rho / 2 : s->rho;
    r->analyze_rho = rho_sub / 2;
    dps_zcdp cost = {rho_sub, s->delta};
    dps_budget cap = est_cap(s);
    dps_zcdp before = est_spent_before(s);
    dps_accountant *acc = NULL;
    float *V = malloc(r->k * r->d * sizeof *V);
    est_release *rel = est_release_new(r);
    int rc = (V && rel) ? dps_accountant_new(&acc, &cap, &before) : DPS_ENOMEM;
    if (rc) {
        free(V);
        cli_error("cannot set up Analyze Gauss: %s", dps_strerror(rc));
        return CLI_EXIT_RUNTIME;
    }
    rel->rows_used = n;
    rel->delta_target = est_cap(s).delta_target;
    int code = 0;
    if (est_release_decide(rel, acc, cost, DPS_CHARGE_ZCDP, "Analyze Gauss")) { /* charged before any noise */
        int released = 0;
        rc = dps_analyze_gauss(X, n, r->d, r->k, r->analyze_rho, s->delta, rng, V, &released);
        est_release_outcome(rel, rc, released, "the noisy eigengap was too small (Analyze Gauss said FAIL): budget spent",
                            "Analyze Gauss");
        if (rel->status == DPS_SNAP_RELEASED)
            code = est_basis_keep(s, r, rel, V);
    }
    code = est_release_finish(s, r, rel, acc, code, NULL);
    dps_accountant_destroy(&acc);
    free(V);
    return code;
}

/* Mean of the rows clipped to unit norm (NaN/Inf rows as zero): the quantity
   dps_gaussian_mean estimates.  out has d entries. */
static void s_exact_mean(const float *X, size_t n, size_t d, double *out)
{
    memset(out, 0, d * sizeof *out);
    for (size_t i = 0; i < n; i++) {
        const float *x = X + i * d;
        double ss = 0;
        int bad = 0;
        for (size_t j = 0; j < d; j++) {
            if (!isfinite(x[j]))
                bad = 1;
            ss += (double)x[j] * x[j];
        }
        if (bad)
            continue;
        double sc = ss > 1 ? 1 / sqrt(ss) : 1;
        for (size_t j = 0; j < d; j++)
            out[j] += x[j] * sc;
    }
    for (size_t j = 0; j < d; j++)
        out[j] /= (double)n;
}

/* ||a - b|| over d entries. */
static double s_dist(const double *a, const double *b, size_t d)
{
    double s = 0;
    for (size_t j = 0; j < d; j++)
        s += (a[j] - b[j]) * (a[j] - b[j]);
    return sqrt(s);
}

/* DESIGN 3.8: x~ = Gaussian mean with rho/2 (dps_gaussian_mean: sigma =
   (2/n)/sqrt(2 rho/2) = 2/(n sqrt(rho))), released as Pi~ x~ with Pi~ the
   subspace just released.  Charged against the same cap as the subspace, as
   a Gaussian mechanism (l2 sensitivity 2/n over sigma: mu = sqrt(2 rho/2)):
   after a gaussian or power subspace the run's total is Gaussian too. */
int est_mean_run(const est_settings *s, est_result *r, const float *X, size_t n, dps_rng *rng)
{
    est_mean_result *mr = &r->mean;
    size_t d = r->d;
    mr->ran = 1;
    mr->rows = n;
    mr->rho = 0;
    mr->sigma = mr->error = mr->bias = NAN;
    int have_basis = r->n_rel > 0 && r->rel[r->n_rel - 1].status == DPS_SNAP_RELEASED && r->basis;
    if (!have_basis) {
        mr->status = "not run";
        snprintf(mr->reason, sizeof mr->reason,
                 "the subspace step released no basis, so the mean was not computed (nothing spent on it)");
        est_report_mean(s, r);
        return 0;
    }
    double rho_mean = s->rho / 2;
    dps_zcdp cost = {rho_mean, 0};
    dps_budget cap = est_cap(s);
    dps_accountant *acc = NULL;
    double *xt = malloc(d * sizeof *xt), *exact = malloc(d * sizeof *exact), *tmp = malloc(d * sizeof *tmp);
    mr->released = malloc(d * sizeof *mr->released);
    int rc = (xt && exact && tmp && mr->released)
                 ? dps_accountant_new_resumed(&acc, &cap, &r->spent, r->spent_kind)
                 : DPS_ENOMEM;
    int code = 0;
    dps_release_hooks mean_hooks = {.refused = "the mean's rho/2 would pass the privacy budget cap: nothing was "
                                               "spent on it"};
    dps_snapshot_info info = {0};
    if (rc) {
        cli_error("cannot set up the mean: %s", dps_strerror(rc));
        code = CLI_EXIT_RUNTIME;
    } else if (dps_release_decide(acc, cost, DPS_CHARGE_GAUSSIAN, NULL, &mean_hooks, &info) != DPS_RELEASE_RUN) {
        mr->status = "refused";
        snprintf(mr->reason, sizeof mr->reason, "%s", info.reason);
        free(mr->released);
        mr->released = NULL;
    } else { /* charged before any noise is drawn */
        rc = dps_gaussian_mean(X, n, d, rho_mean, rng, xt);
        char internal[sizeof mr->reason];
        dps_release_outcome(&info, rc, 0, NULL, "the Gaussian mean", internal, sizeof internal);
        if (rc) { /* after the charge: FAILED, budget spent (dps_release_outcome) */
            mr->status = "failed";
            mr->rho = rho_mean;
            snprintf(mr->reason, sizeof mr->reason, "%s", info.reason);
            free(mr->released);
            mr->released = NULL;
        } else {
            dps_project(r->basis, r->k, d, xt, mr->released);
            s_exact_mean(X, n, d, exact);
            dps_project(r->basis, r->k, d, exact, tmp);
            mr->status = "released";
            mr->reason[0] = '\0';
            mr->rho = rho_mean;
            mr->sigma = (2.0 / (double)n) / sqrt(2.0 * rho_mean);
            mr->error = s_dist(mr->released, exact, d);
            mr->bias = s_dist(tmp, exact, d);
        }
    }
    if (acc) {
        r->spent = dps_accountant_spent(acc);
        r->spent_kind = dps_accountant_kind(acc);
        r->eps_total = dps_accountant_eps(acc, est_cap(s).delta_target);
    }
    dps_accountant_destroy(&acc);
    free(xt);
    free(exact);
    free(tmp);
    if (!code)
        est_report_mean(s, r);
    return code;
}

/* Analyze Gauss's JSON members: what rho the library was called with. */
void est_central_json(cli_json *j, const est_settings *s, const est_result *r)
{
    cli_json_num(j, "analyze_gauss_rho", r->analyze_rho);
    cli_json_str(j, "analyze_gauss_note",
                 s->task == EST_MEAN
                     ? "dps_analyze_gauss spends (2 rho, delta): it was called with rho = --rho/4 so that the "
                       "subspace spends --rho/2 and the mean the other --rho/2"
                     : "dps_analyze_gauss spends (2 rho, delta): it was called with rho = --rho/2 so that it "
                       "spends --rho");
}
