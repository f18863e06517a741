/* cov_internal.h - the pieces of the Bingham sampler shared by bingham.c,
   covariance.c and the tests; not installed. */
#ifndef DPS_COV_INTERNAL_H
#define DPS_COV_INTERNAL_H

#include "dpsubspace.h"

/* Which acceptance ratio the rejection step uses. */
enum {
    BINGHAM_CORRECT = 0, /* exp(-x^T A x) (x^T Omega x)^(+q/2) / M (Kent et al.) */
    BINGHAM_WRONG = 1    /* exp(-x^T A x) (x^T Omega x)^(-q/2) / M: the sign error
                            of a widely used implementation; tests only, to show
                            that the tests can tell the two apart              */
};

/* b >= 1 solving sum_j 1/(b + 2 a_j) = 1 for a_j >= 0 with min_j a_j = 0
   (bisection on [1, q] to machine precision). */
double bingham_solve_b(const double *a, size_t q);

/* One draw from exp(-x^T A x) on S^{q-1} given A = U diag(a) U^T: a (q values,
   >= 0, smallest 0), U (q x q, eigenvector j contiguous at U + j*q; NULL for
   the identity).  x: q outputs.  work: q doubles.  Returns DPS_OK or
   DPS_ENUMERIC (10^9 proposals without acceptance, or a non-finite ratio). */
int bingham_draw_eig(const double *a, const double *U, size_t q, dps_rng *rng, int variant, double *x,
                     double *work, uint64_t *proposals);

/* dps_bingham_sample with a choice of variant (tests). */
int bingham_sample_variant(const double *A, size_t q, dps_rng *rng, double *x, uint64_t *proposals,
                           int variant);

#endif
