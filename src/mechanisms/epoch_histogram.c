/* epoch_histogram.c - the histogram aggregator (DPS_AGG_HISTOGRAM;
   Singhal-Steinke 2021 DPASE): an epoch mechanism (epoch_mechanism.h).

   GUARANTEE.  (eps, delta)-DP per epoch under replacing one row, with
   eps = sqrt(2 rho_epoch) and delta = delta_epoch; dps_zcdp_from_dp(eps,
   delta) = (rho_epoch, delta_epoch) is what the epoch is charged.

   ARGUMENT.  Bucket j's item is the reference aggregator's y^j = Pi_j P^T
   for public reference points P drawn at the epoch's begin (agg_refs,
   aggregate.c).  Replacing one row changes one bucket (the partition does
   not look at the rows), so one item.  The release, the largest noisy count
   of the grid cells above the threshold, is (eps, delta)-DP under replacing
   one item when ln(1/(1 - delta)) <= eps/2 (histogram.c has the proof;
   dps_config_check refuses other parameters).  The snapshot, the top-k right
   singular subspace of the released cell's centre, is post-processing. */
#include "epoch_aggregate.h"
#include "noise_level.h"

#include <math.h>

static double s_eps(const dps_config *c) { return sqrt(2.0 * c->rho_epoch); }

static size_t s_min_buckets(const dps_config *c)
{
    if (!agg_hist_params_ok(s_eps(c), c->delta_epoch))
        return 2;
    return agg_hist_min_buckets(s_eps(c), c->delta_epoch);
}

static int s_check(const dps_config *c, const char **why)
{
    if (!agg_hist_params_ok(s_eps(c), c->delta_epoch)) {
        *why = "histogram aggregator: needs delta_epoch <= 1/2 and ln(1/(1 - delta_epoch)) <= sqrt(2 rho_epoch)/2";
        return DPS_EINVAL;
    }
    if (c->q > DPS_HISTOGRAM_MAX_QD / c->d) {
        *why = "the histogram aggregator keeps q*d-sized cell coordinates: q*d above 2^23 is refused";
        return DPS_ELIMIT;
    }
    return DPS_OK;
}

static size_t s_memory(const dps_config *c)
{
    /* the WFC scratch (see s_create); A, P; offset, two cells, centre */
    return agg_ws_bytes(c->t, c->k, c->q, c->d, c->workers, 0) + agg_refs_bytes(c->t, c->k, c->q, c->d) +
           c->q * c->d * (sizeof(double) + 2 * sizeof(int64_t) + sizeof(float));
}

static dps_zcdp s_cost(const dps_config *c) { return (dps_zcdp){c->rho_epoch, c->delta_epoch}; }

/* Per coordinate of an item, for orthogonal subspaces (as the cell side). */
static double s_radius_unrelated(const dps_config *c) { return sqrt(2.0 * (double)c->k / (double)c->d); }

/* The reference items; the WFC scratch is not used by agg_histogram but
   allocated (and counted) as the reference aggregator's, which shares this
   state. */
static int s_create(epoch_state **out, const dps_config *c, dps_pool *pool)
{
    return epoch_agg_create(out, c, pool, EPOCH_AGG_REFS);
}

static int s_release(epoch_state *st, const epoch_input *in, float *basis, epoch_outcome *out)
{
    const dps_config *c = st->cfg;
    agg_input items = epoch_agg_items(st, in);
    agg_hist_result res = {0};
    int rc = agg_histogram(&items, s_eps(c), c->delta_epoch, c->hist_width, in->noise, in->pub, basis, &res);
    out->failed = res.failed;
    if (res.failed)
        out->reason = "no histogram cell's noisy count passed the threshold: the buckets disagree at this cell "
                      "width; budget spent";
    out->radius = res.width;
    out->w_hat = res.count_hat;
    /* The released point is the centre of the released cell: for an item y
       in it, centre - y is uniform on the cell (random offset, histogram.c),
       sd l / sqrt 12 per coordinate of the q x d item, l = the released cell
       side.  The released cell holds many items (its noisy count passed T),
       which agree to within l per coordinate, so the noise-free part is such
       an item, of squared singular values of mean q: the spiked-matrix level
       of the reference aggregator with sigma = l / sqrt 12 (noise_level_rect),
       a function of l and the public q, d: post-processing. */
    if (!rc && !res.failed)
        out->noise_level = noise_level_rect(res.width / sqrt(12.0), items.q, items.d);
    return rc;
}

const epoch_mechanism epoch_histogram = {
    .id = DPS_AGG_HISTOGRAM, .name = "histogram", .intake = EPOCH_BUCKETS,
    .uses = EPOCH_USES_Q | EPOCH_USES_HIST_WIDTH,
    .check = s_check, .min_buckets = s_min_buckets, .memory = s_memory, .cost = s_cost,
    .radius_unrelated = s_radius_unrelated,
    .create = s_create, .destroy = epoch_agg_destroy,
    .begin = epoch_agg_begin, .take_bucket = epoch_agg_take_bucket, .release = s_release,
};
