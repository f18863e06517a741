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
   of the line.

   Damage and tears: only a last line without its newline is a tear (an
   append that never completed: see ledger.c for why cutting it is safe); it
   is cut off with a warning, or kept when its check holds.  A complete line
   whose check or fields fail, the last one included, stops the collector at
   open with the line's number: its epoch may have been released, and
   dropping it would forget budget already spent.
   Write failures: an append that fails (disk full, EIO) removes its partial
   line, or, if that fails too, leaves it without its newline (a tear); and
   the ledger then takes no more lines (halted), so nothing is ever written
   after a partial line.  The caller stops the collector. */
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
    uint64_t end;        /* the byte after the last complete line: where the next one goes */
    int torn_cut;        /* 1 if a torn last line was cut off at open */
    int halted;          /* a write failed: every append fails at once (DPS_EIO), writing nothing */
    char why[4096 + 1024]; /* what failed and what was left on disk, for the log ("" if nothing) */
} ledger;

/* Open (create) STATE/ledger and read it back.  On error err says why:
   the file and the line number, and what to do. */
int ledger_open(ledger *l, const char *state_dir, char *err, size_t errlen);
/* Append one entry and fsync it.  total is kept in l for commits.  On
   failure (DPS_EIO) nothing of the line is counted, l->why says what
   happened, and the ledger is halted; DPS_EINVAL for a line too long
   (nothing written, not halted). */
int ledger_append(ledger *l, const char *kind, uint64_t epoch, dps_zcdp cost, const char *extra);
/* Halt the ledger after another write of the state directory failed (the
   snapshot store): it takes no more lines.  why is kept for the log. */
void ledger_halt(ledger *l, const char *why);
/* The kind (dps_charge_kind) a resumed accountant may take the ledger's
   total as: DPS_CHARGE_GAUSSIAN only when nothing was committed, else
   DPS_CHARGE_ZCDP (its eps by the CKS conversion, valid for any mix).  A
   commit line records rho and delta only, not the mechanism: a delta > 0
   rules out a Gaussian release, but delta 0 is the gaussian, the power AND
   the covariance aggregator (pure eps-DP, not a Gaussian mechanism), and a
   state directory may have been run with any of them, so no line proves its
   release Gaussian.  A collector that resumes a non-empty ledger of
   gaussian or power epochs states the CKS eps from then on (rho 1, delta
   1e-5: 7.08 where the same run before the restart stated 6.57). */
dps_charge_kind ledger_kind(const ledger *l);
/* 1 if a commit line exists for epoch (reads the file again). */
int ledger_has_commit(const ledger *l, uint64_t epoch);
void ledger_close(ledger *l);

#endif
