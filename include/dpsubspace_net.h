/*  dpsubspace_net.h - the streaming system's client side: keys, producers that
    stream rows to a dps-collector, subscribers that receive its snapshots, and
    a status query.  Built on ZeroMQ (CURVE for security) and protobuf-c, both
    private to the library: only dps_ types appear here.  Errors are dps_err
    codes from dpsubspace.h (dps_strerror names them).

    Security: every client speaks CURVE unless dps_security.plaintext is set;
    plaintext is refused for endpoints other than loopback TCP and ipc://.   */
#ifndef DPSUBSPACE_NET_H
#define DPSUBSPACE_NET_H

#include "dpsubspace.h"

#include <signal.h> /* sig_atomic_t: dps_producer_set_cancel */

#ifdef __cplusplus
extern "C" {
#endif

#define DPS_WIRE_VERSION 1
#define DPS_KEY_LEN 40 /* a CURVE key in Z85 text */

/* ------------------------------------------------------------------- keys */
typedef struct {
    char public_key[DPS_KEY_LEN + 1];
    char secret_key[DPS_KEY_LEN + 1];
} dps_keypair;

/* A new CURVE key pair (libzmq/libsodium).  DPS_ENET if CURVE is unavailable. */
DPS_EXPORT int dps_keypair_generate(dps_keypair *out);
/* Write base.key (public key, 0644) and base.key_secret (both keys, 0600);
   refuses to overwrite (DPS_EIO).  */
DPS_EXPORT int dps_keypair_save(const dps_keypair *kp, const char *base);
/* Read a key pair from a .key_secret file. */
DPS_EXPORT int dps_keypair_load(dps_keypair *out, const char *path);
/* Read the public key from a .key or .key_secret file. */
DPS_EXPORT int dps_public_key_load(char out[DPS_KEY_LEN + 1], const char *path);
/* 1 if endpoint is loopback TCP (127.0.0.0/8, [::1], localhost) or ipc://. */
DPS_EXPORT int dps_endpoint_is_local(const char *endpoint);

/* How a client connects.  CURVE: server_public_key and the client's own pair
   (the collector's ZAP handler checks public_key against its authorized
   keys).  plaintext = 1 only for local endpoints. */
typedef struct {
    const char *server_public_key; /* Z85 */
    const char *public_key;        /* Z85 */
    const char *secret_key;        /* Z85 */
    int plaintext;
} dps_security;

/* The ingest endpoint of rank `shard` of a sharded collector whose
   --ingest is base (one rule for producers and collector ranks): the
   shard-th item of a comma-separated list; else base itself for shard 0,
   tcp://host:(port + shard), or ipc://path-<shard>.  DPS_OK, or DPS_EINVAL
   (a list too short, a port past 65535, another transport; out too small). */
DPS_EXPORT int dps_shard_endpoint(const char *base, size_t shard, char *out, size_t len);

/* --------------------------------------------------------------- producer */
typedef struct {
    const char *endpoint;    /* the collector's ingest endpoint             */
    size_t dim;              /* row dimension, as the collector expects     */
    size_t batch_rows;       /* rows per message (default 256)              */
    const char *producer_id; /* unique per producer (default "producer-<pid>-<random>") */
    const char *status_endpoint; /* the collector's status endpoint: close waits
                                    there until every batch is confirmed taken.
                                    NULL: nobody can confirm anything -- rows
                                    queued at the collector when we disconnect
                                    can be lost unnoticed (close counts every
                                    batch as unconfirmed) */
    dps_security sec;
    int sndhwm;              /* messages queued before send blocks (default 64) */
    int linger_ms;           /* how long close waits for the confirmation (with a
                                status endpoint) or to deliver (without); default 30000 */
    int send_timeout_ms;     /* 0: block as long as the collector is slow (default) */
    size_t shards;           /* 0 or 1 (default): whole rows to endpoint.  R > 1: the
                                collector is sharded over R ranks (dps-collector
                                --sharded): each row is split by dps_shard_slice and
                                shard r sent to dps_shard_endpoint(endpoint, r), all
                                with one id and one stream; status_endpoint is rank
                                0's, which confirms a batch once every rank took it */
    size_t full_dim;         /* 0 (default): the rows are whole.  > 0: this producer
                                holds only shard `shard` of rows of full_dim
                                coordinates (an FSDP/ZeRO training rank's own
                                parameters' gradients): dim is that shard's width
                                (dps_shard_slice(full_dim, shards, shard)), sent to
                                dps_shard_endpoint(endpoint, shard).  The R producers
                                of one stream of rows must share producer_id, stream
                                and batch_rows and send the same rows in the same
                                order; only shard 0's gives status_endpoint */
    size_t shard;
    uint64_t stream;         /* with full_dim: the stream the R producers share
                                (nonzero, drawn at random once, e.g. by the job's
                                rank 0 and broadcast) */
} dps_producer_opts;

typedef struct dps_producer dps_producer;

DPS_EXPORT void dps_producer_opts_init(dps_producer_opts *o, const char *endpoint, size_t dim);
/* Connects (asynchronously).  The caller owns *out. */
DPS_EXPORT int dps_producer_new(dps_producer **out, const dps_producer_opts *o);
/* Wait until the security handshake with the collector succeeded: DPS_OK,
   DPS_EAUTH (our key was refused), or DPS_ETIMEOUT. */
DPS_EXPORT int dps_producer_wait_ready(dps_producer *p, int timeout_ms);
/* Buffer n rows of dimension dim and send every full batch (in pieces of
   the collector's batch limit when it is lower: it says so to a producer with
   a status endpoint).  Blocks while the
   collector is behind (its queue and ours are full): rows are never dropped.
   DPS_EDIM if dim differs, DPS_EAUTH if the collector refused our key,
   DPS_EGONE if it went silent (dps_producer_set_collector_timeout),
   DPS_ETIMEOUT if send_timeout_ms passed (the rows not sent stay buffered),
   DPS_ECANCELED if the flag of dps_producer_set_cancel ended the wait,
   DPS_ESTATE after dps_producer_close. */
DPS_EXPORT int dps_producer_send_rows(dps_producer *p, const float *rows, size_t n, size_t dim);
/* Send the partial batch, if any. */
DPS_EXPORT int dps_producer_flush(dps_producer *p);
/* A way out of a producer's waits, for a program that must stop when told
   to (SIGINT/SIGTERM) although sends have no deadline: the collector may be
   gone, or never have been there, and a send then blocks for good.  While
   *flag is nonzero (NULL: no flag, the default), every wait of p for the
   collector -- a blocked send or flush, waiting for credit, the drain,
   dps_producer_wait_ready -- ends within about 200 ms (the drain: about a
   second) with DPS_ECANCELED, where send_timeout_ms would end it with
   DPS_ETIMEOUT; and dps_producer_close neither flushes nor drains nor
   lingers (it returns DPS_ECANCELED; every batch not confirmed is counted).
   Clear *flag to wait again.  A sharded producer is failed after a canceled
   send, as after any failed one.  The flag is only read, never written: set
   it from a signal handler (sig_atomic_t) or another thread; it must
   outlive p or be unset first.  (A function rather than a field of
   dps_producer_opts: the options struct keeps its layout, so programs
   built against an older header keep working with this library.) */
DPS_EXPORT int dps_producer_set_cancel(dps_producer *p, const volatile sig_atomic_t *flag);
/* A collector that dies mid-stream: once it has been heard (a status reply;
   without a status endpoint, a handshake), every wait of p for it -- credit,
   a blocked send or flush, the drain -- ends with DPS_EGONE when it has been
   silent for timeout_ms: with a status endpoint no answer to a question
   (asked at least once a second while a send is blocked; the collector
   answers while its ingest waits for a release), without one the connection
   down that long.  A collector never heard is waited for as before.
   Default DPS_PRODUCER_COLLECTOR_TIMEOUT_MS; 0: wait without limit.  A
   status reply saying our key was revoked ends the waits with DPS_EAUTH. */
#define DPS_PRODUCER_COLLECTOR_TIMEOUT_MS 15000
DPS_EXPORT int dps_producer_set_collector_timeout(dps_producer *p, int timeout_ms);
/* Times the collector ended our connection (a batch above its
   --max-batch-rows, a restart): the batches in flight on it were lost.
   Without a status endpoint dps_producer_close returns DPS_ENET when this is
   not 0 (nothing else can say what was lost). */
DPS_EXPORT uint64_t dps_producer_disconnects(const dps_producer *p);
DPS_EXPORT void dps_producer_counts(const dps_producer *p, uint64_t *rows_sent, uint64_t *batches_sent);
/* Flush, then wait until the collector has answered for every batch we sent
   (asked on status_endpoint): DPS_OK when all were taken, DPS_EPROTO when it
   refused some as a whole (wrong dimension, too large...: its status says
   which), DPS_ETIMEOUT after timeout_ms, or DPS_ESTATE without a
   status_endpoint or after close.  libzmq discards messages still queued
   toward a PULL socket when their sender disconnects; this is how a producer
   knows it may disconnect. */
DPS_EXPORT int dps_producer_drain(dps_producer *p, int timeout_ms);
/* The collector's last answer to a drain: batches of ours it took, and
   refused as a whole (0, 0 before any answer). */
DPS_EXPORT void dps_producer_confirmed(const dps_producer *p, uint64_t *taken, uint64_t *refused);
/* The producer id the collector knows us by (generated unless given). */
DPS_EXPORT const char *dps_producer_id(const dps_producer *p);
/* Flush (up to linger_ms), drain (with a status endpoint, until linger_ms
   from the call; not again if a drain already ended for the same batches),
   and close the connection; the caller still owns p (destroy frees it).
   Sets *unconfirmed (may be NULL) to the number of batches the collector did
   not confirm taking: refused ones, unanswered ones and a last partial batch
   that could not be sent.  Returns DPS_OK when every batch was confirmed;
   DPS_ETIMEOUT when the confirmation (or the last send) did not come within
   linger_ms -- the collector is gone or overloaded, and those rows may be
   lost; DPS_EPROTO when it refused some batches; DPS_EAUTH when it refused
   our key; DPS_EGONE when the collector went silent (see
   dps_producer_set_collector_timeout); another code if a send or status
   query failed.  Without a status endpoint nothing can be confirmed: DPS_OK
   after lingering up to linger_ms to deliver, with every batch counted in
   *unconfirmed, or DPS_ENET when the collector ended our connection while we
   sent (dps_producer_disconnects).  A second call returns the first one's
   result. */
DPS_EXPORT int dps_producer_close(dps_producer *p, uint64_t *unconfirmed);
/* Close (if dps_producer_close was not called; its result is lost: call it
   to know whether the rows arrived), free, and set *p to NULL. */
DPS_EXPORT void dps_producer_destroy(dps_producer **p);

/* ------------------------------------------------------------- subscriber */
typedef struct dps_subscriber dps_subscriber;

/* Subscribe to a collector's snapshot endpoint.  A new subscriber receives the
   latest snapshot at once (the collector's welcome message). */
DPS_EXPORT int dps_subscriber_new(dps_subscriber **out, const char *endpoint, const dps_security *sec);
DPS_EXPORT void dps_subscriber_destroy(dps_subscriber **s);
/* Skip every snapshot of an epoch before epoch, the welcome message included
   (it can be the last snapshot of a previous job on the same collector): a
   job that asks the collector's open epoch (dps_collector_status_query) when
   it starts and passes it here sees only bases learned from then on.  Call
   before the first recv/update; 0 (the default) skips nothing. */
DPS_EXPORT int dps_subscriber_set_from_epoch(dps_subscriber *s, uint64_t epoch);
/* 1 once a handshake with the collector succeeded (something answers at the
   endpoint), else 0: a subscriber connects in the background and waits for
   a collector for ever, so a program can say when none is there. */
DPS_EXPORT int dps_subscriber_connected(dps_subscriber *s);
/* The next snapshot not seen before (by sequence number) and not skipped by
   dps_subscriber_set_from_epoch: DPS_OK and *out
   (the caller owns it), DPS_ETIMEOUT, DPS_EAUTH (the collector refused our
   key), or DPS_EPROTO for a message that does not decode (skipped and
   counted).  timeout_ms < 0 waits forever. */
DPS_EXPORT int dps_subscriber_recv(dps_subscriber *s, int timeout_ms, dps_snapshot **out);
/* For a training loop: take every pending snapshot without blocking and keep
   the latest released one.  Returns 1 if the basis changed, 0 if not, or a
   negative -dps_err. */
DPS_EXPORT int dps_subscriber_update(dps_subscriber *s);
/* The latest released snapshot kept by update/recv; NULL before the first.
   Owned by the subscriber, valid until the next update/recv/destroy. */
DPS_EXPORT const dps_snapshot *dps_subscriber_latest(const dps_subscriber *s);
/* out = V^T V x with the latest released basis (x, out of length d; may
   alias).  DPS_ESTATE before the first basis, DPS_EDIM if d differs. */
DPS_EXPORT int dps_subscriber_project(const dps_subscriber *s, const float *x, float *out, size_t d);
/* Snapshots missed (gaps in sequence numbers) and undecodable messages. */
DPS_EXPORT void dps_subscriber_counts(const dps_subscriber *s, uint64_t *received, uint64_t *missed,
                                      uint64_t *bad);

/* ---------------------------------------------------------------- status */
/* What a collector's status endpoint answers (dps-status shows it): the
   open epoch, the privacy spent (named as in snapshots: rho_total ...), and
   operator counts.  refusals: batches and requests refused, by reason
   (wrong_dim, auth_refused, ...); counters: everything else counted (rows
   taken as zero vectors, rows discarded, sequence gaps, dropped connections,
   credit).  Each name is listed in dps-status --help. */
#define DPS_STATUS_MAX_COUNTERS 32
typedef struct {
    char name[32];
    uint64_t value;
} dps_named_count;
typedef struct {
    uint64_t epoch, rows_accepted, buckets_completed, rows_in_epoch, epoch_rows;
    double rho_total, delta_total, eps_total, delta_target, budget_left;
    char budget_unit[8];
    uint64_t last_snapshot_seq, uptime_s;
    size_t d, k;
    size_t n_refusals, n_counters;
    dps_named_count refusals[DPS_STATUS_MAX_COUNTERS], counters[DPS_STATUS_MAX_COUNTERS];
    /* for the producer_id asked (dps_collector_status_query_producer) */
    uint64_t producer_batches, producer_rows, producer_seq_gaps, producer_refused;
    /* credit (the producers' flow control): 1 if the collector grants it (0
       from an old collector), and how far the asked producer may send */
    int credit;
    uint64_t credit_seq_end;
    /* 0: one process; R: a collector sharded over R MPI ranks, which takes
       rows split into R slices (dps_producer_opts.shards, dps-produce
       --shards R) -- whole rows are refused (wrong_dim).  (0.3) */
    uint32_t shards;
    /* the most rows a batch of d coordinates may hold (libzmq drops a larger
       one with its connection; a producer splits its batches to fit); 0 from
       an older collector that does not say */
    uint32_t max_batch_rows;
    /* not empty: the collector refused the question, and why ("key_revoked":
       our key left its authorized keys); nothing else is set */
    char refused[32];
} dps_collector_status;

/* Ask a collector's status endpoint: DPS_OK, DPS_ETIMEOUT, DPS_EAUTH (our key
   is not among its authorized keys), DPS_EPROTO.  Operator information: the
   rejection counts are about the data and are not differentially private. */
DPS_EXPORT int dps_collector_status_query(const char *endpoint, const dps_security *sec, int timeout_ms,
                                          dps_collector_status *out);
/* The same, also asking how many batches of producer_id were taken. */
DPS_EXPORT int dps_collector_status_query_producer(const char *endpoint, const dps_security *sec, int timeout_ms,
                                                   const char *producer_id, dps_collector_status *out);

/* ------------------------------------------------------- snapshot bytes */
/* Serialise a snapshot (with its seq/time from its info) as a protocol
   Snapshot message; *out is malloc'd, the caller frees it. */
DPS_EXPORT int dps_snapshot_encode(const dps_snapshot *s, unsigned char **out, size_t *len);
/* Parse and validate a Snapshot message (version, sizes, status, basis
   length, finite numbers).  The caller owns *out. */
DPS_EXPORT int dps_snapshot_decode(const unsigned char *buf, size_t len, dps_snapshot **out);

#ifdef __cplusplus
}
#endif
#endif
