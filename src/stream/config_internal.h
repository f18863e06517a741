/* config_internal.h - the streaming estimator's configuration as the library
   holds it: the fields behind the public handle dps_config (include/
   dpsubspace.h: its parameters are set and read by name, dps_param).  Not
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
    size_t d;            /* row dimension                                   */
    size_t k;            /* subspace dimension, 1 <= k < d                  */
    size_t t;            /* buckets per epoch (default 125)                 */
    size_t m;            /* rows per bucket (default 2k), m >= k            */
    size_t window;       /* W: open buckets at once, W <= t; 0 (default): t,
                            whatever t is set to after dps_config_init     */
    size_t q;            /* reference points (default 10k)                  */
    dps_aggregator aggregator;
    double rho_epoch;    /* per-epoch zCDP rho (default 1)                  */
    double delta_epoch;  /* per-epoch delta (default 1e-8: deltas add up, and
                            1000 epochs then fit under delta_target 1e-5)    */
    double alpha;        /* WFC slope (default 1/2)                         */
    double tau;          /* radius search target fraction of t (default 1/2) */
    double split_search, split_count, split_mean; /* rho split (0.2, 0.1, 0.7) */
    double xi_min;       /* smallest radius on the grid (default 1e-6)      */
    double hist_width;   /* histogram aggregator: cell side l of the grid over
                            R^{q d} (0: default 0.25 sqrt(k/d), a fraction of
                            an item's per-coordinate scale).  The histogram
                            aggregator is (eps, delta)-DP with
                            eps = sqrt(2 rho_epoch), delta = delta_epoch, which
                            dps_zcdp_from_dp charges as (rho_epoch,
                            delta_epoch); its snapshot's radius is l and
                            radius_unrelated sqrt(2k/d) (the per-coordinate
                            distance of items of orthogonal subspaces), w_hat
                            the released cell's noisy count; q*d <= 2^23.  */
    size_t groups;       /* parameter groups (DESIGN 7.2; the gaussian, kron and
                            power aggregators only): 0 (default) or 1 = one group,
                            the whole row; G >= 2: the row is G public
                            groups (a model's parameter tensors), group g of
                            group_d[g] columns in row order, with its own
                            rank group_k[g]; sum group_d = d, sum group_k = k,
                            0 <= group_k[g] <= group_d[g].  One release
                            gives every group its own basis for the cost of
                            one (the argument: src/mechanisms/epoch_gaussian.c) */
    size_t group_d[DPS_MAX_GROUPS];
    size_t group_k[DPS_MAX_GROUPS];
    size_t power_blocks; /* power aggregator: T, disjoint blocks of the epoch's
                            t*m rows by index, one noisy power step each
                            (1..1024; min(T, t*m) blocks run); 0 (default):
                            3 while no epoch has been released (a cold
                            start needs steps), then 1 (a warm start is
                            best with every row in one step): public     */
    size_t power_oversample; /* power aggregator: p, the columns iterated
                            beyond k, b = min(k + p, d) (default 10)        */
    size_t dense_max_d;  /* gaussian aggregator: the widest group (or d) that
                            gets the dense d_g x d_g covariance; wider ones
                            get the noisy power iteration (power_blocks,
                            power_oversample) in O(k_g d_g) memory, and then
                            every group's noise is that of the power
                            aggregator (DESIGN 7.3).  0: DPS_DENSE_MAX_D;
                            at most 16384                                   */
    dps_budget cap;      /* cap over all epochs (default: none; eps shown at
                            cap.delta_target, default 1e-5)                  */
    uint64_t public_seed;/* seed of public randomness (default 0)           */
    int seeded;          /* 1: noise from a seeded generator (tests only)   */
    uint64_t seed;       /* its seed                                        */
    int workers;         /* worker threads (default: online CPUs, >= 1)     */
    uint64_t first_epoch;/* epoch number to start at (resume; default 0)    */
    dps_zcdp spent_before; /* budget already spent (resume; default 0)      */
    dps_commit_fn commit;  /* ledger hook (may be NULL)                     */
    void *commit_arg;
    size_t group_rows[DPS_MAX_GROUPS]; /* kron aggregator only (refused with
                            another): group g's shape, its block of the row
                            read as a group_rows[g] x (group_d[g] /
                            group_rows[g]) matrix in row-major order (as torch
                            flattens a Linear weight (out, in), or a Conv
                            weight (out, in, kh, kw) as out x in*kh*kw); it
                            must divide the group's width, and both sides be
                            at most dense_max_d.  0 (default): no shape (the
                            group is released as the gaussian aggregator
                            does).  Without groups (groups 0 or 1),
                            group_rows[0] is the whole row's shape        */
};

#endif
