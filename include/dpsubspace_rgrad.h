/*  dpsubspace_rgrad.h - DP low-rank trace regression (DP-RGrad).
    Included by dpsubspace.h; conventions as there.

    Model: observations (X_i, y_i), X_i a d1 x d2 matrix (row-major float, one
    observation = d1*d2 floats), y_i = <X_i, M> + noise, rank(M) = r.
    Unit of privacy: one observation (X_i, y_i), the whole pair; neighbouring
    data sets differ by replacing one observation (n is public).  Nothing is
    assumed about the data for privacy: every per-observation quantity is
    clipped (DESIGN 3.7), and a non-finite observation contributes zero.
    Algorithm and proofs: src/mechanisms/rgrad.c.                                       */
#ifndef DPSUBSPACE_RGRAD_H
#define DPSUBSPACE_RGRAD_H

#include "dpsubspace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Dense d1 x d2 work (SVD per group and per iteration) and the d1*d2 floats of
   one observation: refused (DPS_ELIMIT) above these. */
#define DPS_RGRAD_MAX_DIM 2048           /* d1 and d2 each                   */
#define DPS_RGRAD_MAX_ENTRIES (1u << 20) /* d1 * d2                          */
#define DPS_RGRAD_MAX_ITERS 10000

/* Trace-regression data with Gaussian design (evaluation aid, not private):
   M = U diag(s) V^T with U (d1 x r), V (d2 x r) Haar-random orthonormal and
   s_j proportional to 1 - j/(2 max(r-1, 1)) (j = 0..r-1: condition number 2
   for r >= 2), scaled so ||M||_F = 1; X entries iid N(0, 1), so <X_i, M> ~
   N(0, 1); y_i = <X_i, M> + N(0, noise_sd^2).  X: n x (d1*d2), y: n, M (may be
   NULL): d1 x d2.  1 <= r <= min(d1, d2); DPS_EINVAL otherwise. */
DPS_EXPORT int dps_trace_synth(dps_rng *rng, size_t n, size_t d1, size_t d2, size_t r, double noise_sd, float *X,
                               float *y, float *M);

typedef struct {
    size_t d1, d2, r;    /* shape and rank, 1 <= r <= min(d1, d2)            */
    size_t iters;        /* gradient iterations (default 10)                 */
    double eta;          /* step size (default 0.5)                          */
    /* Clipping thresholds.  The defaults assume responses of unit scale (sd of
       y about 1, as dps_trace_synth makes): set them from public knowledge of
       your data's scale, never from the data. */
    double clip_init;    /* C0: ||y_i X_i||_F (default 3 sqrt(d1 d2))         */
    double clip_sigma;   /* C_S: ||U~^T clip(y_i X_i) V~||_F (default 3 r)    */
    double clip_grad;    /* C: ||P_T(grad_i)||_F (default 3 sqrt(r(d1+d2-r)))  */
    double rho_init;     /* zCDP of the initialization (see dps_rgrad_config_budget) */
    double rho_iter;     /* zCDP of one iteration                            */
    double split_sigma;  /* share of rho_init for Sigma~ (default 0.2); the rest
                            is split evenly between the U~ and V~ aggregations */
    double delta;        /* delta of the whole fit (the two aggregations, half
                            each; default 1e-8)                              */
    int streaming;       /* 1: disjoint batches, each observation used once   */
    size_t init_obs;     /* streaming: observations in the init batch (0: an
                            equal share n/(iters+1)); batch mode: all n      */
    size_t groups;       /* sample-and-aggregate groups (0: auto, see
                            dps_rgrad_groups)                                */
    size_t q;            /* reference points per aggregation (default 10 r)  */
    double alpha, tau;   /* WFC slope and radius-search target (1/2, 1/2)    */
    double split_search, split_count, split_mean; /* per aggregation (0.2 0.1 0.7) */
    double xi_min;       /* smallest radius on the grid (1e-6)               */
    uint64_t public_seed;/* seed of the public randomness (reference points) */
} dps_rgrad_config;

/* Defaults above for shape (d1, d2, r), with dps_rgrad_config_budget(cfg, 1). */
DPS_EXPORT void dps_rgrad_config_init(dps_rgrad_config *cfg, size_t d1, size_t d2, size_t r);
/* Spend rho_total in all: batch mode rho_init = 0.3 rho_total and rho_iter =
   0.7 rho_total / iters (the parts compose); streaming mode rho_init =
   rho_iter = rho_total (disjoint batches: the cost is the max).  Call after
   setting iters and streaming. */
DPS_EXPORT void dps_rgrad_config_budget(dps_rgrad_config *cfg, double rho_total);
/* DPS_OK, or DPS_EINVAL / DPS_ELIMIT with a sentence in *why (may be NULL), for
   a fit of n observations. */
DPS_EXPORT int dps_rgrad_config_check(const dps_rgrad_config *cfg, size_t n, const char **why);
/* What dps_rgrad_fit spends when everything runs: batch (rho_init +
   iters rho_iter, delta); streaming (max(rho_init, rho_iter), delta). */
