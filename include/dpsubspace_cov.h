/*  dpsubspace_cov.h - pure eps-DP covariance and subspace (Amin, Dick, Kulesza,
    Munoz Medina, Vassilvitskii 2019), a Bingham sampler (Kent, Ganeiber, Mardia
    2018) and the Laplace / Gaussian covariance baselines.
    Included by dpsubspace.h; conventions as there.

    Privacy model: rows are clipped to unit L2 norm (x / max(1, ||x||); a row
    with NaN/Inf counts as the zero vector), C = sum_i x_i x_i^T, and
    neighbouring data sets differ by REPLACING one row.  The guarantees below
    are pure eps-DP or (eps, delta)-DP; the ledger takes them as
    dps_zcdp_from_pure(eps) / dps_zcdp_from_dp(eps, delta).
    Matrices here are d x d, row-major, double, full symmetric storage; they
    are refused above DPS_COV_MAX_D with DPS_ELIMIT.  The proofs are next to
    the code in src/mechanisms/covariance.c and src/mechanisms/bingham.c.                          */
#ifndef DPSUBSPACE_COV_H
#define DPSUBSPACE_COV_H

#include "dpsubspace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* d x d doubles: 4096^2 * 8 B = 128 MB per matrix, and the iterative
   mechanism does k eigendecompositions of up to d x d (seconds each at 4096). */
#define DPS_COV_MAX_D 4096

/* C (d x d, full symmetric) += sum over the n rows of X (n x d float) of
   x x^T, each row clipped to unit norm, a row with NaN/Inf added as zero.
   Not private by itself (it is the input of the mechanisms below).
   *nonfinite (may be NULL) receives the number of rows taken as zero.
   DPS_EINVAL (NULL, d = 0), DPS_ELIMIT (d > DPS_COV_MAX_D), DPS_ENOMEM. */
DPS_EXPORT int dps_cov_accumulate(const float *X, size_t n, size_t d, double *C, uint64_t *nonfinite);

/* One draw x (length q, unit norm) from the Bingham density proportional to
   exp(-x^T A x) on the sphere S^{q-1}, for A (q x q, full symmetric) positive
   semidefinite, by Kent-Ganeiber-Mardia rejection from an angular central
   Gaussian envelope (exact: no approximation, no iteration cap short of
   10^9 proposals, which returns DPS_ENUMERIC).  *proposals (may be NULL)
   receives the proposals it took (>= 1).  Randomness from rng only.
   DPS_EINVAL (NULL, q = 0, A not finite/symmetric, or an eigenvalue below
   -1e-9 * max(1, ||A||)), DPS_ELIMIT (q > DPS_COV_MAX_D), DPS_ENOMEM,
   DPS_ENUMERIC.  Not a mechanism by itself: see dps_cov_iterative. */
DPS_EXPORT int dps_bingham_sample(const double *A, size_t q, dps_rng *rng, double *x, uint64_t *proposals);

/* How dps_cov_iterative splits the eigenvector budget over its k draws. */
typedef enum {
    DPS_SPLIT_UNIFORM  = 0, /* eps_i = (eps - eps_values) / k'                  */
    DPS_SPLIT_ADAPTIVE = 1  /* Amin et al. Corollary 1: eps_i proportional to
                               sqrt(lambda^_i + tau), tau = (2/eps_values)
                               ln(2d/beta), beta = DPS_COV_ADAPTIVE_BETA; needs
                               eps_values > 0 (it uses the noisy eigenvalues) */
} dps_eps_split;

/* The utility failure probability in the adaptive split's tau (a constant of
   the budget allocation, not a privacy parameter). */
#define DPS_COV_ADAPTIVE_BETA 0.05

typedef struct {
    size_t k;            /* eigenvectors to sample, 1 <= k <= d (k = d: the
                            full covariance)                                  */
    double eps;          /* total pure-DP budget, > 0                         */
    double eps_values;   /* the part of eps for the k eigenvalues, in [0, eps);
                            0: subspace only (no lambda, no C_hat)            */
    dps_eps_split split;
} dps_iterative_params;

/* What a run of dps_cov_iterative did (all public: functions of the output
   and the parameters, except the proposal counts, see the privacy note at
   dps_cov_iterative). */
typedef struct {
    double *eps_step;    /* IN: caller's array of k (may be NULL); OUT: the
                            eps spent by each eigenvector draw              */
    double eps_values;   /* spent on the eigenvalues                        */
    double eps_spent;    /* eps_values + sum eps_step (== params eps)       */
    uint64_t proposals;  /* Bingham proposals over all draws                */
    uint64_t proposals_max; /* the most one draw took                       */
    size_t draws;        /* draws that needed the sampler (k, or d - 1 when
                            k = d: the last direction is then determined)   */
} dps_iterative_stats;

