/* estimator.c - the streaming estimator's epoch life cycle (DESIGN 3.1-3.3):
   rows in, one private snapshot out per epoch.

   The way of an epoch: its first row begins it (the mechanism's begin, then
   the bucket pipeline's first window); each row is admitted (row_unit) and
   goes to a random bucket (buckets.c) or, for a mechanism without buckets,
   straight to the mechanism; at the close the estimator checks that enough
   came in and that the cost fits the cap, makes the charge durable (the
   commit hook), charges the accountant and has the mechanism release into a
   snapshot.  The mechanism is one entry of the table of
   src/mechanisms/epoch_mechanism.h; nothing here depends on which.

   Who owns what: the estimator owns the configuration, the accountant, the
   generators (noise, and the partition's, forked from it), the worker pool,
   the bucket pipeline and the mechanism's state.  One thread pushes and
   closes. */
#include "buckets.h"
#include "epoch_mechanism.h"
#include "estimator_internal.h"
#include "internal.h"
#include "rows.h"
#include "snapshot.h"

#include <stdio.h>
#include <string.h>

struct dps_estimator {
    dps_config cfg;
    const epoch_mechanism *mech;
    epoch_state *mech_state;
    dps_accountant *acc;
    dps_rng *noise;       /* mechanism noise: secure, or seeded in tests */
    dps_rng *part;        /* partition choices (forked from noise) */
    dps_pool *pool;
    bucket_pipe *buckets;
    float *row;           /* EPOCH_ROWS: one admitted row */

    uint64_t epoch;
    int epoch_started;
    dps_stats stats;      /* owned by the pushing thread */
};

/* -------------------------------------------------------------- lifecycle */
int dps_estimator_new(dps_estimator **out, const dps_config *cfg)
{
    if (!out)
        return DPS_EINVAL;
    *out = NULL;
    int rc = dps_config_check(cfg, NULL);
    if (rc)
        return rc;
    dps_blas_init_once();
    dps_estimator *e = calloc(1, sizeof *e);
    if (!e)
        return DPS_ENOMEM;
    e->cfg = *cfg;
    const dps_config *c = &e->cfg;
    e->mech = epoch_mechanism_for(c->aggregator);
    e->epoch = c->first_epoch;
    e->stats.epoch = e->epoch;
    rc = dps_accountant_new(&e->acc, &c->cap, &c->spent_before);
    if (!rc)
        rc = c->seeded ? dps_rng_new_seeded(&e->noise, c->seed) : dps_rng_new_secure(&e->noise);
    if (!rc)
        rc = dps_rng_fork(e->noise, &e->part);
    if (!rc)
        rc = (e->pool = pool_new(c->workers)) ? DPS_OK : DPS_ENOMEM;
    if (!rc)
        rc = e->mech->create(&e->mech_state, c, e->pool);
    if (!rc && e->mech->intake == EPOCH_BUCKETS) /* EPOCH_ROWS: no pipe (e->buckets stays NULL) */
        rc = buckets_new(&e->buckets, c, e->part, e->pool, e->mech, e->mech_state);
    if (!rc && e->mech->intake == EPOCH_ROWS)
        rc = (e->row = malloc(c->d * sizeof *e->row)) ? DPS_OK : DPS_ENOMEM;
    if (rc) {
        dps_estimator_destroy(&e);
        return rc;
    }
    *out = e;
    return DPS_OK;
}

void dps_estimator_destroy(dps_estimator **pe)
{
    if (!pe || !*pe)
        return;
    dps_estimator *e = *pe;
    if (e->pool) {
        pool_wait(e->pool);
        pool_free(&e->pool);
    }
    buckets_free(&e->buckets);
    if (e->mech)
        e->mech->destroy(&e->mech_state);
    free(e->row);
    dps_rng_destroy(&e->noise);
    dps_rng_destroy(&e->part);
    dps_accountant_destroy(&e->acc);
    free(e);
    *pe = NULL;
}

/* ------------------------------------------------------------------- push */
/* Start the open epoch lazily, at its first row: the mechanism's begin (e.g.
   the public reference points), then the first window of buckets. */
static int s_epoch_begin(dps_estimator *e)
{
    int rc = e->mech->begin(e->mech_state, e->epoch, e->noise);
    if (!rc && e->mech->intake == EPOCH_BUCKETS)
        rc = buckets_begin(e->buckets, e->epoch);
    if (!rc)
        e->epoch_started = 1;
    return rc;
}

/* A row was admitted by row_unit (src/core/rows.c): normalised to norm 1 (at
   most), or, with NaN, Inf or zero norm, the zero vector, counted here.
   Every float row is either: no row can make a bucket or C non-finite. */
static void s_count(dps_estimator *e, row_kind kind)
{
    switch (kind) {
    case ROW_OK: break;
    case ROW_NAN: e->stats.rows_nan++; break;
    case ROW_INF: e->stats.rows_inf++; break;
    case ROW_ZERO: e->stats.rows_zero++; break;
    }
}