DPS_EXPORT dps_zcdp dps_rgrad_cost(const dps_rgrad_config *cfg);
/* The number of groups a fit uses: cfg->groups, or when 0 the smallest t with
   tau t >= 1 + s_W (sqrt(2 ln(2/delta)) + 6) (s_W as below): 6 sd of margin
   for the noisy count and the radius search, so FAIL is rare when the groups
   agree. */
DPS_EXPORT size_t dps_rgrad_groups(const dps_rgrad_config *cfg);
/* The fewest groups with which each aggregation's noisy count can succeed even
   if every group agrees: 1 + s_W (sqrt(2 ln(2/delta)) + 2), s_W = (1/alpha + 1)
   / sqrt(2 rho_count) (the estimator's dps_config_min_buckets rule).  Fewer
   groups (>= 2) are accepted but the init then FAILs with high probability. */
DPS_EXPORT size_t dps_rgrad_min_groups(const dps_rgrad_config *cfg);

typedef struct {
    int init_failed;       /* 1: an aggregation said FAIL (a DP output); L is
                              zero and the iterations did not run            */
    const char *reason;    /* a sentence when init_failed; "" otherwise       */
    dps_zcdp spent;        /* what this fit spent (only the parts that ran)   */
    double eps;            /* spent as eps at delta_target                    */
    double delta_target;   /* set by the caller before the fit (0: 1e-5)      */
    size_t groups, init_obs, batch_obs; /* the public partition              */
    double sd_sigma;       /* noise sd of each Sigma~ entry                   */
    double sd_iter;        /* noise sd of each tangent coordinate per iteration */
    double radius_u, radius_v;  /* WFC radii of the two aggregations (private
                                   outputs: post-processing)                   */
    double w_hat_u, w_hat_v;    /* their noisy friend weights (private)       */
    double *grad_norm;     /* caller's array of iters entries, or NULL: the
                              Frobenius norm of each noisy Riemannian gradient
                              (post-processing of the release)               */
    /* NOT private (diagnostics for experiments; never publish): how many
       per-observation contributions were clipped. */
    uint64_t nonprivate_clipped_init, nonprivate_clipped_grad;
} dps_rgrad_stats;

/* DP-RGrad: private spectral initialization by sample-and-aggregate, then
   `iters` private Riemannian gradient steps on the rank-r manifold (src/mechanisms/rgrad.c
   has the algorithm and the proof).  X: n x (d1*d2), y: n; L (d1 x d2) receives
   the estimate (zero if the init failed).  Noise from rng only.  st may be
   NULL (then nothing is reported: prefer passing one).
   Privacy: delta-approximate rho-zCDP with (rho, delta) = dps_rgrad_cost(cfg),
   for every input, under replace-one neighbours; st->spent says what ran.
   Errors: DPS_EINVAL / DPS_ELIMIT (dps_rgrad_config_check), DPS_ENOMEM,
   DPS_ENUMERIC (an SVD failed: spent stays charged). */
DPS_EXPORT int dps_rgrad_fit(const float *X, const float *y, size_t n, const dps_rgrad_config *cfg, dps_rng *rng,
                             float *L, dps_rgrad_stats *st);

/* ------------------------------------------------ the pieces (for tests) */
/* out = P_T(G) = U U^T G + G V V^T - U U^T G V V^T, the projection onto the
   tangent space at a rank-r point with column bases U (d1 x r) and V (d2 x r),
   both row-major double with orthonormal columns; G, out d1 x d2 (may alias).
   DPS_EINVAL for NULLs or r = 0. */
DPS_EXPORT int dps_rgrad_tangent_project(const double *U, const double *V, size_t d1, size_t d2, size_t r,
                                         const double *G, double *out);

/* The private Riemannian gradient at L = U diag(s) V^T:
     G = (1/n) sum_i clip_F(P_T((<X_i, L> - y_i) X_i), clip) + P_T(Z),
   Z iid N(0, sigma^2) (d1 x d2), i.e. isotropic N(0, sigma^2) noise on the
   r(d1+d2-r)-dimensional tangent space.  Replace-one sensitivity of the mean:
   2 clip / n, so sigma = dps_rgrad_sigma(clip, n, rho) makes G rho-zCDP given
   U, s, V.  *n_clipped (may be NULL) counts clipped contributions (NOT private).
   G: d1 x d2.  DPS_EINVAL for bad arguments. */
DPS_EXPORT int dps_rgrad_gradient(const float *X, const float *y, size_t n, size_t d1, size_t d2, size_t r,
                                  const double *U, const double *s, const double *V, double clip, double sigma,
                                  dps_rng *rng, double *G, uint64_t *n_clipped);
/* Gaussian-mechanism sd for a mean of n contributions of norm <= clip at rho:
   (2 clip / n) / sqrt(2 rho). */
DPS_EXPORT double dps_rgrad_sigma(double clip, size_t n, double rho);

#ifdef __cplusplus
}
#endif
#endif
