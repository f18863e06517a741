/* epoch_projection.c - the projection aggregator (DPS_AGG_PROJECTION;
   Naive_Agg, Tsfadia sec. 4.1): an epoch mechanism (epoch_mechanism.h).

   GUARANTEE.  delta_epoch-approximate rho_epoch-zCDP per epoch under
   replacing one row; charged (rho_epoch, delta_epoch).

   ARGUMENT.  Bucket j's item is its projection Pi_j = V_j^T V_j, a point of
   R^{d^2}.  Replacing one row changes one bucket (the partition does not look
   at the rows), so one item.  The release is the weighted FriendlyCore
   average of the items with its private radius search, rho_epoch split as
   split_search : split_count : split_mean, delta1 = delta_epoch:
   delta1-approximate rho_epoch-zCDP under replacing one item (wfc.c has the
   proof; aggregate.c computes the distances from the Gram of the bases and
   adds the noise to the d x d mean).  The radius grid ends at
   xi_max = sqrt(2k) >= ||Pi_j - Pi_l||_F for any two rank-k projections
   (data-independent).  The snapshot, the top-k eigenvectors of the
   symmetrised noisy mean, is post-processing.  d x d matrices: refused above
   DPS_PROJECTION_MAX_D. */
#include "epoch_aggregate.h"
#include "noise_level.h"

#include <math.h>

static int s_check(const dps_config *c, const char **why)
{
    if (c->d > DPS_PROJECTION_MAX_D) {
        *why = "the projection aggregator keeps d x d matrices: d above 10000 is refused";
        return DPS_ELIMIT;
    }
    return DPS_OK;
}

static size_t s_memory(const dps_config *c)
{
    /* the WFC scratch; the d x d double mean, its float noisy copy, the scaled bases */
    return agg_ws_bytes(c->t, c->k, c->q, c->d, c->workers, 0) + c->d * c->d * (sizeof(double) + sizeof(float)) +
           c->t * c->k * c->d * sizeof(double);
}

static dps_zcdp s_cost(const dps_config *c) { return (dps_zcdp){c->rho_epoch, c->delta_epoch}; }

/* ||Pi_j - Pi_l||_F for orthogonal subspaces. */
static double s_radius_unrelated(const dps_config *c) { return sqrt(2.0 * (double)c->k); }

/* The items are the bases themselves: no reference items. */
static int s_create(epoch_state **out, const dps_config *c, dps_pool *pool)
{
    return epoch_agg_create(out, c, pool, 0);
}

static int s_release(epoch_state *st, const epoch_input *in, float *basis, epoch_outcome *out)
{
    agg_input items = epoch_agg_items(st, in);
    wfc_params p = epoch_agg_wfc_params(st->cfg, items.xi_max);
    wfc_result res = {0};
    int rc = agg_projection(&items, &p, in->noise, st->pool, st->ws, basis, &res);
    epoch_agg_wfc_outcome(&res, out);
    /* The released d x d mean (a projection's eigenvalues: 1 where the buckets
       agree) gets N(0, s_mu^2) per entry, symmetrised: off-diagonal sd
       s_mu / sqrt 2.  s_mu is a function of the released radius and noisy
       weight and public parameters (wfc.c): post-processing.  The level is
       the spiked-Wigner margin (s_mu / sqrt 2) sqrt(d) (noise_level_sym). */
    if (!res.failed)
        out->noise_level = noise_level_sym(res.s_mu / sqrt(2.0), items.d);
    return rc;
}

const epoch_mechanism epoch_projection = {
    .id = DPS_AGG_PROJECTION, .name = "projection", .intake = EPOCH_BUCKETS, .uses = 0,
    .check = s_check, .min_buckets = epoch_agg_wfc_min_buckets, .memory = s_memory, .cost = s_cost,
    .radius_unrelated = s_radius_unrelated,
    .create = s_create, .destroy = epoch_agg_destroy,
    .begin = epoch_agg_begin, .take_bucket = epoch_agg_take_bucket, .release = s_release,
};
