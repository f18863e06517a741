/* config_params.c - the configuration by parameter: the table of its
   settings (name, type, where it lives; what each means is documented at
   dps_config in the public header, and for the programs' flags in
   src/args/est_flags.c), the handle's life, and the setters and getters.  The defaults are dps_config_init's
   (config.c) and whether settings go together is dps_config_check's: this
   file only moves values in and out.

   Who owns what: dps_config_new's handle is the caller's until
   dps_config_destroy; the table is static. */
#include "dpsubspace.h"
#include "epoch_mechanism.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef enum { S_SIZE, S_INT, S_U64, S_AGG, S_REAL } s_kind;

typedef struct {
    const char *name;
    s_kind kind;
    size_t offset;
} s_param;

#define P(id, field, kind) [id] = {#field, kind, offsetof(dps_config, field)}
#define PN(id, name, field, kind) [id] = {name, kind, offsetof(dps_config, field)}
static const s_param s_params[DPS_PARAM_COUNT] = {
    P(DPS_PARAM_D, d, S_SIZE),
    P(DPS_PARAM_K, k, S_SIZE),
    P(DPS_PARAM_T, t, S_SIZE),
    P(DPS_PARAM_M, m, S_SIZE),
    P(DPS_PARAM_WINDOW, window, S_SIZE),
    P(DPS_PARAM_Q, q, S_SIZE),
    P(DPS_PARAM_AGGREGATOR, aggregator, S_AGG),
    P(DPS_PARAM_RHO_EPOCH, rho_epoch, S_REAL),
    P(DPS_PARAM_DELTA_EPOCH, delta_epoch, S_REAL),
    P(DPS_PARAM_ALPHA, alpha, S_REAL),
    P(DPS_PARAM_TAU, tau, S_REAL),
    P(DPS_PARAM_SPLIT_SEARCH, split_search, S_REAL),
    P(DPS_PARAM_SPLIT_COUNT, split_count, S_REAL),
    P(DPS_PARAM_SPLIT_MEAN, split_mean, S_REAL),
    P(DPS_PARAM_XI_MIN, xi_min, S_REAL),
    P(DPS_PARAM_HIST_WIDTH, hist_width, S_REAL),
    P(DPS_PARAM_GROUPS, groups, S_SIZE),
    P(DPS_PARAM_POWER_BLOCKS, power_blocks, S_SIZE),
    P(DPS_PARAM_POWER_OVERSAMPLE, power_oversample, S_SIZE),
    P(DPS_PARAM_DENSE_MAX_D, dense_max_d, S_SIZE),
    PN(DPS_PARAM_CAP_RHO, "cap_rho", cap.rho_cap, S_REAL),
    PN(DPS_PARAM_CAP_EPS, "cap_eps", cap.eps_cap, S_REAL),
    PN(DPS_PARAM_DELTA_TARGET, "delta_target", cap.delta_target, S_REAL),
    P(DPS_PARAM_PUBLIC_SEED, public_seed, S_U64),
    P(DPS_PARAM_SEEDED, seeded, S_INT),
    P(DPS_PARAM_SEED, seed, S_U64),
    P(DPS_PARAM_WORKERS, workers, S_INT),
    P(DPS_PARAM_FIRST_EPOCH, first_epoch, S_U64),
    PN(DPS_PARAM_SPENT_RHO, "spent_rho", spent_before.rho, S_REAL),
    PN(DPS_PARAM_SPENT_DELTA, "spent_delta", spent_before.delta, S_REAL),
};
#undef P
#undef PN

static const s_param *s_get(dps_param p)
{
    return (unsigned)p < DPS_PARAM_COUNT ? &s_params[p] : NULL;
}

int dps_config_new(dps_config **out, size_t d, size_t k)
{
    if (!out)
        return DPS_EINVAL;
    *out = malloc(sizeof **out);
    if (!*out)
        return DPS_ENOMEM;
    dps_config_init(*out, d, k);
    return DPS_OK;
}

void dps_config_destroy(dps_config **cfg)
{
    if (!cfg)
        return;
    free(*cfg);
    *cfg = NULL;
}

const char *dps_param_name(dps_param p)
{
    const s_param *sp = s_get(p);
    return sp ? sp->name : NULL;
}

int dps_param_from_name(const char *name, dps_param *out)
{
    for (int p = 0; name && out && p < DPS_PARAM_COUNT; p++)
        if (strcmp(name, s_params[p].name) == 0) {
            *out = (dps_param)p;
            return DPS_OK;
        }
    return DPS_EINVAL;
}

int dps_param_is_real(dps_param p)
{
    const s_param *sp = s_get(p);
    return sp && sp->kind == S_REAL;
}

