/* publish.h - the state of dps-collector's publication (publish.c): the
   publish socket, the snapshots sent on it and the latest one (a new
   subscriber's welcome).

   Who owns what: the collector holds one publish_state; the loop writes it
   (publish.c, and reload.c when the socket is bound again); latest is owned
   here (destroyed when replaced and at teardown), the socket by the
   collector's context. */
#ifndef DPS_COLLECTOR_PUBLISH_H
#define DPS_COLLECTOR_PUBLISH_H

#include "dpsubspace.h"

#include <stdint.h>

typedef struct {
    void *xpub;            /* the publish socket (XPUB: it sees subscriptions) */
    uint64_t published;    /* snapshots sent */
    uint64_t last_seq;     /* the last snapshot's number (the ledger's on a restart) */
    dps_snapshot *latest;  /* the last one sent, sent again to each new subscriber */
    int warned_delta;      /* the warning that the deltas near --delta-target was logged */
    uint64_t sub_removals; /* zap_removals("publish") when the publish socket was last bound */
} publish_state;

#endif
