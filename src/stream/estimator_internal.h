/* estimator_internal.h - a test hook into the estimator; not installed.
   The hook runs on a worker thread for every full bucket, before its basis is
   computed: rows is the bucket's m x d normalised rows (read-only). */
#ifndef DPS_ESTIMATOR_INTERNAL_H
#define DPS_ESTIMATOR_INTERNAL_H

#include "dpsubspace.h"

typedef void (*dps_bucket_hook)(void *arg, uint64_t epoch, size_t bucket, const float *rows, size_t m, size_t d);
void dps_estimator_set_bucket_hook(dps_estimator *est, dps_bucket_hook fn, void *arg);

/* Tests only, process-wide, read when a bucket pipe is made: 1 keeps the
   bases apart from the rows even when W = t (the W < t layout), so that a
   test can check that the in-place layout releases the same bits. */
void dps_buckets_force_separate_bases(int on);

/* Tests only: how many epoch states (slots) the estimator holds, 1 or 2. */
int dps_estimator_slots_made(const dps_estimator *est);

#endif
