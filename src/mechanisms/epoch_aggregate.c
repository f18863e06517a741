/* epoch_aggregate.c - the shared part of the epoch mechanisms that aggregate
   bucket bases (epoch_aggregate.h).  No privacy argument here: each
   mechanism's file has its own. */
#include "epoch_aggregate.h"

#include <math.h>
#include <stdlib.h>

void epoch_agg_destroy(epoch_state **pst)
{
    if (!pst || !*pst)
        return;
    agg_refs_free(&(*pst)->refs);
    agg_ws_free(&(*pst)->ws);
    free(*pst);
    *pst = NULL;
}

int epoch_agg_create(epoch_state **out, const dps_config *c, dps_pool *pool, unsigned parts)
{
    epoch_state *st = calloc(1, sizeof *st);
    if (!st)
        return DPS_ENOMEM;
    st->cfg = c;
    st->pool = pool;
    int ok = !(parts & EPOCH_AGG_REFS) ||
             agg_refs_init(&st->refs, c->public_seed, c->t, c->k, c->q, c->d, pool) == DPS_OK;
    if (ok)
        ok = (st->ws = agg_ws_new(c->t, c->k, c->q, c->d, c->workers, (parts & EPOCH_AGG_WS_REFERENCE) != 0)) != NULL;
    if (!ok)
        epoch_agg_destroy(&st);
    *out = st;
    return ok ? DPS_OK : DPS_ENOMEM;
}

int epoch_agg_begin(epoch_state *st, uint64_t epoch, dps_rng *noise)
{
    (void)noise;
    if (st->refs.P) /* drawn on the workers: the pushing thread does not wait behind the last epoch's buckets */
        agg_refs_begin_async(&st->refs, epoch);
    return DPS_OK;
}

void epoch_agg_take_bucket(epoch_state *st, size_t bucket, const float *V)
{
    if (st->refs.A)
        agg_refs_take(&st->refs, bucket, V);
}

agg_input epoch_agg_items(epoch_state *st, const epoch_input *in)
{
    const dps_config *c = st->cfg;
    double xi_max = sqrt(2.0 * (double)c->k); /* ||Pi_j - Pi_l||_F <= sqrt(2k) */
    if (st->refs.A) {
        agg_refs_wait(&st->refs); /* P and xi_max (an epoch without a completed bucket never waited) */
        epoch_pack(st->refs.A, c->k * c->q * sizeof(float), in->done, c->t);
        xi_max = st->refs.xi_max;
    }
    agg_input items = {in->V, st->refs.A, in->buckets, c->k, c->d, c->q, xi_max};
    return items;
}

wfc_params epoch_agg_wfc_params(const dps_config *c, double xi_max)
{
    double split = c->split_search + c->split_count + c->split_mean;
    wfc_params p = {
        .alpha = c->alpha, .tau = c->tau,
        .rho_search = c->rho_epoch * c->split_search / split,
        .rho_count = c->rho_epoch * c->split_count / split,
        .rho_mean = c->rho_epoch * c->split_mean / split,
        .delta1 = c->delta_epoch, .xi_min = c->xi_min, .xi_max = xi_max,
    };
    return p;
}

/* L = W^ - s_W sqrt(2 ln(1/delta)) >= 1 with W <= t needs, with two sd of
   margin for W^, t >= 1 + s_W (sqrt(2 ln(1/delta)) + 2). */
size_t epoch_agg_wfc_min_buckets(const dps_config *c)
{
    double split = c->split_search + c->split_count + c->split_mean;
    if (!(split > 0) || !(c->rho_epoch > 0) || !(c->alpha > 0) || !(c->delta_epoch > 0 && c->delta_epoch < 1))
        return 2;
    double s_W = (1.0 / c->alpha + 1.0) / sqrt(2.0 * c->rho_epoch * c->split_count / split);
    double need = 1.0 + s_W * (sqrt(2.0 * log(1.0 / c->delta_epoch)) + 2.0);
    return need < 2 ? 2 : (size_t)ceil(need);
}

void epoch_agg_wfc_outcome(const wfc_result *res, epoch_outcome *out)
{
    out->failed = res->failed;
    if (res->failed)
        out->reason = "the noisy count of friends was too low (WFC said FAIL): the buckets disagree; budget spent";
    out->radius = res->radius;
    out->w_hat = res->W_hat;
}
