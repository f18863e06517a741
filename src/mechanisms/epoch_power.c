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
       G_i iid N(0, s^2) (d x b),  s = sqrt(2 / rho_epoch),
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

   ARGUMENT.  Sensitivity of one iteration: X_{i-1} has ||X||_2 <= 1 (the
   norm guard of power_iteration.c), so for ||x|| <= 1,
   ||x x^T X||_F = ||x|| ||X^T x|| <= 1, and replacing x by y moves C_i X
   by ||y y^T X - x x^T X||_F <= 2.  With s = 2 / sqrt(2 rho) the Gaussian
   mechanism Y_i is (2^2 / (2 s^2)) = rho-zCDP (Bun-Steinke 2016, Prop. 1.6)
   given X_{i-1}.  Composition: the replaced row has a fixed index, so it
   lies in exactly one block j.  For i != j, Y_i given the earlier outputs
   (which fix X_{i-1}) has the same law on both inputs: 0-zCDP for this pair.
   For i = j it is rho-zCDP whatever X_{j-1} was (an adaptively chosen, public
   function of the earlier outputs).  Adaptive composition of zCDP
   (Bun-Steinke Lemma 2.3) sums to 0 + ... + rho + ... + 0 = rho: parallel
   composition with adaptivity.  The basis is a function of (X_0, Y_1..Y_T):
   post-processing.  (Composing instead T passes over the whole epoch would
   cost T rho; the disjoint blocks use each row once.)  The noise is drawn for
   every entry whatever the data.  Floating point: Y is summed in float
   (relative rounding 1e-7 per entry against the noise s), the usual caveat
   of rng.c.

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

   MEMORY.  power_bytes(d, k, b): 2 b d floats (X, Y), a block of 32 rows
   (32 d floats) and O(b^2 + b 2048) of scratch; plus the previous basis,
   k d floats: 4 (2 b + 32 + k) d bytes and change. */
#include "epoch_mechanism.h"
#include "epoch_power.h"
#include "internal.h"
#include "power_iteration.h"
#include "second_moment.h"

#include <math.h>
#include <string.h>

struct epoch_state {
    const dps_config *cfg;
    power_iteration pi;
    float *prev;       /* k x d: the last released basis (public)           */
    int has_prev;
    dps_rng *noise;    /* the stream's, from begin until the release        */
    uint64_t n, blocks;/* N = t m and T = min(power_blocks, N) (public)     */
    uint64_t rows;     /* rows taken by the open epoch                      */
    uint64_t block;    /* the block the next row goes to                    */
    uint64_t block_end;/* its first row index past it                       */
    int err;           /* a LAPACK error of a step, returned by the release */
};

double power_noise_sd(double rho) { return sqrt(2.0 / rho); }

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

static int s_check(const dps_config *c, const char **why)
{
    if (c->power_blocks < 1 || c->power_blocks > POWER_MAX_BLOCKS) {
        *why = "power_blocks must be in 1..1024";
        return DPS_EINVAL;
    }
    if (c->power_oversample > c->d) {
        *why = "power_oversample must be at most d (k + power_oversample is capped at d)";
        return DPS_EINVAL;
    }
    size_t b = power_columns(c);
    if (c->d > (size_t)INT32_MAX || b > SIZE_MAX / sizeof(float) / 4 / c->d) {
        *why = "d (or b d) is too large for the power iteration's BLAS calls";
        return DPS_ELIMIT;
    }
    return DPS_OK;
}

static size_t s_memory(const dps_config *c)
{
    return power_bytes(c->d, c->k, power_columns(c)) + c->k * c->d * sizeof(float);
}

static void s_destroy(epoch_state **pst)
{
    if (!pst || !*pst)
        return;
    power_free(&(*pst)->pi);
    free((*pst)->prev);
    free(*pst);
    *pst = NULL;
}

static int s_create(epoch_state **out, const dps_config *c, dps_pool *pool)
{
    (void)pool;
    epoch_state *st = calloc(1, sizeof *st);
    if (!st)
        return DPS_ENOMEM;
    st->cfg = c;
    st->n = (uint64_t)c->t * c->m;
    st->blocks = DPS_MIN((uint64_t)c->power_blocks, st->n);
    int rc = power_init(&st->pi, c->d, c->k, power_columns(c));
    st->prev = malloc(c->k * c->d * sizeof *st->prev);
    if (rc || !st->prev)
        s_destroy(&st);
    *out = st;
    return st ? DPS_OK : (rc ? rc : DPS_ENOMEM);
}

/* X_0 from public facts only: the last released basis and the public
   generator of this epoch. */
static int s_begin(epoch_state *st, uint64_t epoch, dps_rng *noise)
{
    st->noise = noise;
    st->rows = 0;
    st->block = 0;
    st->block_end = power_block_start(st->n, st->blocks, 1);
    st->err = DPS_OK;
    dps_rng *pub = NULL;
    int rc = dps_rng_new_labelled(&pub, st->cfg->public_seed, "power", epoch);
    if (!rc)
        rc = power_start(&st->pi, st->has_prev ? st->prev : NULL, pub);
    dps_rng_destroy(&pub);
    return rc;
}

/* One step at the end of each block (a block's noise is drawn as soon as its
   last row is in: nothing of it leaves before the release). */
static void s_end_block(epoch_state *st, dps_rng *noise)
{
    int rc = power_step(&st->pi, power_noise_sd(st->cfg->rho_epoch), noise);
    if (rc && !st->err)
        st->err = rc;
    st->block++;
    st->block_end = power_block_start(st->n, st->blocks, st->block + 1);
}

static void s_take_row(epoch_state *st, const float *row)
{
    power_add(&st->pi, row);
    if (++st->rows == st->block_end && st->block < st->blocks)
        s_end_block(st, st->noise);
}

/* After the charge: the only errors are LAPACK's (DPS_ENUMERIC), which the
   stream publishes as FAILED (and then the warm start is not updated). */
static int s_release(epoch_state *st, const epoch_input *in, float *basis, epoch_outcome *out)
{
    (void)out; /* no FAIL of its own, no radius */
    if (st->block < st->blocks && st->rows > power_block_start(st->n, st->blocks, st->block))
        s_end_block(st, in->noise); /* the last, partial block (in->noise is begin's generator) */
    if (st->err)
        return st->err;
    int rc = power_basis(&st->pi, basis, NULL);
    /* TODO(noise_level, issue 11.6): the noisy singular values of the last Y
       (power_basis's sv) against the noise's spectral norm
       s (sqrt d + sqrt b), s = power_noise_sd(rho_epoch), are the quality
       signal of this release (released quantities only). */
    if (rc)
        return rc;
    memcpy(st->prev, basis, st->cfg->k * st->cfg->d * sizeof *st->prev);
    st->has_prev = 1;
    return DPS_OK;
}

const epoch_mechanism epoch_power = {
    .id = DPS_AGG_POWER, .name = "power", .intake = EPOCH_ROWS, .uses = 0,
    .check = s_check, .min_buckets = epoch_rows_min_buckets, .memory = s_memory, .cost = epoch_rows_cost,
    .radius_unrelated = epoch_rows_radius_unrelated,
    .create = s_create, .destroy = s_destroy,
    .begin = s_begin, .take_row = s_take_row, .release = s_release,
};
