/* layout_probe.c - prints the size and every field's offset of the structs
   that python/dpsubspace/native.py mirrors with ctypes, as the compiler lays
   them out ("Struct.field offset" lines, "Struct sizeof size"), for
   python/tests/test_native.py to compare with its mirror. */
#include "dpsubspace.h"

#include <stddef.h>
#include <stdio.h>

#define F(S, T, f) printf("%s.%s %zu\n", S, #f, offsetof(T, f))
#define Z(S, T) printf("%s sizeof %zu\n", S, sizeof(T))

int main(void)
{
    Z("Zcdp", dps_zcdp); F("Zcdp", dps_zcdp, rho); F("Zcdp", dps_zcdp, delta);
    Z("Budget", dps_budget); F("Budget", dps_budget, rho_cap); F("Budget", dps_budget, eps_cap);
    F("Budget", dps_budget, delta_target);
    Z("Plan", dps_plan); F("Plan", dps_plan, rows); F("Plan", dps_plan, memory); F("Plan", dps_plan, cost);
    F("Plan", dps_plan, groups); F("Plan", dps_plan, method); F("Plan", dps_plan, floor);
    Z("SnapshotInfo", dps_snapshot_info);
    F("SnapshotInfo", dps_snapshot_info, epoch); F("SnapshotInfo", dps_snapshot_info, d);
    F("SnapshotInfo", dps_snapshot_info, k); F("SnapshotInfo", dps_snapshot_info, status);
    F("SnapshotInfo", dps_snapshot_info, aggregator); F("SnapshotInfo", dps_snapshot_info, rows_used);
    F("SnapshotInfo", dps_snapshot_info, buckets_used); F("SnapshotInfo", dps_snapshot_info, radius);
    F("SnapshotInfo", dps_snapshot_info, radius_unrelated); F("SnapshotInfo", dps_snapshot_info, w_hat);
    F("SnapshotInfo", dps_snapshot_info, epoch_cost); F("SnapshotInfo", dps_snapshot_info, total);
    F("SnapshotInfo", dps_snapshot_info, eps_total); F("SnapshotInfo", dps_snapshot_info, delta_target);
    F("SnapshotInfo", dps_snapshot_info, seeded); F("SnapshotInfo", dps_snapshot_info, public_seed);
    F("SnapshotInfo", dps_snapshot_info, reason); F("SnapshotInfo", dps_snapshot_info, seq);
    F("SnapshotInfo", dps_snapshot_info, time_unix_ms); F("SnapshotInfo", dps_snapshot_info, budget_left);
    F("SnapshotInfo", dps_snapshot_info, budget_unit); F("SnapshotInfo", dps_snapshot_info, groups);
    F("SnapshotInfo", dps_snapshot_info, group_d); F("SnapshotInfo", dps_snapshot_info, group_k);
    F("SnapshotInfo", dps_snapshot_info, noise_level);
    Z("Stats", dps_estimator_stats);
    F("Stats", dps_estimator_stats, epoch); F("Stats", dps_estimator_stats, rows_accepted); F("Stats", dps_estimator_stats, rows_nan);
    F("Stats", dps_estimator_stats, rows_inf); F("Stats", dps_estimator_stats, rows_zero); F("Stats", dps_estimator_stats, rows_discarded);
    F("Stats", dps_estimator_stats, batches_dim); F("Stats", dps_estimator_stats, batches_empty);
    F("Stats", dps_estimator_stats, buckets_completed); F("Stats", dps_estimator_stats, rows_in_epoch);
    F("Stats", dps_estimator_stats, buckets_done_epoch); F("Stats", dps_estimator_stats, epochs_closed);
    F("Stats", dps_estimator_stats, epochs_internal_error);
    Z("IterativeParams", dps_iterative_params);
    F("IterativeParams", dps_iterative_params, k); F("IterativeParams", dps_iterative_params, eps);
    F("IterativeParams", dps_iterative_params, eps_values); F("IterativeParams", dps_iterative_params, split);
    Z("ExactStats", dps_exact_stats);
    F("ExactStats", dps_exact_stats, candidates); F("ExactStats", dps_exact_stats, bound);
    F("ExactStats", dps_exact_stats, delta_sampling); F("ExactStats", dps_exact_stats, delta_total);
    F("ExactStats", dps_exact_stats, cost); F("ExactStats", dps_exact_stats, primes);
    F("ExactStats", dps_exact_stats, score); F("ExactStats", dps_exact_stats, members);
    F("ExactStats", dps_exact_stats, scored);
    return 0;
}