int dps_config_set_int(dps_config *cfg, dps_param p, uint64_t v)
{
    const s_param *sp = s_get(p);
    if (!cfg || !sp || sp->kind == S_REAL)
        return DPS_EINVAL;
    char *at = (char *)cfg + sp->offset;
    switch (sp->kind) {
    case S_SIZE:
        if (v > SIZE_MAX)
            return DPS_EINVAL;
        *(size_t *)(void *)at = (size_t)v;
        return DPS_OK;
    case S_INT:
    case S_AGG:
        if (v > INT_MAX)
            return DPS_EINVAL;
        if (sp->kind == S_AGG)
            *(dps_aggregator *)(void *)at = (dps_aggregator)v;
        else
            *(int *)(void *)at = (int)v;
        return DPS_OK;
    default:
        *(uint64_t *)(void *)at = v;
        return DPS_OK;
    }
}

int dps_config_set_real(dps_config *cfg, dps_param p, double v)
{
    const s_param *sp = s_get(p);
    if (!cfg || !sp || sp->kind != S_REAL)
        return DPS_EINVAL;
    *(double *)(void *)((char *)cfg + sp->offset) = v;
    return DPS_OK;
}

int dps_config_get_int(const dps_config *cfg, dps_param p, uint64_t *v)
{
    const s_param *sp = s_get(p);
    if (!cfg || !v || !sp || sp->kind == S_REAL)
        return DPS_EINVAL;
    const char *at = (const char *)cfg + sp->offset;
    switch (sp->kind) {
    case S_SIZE:
        *v = *(const size_t *)(const void *)at;
        return DPS_OK;
    case S_INT:
        *v = (uint64_t)*(const int *)(const void *)at;
        return DPS_OK;
    case S_AGG:
        *v = (uint64_t)*(const dps_aggregator *)(const void *)at;
        return DPS_OK;
    default:
        *v = *(const uint64_t *)(const void *)at;
        return DPS_OK;
    }
}

int dps_config_get_real(const dps_config *cfg, dps_param p, double *v)
{
    const s_param *sp = s_get(p);
    if (!cfg || !v || !sp || sp->kind != S_REAL)
        return DPS_EINVAL;
    *v = *(const double *)(const void *)((const char *)cfg + sp->offset);
    return DPS_OK;
}

uint64_t dps_config_int(const dps_config *cfg, dps_param p)
{
    uint64_t v = 0;
    return dps_config_get_int(cfg, p, &v) == DPS_OK ? v : 0;
}

double dps_config_real(const dps_config *cfg, dps_param p)
{
    double v = 0;
    return dps_config_get_real(cfg, p, &v) == DPS_OK ? v : 0;
}

int dps_config_set_group(dps_config *cfg, size_t g, size_t d_g, size_t k_g, size_t rows_g)
{
    if (!cfg || g >= DPS_MAX_GROUPS)
        return DPS_EINVAL;
    cfg->group_d[g] = d_g;
    cfg->group_k[g] = k_g;
    cfg->group_rows[g] = rows_g;
    return DPS_OK;
}

int dps_config_get_group(const dps_config *cfg, size_t g, size_t *d_g, size_t *k_g, size_t *rows_g)
{
    if (!cfg || g >= DPS_MAX_GROUPS)
        return DPS_EINVAL;
    if (d_g)
        *d_g = cfg->group_d[g];
    if (k_g)
        *k_g = cfg->group_k[g];
    if (rows_g)
        *rows_g = cfg->group_rows[g];
    return DPS_OK;
}

int dps_config_set_commit(dps_config *cfg, dps_commit_fn commit, void *arg)
{
    if (!cfg)
        return DPS_EINVAL;
    cfg->commit = commit;
    cfg->commit_arg = arg;
    return DPS_OK;
}

int dps_param_applies(dps_param p, dps_aggregator a)
{
    const epoch_mechanism *m = epoch_mechanism_for(a);
    if (!m || !s_get(p))
        return 0;
    switch (p) {
    case DPS_PARAM_Q:
        return (m->uses & EPOCH_USES_Q) != 0;
    case DPS_PARAM_HIST_WIDTH:
        return (m->uses & EPOCH_USES_HIST_WIDTH) != 0;
    case DPS_PARAM_GROUPS:
        return (m->uses & EPOCH_USES_GROUPS) != 0;
    case DPS_PARAM_POWER_BLOCKS:
    case DPS_PARAM_POWER_OVERSAMPLE:
        return (m->uses & EPOCH_USES_POWER) != 0;
    case DPS_PARAM_DENSE_MAX_D:
        return (m->uses & EPOCH_USES_DENSE) != 0;
    default:
        return 1;
    }
}
