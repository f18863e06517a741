/* gaussian_cov.h - the noise of the Gaussian covariance epoch mechanism
   (epoch_gaussian.c), exposed for its test of the noise scale. */
#ifndef DPS_GAUSSIAN_COV_H
#define DPS_GAUSSIAN_COV_H

#include "dpsubspace.h"

#define GAUSS_COV_MAX_D DPS_DENSE_MAX_D_LIMIT /* two d x d double matrices: 4.3 GB at this d */

/* A (d x d, full storage) += E, E symmetric with its upper triangle
   (diagonal included) iid N(0, s^2): with s = 1/sqrt(rho), rho-zCDP for the
   second moment of rows of norm <= 1 (the argument is in epoch_gaussian.c;
   moment_groups.c says which s a release with power groups needs). */
void gauss_cov_add_noise(double *A, size_t d, double s, dps_rng *rng);

#endif
