/* status.h - the state of dps-collector's status endpoint
   (status_reply.c): its REP socket, when the collector started, and the
   refusals it reports that no other part counts (batches refused by the
   wire's checks, by the ingest; requests and batches from revoked keys, by
   the ingest and the status reply).

   Who owns what: the collector holds one status_state; the loop writes it;
   the socket belongs to the collector's context. */
#ifndef DPS_COLLECTOR_STATUS_H
#define DPS_COLLECTOR_STATUS_H

#include "wire.h"

#include <stdint.h>

typedef struct {
    void *rep;                             /* the status socket (REP) */
    uint64_t started_ms;                   /* when the loop started: the uptime's origin */
    uint64_t rejected[WIRE_REJECT_COUNT_]; /* batches refused, by wire_reject reason */
    uint64_t revoked;                      /* batches and status requests from keys no longer authorized */
} status_state;

#endif
