/* est_release.c - dps-estimate's result, at the bottom of its modules (they
   all use it; it uses none of them): the release list, the last released
   basis, the rows counted by kind, the report of an error after a charge,
   and freeing the result.

   Who owns what: the est_result owns the release list, the basis and the
   numbers the methods allocated in it; est_result_free releases them. */
#include "estimate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- helpers */
/* Append a release marked "failed: did not run" with every number that does
   not apply set to NaN; NULL when out of memory. */
est_release *est_release_new(est_result *r)
{
    if (r->n_rel == r->cap_rel) {
        size_t cap = r->cap_rel ? 2 * r->cap_rel : 8;
        est_release *n = realloc(r->rel, cap * sizeof *n);
        if (!n)
            return NULL;
        r->rel = n;
        r->cap_rel = cap;
    }
    est_release *e = &r->rel[r->n_rel++];
    memset(e, 0, sizeof *e);
    e->status = DPS_SNAP_FAILED; /* until the method says otherwise */
    snprintf(e->reason, sizeof e->reason, "did not run");
    e->buckets_used = e->radius = e->w_hat = e->noise_level = NAN;
    e->rho_epoch = e->delta_epoch = e->rho_total = e->delta_total = e->eps_total = e->delta_target = NAN;
    e->sin_to_truth = e->fro_to_truth = NAN;
    return e;
}

/* Keep V (k x d) as the last released basis and measure it against the
   truth.  Returns 0 or CLI_EXIT_RUNTIME (message printed). */
int est_basis_keep(const est_settings *s, est_result *r, est_release *rel, const float *V)
{
    size_t kd = r->k * r->d;
    if (!r->basis && !(r->basis = malloc(kd * sizeof *r->basis))) {
        cli_error("out of memory keeping the released basis");
        return CLI_EXIT_RUNTIME;
    }
    memcpy(r->basis, V, kd * sizeof *V);
    if (s->truth_basis) {
        double fro = NAN;
        rel->sin_to_truth = dps_subspace_sin(V, s->truth_basis, r->k, r->d, &fro);
        rel->fro_to_truth = fro;
    }
    return 0;
}

/* A central method's release ends through the library's end of a release
   (dps_release_decide / dps_release_outcome, include/dpsubspace.h: its
   order, and the errors that can still come after the charge).  The central
   methods clip every row into the unit ball (src/core/rows.c); their
   argument and limit errors are checked before the charge.  An error after
   it is a FAILED release, exit 4, budget spent: the same observable outcome
   as the mechanism's own FAIL. */
int est_release_decide(est_release *rel, dps_accountant *acc, dps_zcdp cost, dps_charge_kind kind, const char *who)
{
    char refused[sizeof rel->reason];
    snprintf(refused, sizeof refused, "running %s would pass the privacy budget cap: nothing was spent", who);
    dps_release_hooks hooks = {.refused = refused};
    dps_snapshot_info info = {0};
    int run = dps_release_decide(acc, cost, kind, NULL, &hooks, &info) == DPS_RELEASE_RUN;
    rel->rho_epoch = info.epoch_cost.rho;
    rel->delta_epoch = info.epoch_cost.delta;
    if (!run) {
        rel->status = info.status;
        snprintf(rel->reason, sizeof rel->reason, "%s", info.reason);
    }
    return run;
}

void est_release_outcome(est_release *rel, int rc, int released, const char *fail_reason, const char *who)
{
    dps_snapshot_info info = {0};
    char internal[sizeof rel->reason];
    dps_release_outcome(&info, rc, !released, fail_reason, who, internal, sizeof internal);
    rel->status = info.status;
    snprintf(rel->reason, sizeof rel->reason, "%s", info.reason);
}

/* Count rows with NaN, Inf (and no NaN) or zero norm, as the estimator does. */
void est_count_rows(const float *X, size_t n, size_t d, est_result *r)
{
    for (size_t i = 0; i < n; i++) {
        const float *x = X + i * d;
        int nan = 0, inf = 0;
        double ss = 0;
        for (size_t j = 0; j < d; j++) {
            if (isnan(x[j]))
                nan = 1;
            else if (isinf(x[j]))
                inf = 1;
            else
                ss += (double)x[j] * x[j];
        }
        r->rows_nan += nan;
        r->rows_inf += !nan && inf;
        r->rows_zero += !nan && !inf && ss == 0;
    }
}

void est_result_free(est_result *r)
{
    free(r->rel);
    free(r->basis);
    free(r->mean.released);
    free(r->cov.eps_step);
    free(r->cov.lambda);
    r->rel = NULL;
    r->basis = NULL;
    r->mean.released = NULL;
    r->cov.eps_step = r->cov.lambda = NULL;
    r->n_rel = r->cap_rel = 0;
}
