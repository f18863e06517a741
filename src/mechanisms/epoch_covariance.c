/* epoch_covariance.c - the covariance epoch mechanism (DPS_AGG_COVARIANCE):
   no buckets, an epoch mechanism (epoch_mechanism.h) of intake EPOCH_ROWS.

   THE MECHANISM.  Every row the epoch takes (unit norm, or zero) is added to
   C = sum x x^T (second_moment.h: d x d double, blocks of rows through dsyrk);
   the release runs iterative eigenvector sampling on C (dps_cov_iterative,
   Amin et al. 2019 Alg. 1) for k directions, without eigenvalues, with
   n = the epoch's row count (public).

   GUARANTEE.  Pure eps-DP per epoch under replacing one row, with
   eps = sqrt(2 rho_epoch); pure eps-DP is eps^2/2 = rho_epoch-zCDP
   (Bun-Steinke 2016, Prop. 1.4), so the epoch is charged (rho_epoch, 0).

   ARGUMENT.  Replacing one row x by y (norms <= 1) changes C by
   y y^T - x x^T; covariance.c proves that iterative eigenvector sampling is
   eps-DP for that change (the score u^T C u has sensitivity 1, the Bingham
   sampler is exact).  Every row of the epoch enters C once; nothing is
   discarded. */
#include "epoch_mechanism.h"
#include "internal.h"
#include "linalg.h"
#include "noise_level.h"
#include "second_moment.h"

#include <math.h>
#include <string.h>

struct epoch_state {
    const dps_config *cfg;
    second_moment sm; /* the epoch's sum x x^T */
};

static int s_check(const dps_config *c, const char **why)
{
    if (c->d > DPS_COV_MAX_D) {
        *why = "the covariance mechanism keeps a d x d matrix: d above 4096 is refused";
        return DPS_ELIMIT;
    }
    return DPS_OK;
}

static size_t s_memory(const dps_config *c)
{
    /* C; the sampler's S, S2, P, Z (covariance.c) and an eigendecomposition's copy and vectors
       (la_syevr_top): 7 d x d doubles (7.5 measured by tools/bench/bench-covariance; bound 8); C's block */
    return c->d * c->d * sizeof(double) * 7 + second_moment_bytes(c->d);
}

static void s_destroy(epoch_state **pst)
{
    if (!pst || !*pst)
        return;
    second_moment_free(&(*pst)->sm);
    free(*pst);
    *pst = NULL;
}

static int s_create(epoch_state **out, const dps_config *c, dps_pool *pool)
{
    epoch_state *st = calloc(1, sizeof *st);
    if (!st)
        return DPS_ENOMEM;
    st->cfg = c;
    if (second_moment_init(&st->sm, c->d, pool) != DPS_OK)
        s_destroy(&st);
    *out = st;
    return st ? DPS_OK : DPS_ENOMEM;
}

/* Each epoch's rows are used once: C starts empty. */
static int s_begin(epoch_state *st, uint64_t epoch, dps_rng *noise)
{
    (void)noise;
    (void)epoch;
    second_moment_reset(&st->sm);
    return DPS_OK;
}

static void s_take_row(epoch_state *st, const float *row) { second_moment_add(&st->sm, row); }

static int s_release(epoch_state *st, const epoch_input *in, float *basis, epoch_outcome *out)
{
    const dps_config *c = st->cfg; /* no FAIL, no radius */
    size_t d = c->d;
    second_moment_finish(&st->sm);
    dps_iterative_params p = {.k = c->k, .eps = sqrt(2.0 * c->rho_epoch), .eps_values = 0,
                              .split = DPS_SPLIT_UNIFORM};
    /* No eigenvalue is released (eps_values = 0), so the level is the floor
       that the public n, d, k and eps allow whatever the data
       (cov_noise_level_floor): >= 1 says this release is at random level
       for any rows; below 1 it promises nothing (the data may be noisier). */
    out->noise_level = cov_noise_level_floor(in->rows, d, c->k, p.eps);
    return dps_cov_iterative(st->sm.C, (size_t)in->rows, d, &p, in->noise, basis, NULL, NULL, NULL);
}

const epoch_mechanism epoch_covariance = {
    .id = DPS_AGG_COVARIANCE, .name = "covariance", .intake = EPOCH_ROWS, .uses = 0,
    .check = s_check, .min_buckets = epoch_rows_min_buckets, .memory = s_memory, .cost = epoch_rows_cost,
    .radius_unrelated = epoch_rows_radius_unrelated,
    .create = s_create, .destroy = s_destroy,
    .begin = s_begin, .take_row = s_take_row, .release = s_release,
};
