/*  dpsubspace_ss.h - the exact-case subspace estimator (Singhal-Steinke 2021, Algorithm 1).
    Included by dpsubspace.h; conventions as there.                          */
#ifndef DPSUBSPACE_SS_H
#define DPSUBSPACE_SS_H

#include "dpsubspace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits of dps_exact_subspace (all data-independent): k <= DPS_EXACT_MAX_K;
   C(n, k-1) * n <= DPS_EXACT_MAX_WORK (the exact score enumerates the
   hyperplanes of the winning candidate spanned by k-1 of its points);
   n * d <= DPS_EXACT_MAX_ND. */
#define DPS_EXACT_MAX_K 8
#define DPS_EXACT_MAX_WORK 2000000000.0
#define DPS_EXACT_MAX_ND ((size_t)1 << 26) /* 6 n d bytes of exact integer rows: 400 MB */

typedef struct {
    size_t candidates;     /* R: candidate subspaces sampled                 */
    double bound;          /* B: the truncated Laplace noise's support [-B, B] */
    double delta_sampling; /* (1 + e^eps) (1 - 2^-k)^R: the price of sampling  */
    double delta_total;    /* delta + delta_sampling: the guarantee's delta    */
    dps_zcdp cost;         /* dps_zcdp_from_dp(eps, delta_total): charge this  */
    size_t primes;         /* 61-bit primes used by the exact arithmetic        */
    /* private, for tests and experiments only (never release them): */
    double score;          /* H = max(0, h(s*)): the winning candidate's gap score */
    size_t members;        /* rows in the winning candidate (0 if none)        */
    size_t scored;         /* distinct candidates whose score was computed     */
} dps_exact_stats;

/* DPESE with sampled candidates (src/mechanisms/exact.c has the mechanism and the proof).
   X: n x d rows (row-major float; rows with NaN/Inf count as zero rows).  A row
   belongs to a subspace in EXACT arithmetic over the rationals (the floats'
   exact values): there is no tolerance, because any positive tolerance breaks
   the privacy proof (see exact.c); data must lie exactly in the subspace, as
   integer or other exactly representable data does.
   Releases, with *released = 1, an orthonormal basis V (k x d) of the k-dim
   subspace s* that holds a majority of the rows in the stable sense of
   exact.c, or *released = 0 (NULL) and leaves V untouched.
   Privacy under replacing one row: (eps, delta + (1 + e^eps)(1 - 2^-k)^R)-DP,
   st->delta_total; the caller charges st->cost.  candidates = R (0: the
   smallest R with (1 + e^eps)(1 - 2^-k)^R <= delta / 100).
   Noise and candidate sampling come from rng.  st may be NULL.
   Errors: DPS_EINVAL (NULL pointers, n < 1, k < 1, k >= d, eps <= 0 or not
   finite, delta not in (0, 1/2]), DPS_ELIMIT (above the limits above),
   DPS_ENOMEM. */
DPS_EXPORT int dps_exact_subspace(const float *X, size_t n, size_t d, size_t k, double eps, double delta,
                                  size_t candidates, dps_rng *rng, float *V, int *released, dps_exact_stats *st);

/* DPS_OK if n rows of dimension d with rank k are within the limits above,
   DPS_ELIMIT if not, DPS_EINVAL for k < 1 or k >= d: all public sizes, so a
   caller checks them before charging (dps_exact_subspace checks them too). */
DPS_EXPORT int dps_exact_check_limits(size_t n, size_t d, size_t k);

/* The public bookkeeping of a run, before it runs: fills st's candidates
   (R, or the default for R = 0), bound, delta_sampling, delta_total and cost
   (the rest zero).  Same argument checks as dps_exact_subspace (k >= 1). */
DPS_EXPORT int dps_exact_plan(size_t k, double eps, double delta, size_t candidates, dps_exact_stats *st);

/* The truncated Laplace noise of sensitivity 2 (Geng et al. 2020): support
   [-B, B], B = (2/eps) ln(1 + (e^eps - 1)/(2 delta)), density prop. to
   exp(-eps |x| / 2).  Adding it to a sensitivity-2 value is (eps, delta)-DP. */
DPS_EXPORT double dps_tlap_bound(double eps, double delta);
DPS_EXPORT double dps_tlap_sample(dps_rng *rng, double eps, double delta);

#ifdef __cplusplus
}
#endif
#endif
