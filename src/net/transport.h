/* transport.h - ZeroMQ plumbing shared by the clients and the collector:
   security options, the plaintext rule, handshake monitoring, clocks. */
#ifndef DPS_TRANSPORT_H
#define DPS_TRANSPORT_H

#include "dpsubspace_net.h"
#include "wire.h"
#include <stdint.h>

/* Make sock a CURVE client of sec->server_public_key, or check that plaintext
   is allowed for endpoint.  DPS_EINVAL (plaintext on a non-local endpoint, or
   keys missing), DPS_EKEY (a key is not Z85), DPS_ENET. */
int net_client_security(void *sock, const char *endpoint, const dps_security *sec);

/* A monitor of sock's handshake events, read through a PAIR socket. */
typedef struct {
    void *pair;
    int succeeded; /* a handshake succeeded */
    int auth_failed; /* the server refused our credentials (ZAP said no) */
    int failed;     /* any handshake failure */
    uint64_t handshake_failures, disconnects;
    uint64_t accepted; /* connections accepted (with count_disconnects): accepted - disconnects are open */
    /* a client's one connection (with count_disconnects): up after a handshake
       succeeded, down after it ended, and when it went down (0: never up) */
    int up;
    uint64_t down_ms;
    /* Optional, with count_disconnects: called from net_monitor_poll with the
       file descriptor of each connection that ended. */
    void (*on_disconnect)(void *arg, int fd);
    void *on_disconnect_arg;
    /* Optional, with count_disconnects: called with the file descriptor of
       each connection accepted (with on_disconnect_arg). */
    void (*on_accept)(void *arg, int fd);
} net_monitor;

/* Watch handshakes (and accepted and ended connections when count_disconnects). */
int net_monitor_start(void *ctx, void *sock, net_monitor *m, int count_disconnects);
/* Read pending events; wait up to timeout_ms for the first (0: poll). */
void net_monitor_poll(net_monitor *m, int timeout_ms);
void net_monitor_stop(void *sock, net_monitor *m);

/* One question (wire.h's wire_status_request) on a socket of its own, its
   reply within timeout_ms: DPS_OK, DPS_ETIMEOUT, DPS_EAUTH (our key refused
   at the handshake, or revoked since: the reply says so), DPS_EPROTO. */
int net_status_query(const char *endpoint, const dps_security *sec, int timeout_ms, const wire_status_request *q,
                     dps_collector_status *out);
/* A REQ socket to a status endpoint that a client keeps for repeated
   questions (credit): ZMQ_REQ_RELAXED and ZMQ_REQ_CORRELATE, so a question
   left unanswered does not block the next.  NULL on failure. */
void *net_status_socket(void *ctx, const char *endpoint, const dps_security *sec);
/* One question on such a socket (wire.h's wire_status_request), its reply
   within timeout_ms: DPS_OK, DPS_ETIMEOUT, DPS_EPROTO. */
int net_status_ask(void *req, const wire_status_request *q, int timeout_ms, dps_collector_status *out);
/* The two halves of net_status_ask, for a question whose reply is read later. */
int net_status_send(void *req, const wire_status_request *q);
int net_status_recv(void *req, int timeout_ms, dps_collector_status *out);

/* 1 if the string is 40 characters of the Z85 alphabet that decode. */
int net_key_valid(const char *z85);

/* Milliseconds on a monotonic clock (timeouts, durations). */
uint64_t net_now_ms(void);
/* The same clock in milliseconds with a fraction (for durations below 1 ms). */
double net_clock_ms(void);
/* Milliseconds since the Unix epoch (timestamps people read). */
uint64_t net_unix_ms(void);

#endif
