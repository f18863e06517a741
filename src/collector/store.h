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
/* The snapshot with the largest epoch (NULL if none) and the largest seq and
   epoch over all files.  bad counts files that do not decode. */
int store_latest(const char *state_dir, dps_snapshot **latest, uint64_t *max_seq, uint64_t *max_epoch,
                 size_t *count, size_t *bad);

#endif
