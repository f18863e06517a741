/* transport.c - security options, the plaintext rule, handshake monitors,
   the endpoints of a sharded collector's ranks. */
#include "transport.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

int dps_endpoint_is_local(const char *ep)
{
    if (!ep)
        return 0;
    if (strncmp(ep, "ipc://", 6) == 0 || strncmp(ep, "inproc://", 9) == 0)
        return 1;
    if (strncmp(ep, "tcp://", 6) != 0)
        return 0;
    const char *h = ep + 6;
    if (strncmp(h, "127.", 4) == 0 || strncmp(h, "localhost:", 10) == 0 || strncmp(h, "[::1]:", 6) == 0)
        return 1;
    return 0;
}

int dps_shard_endpoint(const char *base, size_t shard, char *out, size_t len)
{
    if (!base || !out || len == 0)
        return DPS_EINVAL;
    out[0] = '\0';
    if (strchr(base, ',')) { /* a list: the shard-th item */
        const char *p = base;
        for (size_t i = 0; i < shard; i++) {
            p = strchr(p, ',');
            if (!p)
                return DPS_EINVAL;
            p++;
        }
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= len)
            return DPS_EINVAL;
        memcpy(out, p, n);
        out[n] = '\0';
        return DPS_OK;
    }
    int n;
    if (shard == 0) {
        n = snprintf(out, len, "%s", base);
    } else if (strncmp(base, "tcp://", 6) == 0) {
        const char *colon = strrchr(base, ':'); /* the port's (host may be [::1]) */
        char *end = NULL;
        unsigned long port = colon && colon > base + 5 ? strtoul(colon + 1, &end, 10) : 0;
        if (!end || *end || end == colon + 1 || port == 0 || port + shard > 65535)
            return DPS_EINVAL;
        n = snprintf(out, len, "%.*s:%lu", (int)(colon - base), base, port + shard);
    } else if (strncmp(base, "ipc://", 6) == 0) {
        n = snprintf(out, len, "%s-%zu", base, shard);
    } else {
        return DPS_EINVAL;
    }
    return n > 0 && (size_t)n < len ? DPS_OK : DPS_EINVAL;
}

int net_key_valid(const char *z85)
{
    if (!z85 || strlen(z85) != DPS_KEY_LEN)
        return 0;
    uint8_t raw[32];
    return zmq_z85_decode(raw, z85) != NULL;
}

int net_client_security(void *sock, const char *endpoint, const dps_security *sec)
{
    if (!sec || sec->plaintext) {
        if (!dps_endpoint_is_local(endpoint))
            return DPS_EINVAL; /* plaintext carries private rows: loopback/ipc only */
        return DPS_OK;
    }
    if (!sec->server_public_key || !sec->public_key || !sec->secret_key)
        return DPS_EINVAL;
    if (!net_key_valid(sec->server_public_key) || !net_key_valid(sec->public_key) ||
        !net_key_valid(sec->secret_key))
        return DPS_EKEY;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, sec->server_public_key, DPS_KEY_LEN + 1) ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, sec->public_key, DPS_KEY_LEN + 1) ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec->secret_key, DPS_KEY_LEN + 1))
        return DPS_ENET;
    return DPS_OK;
}

int net_monitor_start(void *ctx, void *sock, net_monitor *m, int count_disconnects)
{
    memset(m, 0, sizeof *m);
    char addr[64];
    snprintf(addr, sizeof addr, "inproc://dps-monitor-%p", sock);
    int events = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                 ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
    if (count_disconnects)
        events |= ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_ACCEPTED;
    if (zmq_socket_monitor(sock, addr, events) != 0)
        return DPS_ENET;
    m->pair = zmq_socket(ctx, ZMQ_PAIR);
    int linger = 0;
    if (!m->pair || zmq_setsockopt(m->pair, ZMQ_LINGER, &linger, sizeof linger) || zmq_connect(m->pair, addr)) {
        if (m->pair)
            zmq_close(m->pair);
        m->pair = NULL;
        return DPS_ENET;
    }
    return DPS_OK;
}

void net_monitor_poll(net_monitor *m, int timeout_ms)
{
    if (!m->pair)
        return;
    for (int first = 1;; first = 0) {
        zmq_pollitem_t it = {m->pair, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, first ? timeout_ms : 0) <= 0 || !(it.revents & ZMQ_POLLIN))
            return;
        zmq_msg_t ev;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, m->pair, 0) < 0) {
            zmq_msg_close(&ev);
            return;
        }
        uint16_t event = 0;
        int32_t value = -1; /* the fd, for ACCEPTED and DISCONNECTED */
        if (zmq_msg_size(&ev) >= 2)
            memcpy(&event, zmq_msg_data(&ev), 2);
        if (zmq_msg_size(&ev) >= 6)
            memcpy(&value, (const char *)zmq_msg_data(&ev) + 2, 4);
        int more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        while (more) { /* the endpoint frame */
            zmq_msg_t f;
            zmq_msg_init(&f);
            if (zmq_msg_recv(&f, m->pair, 0) < 0) {
                zmq_msg_close(&f);
                break;
            }
            more = zmq_msg_more(&f);
            zmq_msg_close(&f);
        }
        if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            m->succeeded = 1;
            m->up = 1;
        } else if (event == ZMQ_EVENT_DISCONNECTED) {
            m->disconnects++;
            m->up = 0;
            m->down_ms = net_now_ms();
            if (m->on_disconnect)
                m->on_disconnect(m->on_disconnect_arg, value);
        } else if (event == ZMQ_EVENT_ACCEPTED) {
            m->accepted++;
            if (m->on_accept)
                m->on_accept(m->on_disconnect_arg, value);
        } else if (event) {
            m->failed = 1;
            m->handshake_failures++;
            if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
                m->auth_failed = 1;
        }
    }
}

void net_monitor_stop(void *sock, net_monitor *m)
{
    if (sock)
        zmq_socket_monitor(sock, NULL, 0);
    if (m->pair)
        zmq_close(m->pair);
    m->pair = NULL;
}

uint64_t net_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

double net_clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

uint64_t net_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
