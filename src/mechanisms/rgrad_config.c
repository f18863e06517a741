/* rgrad_config.c - the configuration of DP-RGrad (rgrad.c): its defaults,
   how a total rho is split and what a fit costs, the number of groups of the
   initialization, the batches, and the checks.  No privacy argument here:
   rgrad.c (the accounting), rgrad_init.c and rgrad_gradient.c. */
#include "internal.h"
#include "rgrad_internal.h"

#include <math.h>
#include <string.h>

void dps_rgrad_config_init(dps_rgrad_config *cfg, size_t d1, size_t d2, size_t r)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->d1 = d1;
    cfg->d2 = d2;
    cfg->r = r;
    cfg->iters = 10;
    cfg->eta = 0.5;
    cfg->clip_init = 3.0 * sqrt((double)d1 * (double)d2);
    cfg->clip_sigma = 3.0 * (double)r;
    double dimT = (double)r * ((double)d1 + (double)d2 - (double)r);
    cfg->clip_grad = 3.0 * sqrt(dimT > 0 ? dimT : 1.0);
    cfg->split_sigma = 0.2;
    cfg->delta = 1e-8;
    cfg->q = 10 * r;
    cfg->alpha = 0.5;
    cfg->tau = 0.5;
    cfg->split_search = 0.2;
    cfg->split_count = 0.1;
    cfg->split_mean = 0.7;
    cfg->xi_min = 1e-6;
    dps_rgrad_config_budget(cfg, 1.0);
}

void dps_rgrad_config_budget(dps_rgrad_config *cfg, double rho_total)
{
    if (cfg->streaming) {
        cfg->rho_init = rho_total;
        cfg->rho_iter = rho_total;
    } else if (cfg->iters == 0) {
        cfg->rho_init = rho_total;
        cfg->rho_iter = rho_total; /* unused */
    } else {
        cfg->rho_init = 0.3 * rho_total;
        cfg->rho_iter = 0.7 * rho_total / (double)cfg->iters;
    }
}

dps_zcdp dps_rgrad_cost(const dps_rgrad_config *cfg)
{
    dps_zcdp c = {cfg->rho_init, cfg->delta};
    if (cfg->iters > 0) {
        if (cfg->streaming)
            c.rho = fmax(cfg->rho_init, cfg->rho_iter);
        else
            c.rho += (double)cfg->iters * cfg->rho_iter;
    }
    return c;
}

double rgrad_rho_agg(const dps_rgrad_config *c) { return 0.5 * (1.0 - c->split_sigma) * c->rho_init; }

wfc_params rgrad_wfc_params(const dps_rgrad_config *c, double xi_max)
{
    double split = c->split_search + c->split_count + c->split_mean, rho = rgrad_rho_agg(c);
    wfc_params p = {
        .alpha = c->alpha, .tau = c->tau,
        .rho_search = rho * c->split_search / split,
        .rho_count = rho * c->split_count / split,
        .rho_mean = rho * c->split_mean / split,
        .delta1 = 0.5 * c->delta, .xi_min = c->xi_min, .xi_max = xi_max,
    };
    return p;
}

/* The fewest groups with which the noisy count can succeed even if all agree:
   L = W^ - s_W sqrt(2 ln(1/delta1)) >= 1 needs t >~ 1 + s_W (sqrt(2 ln(1/delta1)) + 2)
   (the estimator's dps_config_min_buckets rule, two sd of margin). */
static size_t s_min_groups(const dps_rgrad_config *c)
{
    wfc_params p = rgrad_wfc_params(c, 1.0);
    if (!(p.rho_count > 0) || !(p.delta1 > 0 && p.delta1 < 1) || !(c->alpha > 0))
        return 2;
    double s_W = wfc_weight_sensitivity(c->alpha) / sqrt(2.0 * p.rho_count);
    double t = 1.0 + s_W * (sqrt(2.0 * log(1.0 / p.delta1)) + 2.0);
    return t < 2 ? 2 : (size_t)ceil(t);
}

size_t dps_rgrad_min_groups(const dps_rgrad_config *cfg) { return s_min_groups(cfg); }

/* Auto groups: the radius search stops at the first grid radius whose noisy W
   reaches tau t, so the true W there can be near tau t (less the search's
   noise); the release needs W^ - s_W sqrt(2 ln(1/delta1)) >= 1.  Asking
   tau t >= 1 + s_W (sqrt(2 ln(1/delta1)) + 6) leaves 6 sd of W^ (and of the
   search's noise, whose sd is about 1.6 s_W at the default split) for both:
   FAIL becomes rare.  (2 x the minimum, tried first, left 2 sd: the
   evaluation saw 2 FAILs in 105 fits, as Phi(-2) per aggregation predicts.) */
