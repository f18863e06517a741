/* snapshot.c - the released object: a k x d basis plus what it cost. */
#include "snapshot.h"
#include "internal.h"

#include <string.h>

const char *dps_status_name(dps_status s)
{
    switch (s) {
    case DPS_SNAP_RELEASED: return "released";
    case DPS_SNAP_FAILED: return "failed";
    case DPS_SNAP_REFUSED: return "refused";
    }
    return "unknown";
}

int dps_snapshot_weak(const dps_snapshot_info *in)
{
    if (in->status != DPS_SNAP_RELEASED)
        return 0;
    if (in->noise_level > 0)
        return in->noise_level >= DPS_NOISE_LEVEL_WEAK;
    return in->radius_unrelated > 0 && in->radius >= 0.5 * in->radius_unrelated; /* no level: older snapshot */
}

int dps_snapshot_new(dps_snapshot **out, const dps_snapshot_info *info, const float *basis)
{
    if (!out || !info)
        return DPS_EINVAL;
    *out = NULL;
    if (info->status == DPS_SNAP_RELEASED && (!basis || info->k == 0 || info->d == 0))
        return DPS_EINVAL;
    dps_snapshot *s = calloc(1, sizeof *s);
    if (!s)
        return DPS_ENOMEM;
    s->info = *info;
    snprintf(s->reason, sizeof s->reason, "%s", info->reason ? info->reason : "");
    s->info.reason = s->reason;
    static const char *const units[] = {"rho", "eps", "none"};
    s->info.budget_unit = "";
    for (size_t i = 0; i < sizeof units / sizeof *units && info->budget_unit; i++)
        if (strcmp(info->budget_unit, units[i]) == 0)
            s->info.budget_unit = units[i];
    if (info->status == DPS_SNAP_RELEASED) {
        s->basis = malloc(info->k * info->d * sizeof *s->basis);
        if (!s->basis) {
            free(s);
            return DPS_ENOMEM;
        }
        memcpy(s->basis, basis, info->k * info->d * sizeof *s->basis);
    }
    *out = s;
    return DPS_OK;
}

dps_snapshot *snapshot_reserve(void) { return calloc(1, sizeof(dps_snapshot)); }

void snapshot_fill(dps_snapshot *s, const dps_snapshot_info *info, float *basis)
{
    s->info = *info;
    snprintf(s->reason, sizeof s->reason, "%s", info->reason ? info->reason : "");
    s->info.reason = s->reason;
    if (info->status == DPS_SNAP_RELEASED && basis) {
        s->basis = basis;
    } else {
        s->info.status = info->status == DPS_SNAP_RELEASED ? DPS_SNAP_FAILED : info->status; /* no basis: none */
        free(basis);
    }
}

void dps_snapshot_destroy(dps_snapshot **s)
{
    if (!s || !*s)
        return;
    free((*s)->basis);
    free(*s);
    *s = NULL;
}

void dps_snapshot_get_info(const dps_snapshot *s, dps_snapshot_info *out) { *out = s->info; }

const float *dps_snapshot_basis(const dps_snapshot *s)
{
    return s->info.status == DPS_SNAP_RELEASED ? s->basis : NULL;
}
