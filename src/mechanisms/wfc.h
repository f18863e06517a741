/* wfc.h - weighted FriendlyCore average and its private radius search
   (DESIGN 3.2).  Works on the t x t matrix of squared distances only; the
   caller computes the weighted mean of its (implicit) points and adds the noise
   this module prescribes. */
#ifndef DPS_WFC_H
#define DPS_WFC_H

#include "dpsubspace.h"
#include <stddef.h>

typedef struct {
    double alpha;      /* weight slope, 0 < alpha <= 1 (default 1/2)          */
    double tau;        /* radius search target: noisy W >= tau * t (default 1/2) */
    double rho_search; /* zCDP spent by the radius search                      */
    double rho_count;  /* zCDP spent on the noisy weight W^                    */
    double rho_mean;   /* zCDP spent on the noisy mean                         */
    double delta1;     /* probability that L > W(D) (the delta of the release) */
    double xi_min;     /* smallest grid radius                                 */
    double xi_max;     /* data-independent radius at which all are friends     */
} wfc_params;

typedef struct {
    int failed;          /* 1: release FAIL (L < 1)                             */
    double radius;       /* r chosen by the search                              */
    size_t grid_points;  /* radii on the grid                                   */
    size_t queries;      /* noisy queries charged (S = ceil(log2(grid_points))) */
    double W;            /* exact total weight (private: never released)        */
    double W_hat;        /* noisy total weight (released)                       */
    double L;            /* W_hat - s_W sqrt(2 ln(1/delta1))                    */
    double s_W;          /* noise sd of W_hat                                   */
    double s_mu;         /* noise sd per coordinate of the mean                 */
    double sensitivity;  /* (2/alpha + 4) r / L: L2 sensitivity the noise covers */
} wfc_result;

/* c_i = #{j : D2[i][j] <= r^2 (1 - 2^-50)}, counting i itself (D2 row-major
   t x t, upper bounds of the exact squared distances: see wfc.c). */
void wfc_friend_counts(const double *D2, size_t t, double r, size_t *counts);
/* w_i = clamp((c_i - (t+1)/2) / (alpha (t-1)), 0, 1); returns W = sum w_i.
   t >= 2. */
double wfc_weights(const size_t *counts, size_t t, double alpha, double *w);
/* The sensitivity of W under replacing one item: 1/alpha + 1. */
double wfc_weight_sensitivity(double alpha);
/* The radius grid xi_min * 2^j, j = 0..J, J the first with radius >= xi_max. */
size_t wfc_grid_size(double xi_min, double xi_max);

/* Radius search then WFC at the chosen radius with fresh noise.  Fills w (t
   weights, the exact ones: the caller averages with them and divides by W) and
   *res.  Spends delta1-approximate (rho_search + rho_count + rho_mean)-zCDP
   together with the caller's mean release at sd res->s_mu.  t >= 2. */
int wfc_run(const double *D2, size_t t, const wfc_params *p, dps_rng *rng, double *w, wfc_result *res);

#endif
