/* epoch_reference.c - the reference aggregator (DPS_AGG_REFERENCE, the
   default; SS_Agg, Tsfadia sec. 4.1): an epoch mechanism (epoch_mechanism.h).

   GUARANTEE.  delta_epoch-approximate rho_epoch-zCDP per epoch under
   replacing one row; charged (rho_epoch, delta_epoch).

   ARGUMENT.  Bucket j's item is y^j = Pi_j P^T (q x d) for public reference
   points P drawn at the epoch's begin (agg_refs, aggregate.c).  Replacing one
   row changes one bucket (the partition does not look at the rows), so one
   item.  The release is the weighted FriendlyCore average of the items with
   its private radius search, rho_epoch split as split_search : split_count :
   split_mean, delta1 = delta_epoch: delta1-approximate rho_epoch-zCDP under
   replacing one item (wfc.c has the proof; aggregate.c how the distances
   and the noisy q x d mean are computed exactly for these items).  The
   radius grid ends at xi_max = 2 ||P||_F, at which any two items are friends
   whatever the bases (data-independent).  The snapshot, the top-k right
   singular subspace of the noisy mean, is post-processing. */
#include "epoch_aggregate.h"
#include "linalg.h"
#include "noise_level.h"

#include <math.h>

static int s_check(const dps_config *c, const char **why)
{
    (void)c;
    (void)why;
    return DPS_OK;
}

static size_t s_memory(const dps_config *c)
{
    /* the WFC scratch; A, P; the top-k workspace of the q x d mean */
    return agg_ws_bytes(c->t, c->k, c->q, c->d, c->workers, 1) + agg_refs_bytes(c->t, c->k, c->q, c->d) +
           c->q * LA_CHUNK * sizeof(double);
}

static dps_zcdp s_cost(const dps_config *c) { return (dps_zcdp){c->rho_epoch, c->delta_epoch}; }

/* The distance of the items of orthogonal subspaces (E ||M p||^2 = ||M||_F^2
   for p ~ N(0, I_d)). */
static double s_radius_unrelated(const dps_config *c) { return sqrt(2.0 * (double)c->k * (double)c->q); }

static int s_create(epoch_state **out, const dps_config *c, dps_pool *pool)
{
    return epoch_agg_create(out, c, pool, EPOCH_AGG_REFS | EPOCH_AGG_WS_REFERENCE);
}

static int s_release(epoch_state *st, const epoch_input *in, float *basis, epoch_outcome *out)
{
    agg_input items = epoch_agg_items(st, in);
    wfc_params p = epoch_agg_wfc_params(st->cfg, items.xi_max);
    wfc_result res = {0};
    int rc = agg_reference(&items, &p, in->noise, in->pub, st->pool, st->ws, basis, &res);
    epoch_agg_wfc_outcome(&res, out);
    /* The released q x d mean carries N(0, s_mu^2) per entry, and
       s_mu = ((2/alpha + 4) r / L) / sqrt(2 rho_mean) with L = W^ -
       s_W sqrt(2 ln(1/delta1)) is a function of the released radius r and
       noisy weight W^ and of public parameters (wfc.c): post-processing.
       Its noise-free part has squared singular values of mean q when the
       buckets agree, so the level is the spiked-matrix margin
       s_mu (d/q)^(1/4) (noise_level_rect). */
    if (!res.failed)
        out->noise_level = noise_level_rect(res.s_mu, items.q, items.d);
    return rc;
}

const epoch_mechanism epoch_reference = {
    .id = DPS_AGG_REFERENCE, .name = "reference", .intake = EPOCH_BUCKETS, .uses = EPOCH_USES_Q,
    .check = s_check, .min_buckets = epoch_agg_wfc_min_buckets, .memory = s_memory, .cost = s_cost,
    .radius_unrelated = s_radius_unrelated,
    .create = s_create, .destroy = epoch_agg_destroy,
    .begin = epoch_agg_begin, .take_bucket = epoch_agg_take_bucket, .release = s_release,
};
