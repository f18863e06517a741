/* ledger.h - the privacy ledger: an append-only file of what each epoch
   spent, written and fsync'ed before anything of that epoch is released.  A
   restart reads it back: budget spent and the next epoch number.

   File: STATE/ledger, one line per entry, the snapshots' names for the costs,
     dps-ledger-v2 kind=commit epoch=3 rho_epoch=1 delta_epoch=1e-06 rho_total=4 delta_total=4e-06 time_unix_ms=... check=<16 hex>
   (lines of a 0.1 collector, "dps-ledger-v1 ... rho= delta= total_rho=
   total_delta=", are read as well: a ledger keeps its old lines)
   kinds: "commit" (the epoch's mechanism is about to run: its cost is spent),
   "outcome" (what was released: status and sequence number, cost 0; it may
   come after the next epoch's commit: the writer thread, release.c; its
   totals are the ledger's when it was written, so then they include that
   commit),
   "refused" (the cap refused the epoch, cost 0).  check is BLAKE2b of the rest
   of the line.  A torn last line (crash mid-write, so the mechanism never ran)
   is cut off with a warning; any other damage stops the collector. */
#ifndef DPS_LEDGER_H
#define DPS_LEDGER_H

#include "dpsubspace.h"
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int fd;
    char path[4096];
    dps_zcdp total;      /* sum of commit costs */
    uint64_t next_epoch; /* 1 + the largest epoch named, 0 if none */
    uint64_t last_seq;   /* the largest seq of an outcome line */
    uint64_t lines;
    int torn_cut;        /* 1 if a torn last line was cut off at open */
} ledger;

/* Open (create) STATE/ledger and read it back.  On error err says why. */
int ledger_open(ledger *l, const char *state_dir, char *err, size_t errlen);
/* Append one entry and fsync it.  total is kept in l for commits. */
int ledger_append(ledger *l, const char *kind, uint64_t epoch, dps_zcdp cost, const char *extra);
/* 1 if a commit line exists for epoch (reads the file again). */
int ledger_has_commit(const ledger *l, uint64_t epoch);
void ledger_close(ledger *l);

#endif
