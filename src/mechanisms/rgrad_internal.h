/* rgrad_internal.h - what the parts of DP-RGrad share: rgrad_config.c (the
   configuration), rgrad_gradient.c (the private gradient and the algebra of
   the tangent space), rgrad_init.c (the private initialization) and rgrad.c
   (the fit, which runs them).  Not installed. */
#ifndef DPS_RGRAD_INTERNAL_H
#define DPS_RGRAD_INTERNAL_H

#include "dpsubspace.h"
#include "wfc.h"

#include <math.h>

/* ------------------------------------------------ rgrad_config.c */
/* A finite positive number. */
static inline int rgrad_positive(double x) { return isfinite(x) && x > 0; }
/* Observations in the init batch (*n0) and in each iteration's batch (*nb). */
void rgrad_batches(const dps_rgrad_config *c, size_t n, size_t *n0, size_t *nb);
/* rho of one of the init's two aggregations, and their WFC parameters
   (rho split as split_search : split_count : split_mean, delta1 = delta/2). */
double rgrad_rho_agg(const dps_rgrad_config *c);
wfc_params rgrad_wfc_params(const dps_rgrad_config *c, double xi_max);

/* ---------------------------------------------- rgrad_gradient.c */
/* min(1, C/norm), or 0 for a non-finite norm (the contribution is dropped). */
double rgrad_clip_factor(double norm, double C);
/* For one observation x (d1 x d2 float): A = U^T x (r x d2), B = x V (d1 x r),
   C = U^T B (r x r); U (d1 x r), Vt = V^T (r x d2), both double. */
void rgrad_factors(const float *x, size_t d1, size_t d2, size_t r, const double *U, const double *Vt, double *A,
                   double *B, double *C);
/* sum x_i^2. */
double rgrad_norm2(const double *x, size_t n);

/* The private gradient over the observations idx[0..n) (idx NULL: 0..n-1)
   at L = U diag(sv) V^T (dps_rgrad_gradient without its argument checks). */
int rgrad_gradient(const float *X, const float *y, const size_t *idx, size_t n, size_t d1, size_t d2, size_t r,
                   const double *U, const double *sv, const double *V, double clip, double sigma, dps_rng *rng,
                   double *G, uint64_t *n_clipped);

/* -------------------------------------------------- rgrad_init.c */
/* The init's buffers, allocated by the fit: scratch for the groups' stacked
   bases, and the outputs. */
typedef struct {
    float *Bl, *Br; /* t*r x d1, t*r x d2: the groups' left and right bases */
    float *Ub, *Vb; /* out: the released bases, r x d1 and r x d2 (rows)   */
    double *S;      /* out: Sigma~, r x r                                   */
} rgrad_init_bufs;

/* The private initialization (rgrad_init.c) on the init batch perm[0..n0) in
   t groups.  Sets st->spent to what it spent, the init's radii, noisy
   weights, Sigma~'s sd and clipped count; on a FAIL of either aggregation
   st->init_failed and st->reason (then Vb or S are not filled).  DPS_ENOMEM,
   or a LAPACK error. */
int rgrad_init(const float *X, const float *y, const size_t *perm, size_t n0, size_t t, const dps_rgrad_config *c,
               dps_rng *rng, const rgrad_init_bufs *b, dps_rgrad_stats *st);

#endif
