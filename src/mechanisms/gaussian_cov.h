/* gaussian_cov.h - the noise of the Gaussian covariance epoch mechanism
   (epoch_gaussian.c), exposed for its test of the noise scale. */
#ifndef DPS_GAUSSIAN_COV_H
#define DPS_GAUSSIAN_COV_H

#include "dpsubspace.h"
#include "pool.h"

#define GAUSS_COV_MAX_D DPS_DENSE_MAX_D_LIMIT /* C in double and C + E in float: 3.2 GB at this d */

/* A (d x d, full storage) += E, E symmetric with its upper triangle
   (diagonal included) iid N(0, s^2): with s = 1/sqrt(rho), rho-zCDP for the
   second moment of rows of norm <= 1 (the argument is in epoch_gaussian.c;
   moment_groups.c says which s a release with power groups needs). */
void gauss_cov_add_noise(double *A, size_t d, double s, dps_rng *rng);

/* The dense release's draws on the workers: the upper triangle's rows cut
   into GAUSS_NOISE_CHUNKS ranges of equal area, range c drawn from the c-th
   fork of the release's stream (forked in order, before any draw), whichever
   worker runs it: the draws depend on the stream only, not on the number of
   workers.  Everything is allocated at init (before any charge). */
enum { GAUSS_NOISE_CHUNKS = 64 };
typedef struct {
    size_t d;
    int workers;
    dps_rng *stream[GAUSS_NOISE_CHUNKS]; /* range c's fork, keyed at each release */
    size_t cut[GAUSS_NOISE_CHUNKS + 1];  /* range c is rows cut[c] .. cut[c + 1] - 1 */
    double trace[GAUSS_NOISE_CHUNKS];    /* range c's part of tr(C + E) */
    double *row;                         /* workers x d: a row of draws per worker */
} gauss_noise_ws;
/* For matrices up to d x d and the pool's workers (NULL: the calling thread).
   DPS_OK or DPS_ENOMEM (then nothing is held). */
int gauss_noise_ws_init(gauss_noise_ws *ws, size_t d, dps_pool *pool);
void gauss_noise_ws_free(gauss_noise_ws *ws);
size_t gauss_noise_ws_bytes(size_t d, int workers);
/* Af (d x d float, full, symmetric) = C + E rounded to float: C's upper
   triangle (double; the lower is not read), E as gauss_cov_add_noise's (the
   same mechanism; rounding the noisy matrix is post-processing); d at
   most the workspace's.  Returns tr(C + E), summed in double in the
   ranges' order (NaN, nothing drawn, for a d above the workspace's). */
double gauss_cov_noisy_float(const double *C, size_t d, double s, dps_rng *rng, gauss_noise_ws *ws, dps_pool *pool,
                             float *Af);

#endif
