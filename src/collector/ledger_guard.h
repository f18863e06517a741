/* ledger_guard.h - the privacy ledger as the collector's threads share it:
   the release thread's commit hook (publish.c) appends the charge before a
   mechanism runs, the loop reads the totals (status, reload) and the writer
   appends the outcomes; one mutex orders them.

   Who owns what: the collector holds one ledger_guard; led is opened at
   start-up and closed at teardown (ledger.h); failed is the loop's. */
#ifndef DPS_COLLECTOR_LEDGER_GUARD_H
#define DPS_COLLECTOR_LEDGER_GUARD_H

#include "ledger.h"

#include <pthread.h>

typedef struct {
    ledger led;         /* the ledger file and its totals (ledger.h) */
    pthread_mutex_t mu; /* held by whoever reads or appends led */
    int failed;         /* the loop took a ledger failure (rel.halt): exit code 3 */
} ledger_guard;

#endif