size_t dps_rgrad_groups(const dps_rgrad_config *cfg)
{
    if (cfg->groups)
        return cfg->groups;
    wfc_params p = rgrad_wfc_params(cfg, 1.0);
    if (!(p.rho_count > 0) || !(p.delta1 > 0 && p.delta1 < 1) || !(cfg->alpha > 0) || !(cfg->tau > 0))
        return 2 * s_min_groups(cfg);
    double s_W = wfc_weight_sensitivity(cfg->alpha) / sqrt(2.0 * p.rho_count);
    double t = (1.0 + s_W * (sqrt(2.0 * log(1.0 / p.delta1)) + 6.0)) / cfg->tau;
    return t < 2 ? 2 : (size_t)ceil(t);
}

void rgrad_batches(const dps_rgrad_config *c, size_t n, size_t *n0, size_t *nb)
{
    if (!c->streaming || c->iters == 0) {
        *n0 = n;
        *nb = n;
        return;
    }
    *n0 = c->init_obs ? c->init_obs : n / (c->iters + 1);
    *nb = *n0 <= n ? (n - *n0) / c->iters : 0;
}

#define WHY(msg)          \
    do {                  \
        if (why)          \
            *why = (msg); \
        return DPS_EINVAL;\
    } while (0)

int dps_rgrad_config_check(const dps_rgrad_config *c, size_t n, const char **why)
{
    if (why)
        *why = "";
    if (!c)
        WHY("no configuration");
    if (c->d1 == 0 || c->d2 == 0 || c->r == 0 || c->r >= c->d1 || c->r >= c->d2)
        WHY("need 1 <= r < min(d1, d2)");
    if (c->d1 > DPS_RGRAD_MAX_DIM || c->d2 > DPS_RGRAD_MAX_DIM ||
        (double)c->d1 * (double)c->d2 > (double)DPS_RGRAD_MAX_ENTRIES || c->iters > DPS_RGRAD_MAX_ITERS) {
        if (why)
            *why = "d1, d2 (each <= " DPS_STR(DPS_RGRAD_MAX_DIM) ", d1*d2 <= 2^20) or iters (<= "
                   DPS_STR(DPS_RGRAD_MAX_ITERS) ") above the documented limit";
        return DPS_ELIMIT;
    }
    if (!rgrad_positive(c->eta))
        WHY("eta must be a positive number");
    if (!rgrad_positive(c->clip_init) || !rgrad_positive(c->clip_sigma) || !rgrad_positive(c->clip_grad))
        WHY("the clipping thresholds must be positive numbers");
    if (!rgrad_positive(c->rho_init) || (c->iters > 0 && !rgrad_positive(c->rho_iter)))
        WHY("rho_init and rho_iter must be positive numbers");
    if (!(c->split_sigma > 0 && c->split_sigma < 1))
        WHY("split_sigma must be in (0, 1)");
    if (!(c->delta > 0 && c->delta < 1))
        WHY("delta must be in (0, 1)");
    if (!(c->alpha > 0 && c->alpha <= 1) || !(c->tau > 0 && c->tau <= 1))
        WHY("alpha and tau must be in (0, 1]");
    if (!rgrad_positive(c->split_search) || !rgrad_positive(c->split_count) || !rgrad_positive(c->split_mean))
        WHY("the aggregation's rho split parts must all be positive");
    if (!rgrad_positive(c->xi_min))
        WHY("xi_min must be positive");
    if (c->q == 0 || c->q >= ((size_t)1 << 24))
        WHY("q must be in [1, 2^24)");
    size_t t = dps_rgrad_groups(c), n0, nb;
    /* Fewer groups than dps_rgrad_min_groups are allowed (a FAIL is a DP
       output, so privacy does not depend on t) but the init then fails with
       high probability: the documented behaviour that lets FAIL be tested. */
    if (t < 2)
        WHY("need at least 2 groups (leave groups at 0 for the automatic choice)");
    if (n == 0)
        WHY("no observations");
    rgrad_batches(c, n, &n0, &nb);
    if (n0 > n || n0 < t)
        WHY("too few observations for the initialization: every group needs at least one");
    if (c->streaming && c->iters > 0 && nb == 0)
        WHY("too few observations for streaming: an iteration's batch would be empty");
    return DPS_OK;
}

double dps_rgrad_sigma(double clip, size_t n, double rho)
{
    return (2.0 * clip / (double)n) / sqrt(2.0 * rho);
}
