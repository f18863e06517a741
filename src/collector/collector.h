/* collector.h - dps-collector as parts, and how its modules share them.

   The daemon is one loop (collector.c: setup, the loop, teardown) that calls
   the modules in the order of the data: ingest.c takes batches (and bounds
   their memory) and seals full epochs, release.c releases them on its own
   thread while the loop ingests the next, publish.c holds the ledger hook
   and stores and publishes each snapshot, status_reply.c answers the status
   endpoint (counters and producers' credit), reload.c applies SIGHUP.  Each
   part's state is a type of its own, in its own header: ingest_state,
   release_handoff, publish_state, status_state, ledger_guard,
   collector_stalls; the collector is their composition with the options,
   the context, the authentication and the estimator they share.
   Who owns what: main() (collector.c) owns the collector and every part;
   the modules borrow it. */
#ifndef DPS_COLLECTOR_H
#define DPS_COLLECTOR_H

#include "dpsubspace.h"
#include "dpsubspace_net.h"
#include "ingest.h"
#include "ledger_guard.h"
#include "log.h"
#include "options.h"
#include "publish.h"
#include "release.h"
#include "stalls.h"
#include "status.h"
#include "store.h"
#include "wire.h"
#include "zap.h"

#include <signal.h>
#include <stdint.h>

typedef struct {
    collector_options o;       /* the options (options.h) */
    int argc;                  /* the command line, read again with the config file on SIGHUP */
    char **argv;
    void *ctx;                 /* the ZeroMQ context: every socket's */
    zap_handler *zap;          /* CURVE authentication of every socket (zap.h) */
    dps_estimator *est;        /* the loop pushes rows, the release thread closes epochs */
    uint64_t epoch_started_ms; /* when the open epoch took its first row */
    ingest_state ingest;       /* sockets, producers, credit, connections (ingest.h) */
    release_handoff rel;       /* the release and writer threads' hand-over (release.h) */
    publish_state pub;         /* the publish socket and what it has sent (publish.h) */
    status_state status;       /* the status socket and the refusals it reports (status.h) */
    ledger_guard ledger;       /* the ledger and its lock (ledger_guard.h) */
    collector_stalls stall;    /* the loop's longest stalls (stalls.h) */
} collector;

/* Set by SIGINT/SIGTERM, or to stop after an unrecoverable ledger error. */
extern volatile sig_atomic_t collector_stop;
/* Test-only fault injection: DPS_FAULT=<point> kills the process there. */
void collector_fault(const char *point);
/* Test-only: 1 (and a warning) when DPS_FAULT=<point>: the caller fails there. */
int collector_fault_here(const char *point);
/* Test-only: DPS_FAULT=<point> holds the calling thread there for ms. */
void collector_hold(const char *point, unsigned ms);

/* publish.c: the ledger hook given to the estimator (the charge on disk
   before the mechanism runs; on the release thread), and a released epoch's
   snapshot numbered and encoded (the release thread), stored with its
   outcome line (the writer), published and logged (the loop). */
int collector_commit(void *arg, uint64_t epoch, dps_zcdp cost, dps_zcdp after);
int collector_number(collector *c, dps_snapshot *snap, collector_outgoing *out);
/* The same from a snapshot's info and basis (NULL unless released): one copy
   fewer where no snapshot exists yet (the sharded collector's rank 0). */
int collector_number_info(collector *c, const dps_snapshot_info *info, const float *basis, collector_outgoing *out);
/* Store and write the outcome line: DPS_OK, or DPS_EIO (said in the log;
   the ledger halted; out freed, so collector_send sends nothing). */
int collector_store(collector *c, collector_outgoing *out);
void collector_send(collector *c, collector_outgoing *out);

/* release.c: the release thread.  start it (before the loop; -1 if it
   cannot), seal the open epoch and hand it over (waits first if the last is
   still releasing), publish a finished release (the loop, when rel.pipe[0]
   is readable), wait until every sealed epoch is published, and stop (the
   epoch already sealed is released and published first). */
int collector_release_start(collector *c);
int collector_seal(collector *c);
void collector_release_poll(collector *c);
void collector_release_wait(collector *c);
/* The same, when the loop must wait to go on (the next epoch is full, or
   waits for its warm start): timed as backpressure (c->stall, stalls.h). */
void collector_backpressure(collector *c);
void collector_release_stop(collector *c);

/* ingest.c: one batch from the PULL socket (0 if none was waiting); the
   ingest memory bound set on the socket before bind, reported at start-up
   and watched as producers come and go; dropped connections. */
int collector_ingest(collector *c);
int collector_ingest_setup(collector *c);
void collector_ingest_report(collector *c, const dps_config *cfg);
void collector_ingest_watch(collector *c);
void collector_on_disconnect(void *arg, int fd);
void collector_on_accept(void *arg, int fd);
void collector_lost(collector *c, const char *id, const char *how);

/* status_reply.c: one status request (counters, or a producer's credit);
   the subscription notices of the publish socket. */
void collector_status(collector *c);
void collector_subscriptions(collector *c);
/* The parts every status reply shares: the next request (1, its fields and
   st zeroed but for the asked producer run's counts and the batch limit; 0
   if none was waiting or it was refused, and then answered: a revoked key's
   reply says so), and the reply sent. */
int collector_status_request(collector *c, wire_status_request *q, dps_collector_status *st);
void collector_status_send(collector *c, const dps_collector_status *st);

/* reload.c: SIGHUP's configuration reload; binding the publish socket again
   after a subscriber key was removed (0 when bound). */
void collector_reload_config(collector *c);
int collector_rebind_publish(collector *c);

/* collector.c: the estimator's configuration from the options; a server
   socket bound to endpoint (CURVE under ZAP domain, or the plaintext rule). */
void collector_config(const collector_options *o, const ledger *led, dps_config *cfg);
/* The stop's error line when a write of the state directory failed (exit 3). */
void collector_log_state_failed(const collector *c);
int collector_server_socket(collector *c, void *sock, const char *endpoint, const char *domain,
                            const dps_keypair *kp, char *err, size_t errlen);

/* The sharded mode (--sharded): src/mpi/collector_sharded.c with
   MPI, src/collector/sharded_none.c without (which refuses it).  start: MPI
   up, this process's rank of size (an error in err: exit 2).  agree: the
   largest of every rank's rc, on every rank.  serve: the sharded loop, on
   every rank (rank 0 has restored the state; the others have not touched
   it); returns the exit code, the same on every rank.  end: MPI down. */
int collector_sharded_start(int *argc, char ***argv, int *rank, int *size, char *err, size_t errlen);
int collector_sharded_agree(int rc);
int collector_sharded_serve(collector *c, dps_config *cfg, const dps_keypair *kp, int rank, int size);
void collector_sharded_end(void);

#endif
