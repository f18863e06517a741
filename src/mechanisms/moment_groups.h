/* moment_groups.h - the row-intake mechanisms on the second moment, group
   by group (DESIGN 7.1-7.3): the machinery the Gaussian covariance
   (epoch_gaussian.c) and the noisy power iteration (epoch_power.c) table
   entries share.  Each parameter group (one, the whole row, without groups)
   releases its basis either densely (C_g + E_g, top-k_g eigenvectors) or by
   the noisy power iteration (O(b_g d_g)), chosen from its width; the
   privacy argument of a release that mixes them is in moment_groups.c.
   Who owns what: the state (struct epoch_state, defined in moment_groups.c)
   owns every buffer; the configuration is the stream's. */
#ifndef DPS_MOMENT_GROUPS_H
#define DPS_MOMENT_GROUPS_H

#include "epoch_mechanism.h"
#include "kron_moment.h"
#include "power_iteration.h"

/* How group g releases: nothing (k_g = 0), dense, power iteration, or by
   its Kronecker factors (kron_moment.h).  The gaussian and kron aggregators
   run an unshaped group densely up to dense_max_d columns (DPS_DENSE_MAX_D
   when 0), the power aggregator never; the kron aggregator runs a shaped
   group (group_rows) by its factors. */
typedef enum { GROUP_NONE, GROUP_DENSE, GROUP_POWER, GROUP_KRON } group_kind;
group_kind moment_group_kind(const dps_config *c, size_t g);
/* The noise sd of every entry of the release, dense, power or kron: with a
   kron group sqrt(2/rho) (the moves add up in squares to at most 4), else
   1/sqrt(rho) (at most 2); the argument is in moment_groups.c. */
double moment_noise_sd(const dps_config *c);

/* For tests: group g's power iteration (its last step's noisy singular
   values), NULL unless group g is power; its Kronecker factors (the noisy
   matrices, eigenpairs and pairs of the last release), NULL unless kron. */
const power_iteration *moment_group_power(const epoch_state *st, size_t g);
const kron_moment *moment_group_kron(const epoch_state *st, size_t g);

/* The hooks of both table entries (epoch_mechanism.h). */
int moment_check(const dps_config *c, const char **why);
size_t moment_memory(const dps_config *c);
int moment_create(epoch_state **out, const dps_config *c, dps_pool *pool);
void moment_destroy(epoch_state **st);
int moment_begin(epoch_state *st, uint64_t epoch, dps_rng *noise);
void moment_take_row(epoch_state *st, const float *row);
float *moment_row_slot(epoch_state *st);
int moment_release(epoch_state *st, const epoch_input *in, float *basis, epoch_outcome *out);
const char *moment_group_method(const dps_config *c, size_t g);
double moment_noise_floor(const dps_config *c, size_t g);
/* 1 when a group is a power iteration (its warm start carries over epochs). */
int moment_warm(const dps_config *c);
int moment_end_block(epoch_state *st);
uint64_t moment_blocks(const dps_config *c, const epoch_state *st);

/* Every hook of a table entry built on this module (all but id, name and
   uses; epoch_rows_* are second_moment.h's). */
#define MOMENT_GROUP_HOOKS                                                                                    \
    .intake = EPOCH_ROWS, .check = moment_check,                                                              \
    .min_buckets = epoch_rows_min_buckets, .memory = moment_memory, .cost = epoch_rows_cost,                  \
    .kind = DPS_CHARGE_GAUSSIAN, /* moment_groups.c's argument: sum_g ||D_gg||_F^2 / s^2 <= 2 rho */          \
    .radius_unrelated = epoch_rows_radius_unrelated, .group_method = moment_group_method,                     \
    .noise_floor = moment_noise_floor, .warm = moment_warm, .create = moment_create,                          \
    .destroy = moment_destroy, .begin = moment_begin, .take_row = moment_take_row,                            \
    .row_slot = moment_row_slot, .release = moment_release,                                                   \
    .end_block = moment_end_block, .blocks = moment_blocks

#endif
