/* zap.h - the ZAP handler (ZeroMQ RFC 27) that decides which CURVE clients
   the collector accepts.  Without one, CURVE lets in anyone who knows the
   server's public key.  Domains: "ingest" and "status" accept the public keys
   in the authorized-keys directory; "publish" accepts those of the
   subscriber-keys directory if one is given, else any CURVE client (snapshots
   are differentially private releases).  The directory is re-read when its
   modification time changes, so adding a key file needs no restart. */
#ifndef DPS_ZAP_H
#define DPS_ZAP_H

#include <pthread.h>
#include <stdint.h>

typedef struct zap_handler zap_handler;

/* Bind inproc://zeromq.zap.01 in ctx and serve it from a thread.  Must run
   before any CURVE server socket binds.  NULL on failure. */
zap_handler *zap_start(void *ctx, const char *authorized_dir, const char *subscriber_dir);
/* Accepted and refused handshakes so far. */
void zap_counts(zap_handler *z, uint64_t *accepted, uint64_t *refused);
void zap_stop(zap_handler **z);

#endif
