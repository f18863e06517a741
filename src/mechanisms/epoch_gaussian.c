/* epoch_gaussian.c - the Gaussian covariance epoch mechanism
   (DPS_AGG_GAUSSIAN, DESIGN 7.1: Analyze Gauss of Dwork-Talwar-Thakurta-Zhang
   2014 without its gap test): no buckets, intake EPOCH_ROWS.

   THE MECHANISM.  Every row the epoch takes (unit norm, or zero: row_unit)
   is added to C = sum x x^T (second_moment.h: d x d double, blocks of rows
   through dsyrk).  The release adds E, symmetric, whose
   upper triangle (diagonal included) is iid N(0, s^2) with s = 1/sqrt(rho),
   and publishes the top-k eigenvectors of C + E (post-processing).

   GUARANTEE.  rho_epoch-zCDP per epoch under replacing one row (pure zCDP:
   charged (rho_epoch, 0)).

   ARGUMENT.  Replacing x by y (norms <= 1) changes C by D = y y^T - x x^T,
   ||D||_F^2 = ||x||^4 + ||y||^4 - 2 (x.y)^2 <= 2.  The release is the upper
   triangle u(C) (diagonal included) plus iid N(0, s^2); ||u(D)||_2^2 =
   sum_{i <= j} D_ij^2 <= ||D||_F^2 <= 2, so the Gaussian mechanism with l2
   sensitivity sqrt 2 and noise s is (sqrt 2)^2 / (2 s^2) = 1/s^2 = rho-zCDP
   (Bun-Steinke 2016, Prop. 1.6).  Mirroring the triangle and the
   eigendecomposition are post-processing.  The noise is drawn for every
   entry whatever the data (the same draws on neighbouring inputs).

   ACCURACY (what to expect).  E is a Wigner matrix: ||E||_2 is about
   2 s sqrt(d).  With rows near a k-dim subspace the k-th eigengap of C is
   about n lambda_k (lambda_k the k-th eigenvalue of the rows' second moment),
   so by Davis-Kahan sin(theta) <= 2 ||E|| / gap ~ 4 sqrt(d / rho) / (n lambda_k).

   PARAMETER GROUPS (DESIGN 7.2).  With G >= 2 public groups (the row is
   the concatenation x = (x_1, ..., x_G), group g of d_g columns) the release
   is, for every group, the top-k_g eigenvectors of C_g + E_g, C_g = sum
   x_g x_g^T, E_g as above with the same s: still rho_epoch-zCDP, charged
   once.  The released vector is the upper triangles of the diagonal blocks
   C_g of C, a sub-vector of u(C), so under replacing one row it moves by at
   most ||u(D)||_2 <= sqrt 2 as above: the same Gaussian mechanism on fewer
   coordinates.  A group with k_g = 0 releases nothing (its C_g is not even
   formed).  The basis is group-wise (dps_snapshot_group): group g's k_g
   rows are zero outside its columns.

   GROUPS TOO WIDE FOR d_g^2 (DESIGN 7.3).  A group wider than dense_max_d
   (default DPS_DENSE_MAX_D) is released by the noisy power iteration of
   epoch_power.c instead, in O(k_g d_g) memory, with the same s = 1/sqrt(rho)
   for every group, and the release is still rho-zCDP: the
   argument for such a mixed release is in moment_groups.c, which holds the
   code of both this table entry and the power aggregator's.

   MEMORY.  Each dense group's C_g (second_moment.h), one noisy copy of the
   widest dense group's for the eigensolver (restarted block Krylov,
   la_sym_topk_d: it destroys its input), its eigenvectors and the Krylov
   scratch: sum_g (d_g^2 + a block of rows) + max_g d_g^2 + max_g k_g d_g
   doubles + la_sym_topk_bytes; a power group's as epoch_power.c says. */
#include "epoch_mechanism.h"
#include "gaussian_cov.h"
#include "moment_groups.h"
#include "second_moment.h"

#include <math.h>

void gauss_cov_add_noise(double *A, size_t d, double s, dps_rng *rng)
{
    for (size_t i = 0; i < d; i++) {
        dps_rng_gaussian_add(rng, s, A + i * d + i, d - i);
        for (size_t j = i + 1; j < d; j++)
            A[j * d + i] = A[i * d + j];
    }
}

const epoch_mechanism epoch_gaussian = {.id = DPS_AGG_GAUSSIAN, .name = "gaussian", .uses = EPOCH_USES_GROUPS | EPOCH_USES_POWER | EPOCH_USES_DENSE,
                                       MOMENT_GROUP_HOOKS};