/* ITERATIVE EIGENVECTOR SAMPLING (Amin et al. Algorithm 1), pure eps-DP.
   C: d x d, full symmetric, the sum of x x^T of n rows of norm <= 1 (as made
   by dps_cov_accumulate; n is public).  Outputs V (k x d, orthonormal rows
   theta_1..theta_k, the private top-k basis, most variance first); lambda
   (k, may be NULL) the noisy eigenvalues clipped to [0, n]; C_hat (d x d, may
   be NULL) = sum lambda_i theta_i theta_i^T.  lambda and C_hat need
   eps_values > 0.  st may be NULL.
   Privacy: p->eps-DP under replace-one (proof in src/mechanisms/covariance.c).  The
   exponent is eps_i/2 * u^T C_i u, not DESIGN 3.6's (and the paper's)
   eps_i/4: the score u^T C u has replace-one sensitivity 1, so eps_i/2 is
   what the exponential mechanism's eps_i-DP argument allows; eps_i/4 would
   spend only half of the stated budget.
   Timing: the number of proposals depends on the data (as for any rejection
   sampler); a process that leaks its running time leaks that.
   Errors: DPS_EINVAL (NULL, k out of range, eps <= 0, eps_values out of
   range, adaptive with eps_values = 0, lambda/C_hat asked without
   eps_values, n = 0), DPS_ELIMIT (d > DPS_COV_MAX_D), DPS_ENOMEM,
   DPS_ENUMERIC.  Outputs are untouched on error. */
DPS_EXPORT int dps_cov_iterative(const double *C, size_t n, size_t d, const dps_iterative_params *p, dps_rng *rng,
                                 float *V, double *lambda, double *C_hat, dps_iterative_stats *st);

/* LAPLACE COVARIANCE: C_hat = C + E, E symmetric with its upper triangle
   (diagonal included) iid Laplace((d + 1)/eps), then projected to eigenvalues
   in [0, n] (dps_cov_clip_spectrum).  eps-DP: the upper triangle of x x^T -
   y y^T has l1 norm <= d + 1 (proof in src/mechanisms/covariance.c).
   C_hat: d x d (may alias C).  DPS_EINVAL, DPS_ELIMIT, DPS_ENOMEM, DPS_ENUMERIC. */
DPS_EXPORT int dps_cov_laplace(const double *C, size_t n, size_t d, double eps, dps_rng *rng, double *C_hat);
/* The Laplace scale dps_cov_laplace uses: (d + 1) / eps. */
DPS_EXPORT double dps_cov_laplace_scale(size_t d, double eps);

/* GAUSSIAN COVARIANCE: C_hat = C + E, E symmetric with off-diagonal entries
   N(0, s^2) and diagonal entries N(0, 2 s^2), s = dps_cov_gaussian_sigma(eps,
   delta), then eigenvalues clipped to [0, n].  (eps, delta)-DP for every
   eps > 0 and delta in (0, 1) (analytic Gaussian mechanism, Balle-Wang 2018;
   proof in src/mechanisms/covariance.c).  DPS_EINVAL, DPS_ELIMIT, DPS_ENOMEM, DPS_ENUMERIC. */
DPS_EXPORT int dps_cov_gaussian(const double *C, size_t n, size_t d, double eps, double delta, dps_rng *rng,
                                double *C_hat);
/* The off-diagonal noise sd of dps_cov_gaussian: the analytic Gaussian
   mechanism's sigma for l2 sensitivity 1. NAN for bad arguments. */
DPS_EXPORT double dps_cov_gaussian_sigma(double eps, double delta);

/* The smallest sigma with which N(0, sigma^2 I) added to a query of l2
   sensitivity sens is (eps, delta)-DP, exactly (Balle-Wang 2018, Thm 8:
   Phi(D/2s - eps s/D) - e^eps Phi(-D/2s - eps s/D) <= delta), by bisection to
   a relative 1e-13, then rounded up by 1e-9.  NAN for sens <= 0, eps <= 0, delta not in (0,1). */
DPS_EXPORT double dps_analytic_gaussian_sigma(double sens, double eps, double delta);

/* Post-processing of a released symmetric matrix (no privacy cost).
   dps_cov_clip_spectrum: S (d x d, full symmetric, in place) = U clip(L, lo,
   hi) U^T.  dps_cov_topk: V (k x d) = the top-k eigenvectors of S (S is not
   changed), w (may be NULL) their eigenvalues, descending.
   Needs 0 <= lo <= hi and a finite S.
   DPS_EINVAL, DPS_ELIMIT, DPS_ENOMEM, DPS_ENUMERIC. */
DPS_EXPORT int dps_cov_clip_spectrum(double *S, size_t d, double lo, double hi);
DPS_EXPORT int dps_cov_topk(const double *S, size_t d, size_t k, float *V, double *w);

#ifdef __cplusplus
}
#endif
#endif
