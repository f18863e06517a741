/* config.c - the streaming estimator's configuration: its defaults, its
   checks and its memory bound.  What is common to every epoch mechanism is
   checked here; each mechanism adds its own conditions, its least bucket
   count and its memory through the table (src/mechanisms/epoch_mechanism.h). */
#include "buckets.h"
#include "epoch_mechanism.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int s_online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (n > 64 ? 64 : (int)n);
}

void dps_config_init(dps_config *c, size_t d, size_t k)
{
    memset(c, 0, sizeof *c);
    c->d = d;
    c->k = k;
    c->t = 125;
    c->m = 2 * k;
    c->window = 0; /* W = t whatever t is set to later (buckets_window) */
    c->q = 10 * k;
    c->aggregator = DPS_AGG_REFERENCE;
    c->rho_epoch = 1.0;
    c->delta_epoch = 1e-8;
    c->cap.delta_target = DPS_DELTA_TARGET_DEFAULT; /* the delta eps is shown at; no cap by default */
    c->alpha = 0.5;
    c->tau = 0.5;
    c->split_search = 0.2;
    c->split_count = 0.1;
    c->split_mean = 0.7;
    c->xi_min = 1e-6;
    c->power_blocks = 0; /* 3 cold, 1 warm (moment_groups.c) */
    c->power_oversample = 10;
    c->workers = s_online_cpus();
}

/* The configuration's mechanism; an unknown aggregator (which
   dps_config_check refuses) counts as the default one. */
static const epoch_mechanism *s_mechanism(const dps_config *c)
{
    const epoch_mechanism *mech = epoch_mechanism_for(c->aggregator);
    return mech ? mech : epoch_mechanism_for(DPS_AGG_REFERENCE);
}

size_t dps_config_min_buckets(const dps_config *c) { return s_mechanism(c)->min_buckets(c); }

dps_zcdp dps_config_epoch_cost(const dps_config *c) { return s_mechanism(c)->cost(c); }

int dps_config_uses_buckets(const dps_config *c) { return s_mechanism(c)->intake == EPOCH_BUCKETS; }

#define WHY(msg)          \
    do {                  \
        if (why)          \
            *why = (msg); \
        return DPS_EINVAL; \
    } while (0)

/* The parameter groups (DESIGN 7.2): NULL if they are right, else why not. */
static const char *s_check_groups(const dps_config *c, const epoch_mechanism *mech)
{
    if (c->groups > DPS_MAX_GROUPS)
        return "too many parameter groups (at most DPS_MAX_GROUPS = 256)";
    if (c->groups > 1 && !(mech->uses & EPOCH_USES_GROUPS))
        return "parameter groups are for the gaussian, power and kron aggregators only";
    for (size_t g = 0; g < epoch_groups(c); g++) {
        size_t r = epoch_group_rows(c, g), dg = epoch_group_d(c, g);
        if (r && !(mech->uses & EPOCH_USES_SHAPES))
            return "group shapes RxC (group_rows) are for --aggregator kron only";
        if (r && dg % r)
            return "a group's shape must divide its width: group_rows[g] rows of group_d[g] / group_rows[g] "
                   "columns";
    }
    for (size_t g = epoch_groups(c); g < DPS_MAX_GROUPS; g++)
        if (c->group_rows[g])
            return "a shape (group_rows) is given for a group past the last";
    if (c->groups == 0)
        return NULL;
    size_t d = 0, k = 0;
    for (size_t g = 0; g < c->groups; g++) {
        if (c->group_d[g] < 1 || c->group_d[g] > c->d)
            return "every parameter group must have between 1 and d columns";
        if (c->group_k[g] > c->group_d[g])
            return "a group's rank group_k must be at most its width group_d";
        d += c->group_d[g];
        k += c->group_k[g];
    }
    if (d != c->d)
        return "the parameter groups' widths must add up to d";
    if (k != c->k)
        return "the parameter groups' ranks must add up to k";
    return NULL;
}

