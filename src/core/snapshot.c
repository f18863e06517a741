/* snapshot.c - the released object: a k x d basis plus what it cost. */
#include "snapshot.h"
#include "internal.h"

#include <math.h>
#include <string.h>

const char *dps_snapshot_status_name(dps_snapshot_status s)
{
    switch (s) {
    case DPS_SNAP_RELEASED: return "released";
    case DPS_SNAP_FAILED: return "failed";
    case DPS_SNAP_REFUSED: return "refused";
    }
    return "unknown";
}

/* The former name (0.1), for callers built against it. */
const char *dps_status_name(dps_snapshot_status s) { return dps_snapshot_status_name(s); }

int dps_snapshot_weak(const dps_snapshot_info *in)
{
    if (in->status != DPS_SNAP_RELEASED)
        return 0;
    if (in->noise_level > 0)
        return in->noise_level >= DPS_NOISE_LEVEL_WEAK;
    return in->radius_unrelated > 0 && in->radius >= 0.5 * in->radius_unrelated; /* no level: older snapshot */
}

/* A group layout that tiles the row and the basis: 0 groups, or 1..MAX
   groups with widths >= 1 summing to d and ranks <= widths summing to k. */
static int s_groups_ok(const dps_snapshot_info *in)
{
    if (in->groups == 0)
        return 1;
    if (in->groups > DPS_MAX_GROUPS || !in->group_d || !in->group_k)
        return 0;
    size_t d = 0, k = 0;
    for (size_t g = 0; g < in->groups; g++) {
        if (in->group_d[g] < 1 || in->group_k[g] > in->group_d[g] || in->group_d[g] > in->d)
            return 0;
        d += in->group_d[g];
        k += in->group_k[g];
    }
    return d == in->d && k == in->k;
}

/* Copy info into s, the strings and group arrays into s's own storage. */
static void s_take_info(dps_snapshot *s, const dps_snapshot_info *info)
{
    s->info = *info;
    snprintf(s->reason, sizeof s->reason, "%s", info->reason ? info->reason : "");
    s->info.reason = s->reason;
    s->info.group_d = s->info.group_k = NULL;
    if (info->groups) {
        memcpy(s->group_d, info->group_d, info->groups * sizeof *s->group_d);
        memcpy(s->group_k, info->group_k, info->groups * sizeof *s->group_k);
        s->info.group_d = s->group_d;
        s->info.group_k = s->group_k;
    }
}

int dps_snapshot_group(const dps_snapshot_info *in, size_t g, size_t *col0, size_t *d_g, size_t *row0, size_t *k_g)
{
    size_t n = in->groups ? in->groups : 1;
    if (g >= n)
        return DPS_EINVAL;
    size_t c = 0, r = 0;
    for (size_t i = 0; i < g; i++) {
        c += in->group_d[i];
        r += in->group_k[i];
    }
    if (col0)
        *col0 = c;
    if (row0)
        *row0 = r;
    if (d_g)
        *d_g = in->groups ? in->group_d[g] : in->d;
    if (k_g)
        *k_g = in->groups ? in->group_k[g] : in->k;
    return DPS_OK;
}

int dps_snapshot_new(dps_snapshot **out, const dps_snapshot_info *info, const float *basis)
{
    if (!out || !info)
        return DPS_EINVAL;
    *out = NULL;
    if (info->status == DPS_SNAP_RELEASED && (!basis || info->k == 0 || info->d == 0))
        return DPS_EINVAL;
    if (!s_groups_ok(info))
        return DPS_EINVAL;
    dps_snapshot *s = calloc(1, sizeof *s);
    if (!s)
        return DPS_ENOMEM;
    s_take_info(s, info);
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
    s_take_info(s, info);
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

uint64_t dps_snapshot_power_steps(const dps_snapshot *s)
{
    return s->info.status == DPS_SNAP_RELEASED ? s->power_steps : 0;
}

double dps_snapshot_group_noise_level(const dps_snapshot *s, size_t g)
{
    size_t n = s->info.groups ? s->info.groups : 1;
    if (s->info.status != DPS_SNAP_RELEASED || g >= n)
        return NAN;
    if (g < s->levels)
        return s->group_level[g];
    return n == 1 && s->info.noise_level > 0 ? s->info.noise_level : NAN;
}

int dps_snapshot_group_weak(const dps_snapshot *s, size_t g)
{
    size_t n = s->info.groups ? s->info.groups : 1;
    if (n == 1)
        return g == 0 && dps_snapshot_weak(&s->info);
    return dps_snapshot_group_noise_level(s, g) >= DPS_NOISE_LEVEL_WEAK; /* NAN: 0 */
}
