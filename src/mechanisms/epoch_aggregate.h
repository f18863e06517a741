/* epoch_aggregate.h - what the three epoch mechanisms that aggregate bucket
   bases (epoch_reference.c, epoch_projection.c, epoch_histogram.c) share:
   their state, the hooks that do the same for the three, and the WFC
   parameters of an epoch.  Not installed. */
#ifndef DPS_EPOCH_AGGREGATE_H
#define DPS_EPOCH_AGGREGATE_H

#include "aggregate.h"
#include "epoch_mechanism.h"

/* The state of the three (their struct epoch_state). */
struct epoch_state {
    const dps_config *cfg;
    dps_pool *pool;
    agg_refs refs; /* EPOCH_AGG_REFS: reference points and projections; else empty */
    agg_ws *ws;    /* the aggregation's scratch, reused every epoch */
};

/* What the state holds: the reference items, and the WFC scratch of the
   reference aggregator (else that of the projection one). */
enum { EPOCH_AGG_REFS = 1, EPOCH_AGG_WS_REFERENCE = 2 };

/* create with these parts; the other hooks as in epoch_mechanism.h.  begin
   draws the reference points and take_bucket computes A_j, if the state has
   reference items (else they do nothing). */
int epoch_agg_create(epoch_state **out, const dps_config *c, dps_pool *pool, unsigned parts);
void epoch_agg_destroy(epoch_state **st);
int epoch_agg_begin(epoch_state *st, uint64_t epoch, dps_rng *noise);
void epoch_agg_take_bucket(epoch_state *st, size_t bucket, const float *V);

/* The release's items: the packed bases and, with reference items, the
   projections A_j packed the same way (epoch_pack); xi_max that of the
   reference items, or sqrt(2k) (the largest ||Pi_j - Pi_l||_F). */
agg_input epoch_agg_items(epoch_state *st, const epoch_input *in);

/* The WFC parameters of an epoch: rho_epoch split as split_search :
   split_count : split_mean, delta1 = delta_epoch. */
wfc_params epoch_agg_wfc_params(const dps_config *c, double xi_max);
/* The fewest buckets with which WFC's noisy count can succeed even if every
   bucket agrees (the min_buckets of the WFC aggregators); 2 for parameters
   out of range. */
size_t epoch_agg_wfc_min_buckets(const dps_config *c);
/* WFC's result as the epoch's outcome: FAIL (with its reason), radius, W^. */
void epoch_agg_wfc_outcome(const wfc_result *res, epoch_outcome *out);

#endif
