/* ingest.h - the state of dps-collector's ingest (ingest.c): the PULL
   socket and its monitor, the producers and their credit, the memory bound
   the sockets are sized by, and the connections as it watches them come
   and go.

   Who owns what: the collector holds one ingest_state; ingest.c writes it
   on the loop's thread (the status reply and the connection callbacks read
   it there too); conn_state is ingest.c's allocation, the producer table
   and the credit pool their modules', all freed at teardown; the socket
   belongs to the collector's context. */
#ifndef DPS_COLLECTOR_INGEST_H
#define DPS_COLLECTOR_INGEST_H

#include "credit.h"
#include "options.h"
#include "producers.h"
#include "transport.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    void *pull;                   /* the PULL socket the batches arrive on */
    net_monitor pull_mon;         /* its connections (accepted, dropped) */
    producer_table producers;     /* the producer runs seen (producers.h) */
    credit_pool credit;           /* the producers' credit (credit.h): capacity from plan */
    uint64_t credit_swept_ms;     /* when silent producers' credit was last reclaimed */
    ingest_plan plan;             /* the ingest memory bound (options_ingest_plan) */
    int over_plan;                /* more producers connected than plan.producers */
    uint64_t connections_dropped; /* connections that ended with their producer still running */
    uint64_t connections_empty;   /* connections that ended without delivering a batch */
    uint64_t batches_cut_short;   /* batches whose rows could not all be pushed (no memory): the rest dropped */
    unsigned char *conn_state;    /* by fd: CONN_NONE, CONN_OPEN (accepted), CONN_DELIVERED */
    size_t conn_state_n;
    uint64_t watched_ms;          /* when the watch last counted */
    int watch_due;                /* a producer without credit came on a new connection */
} ingest_state;

#endif
