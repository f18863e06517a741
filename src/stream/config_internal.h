/* config_internal.h - the streaming estimator's configuration as the library
   holds it: the fields behind the public handle dps_config (include/
   dpsubspace.h: its parameters are set and read by name, dps_param; each
   field is documented there, at dps_config, under its name).  Not
   installed: the library's modules, and the project's own programs and
   tests, read the fields; a caller outside the project uses the setters, so
   that a new field changes no ABI.

   Who owns what: a dps_config is its creator's (dps_config_new's caller, or
   a struct on the stack of the project's own code); it holds nothing it
   owns (the commit hook's arg is the caller's). */
#ifndef DPS_CONFIG_INTERNAL_H
#define DPS_CONFIG_INTERNAL_H

#include "dpsubspace.h"

struct dps_config {
    size_t d;
    size_t k;
    size_t t;
    size_t m;
    size_t window;
    size_t q;
    dps_aggregator aggregator;
    double rho_epoch;
    double delta_epoch;
    double alpha;
    double tau;
    double split_search, split_count, split_mean;
    double xi_min;
    double hist_width;
    size_t groups;
    size_t group_d[DPS_MAX_GROUPS];
    size_t group_k[DPS_MAX_GROUPS];
    size_t power_blocks;
    size_t power_oversample;
    size_t dense_max_d;
    dps_budget cap;
    uint64_t public_seed;
    int seeded;
    uint64_t seed;
    int workers;
    uint64_t first_epoch;
    dps_zcdp spent_before;
    dps_commit_fn commit;
    void *commit_arg;
    size_t group_rows[DPS_MAX_GROUPS];
};

#endif
