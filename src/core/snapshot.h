/* snapshot.h - the snapshot's layout, shared by the estimator that fills it. */
#ifndef DPS_SNAPSHOT_H
#define DPS_SNAPSHOT_H

#include "dpsubspace.h"
#include <stdio.h>

struct dps_snapshot {
    dps_snapshot_info info;
    char reason[160];
    float *basis; /* k x d when released, else NULL */
    size_t group_d[DPS_MAX_GROUPS], group_k[DPS_MAX_GROUPS]; /* info's groups */
    uint64_t power_steps; /* the release's noisy power steps (the estimator's) */
    size_t levels;        /* entries of group_level: the release's groups when
                             its mechanism gave a level per group (the
                             estimator's), else 0                            */
    double group_level[DPS_MAX_GROUPS];
};

/* The estimator's way to publish without allocating after a charge: it
   allocates an empty snapshot (snapshot_reserve) and the basis buffer before
   the commit hook, then snapshot_fill sets the outcome and takes `basis`
   (freed here unless the status is RELEASED, when the snapshot owns it).
   Neither can fail once reserved. */
dps_snapshot *snapshot_reserve(void);
void snapshot_fill(dps_snapshot *s, const dps_snapshot_info *info, float *basis);

#endif
