/* noise_level.h - how far a released basis is from noise, from released or
   public quantities only (the snapshot's noise_level, dps_snapshot_info).
   Each function is post-processing of what its mechanism releases (or of the
   public configuration): it costs no privacy.  The derivations are in
   noise_level.c.  Scale, for all: about the sine of the angle between the
   released basis and the noise-free one of the mechanism's input (about
   <= 0.1: mostly signal); >= 1: the noise is past the level at which any
   signal of that size can be told from it (random level).  Not installed. */
#ifndef DPS_NOISE_LEVEL_H
#define DPS_NOISE_LEVEL_H

#include <stddef.h>
#include <stdint.h>

/* Reference and histogram aggregators: the released q x d noisy mean whose
   noise-free part has rank k and squared singular values of mean q (the
   items Pi_j P^T with P ~ N(0, I)), plus iid noise of sd sigma per entry.
   mu = sigma (d/q)^(1/4) (the spiked-matrix detection threshold): mu if
   mu >= 1, else the predicted sine (never above 1). */
double noise_level_rect(double sigma, size_t q, size_t d);

/* Projection aggregator: a d x d symmetric noisy mean, noise-free
   eigenvalues 1 (a projection), symmetric noise of sd sigma_off off the
   diagonal: sigma_off sqrt(d) (the spike threshold over the spike). */
double noise_level_sym(double sigma_off, size_t d);

/* Gaussian covariance (and any C + E with E symmetric, iid N(0, s^2) entries
   on and above the diagonal): w, the top-k eigenvalues of C + E (descending)
   against the Wigner edge 2 s sqrt(d).  For the Gaussian epoch mechanism
   and its parameter groups (call it per group, with that group's d).  The
   noisy power iteration's Y = C X + G (G iid N(0, s^2), d x k) has another
   noise law (||G||_2 ~ s (sqrt d + sqrt k), no Wigner de-biasing): its level
   needs its own threshold, not this function as it stands. */
double gauss_noise_level(const double *w, size_t k, size_t d, double s);

/* The two sums gauss_noise_level's energy-weighted sine is made of, added
   to *lost and *total: a group's level is sqrt(lost / total), and a release
   with parameter groups weighs its groups by them (moment_groups.c); tr,
   the trace of C + E (NAN: not known) bounds what the directions that did
   not clear hold (noise_level.c).  Returns 1 if some eigenvalue cleared the
   detection level. */
int gauss_noise_parts(const double *w, size_t k, size_t d, double s, double tr, double *lost, double *total);
/* The rule those sums are made of, one direction at a time: how many of
   the k eigenvalues w (descending) cleared the detection level (a prefix);
   for one of them, w, given that count m: its de-biased eigenvalue
   *lambda (T = s sqrt(d), the most it can hold, where it did not clear) and
   the predicted share of it its eigenvector keeps, *keep (1 - T^2/lambda^2,
   or the random share (k - m)/(d - m)); and what each that did not clear is
   taken to hold given the trace tr of C + E (T when tr is NAN). */
size_t gauss_noise_cleared(const double *w, size_t k, size_t d, double s);
void gauss_noise_dir(double w, size_t m, size_t k, size_t d, double s, double *lambda, double *keep);
double gauss_noise_weak(const double *w, size_t k, size_t d, double s, size_t m, double tr);
/* The same sums for the noisy power iteration's last Y = C X + G (d x b, G
   iid N(0, s^2)): sv, its top-k singular values (noise_level.c). */
int power_noise_parts(const double *sv, size_t k, size_t d, size_t b, double s, double *lost, double *total);

/* Pure-DP covariance (iterative eigenvector sampling, eps split uniformly over
   k draws, no eigenvalues released): the level the best possible data (all n
   unit rows on one line) would give, sqrt(k (d - 1) / (eps n)); a floor,
   from public quantities only.  0 for n = 0 or eps <= 0. */
double cov_noise_level_floor(uint64_t n, size_t d, size_t k, double eps);

#endif
