/* stalls.h - the longest stalls of dps-collector's loop, logged at its
   stop (tools/bench/bench-ingest reads that line): how long one batch held
   the loop, how long a release and its publication did, and how long the
   loop waited for a release (backpressure).

   Who owns what: the collector holds one collector_stalls; the loop writes
   it (ingest.c, release.c on the loop's side) and collector.c logs it. */
#ifndef DPS_COLLECTOR_STALLS_H
#define DPS_COLLECTOR_STALLS_H

#include <stdint.h>

typedef struct {
    double batch_ms;       /* one batch in the estimator (push, seal), less its backpressure */
    double warm_ms;        /* ... from the run's third epoch on (the first two touch their memory first) */
    uint64_t first_epoch;  /* the run's first epoch (a restart resumes the ledger's numbering) */
    double publish_ms;     /* one released epoch stored and published */
    double waited_ms;      /* backpressure: waiting for the last release, this batch (reset per batch) */
    double waited_max_ms, waited_total_ms; /* ... the longest wait and their sum over the run */
} collector_stalls;

#endif
