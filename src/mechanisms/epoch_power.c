/* epoch_power.c - the noisy power iteration epoch mechanism (DPS_AGG_POWER,
   DESIGN 7.3; Hardt-Price 2014): no buckets, intake EPOCH_ROWS, memory
   O(b d) with b = k + power_oversample columns, never d x d.

   THE MECHANISM.  The epoch's rows (unit norm, or zero: row_unit) are split
   into T = min(power_blocks, N) disjoint blocks by their index in the epoch,
   N = t m (public): block i is rows [floor(i N / T), floor((i+1) N / T)).
   X_0 (d x b, orthonormal) is public: the previous epoch's released basis
   (k columns, public once released: the warm start is only post-processing
   of released outputs) completed with b - k directions of the public
   generator ("power", epoch), or b public directions for the first epoch
   (and after an epoch that did not release), orthonormalised.  Iteration i
   reads block i only:
       Y_i = C_i X_{i-1} + G_i,  C_i = sum over block i of x x^T,
       G_i iid N(0, s^2) (d x b),  s = 1 / sqrt(rho_epoch),
       X_i = orth(Y_i)  (power_iteration.c).
   The release is the top-k left singular vectors of the last Y (from its QR
   and the SVD of the b x b R: post-processing).  An epoch closed with fewer
   than N rows runs the blocks that have rows (the last one partial); the
   blocks are fixed by index and the row count is public, so which blocks
   run is public.  Noise is drawn at the end of each block, before the
   epoch's charge: nothing leaves the mechanism before the release, so an
   epoch that is not released (too few rows, refused, the commit failed)
   publishes nothing; no intermediate X or Y is published or logged, and the
   warm start takes only a basis that release returned.

   GUARANTEE.  rho_epoch-zCDP per epoch under replacing one row (pure zCDP:
   charged (rho_epoch, 0)).

   ARGUMENT.  Sensitivity of one iteration: replacing x by y (norms <= 1)
   moves C_i X by ||(y y^T - x x^T) X||_F <= ||y y^T - x x^T||_F ||X||_2
   (||A B||_F <= ||A||_F ||B||_2), where ||X||_2 <= 1 (the norm guard of
   power_iteration.c) and ||y y^T - x x^T||_F^2 = ||x||^4 + ||y||^4
   - 2 (x.y)^2 <= 2: the move is at most sqrt 2, attained by orthogonal unit
   x, y in the span of X (tests/mechanisms/test_epoch_power.c checks both).
   (The triangle inequality, ||x x^T X|| + ||y y^T X|| <= 2, overstates it
   by sqrt 2: a noise calibrated for it spends half the rho it is charged.)
   With s = sqrt 2 / sqrt(2 rho) = 1 / sqrt(rho) the Gaussian mechanism Y_i
   is ((sqrt 2)^2 / (2 s^2)) = rho-zCDP (Bun-Steinke 2016, Prop. 1.6) given
   X_{i-1}.  Composition: the replaced row has a fixed index, so it
   lies in exactly one block j.  For i != j, Y_i given the earlier outputs
   (which fix X_{i-1}) has the same law on both inputs: 0-zCDP for this pair.
   For i = j it is rho-zCDP whatever X_{j-1} was (an adaptively chosen, public
   function of the earlier outputs).  Adaptive composition of zCDP
   (Bun-Steinke Lemma 2.3) sums to 0 + ... + rho + ... + 0 = rho: parallel
   composition with adaptivity.  The basis is a function of (X_0, Y_1..Y_T):
   post-processing.  (Composing instead T passes over the whole epoch would
   cost T rho; the disjoint blocks use each row once.)  The noise is drawn for
   every entry whatever the data, range by range from forks of the stream
   keyed in order (independent ChaCha20 streams: power_iteration.h), the same
   draws for any number of workers.  Floating point: every product of a step is
   formed and summed in double (power_iteration.c, THE SUM IN DOUBLE), so
   rounding moves a step's sum by at most R(n) + R(n + 1) beyond the exact
   move, under replacing or adding a row, n the step's rows
   (power_rounding_bound: 7e-6 at n = 60 000, d = 10^5, b = 20, against
   sqrt 2 and 1; not added to the noise); the Gaussian draws keep rng.c's
   floating-point caveat.

   ACCURACY (what to expect; Hardt-Price 2014).  The noise's spectral norm
   is about s (sqrt d + sqrt b).  One step on a block whose C_i has eigengap
   g = lambda_k - lambda_{k+1} leaves the top-k subspace within
   sin ~ s (sqrt d + sqrt b) / g plus the power method's own error
   (lambda_{k+1} / lambda_k) tan(theta_{i-1}), theta_{i-1} the angle of the
   start; p = b - k extra columns keep a random start's tan near
   sqrt(d) / (sqrt(b) - sqrt(k - 1)) instead of unbounded.  So a cold start
   sees the signal through about sqrt(b / d) of it: the first step needs
   lambda_k sqrt(b / d) above s sqrt(d), and a first epoch is weak in large
   d; a warm start (cos theta near 1) needs only lambda_k above s sqrt(d).
   Fewer blocks mean more rows per block (the gap grows with the block, the
   noise does not) but fewer steps: measured on the logreg gradients
   (tools/experiments/README.md), one block is best once warm (the default),
   three for a single cold epoch.

   PARAMETER GROUPS (DESIGN 7.2).  With groups, every group runs its own
   iteration on its slice of the rows (b_g = min(k_g + p, d_g) columns, its
   own warm start), all with the same s and blocks: still rho_epoch-zCDP,
   charged once (group g's step moves by at most ||D_gg||_F, D = y y^T
   - x x^T, and sum_g ||D_gg||_F^2 <= ||D||_F^2 <= 2; the argument, shared
   with the Gaussian aggregator's mixed releases, and the code are in
   moment_groups.c).

   MEMORY.  power_bytes(d, k, b): 2 b d floats (X, Y), 2 b d doubles (the
   sum's two lanes, power_iteration.c), a block of 32 rows (32 d floats)
   and O(b^2 + b 2048 + 2 (32 + b) 1024) of scratch (the tiles in double);
   two more blocks of 32 rows, one per lane on a worker while the next
   arrive (power_pool_bytes); plus the previous basis, k d floats:
   4 (6 b + 96 + k) d bytes and change. */
#include "epoch_mechanism.h"
#include "epoch_power.h"
#include "moment_groups.h"
#include "second_moment.h"

#include <math.h>

double power_noise_sd(double rho) { return 1.0 / sqrt(rho); }

uint64_t dps_power_block_start(uint64_t n, uint64_t T, uint64_t i) { return power_block_start(n, T, i); }

uint64_t power_block_start(uint64_t n, uint64_t blocks, uint64_t i)
{
    /* floor(i n / T) without overflow: i (n mod T) < T^2 */
    return i * (n / blocks) + i * (n % blocks) / blocks;
}

size_t power_columns(const dps_config *c)
{
    size_t b = c->k + c->power_oversample;
    return b < c->d ? b : c->d;
}

const epoch_mechanism epoch_power = {.id = DPS_AGG_POWER, .name = "power", .uses = EPOCH_USES_GROUPS | EPOCH_USES_POWER,
                                       MOMENT_GROUP_HOOKS};
