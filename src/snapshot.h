/* snapshot.h - the snapshot's layout, shared by the estimator that fills it. */
#ifndef DPS_SNAPSHOT_H
#define DPS_SNAPSHOT_H

#include "dpsubspace.h"
#include <stdio.h>

struct dps_snapshot {
    dps_snapshot_info info;
    char reason[160];
    float *basis; /* k x d when released, else NULL */
};

#endif