int dps_config_check(const dps_config *c, const char **why)
{
    if (why)
        *why = "";
    if (!c)
        WHY("no configuration");
    if (c->d < 2)
        WHY("d must be at least 2");
    if (c->k < 1 || c->k >= c->d)
        WHY("k must satisfy 1 <= k < d");
    if (c->t < 2)
        WHY("t (buckets per epoch) must be at least 2");
    if (c->window > c->t)
        WHY("window must satisfy W <= t (or be 0, the default: W = t)");
    const epoch_mechanism *mech = epoch_mechanism_for(c->aggregator);
    if (!mech)
        WHY("unknown aggregator");
    /* a bucket's top-k needs k rows; row-intake epochs are just t m rows
       (with groups k adds up the groups' ranks, often above m) */
    if (mech->intake == EPOCH_BUCKETS && c->m < c->k)
        WHY("m (rows per bucket) must be at least k");
    if ((mech->uses & EPOCH_USES_Q) && c->q < c->k)
        WHY("q (reference points) must be at least k");
    if (!(c->hist_width >= 0) || !isfinite(c->hist_width))
        WHY("hist_width must be >= 0 (0: the default cell width)");
    if (c->hist_width > 0 && !(mech->uses & EPOCH_USES_HIST_WIDTH))
        WHY("hist_width is for the histogram aggregator only");
    const char *group_why = s_check_groups(c, mech);
    if (group_why)
        WHY(group_why);
    if (!(c->rho_epoch > 0) || !isfinite(c->rho_epoch))
        WHY("rho (rho_epoch, the epoch's) must be positive");
    if (!(c->delta_epoch > 0 && c->delta_epoch < 1))
        WHY("delta (delta_epoch, the epoch's) must be in (0, 1)");
    if (!(c->alpha > 0 && c->alpha <= 1))
        WHY("alpha must be in (0, 1]");
    if (!(c->tau > 0 && c->tau <= 1))
        WHY("tau must be in (0, 1]");
    if (c->tau >= (c->alpha > 0.5 ? 0.5 / c->alpha : 1.0))
        WHY("tau must be below the largest possible weight fraction min(1, 1/(2 alpha)): the radius search "
            "could never reach tau * t and would climb to the largest radius");
    if (!(c->split_search > 0 && c->split_count > 0 && c->split_mean > 0))
        WHY("the rho split parts must all be positive");
    if (!(c->xi_min > 0))
        WHY("xi_min must be positive");
    if (c->workers < 1 || c->workers > 256)
        WHY("workers must be in 1..256");
    if (c->spent_before.rho < 0 || c->spent_before.delta < 0)
        WHY("spent_before must be non-negative");
    if (c->cap.rho_cap < 0 || c->cap.eps_cap < 0 || c->cap.delta_target < 0 || c->cap.delta_target >= 1)
        WHY("budget cap values out of range");
    if ((c->cap.rho_cap > 0 || c->cap.eps_cap > 0) && !(c->cap.delta_target > 0))
        WHY("a budget cap needs delta_target > 0");
    if (c->t > SIZE_MAX / c->m || c->t * c->k > SIZE_MAX / c->d / sizeof(float) ||
        (mech->intake == EPOCH_BUCKETS && c->t * c->m > SIZE_MAX / c->d / sizeof(float)))
        WHY("t * m, t * k * d or (buckets) t * m * d overflows");
    size_t need = mech->min_buckets(c);
    if (c->t < need) {
        static __thread char msg[200];
        snprintf(msg, sizeof msg,
                 "t = %zu buckets is too few: with this rho (rho_epoch), alpha, split and delta the noisy count needs "
                 "at least %zu buckets to ever succeed (raise t or rho)", c->t, need);
        if (why)
            *why = msg;
        return DPS_EINVAL;
    }
    const char *mech_why = "";
    int rc = mech->check(c, &mech_why);
    if (rc && why)
        *why = mech_why;
    return rc;
}

size_t dps_estimator_memory_bound(const dps_config *c)
{
    const epoch_mechanism *mech = s_mechanism(c);
    return buckets_memory(c, mech->intake) + mech->memory(c);
}

size_t dps_estimator_memory_bound_pipelined(const dps_config *c)
{
    const epoch_mechanism *mech = s_mechanism(c);
    size_t one = dps_estimator_memory_bound(c);
    return mech->warm && mech->warm(c) ? one : 2 * one; /* one slot, or one per epoch (estimator.c) */
}

uint64_t dps_config_power_blocks(const dps_config *c)
{
    if (!c || dps_config_check(c, NULL) != DPS_OK)
        return 0;
    const epoch_mechanism *mech = s_mechanism(c);
    return mech->blocks ? mech->blocks(c, NULL) : 0;
}

int dps_config_plan(const dps_config *c, dps_plan *out)
{
    if (!c || !out || dps_config_check(c, NULL) != DPS_OK)
        return DPS_EINVAL;
    const epoch_mechanism *mech = s_mechanism(c);
    memset(out, 0, sizeof *out);
    out->rows = (uint64_t)c->t * c->m;
    out->memory = dps_estimator_memory_bound(c);
    out->cost = mech->cost(c);
    out->groups = epoch_groups(c);
    for (size_t g = 0; g < out->groups; g++) {
        out->method[g] = mech->group_method ? mech->group_method(c, g) : mech->name;
        out->floor[g] = mech->noise_floor ? mech->noise_floor(c, g) / (double)out->rows : 0.0;
    }
    return DPS_OK;
}
