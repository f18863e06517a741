/* epoch_close.c - the end of a release, in its privacy order: the decision
   (too little input, the cap, the memory, the durable commit, the charge),
   the outcome after the charge, and the totals.  Every path that spends
   budget ends through it (include/dpsubspace.h, "The end of a release"):
   the streaming estimator (estimator.c), the sharded collector
   (src/mpi/collector_sharded.c), dps-estimate's central methods and the
   Python package's.

   Who owns what: borrows the accountant and info; the strings it puts in
   info are the caller's (too_little, hooks->refused, buf) or static. */
#include "dpsubspace.h"

#include <stdio.h>

static const char s_refused[] = "releasing this epoch would pass the privacy budget cap: nothing was spent";
static const char s_invalid[] = "the release's cost is not a valid (rho, delta) of its kind: nothing was spent";
static const char s_failed[] = "the mechanism said FAIL: budget spent";

dps_release_decision dps_release_decide(dps_accountant *acc, dps_zcdp cost, dps_charge_kind kind,
                                        const char *too_little, const dps_release_hooks *hooks,
                                        dps_snapshot_info *info)
{
    if (!acc || !info)
        return DPS_RELEASE_NOT_RUN;
    info->epoch_cost = (dps_zcdp){0, 0};
    /* A cost the accountant would refuse to charge is refused before any
       hook: the charge below must not fail once the commit has recorded it. */
    if (!dps_charge_valid(cost, kind)) {
        info->status = DPS_SNAP_FAILED;
        info->reason = s_invalid;
        return DPS_RELEASE_NOT_RUN;
    }
    if (too_little) {
        info->status = DPS_SNAP_FAILED;
        info->reason = too_little;
        return DPS_RELEASE_NOT_RUN;
    }
    if (!dps_accountant_fits_kind(acc, cost, kind)) {
        info->status = DPS_SNAP_REFUSED;
        info->reason = hooks && hooks->refused ? hooks->refused : s_refused;
        return DPS_RELEASE_NOT_RUN;
    }
    if (hooks && hooks->reserve && hooks->reserve(hooks->arg) != 0)
        return DPS_RELEASE_NO_MEMORY;
    dps_zcdp before = dps_accountant_spent(acc);
    dps_zcdp after = {before.rho + cost.rho, before.delta + cost.delta};
    if (hooks && hooks->commit && hooks->commit(hooks->arg, info->epoch, cost, after) != 0)
        return DPS_RELEASE_UNCOMMITTED;
    /* From here on the charge is on disk: it is kept whatever the mechanism
       does.  It cannot fail (a valid cost that fits, under the caller's lock);
       were it to, nothing runs: the ledger then holds more than was spent,
       never less. */
    if (dps_accountant_charge_kind(acc, cost, kind) != DPS_OK)
        return DPS_RELEASE_UNCOMMITTED;
    info->epoch_cost = cost;
    return DPS_RELEASE_RUN;
}

void dps_release_outcome(dps_snapshot_info *info, int rc, int failed, const char *fail_reason, const char *who,
                         char *buf, size_t len)
{
    if (rc) {
        snprintf(buf, len,
                 "%s stopped on an internal error after the budget was charged (%s): published as FAILED; budget "
                 "spent", who, dps_strerror(rc));
        info->status = DPS_SNAP_FAILED;
        info->reason = buf;
    } else if (failed) {
        info->status = DPS_SNAP_FAILED;
        info->reason = fail_reason ? fail_reason : s_failed;
    } else {
        info->status = DPS_SNAP_RELEASED;
        info->reason = "";
    }
}

void dps_release_totals(const dps_accountant *acc, const dps_budget *cap, dps_snapshot_info *info)
{
    info->delta_target = cap && cap->delta_target > 0 ? cap->delta_target : DPS_DELTA_TARGET_DEFAULT;
    info->total = dps_accountant_spent(acc);
    info->eps_total = dps_accountant_eps(acc, info->delta_target);
    info->budget_left = dps_accountant_left(acc);
    info->budget_unit = dps_budget_unit(cap);
}
