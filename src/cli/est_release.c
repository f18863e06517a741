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

/* AFTER THE CHARGE NOTHING MAY DEPEND ON AN ERROR THE DATA CAN CAUSE.  The
   central methods clip every row into the unit ball (src/core/rows.c: NaN/Inf rows
   become zero, every row finite with norm <= 1, whatever its magnitude), so
   the errors their mechanisms can still return after the charge are:
   - DPS_ENOMEM: scratch whose size is a function of n, d, k (public);
   - DPS_ENUMERIC: LAPACK non-convergence (dsyevr, dgesdd) on a finite matrix
     of data plus noise, or the Bingham sampler's proposal cap (iterative);
     in principle data-dependent, no input is known to cause them, and their
     probability is not in delta;
   - rgrad: an SVD's DPS_ENUMERIC, as above.
   (Argument and limit errors are checked before the charge.)  Each is
   published as a FAILED release, exit 4, budget spent: the same observable
   outcome as the mechanism's own FAIL, so an error differs from a run
   without it only in the basis being withheld. */
void est_release_internal_error(est_release *rel, const char *method, int rc)
{
    rel->status = DPS_SNAP_FAILED;
    snprintf(rel->reason, sizeof rel->reason,
             "%s stopped on an internal error after the budget was charged (%s): published as FAILED; budget spent",
             method, dps_strerror(rc));
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
