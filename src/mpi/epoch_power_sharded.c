/* epoch_power_sharded.c - one power-mechanism epoch on sharded rows (see
   epoch_power_sharded.h for the guarantee and epoch_power.c for its
   argument). */
#include "epoch_power_sharded.h"
#include "epoch_power.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int epoch_power_sharded(power_sharded *p, const sharded_epoch *e, sharded_next_row next, void *ctx,
                        float *basis_slice, double *sv)
{
    uint64_t blocks = e->blocks ? e->blocks : (e->warm_slice ? 1 : 3);
    if (blocks > e->n)
        blocks = e->n;
    int rc = e->n && blocks <= POWER_MAX_BLOCKS && e->rho > 0 && isfinite(e->rho) ? DPS_OK : DPS_EINVAL;
    float *slice = rc ? NULL : malloc(DPS_MAX((size_t)1, p->w) * sizeof *slice);
    if (!rc && !slice)
        rc = DPS_ENOMEM;
    rc = power_sharded_agree(p, rc);
    if (!rc)
        rc = power_sharded_start(p, e->warm_slice, e->public_seed, e->epoch);
    double s = power_noise_sd(e->rho);
    for (uint64_t i = 0; i < blocks && !rc; i++) {
        uint64_t first = power_block_start(e->n, blocks, i), end = power_block_start(e->n, blocks, i + 1);
        for (uint64_t r = first; r < end; r++) {
            /* a reader's error: this rank adds zero slices to the block's end (the
               flushes are collective), then every rank stops, before the step */
            if (!rc)
                rc = next(ctx, slice);
            if (rc)
                memset(slice, 0, p->w * sizeof *slice);
            power_sharded_add(p, slice);
        }
        rc = power_sharded_agree(p, rc);
        if (!rc)
            rc = power_sharded_step(p, s);
    }
    if (!rc)
        rc = power_sharded_basis(p, basis_slice, sv);
    free(slice);
    return rc;
}
