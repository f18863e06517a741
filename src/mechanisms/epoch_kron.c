/* epoch_kron.c - the Kronecker-factored epoch mechanism (DPS_AGG_KRON,
   DESIGN 7.6): no buckets, intake EPOCH_ROWS.
   Owned by the mechanisms module; its code is moment_groups.c's (the
   groups) and kron_moment.c's (one factored group).

   THE MECHANISM.  The row is the concatenation of public parameter groups
   (one, the whole row, without groups); a group with a shape r_g x c_g
   (dps_config.group_rows, r_g c_g = d_g) and k_g > 0 is a KRON group: its
   slice is read as the r_g x c_g matrix G (row-major: a Linear weight's
   per-example gradient delta a^T, out x in), and the epoch releases the
   upper triangles of C_in = sum G^T G (c_g x c_g) and C_out = sum G G^T
   (r_g x r_g) plus iid N(0, s^2), s = sqrt(2 / rho_epoch).  The group's
   basis is the k_g products u_i (x) v_j of the top eigenvectors of the two
   noisy matrices with the largest products of their (clamped) eigenvalues
   (kron_moment.h): k_g directions of a d_g-wide group from memory
   r_g^2 + c_g^2 where the dense covariance needs d_g^2.  The other groups
   are released as the gaussian aggregator releases them (densely up to
   dense_max_d columns, by the noisy power iteration above), with the same
   s = sqrt(2 / rho_epoch).

   GUARANTEE.  rho_epoch-zCDP per epoch under replacing one row, and
   sqrt(2 rho_epoch)-GDP: charged (rho_epoch, 0) as DPS_CHARGE_GAUSSIAN.

   ARGUMENT.  moment_groups.c, "KRON GROUPS": the squared moves of all the
   released matrices add up to at most 2 (||x||^4 + ||y||^4) <= 4 (each
   side of a kron group moves by at most ||x_g||^4 + ||y_g||^4 in squared
   Frobenius norm, a PSD difference), tight for rank-one blocks with
   orthogonal factors, hence s = sqrt(2/rho) for every entry.

   ACCURACY (what to expect).  Each side is a Gaussian covariance of its own
   (epoch_gaussian.c): the noise's spectral norm is 2 s sqrt(r_g) or
   2 s sqrt(c_g), against eigenvalues that hold the group's whole energy
   (tr C_in = tr C_out = sum ||x_g||^2), so a side is seen where the dense
   covariance of the d_g-wide group would need its eigenvalues above
   2 s sqrt(d_g).  The price is structural: the products span only what is
   Kronecker-structured in the rows (K-FAC's premise); how much of a layer's
   gradient that is, is measured in tools/experiments/README.md
   ("Kronecker-factored bases").

   MEMORY.  Per kron group kron_bytes(r_g, c_g, k_g): C_in, C_out and their
   noisy copies (2 (r^2 + c^2) doubles), a block of up to 64 rows (at most
   16 MB), the eigenpairs; the eigensolver's copy of the wider side is
   shared with the dense groups (moment_groups.c). */
#include "epoch_mechanism.h"
#include "moment_groups.h"
#include "second_moment.h"

const epoch_mechanism epoch_kron = {.id = DPS_AGG_KRON, .name = "kron",
                                    .uses = EPOCH_USES_GROUPS | EPOCH_USES_SHAPES | EPOCH_USES_POWER | EPOCH_USES_DENSE, MOMENT_GROUP_HOOKS};
