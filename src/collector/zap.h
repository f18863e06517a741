/* zap.h - the ZAP handler (ZeroMQ RFC 27) that decides which CURVE clients
   the collector accepts.  Without one, CURVE lets in anyone who knows the
   server's public key.  Domains: "ingest" and "status" accept the public keys
   in the authorized-keys directory; "publish" accepts those of the
   subscriber-keys directory if one is given, else any CURVE client (snapshots
   are differentially private releases).

   Key changes need no restart.  A directory's key set is read again when
   anything about one of its .key files changes (a file added, removed,
   renamed, rewritten in place, replaced by another inode, touched): the
   handler compares a fingerprint of every .key file's stat (device, inode,
   size, mtime and ctime to the nanosecond) at each handshake and every
   ZAP_REFRESH_MS, and re-reads all files when it differs; SIGHUP (through
   zap_reload) re-reads them whatever the fingerprint says.  Each key added or
   removed is logged with its file.  So a key that leaves the directory is
   refused at the next handshake at once, and within ZAP_REFRESH_MS for
   connections made before (the handler thread wakes for each refresh): the
   collector checks every ingest batch and status request against the current
   set (zap_allowed, through the User-Id the handler gives each connection)
   and drops the connections of removed subscriber keys (zap_removals). */
#ifndef DPS_ZAP_H
#define DPS_ZAP_H

#include <pthread.h>
#include <stdint.h>

#define ZAP_REFRESH_MS 1000

typedef struct zap_handler zap_handler;

/* Bind inproc://zeromq.zap.01 in ctx and serve it from a thread.  Must run
   before any CURVE server socket binds.  NULL on failure. */
zap_handler *zap_start(void *ctx, const char *authorized_dir, const char *subscriber_dir);
/* Accepted and refused handshakes so far. */
void zap_counts(zap_handler *z, uint64_t *accepted, uint64_t *refused);
/* 1 if user_id (the Z85 public key the handler gave the connection, as
   zmq_msg_gets(msg, "User-Id") returns it) is in domain's current key set,
   else 0 (also for NULL or a malformed id).  Thread-safe. */
int zap_allowed(zap_handler *z, const char *domain, const char *user_id);
/* How many keys have left domain's set since the start: when it grows, the
   connections made with a removed key are still open. */
uint64_t zap_removals(zap_handler *z, const char *domain);
/* Ask the handler thread to re-read both directories now (SIGHUP); it logs
   what changed.  Async-signal-safe: it only sets a flag. */
void zap_reload(zap_handler *z);
void zap_stop(zap_handler **z);

#endif
