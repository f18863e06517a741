/* angles.h - principal angles between two k-dimensional subspaces of R^d,
   each given by k orthonormal rows (row-major float32, k x d), for dps-watch.
   All the linear algebra of the network programs is here: the k x k SVD in
   double through LAPACKE, and a QR to orthonormalise a user's --truth basis.

   Who owns what: the functions allocate scratch and free it before they
   return.  Errors: -1 for an allocation or LAPACK failure (or, for
   cli_orthonormalize_rows, rows that are linearly dependent). */
#ifndef DPS_CLI_ANGLES_H
#define DPS_CLI_ANGLES_H

#include <stddef.h>

/* The k principal angles between span(A) and span(B) in degrees, smallest
   first, in deg[0..k-1]: acos of the singular values of A B^T (k x k, in
   double), clamped to [0, 1].  Near 0 degrees acos(1 - x) loses precision
   (float bases put a floor of about 0.03 degrees on it), so *sin_max gets
   the sine of the largest angle from dps_subspace_sin, which works on the
   residual B - (B A^T) A instead.  Returns 0 or -1. */
int cli_principal_angles(const float *A, const float *B, size_t k, size_t d, double *deg, double *sin_max);

/* Replace the k rows of B (k x d) by an orthonormal basis of their span
   (Householder QR in double; the same span, the same order of directions).
   Returns 0, or -1 if the rows are (numerically) linearly dependent. */
int cli_orthonormalize_rows(float *B, size_t k, size_t d);

/* Largest |<b_i, b_j> - delta_ij| over the rows of B: 0 for orthonormal rows. */
double cli_orthonormality_error(const float *B, size_t k, size_t d);

#endif
