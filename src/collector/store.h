/* store.h - snapshots kept as files in STATE/snapshots/epoch-<20 digits>.snap
   (protocol Snapshot messages), written atomically: temp file, fsync,
   rename, fsync of the directory. */
#ifndef DPS_STORE_H
#define DPS_STORE_H

#include "dpsubspace.h"
#include <stddef.h>
#include <stdint.h>

/* fsync a directory, so that a file created or renamed in it survives a
   crash; 0 or -1. */
int store_fsync_dir(const char *dir);
/* Create STATE/snapshots if needed. */
int store_init(const char *state_dir, char *err, size_t errlen);
/* Write the encoded snapshot of epoch atomically. */
int store_put(const char *state_dir, uint64_t epoch, const unsigned char *buf, size_t len);
/* Retention: delete the stored snapshots beyond the newest keep_n (0: no
   limit) and those whose file is older than keep_days (0: no limit) at
   now_unix; the newest is never deleted.  Returns how many were deleted
   (-1 if the directory cannot be read).  The ledger is not touched. */
long store_prune(const char *state_dir, uint64_t keep_n, double keep_days, double now_unix);
/* The row dimension d a state directory was made for, checked before a
   collector uses it: from STATE/shape ("dps-state-v1 d=<d>"), or, in a state
   directory made before that file existed, from its latest stored snapshot
   (latest, NULL if none).  DPS_EINVAL if it is not d (err names both and
   what to do); with no record at all the file is written (atomically) with
   d, so that an older state directory opens and is checked from then on.
   DPS_EIO if the file cannot be read, parsed or written (err says which). */
int store_check_shape(const char *state_dir, uint64_t d, const dps_snapshot *latest, char *err, size_t errlen);
/* The snapshot with the largest epoch (NULL if none) and the largest seq and
   epoch over all files.  bad counts files that do not decode. */
int store_latest(const char *state_dir, dps_snapshot **latest, uint64_t *max_seq, uint64_t *max_epoch,
                 size_t *count, size_t *bad);

#endif
