/* epoch_power.h - the public arithmetic of the noisy power iteration epoch
   mechanism (epoch_power.c), exposed for its tests and the programs' plans. */
#ifndef DPS_EPOCH_POWER_H
#define DPS_EPOCH_POWER_H

#include "dpsubspace.h"

#include <stdint.h>

#define POWER_MAX_BLOCKS 1024 /* power_blocks above it is refused */

/* The noise sd of one step at rho: 1 / sqrt(rho) (sensitivity sqrt 2, the
   argument in epoch_power.c). */
double power_noise_sd(double rho);
/* The first row index of block i of an epoch of n rows in `blocks` blocks:
   floor(i n / blocks) (i <= blocks). */
uint64_t power_block_start(uint64_t n, uint64_t blocks, uint64_t i);
/* b = min(k + power_oversample, d): the columns iterated. */
size_t power_columns(const dps_config *c);

#endif