int dps_estimator_push(dps_estimator *e, const float *rows, size_t n_rows, size_t dim, size_t *n_taken)
{
    if (n_taken)
        *n_taken = 0;
    if (!e)
        return DPS_EINVAL;
    const dps_config *c = &e->cfg;
    if (n_rows == 0) {
        e->stats.batches_empty++;
        return DPS_EEMPTY;
    }
    if (dim != c->d) {
        e->stats.batches_dim++;
        return DPS_EDIM;
    }
    if (!rows)
        return DPS_EINVAL;
    size_t cap = c->t * c->m;
    size_t taken = 0;
    int rc = DPS_OK;
    while (taken < n_rows) {
        if (e->stats.rows_in_epoch >= cap) {
            rc = DPS_EFULL;
            break;
        }
        if (!e->epoch_started && (rc = s_epoch_begin(e)) != DPS_OK)
            break;
        const float *src = rows + taken * c->d;
        row_kind kind;
        if (e->mech->intake == EPOCH_ROWS) { /* every row of the epoch, nothing discarded */
            kind = row_unit(src, c->d, ROW_NORMALISE, e->row);
            e->mech->take_row(e->mech_state, e->row);
        } else {
            rc = buckets_add(e->buckets, src, &kind);
        }
        s_count(e, kind);
        taken++;
        e->stats.rows_accepted++;
        e->stats.rows_in_epoch++;
        if (rc)
            break;
    }
    if (n_taken)
        *n_taken = taken;
    return rc;
}

int dps_estimator_epoch_full(const dps_estimator *e)
{
    return e->stats.rows_in_epoch >= e->cfg.t * e->cfg.m;
}

/* ------------------------------------------------------------------ close */
/* Every outcome says what the cap leaves, after its charge if any. */
static void s_budget_left(const dps_estimator *e, dps_snapshot_info *info)
{
    info->budget_left = dps_accountant_left(e->acc);
    info->budget_unit = dps_budget_unit(&e->cfg.cap);
}

/* The epoch's end: its rows are used once, the next epoch starts empty (its
   first row begins it). */
static void s_epoch_end(dps_estimator *e)
{
    if (e->buckets)
        buckets_end(e->buckets);
    e->epoch++;
    e->epoch_started = 0;
    e->stats.epoch = e->epoch;
    e->stats.epochs_closed++;
    e->stats.rows_in_epoch = 0;
}

/* A snapshot that did not run the mechanism (nothing charged), and the end of
   the epoch. */
static int s_finish(dps_estimator *e, dps_snapshot_info *info, const float *basis, dps_snapshot **out)
{
    s_budget_left(e, info);
    int rc = dps_snapshot_new(out, info, basis);
    s_epoch_end(e);
    return rc;
}

/* NULL when enough came in for the mechanism to run, else why not (in why). */
static const char *s_too_little(const dps_estimator *e, size_t completed, char *why, size_t len)
{
    if (e->mech->intake == EPOCH_ROWS) {
        if (e->stats.rows_in_epoch >= 1)
            return NULL;
        snprintf(why, len, "no rows arrived in this epoch: the mechanism did not run, nothing was spent");
        return why;
    }
    size_t need = e->mech->min_buckets(&e->cfg);
    if (completed >= need)
        return NULL;
    snprintf(why, len,
             "only %zu buckets completed and the mechanism needs %zu to succeed: it did not run, nothing was "
             "spent", completed, need);
    return why;
}

