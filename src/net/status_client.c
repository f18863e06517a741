/* status_client.c - one request/reply with a collector's status endpoint. */
#include "dpsubspace_net.h"
#include "transport.h"
#include "wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

int dps_collector_status_query(const char *endpoint, const dps_security *sec, int timeout_ms,
                               dps_collector_status *out)
{
    return dps_collector_status_query_producer(endpoint, sec, timeout_ms, NULL, out);
}

int dps_collector_status_query_producer(const char *endpoint, const dps_security *sec, int timeout_ms,
                                        const char *producer_id, dps_collector_status *out)
{
    if (!endpoint || !out || (producer_id && strlen(producer_id) > WIRE_MAX_PRODUCER_ID))
        return DPS_EINVAL;
    wire_status_request q = {0};
    if (producer_id)
        snprintf(q.producer_id, sizeof q.producer_id, "%s", producer_id);
    return net_status_query(endpoint, sec, timeout_ms, &q, out);
}

int net_status_query(const char *endpoint, const dps_security *sec, int timeout_ms, const wire_status_request *q,
                     dps_collector_status *out)
{
    void *ctx = zmq_ctx_new();
    if (!ctx)
        return DPS_ENOMEM;
    void *sock = zmq_socket(ctx, ZMQ_REQ);
    int rc = sock ? net_client_security(sock, endpoint, sec) : DPS_ENET;
    int zero = 0;
    unsigned char *req = NULL;
    size_t len = 0;
    net_monitor mon;
    memset(&mon, 0, sizeof mon);
    if (!rc && (zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero) ||
                net_monitor_start(ctx, sock, &mon, 0) != DPS_OK || zmq_connect(sock, endpoint)))
        rc = DPS_ENET;
    if (!rc)
        rc = wire_status_request_encode(q, &req, &len);
    if (!rc && zmq_send(sock, req, len, 0) < 0)
        rc = DPS_ENET;
    free(req);
    if (!rc) {
        /* wait for the reply, noticing a refusal of our key on the way */
        uint64_t end = net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
        zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
        int got = 0;
        for (;;) {
            uint64_t now = net_now_ms();
            int slice = now >= end ? 0 : (int)(end - now < 50 ? end - now : 50);
            got = zmq_poll(&it, 1, slice) > 0;
            net_monitor_poll(&mon, 0);
            if (got || mon.auth_failed || now >= end)
                break;
        }
        if (!got) {
            rc = mon.auth_failed ? DPS_EAUTH : DPS_ETIMEOUT;
        } else {
            zmq_msg_t msg;
            zmq_msg_init(&msg);
            if (zmq_msg_recv(&msg, sock, 0) < 0)
                rc = DPS_ENET;
            else
                rc = wire_status_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), out);
            zmq_msg_close(&msg);
            if (!rc && out->refused[0]) /* our key left its authorized keys since we connected */
                rc = DPS_EAUTH;
        }
    }
    if (sock) {
        net_monitor_stop(sock, &mon);
        zmq_close(sock);
    }
    zmq_ctx_term(ctx);
    return rc;
}

void *net_status_socket(void *ctx, const char *endpoint, const dps_security *sec)
{
    void *sock = zmq_socket(ctx, ZMQ_REQ);
    int one = 1, zero = 0;
    if (sock && (net_client_security(sock, endpoint, sec) != DPS_OK ||
                 zmq_setsockopt(sock, ZMQ_REQ_RELAXED, &one, sizeof one) ||
                 zmq_setsockopt(sock, ZMQ_REQ_CORRELATE, &one, sizeof one) ||
                 zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero) || zmq_connect(sock, endpoint))) {
        zmq_close(sock);
        sock = NULL;
    }
    return sock;
}

int net_status_send(void *req, const wire_status_request *q)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    int rc = wire_status_request_encode(q, &buf, &len);
    if (rc)
        return rc;
    rc = zmq_send(req, buf, len, 0) < 0 ? DPS_ENET : DPS_OK;
    free(buf);
    return rc;
}

/* Never a blocking receive: with ZMQ_REQ_CORRELATE a late reply to a
   question asked again since wakes the poll and is then dropped inside the
   receive, which would wait for ever on a collector that is gone. */
int net_status_recv(void *req, int timeout_ms, dps_collector_status *out)
{
    uint64_t end = net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        uint64_t now = net_now_ms();
        zmq_pollitem_t it = {req, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, now < end ? (long)(end - now) : 0) <= 0)
            return DPS_ETIMEOUT;
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, req, ZMQ_DONTWAIT) >= 0) {
            int rc = wire_status_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), out);
            zmq_msg_close(&msg);
            return rc;
        }
        zmq_msg_close(&msg);
        if (errno != EAGAIN && errno != EINTR)
            return DPS_ENET;
        if (net_now_ms() >= end)
            return DPS_ETIMEOUT;
    }
}

int net_status_ask(void *req, const wire_status_request *q, int timeout_ms, dps_collector_status *out)
{
    int rc = net_status_send(req, q);
    return rc ? rc : net_status_recv(req, timeout_ms, out);
}
