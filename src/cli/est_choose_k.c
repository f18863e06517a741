/* est_choose_k.c - dps-estimate's private choice of k (dps_choose_k): run it
   on rows already read, say what it found, and charge its cost so that the
   run's totals and caps include it.  Used by --method choose-k (report only)
   and by --k-max with another method (choose k, then run the method).

   Who owns what: the rows belong to the caller; the result's choice is
   filled in place (no allocation beyond its fixed arrays). */
#include "args.h"
#include "estimate.h"

#include <math.h>
#include <stdio.h>

int est_choose_k(const est_settings *s, const float *X, size_t n, size_t d, dps_rng *rng, est_result *r)
{
    est_choice *c = &r->choice;
    c->ran = 1;
    c->k_max = s->k_max;
    c->eps = s->eps_k;
    c->beta = s->beta_k;
    c->threshold = dps_choose_k_threshold(s->k_max, s->eps_k, s->beta_k);
    int rc = dps_choose_k(X, n, d, s->k_max, s->eps_k, s->beta_k, rng, &c->k, c->noisy_sq);
    if (rc == DPS_ELIMIT) {
        cli_error("choosing k forms a min(n, d) = %zu square matrix, above the limit %d; give --k instead",
                  n < d ? n : d, DPS_CHOOSE_K_MAX_DIM);
        return CLI_EXIT_USAGE;
    }
    r->spent = dps_zcdp_from_pure(s->eps_k); /* the run's first charge */
    if (rc) { /* after the charge: exit 4 like "no k found" (dps_release_outcome) */
        cli_error("choosing k stopped on an internal error after its budget was charged (%s): nothing else was "
                  "run; eps %g was spent", dps_strerror(rc), s->eps_k);
        return CLI_EXIT_PRIVACY;
    }
    if (s->progress) {
        fprintf(s->progress, "choose-k  k %zu  (of at most %zu)  eps %g (pure; zCDP rho %.4g)  threshold %.3g  noisy sigma^2:",
                c->k, c->k_max, c->eps, r->spent.rho, c->threshold);
        for (size_t i = 0; i <= c->k_max; i++)
            fprintf(s->progress, " %.4g", c->noisy_sq[i]);
        fputc('\n', s->progress);
        if (c->k == 0)
            fprintf(s->progress, "  no squared singular value stands above the noise threshold\n");
        else if (c->k == c->k_max)
            fprintf(s->progress, "  every value up to --k-max passed: the right k may be larger\n");
    }
    return 0;
}