int dps_estimator_close_epoch(dps_estimator *e, dps_snapshot **out)
{
    if (!e || !out)
        return DPS_EINVAL;
    *out = NULL;
    const dps_config *c = &e->cfg;
    const epoch_mechanism *mech = e->mech;
    int rows_intake = mech->intake == EPOCH_ROWS;
    size_t t_eff = buckets_close(e->buckets, &e->stats.rows_discarded); /* public: it depends only on how
                                                                             many rows arrived */
    dps_snapshot_info info;
    memset(&info, 0, sizeof info);
    info.epoch = e->epoch;
    info.d = c->d;
    info.k = c->k;
    if (c->groups > 1) {
        info.groups = c->groups;
        info.group_d = c->group_d;
        info.group_k = c->group_k;
    }
    info.aggregator = c->aggregator;
    info.buckets_used = t_eff;
    info.rows_used = rows_intake ? e->stats.rows_in_epoch : (uint64_t)t_eff * c->m;
    info.seeded = c->seeded;
    info.public_seed = c->public_seed;
    info.radius_unrelated = mech->radius_unrelated(c);
    info.delta_target = c->cap.delta_target > 0 ? c->cap.delta_target : 1e-5;
    info.reason = "";
    dps_zcdp cost = mech->cost(c);

    char why[200];
    const char *too_little = s_too_little(e, t_eff, why, sizeof why);
    if (too_little) {
        info.status = DPS_SNAP_FAILED;
        info.reason = too_little;
    } else if (!dps_accountant_fits(e->acc, cost)) {
        info.status = DPS_SNAP_REFUSED;
        info.reason = "releasing this epoch would pass the privacy budget cap: nothing was spent";
    }
    if (too_little || info.status == DPS_SNAP_REFUSED) {
        info.total = dps_accountant_spent(e->acc);
        info.eps_total = dps_accountant_eps(e->acc, info.delta_target);
        return s_finish(e, &info, NULL, out);
    }

    /* Everything the release needs that could fail for want of memory is
       allocated before the charge: the snapshot and the basis it will own. */
    dps_snapshot *snap = snapshot_reserve();
    float *basis = dps_aligned_calloc(c->k * c->d, sizeof(float));
    if (!snap || !basis) {
        free(snap);
        free(basis);
        return DPS_ENOMEM; /* before the charge: nothing spent, the epoch stays open */
    }
    dps_zcdp before = dps_accountant_spent(e->acc);
    dps_zcdp after = {before.rho + cost.rho, before.delta + cost.delta};
    if (c->commit && c->commit(c->commit_arg, e->epoch, cost, after) != 0) {
        free(snap);
        free(basis);
        s_epoch_end(e); /* the epoch's rows are dropped */
        return DPS_ECOMMIT;
    }
    /* From here on the charge is on disk: every path ends in *out = snap. */
    int rc = dps_accountant_charge(e->acc, cost); /* cannot fail: it fits (checked above) */

    /* The completed buckets in bucket order.  Buckets finish in order of
       their ids only when W = t... any order is fine for privacy, but keep
       only the done ones, packed, so the input is the same on every run. */
    epoch_input in = {.epoch = e->epoch, .buckets = t_eff, .rows = e->stats.rows_in_epoch, .noise = e->noise};
    if (!rows_intake)
        in.V = buckets_pack(e->buckets, &in.done);
    epoch_outcome res;
    memset(&res, 0, sizeof res);
    if (!rc)
        rc = dps_rng_new_labelled(&in.pub, c->public_seed, "aggregate", e->epoch);
    if (!rc)
        rc = mech->release(e->mech_state, &in, basis, &res);
    dps_rng_destroy(&in.pub);
    info.epoch_cost = cost;
    info.total = dps_accountant_spent(e->acc);
    info.eps_total = dps_accountant_eps(e->acc, info.delta_target);
    info.radius = res.radius;
    info.w_hat = res.w_hat;
    info.noise_level = rc || res.failed ? 0 : res.noise_level; /* only with a basis */
    char internal[200];
    if (rc) {
        /* AFTER THE CHARGE NOTHING MAY DEPEND ON AN ERROR THE DATA CAN CAUSE.
           Every row reaching a mechanism is finite with norm <= 1 (row_unit,
           src/core/rows.c, at buckets_add and the EPOCH_ROWS intake) and every
           bucket basis is finite with orthonormal rows (s_bucket_job,
           src/stream/buckets.c), so the errors that can still reach this
           line are the following, none of which the rows can cause:
           - DPS_ENOMEM: the labelled generator, the aggregators' and the
             covariance sampler's scratch; every size is a function of the
             public configuration (d, k, t, q, the bucket count);
           - DPS_EINVAL / DPS_ELIMIT from a mechanism's argument checks: the
             arguments are the configuration, checked at dps_estimator_new,
             and the row count (public); C and the bases are finite;
           - DPS_ENUMERIC: LAPACK reporting non-convergence (dsyevr, dgesdd)
             on a finite matrix made of the data and the noise, or the
             Bingham sampler passing its cap of 1e9 proposals.  These are the
             residual risk: in principle they depend on the data, no input is
             known to cause them, and their probability is not in delta.
           Whatever the cause, the epoch is published as FAILED, budget
           spent, like a FAIL of the mechanism: never a silent gap, so the
           outcome differs from a run without the error only in the basis
           being withheld.  The snapshot and the basis were allocated before
           the charge, so this path allocates nothing. */
        snprintf(internal, sizeof internal,
                 "the mechanism stopped on an internal error after the budget was charged (%s): published as "
                 "FAILED; budget spent", dps_strerror(rc));
        info.status = DPS_SNAP_FAILED;
        info.reason = internal;
        e->stats.epochs_internal_error++;
    } else if (res.failed) {
        info.status = DPS_SNAP_FAILED;
        info.reason = res.reason;
    } else {
        info.status = DPS_SNAP_RELEASED;
    }
    s_budget_left(e, &info);
    snapshot_fill(snap, &info, basis); /* takes basis */
    s_epoch_end(e);
    *out = snap;
    return DPS_OK;
}

void dps_estimator_get_stats(const dps_estimator *e, dps_stats *out)
{
    size_t done_epoch = 0;
    *out = e->stats;
    buckets_counts(e->buckets, &out->buckets_completed, &done_epoch);
    out->buckets_done_epoch = e->epoch_started ? done_epoch : 0;
}

dps_zcdp dps_estimator_spent(const dps_estimator *e) { return dps_accountant_spent(e->acc); }

int dps_estimator_set_cap(dps_estimator *e, const dps_budget *cap)
{
    if (!e || !cap)
        return DPS_EINVAL;
    int rc = dps_accountant_set_cap(e->acc, cap);
    if (rc == DPS_OK)
        e->cfg.cap = *cap;
    return rc;
}

void dps_estimator_set_bucket_hook(dps_estimator *e, dps_bucket_hook fn, void *arg)
{
    buckets_set_hook(e->buckets, fn, arg);
}
