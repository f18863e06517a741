/* zap.c - ZAP handler thread (see zap.h). */
#include "zap.h"
#include "dpsubspace_net.h"
#include "log.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zmq.h>

typedef struct {
    char dir[4096];
    struct timespec mtime;
    int loaded;
    size_t n;
    uint8_t (*keys)[32];
} keyset;

struct zap_handler {
    void *ctx, *sock;
    pthread_t thread;
    volatile int stop;
    keyset authorized, subscribers;
    int has_subscribers;
    pthread_mutex_t mu;
    uint64_t accepted, refused;
};

/* (Re)load the .key files of a directory when its mtime changed. */
static void s_refresh(keyset *ks)
{
    struct stat st;
    if (stat(ks->dir, &st) != 0) {
        if (ks->loaded)
            log_warn("authorized keys directory %s disappeared: refusing everyone", ks->dir);
        ks->n = 0;
        ks->loaded = 0;
        return;
    }
    if (ks->loaded && st.st_mtim.tv_sec == ks->mtime.tv_sec && st.st_mtim.tv_nsec == ks->mtime.tv_nsec)
        return;
    DIR *dp = opendir(ks->dir);
    if (!dp)
        return;
    size_t cap = 16, n = 0;
    uint8_t(*keys)[32] = malloc(cap * 32);
    struct dirent *de;
    while (keys && (de = readdir(dp))) {
        size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 4, ".key") != 0)
            continue;
        char path[8300], z85[DPS_KEY_LEN + 1];
        snprintf(path, sizeof path, "%s/%s", ks->dir, de->d_name);
        if (dps_public_key_load(z85, path) != DPS_OK) {
            log_warn("ignoring %s: not a dpsubspace public key file", path);
            continue;
        }
        if (n == cap) {
            void *more = realloc(keys, 2 * cap * 32);
            if (!more)
                break;
            keys = more;
            cap *= 2;
        }
        zmq_z85_decode(keys[n++], z85);
    }
    closedir(dp);
    free(ks->keys);
    ks->keys = keys;
    ks->n = keys ? n : 0;
    ks->mtime = st.st_mtim;
    ks->loaded = 1;
    log_info("authorized keys: %zu in %s", ks->n, ks->dir);
}

static int s_has(const keyset *ks, const uint8_t *key)
{
    for (size_t i = 0; i < ks->n; i++)
        if (memcmp(ks->keys[i], key, 32) == 0)
            return 1;
    return 0;
}

/* Receive one frame into buf (truncated to cap); returns its size or -1. */
static int s_frame(void *sock, char *buf, size_t cap, int *more)
{
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, sock, 0) < 0) {
        zmq_msg_close(&m);
        return -1;
    }
    size_t n = zmq_msg_size(&m);
    memcpy(buf, zmq_msg_data(&m), n < cap ? n : cap);
    *more = zmq_msg_more(&m);
    zmq_msg_close(&m);
    return (int)(n < cap ? n : cap);
}

static void s_reply(void *sock, const char *id, int idlen, const char *code, const char *text)
{
    zmq_send(sock, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(sock, id, (size_t)idlen, ZMQ_SNDMORE);
    zmq_send(sock, code, strlen(code), ZMQ_SNDMORE);
    zmq_send(sock, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(sock, "", 0, ZMQ_SNDMORE);
    zmq_send(sock, "", 0, 0);
}

static void *s_thread(void *arg)
{
    zap_handler *z = arg;
    while (!z->stop) {
        zmq_pollitem_t it = {z->sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 200) <= 0)
            continue;
        char f[8][256];
        int len[8] = {0}, more = 1, nf = 0;
        while (more && nf < 8) {
            len[nf] = s_frame(z->sock, f[nf], sizeof f[nf], &more);
            if (len[nf] < 0)
                break;
            nf++;
        }
        while (more) { /* drain anything beyond what we read */
            char skip[16];
            if (s_frame(z->sock, skip, sizeof skip, &more) < 0)
                break;
        }
        if (nf < 6) {
            if (nf >= 2)
                s_reply(z->sock, f[1], len[1], "500", "malformed ZAP request");
            continue;
        }
        char domain[64], mech[16], addr[64];
        snprintf(domain, sizeof domain, "%.*s", len[2], f[2]);
        snprintf(addr, sizeof addr, "%.*s", len[3], f[3]);
        snprintf(mech, sizeof mech, "%.*s", len[5], f[5]);
        int ok = 0;
        const char *why = "unknown key";
        if (strcmp(mech, "CURVE") == 0 && nf >= 7 && len[6] == 32) {
            pthread_mutex_lock(&z->mu);
            if (strcmp(domain, "publish") == 0 && !z->has_subscribers) {
                ok = 1;
            } else {
                keyset *ks = strcmp(domain, "publish") == 0 ? &z->subscribers : &z->authorized;
                s_refresh(ks);
                ok = s_has(ks, (const uint8_t *)f[6]);
            }
            if (ok)
                z->accepted++;
            else
                z->refused++;
            pthread_mutex_unlock(&z->mu);
        } else if (strcmp(mech, "NULL") == 0) {
            ok = 1; /* plaintext sockets are local-only; the collector checked */
        } else {
            why = "mechanism not allowed";
        }
        if (!ok) {
            char pub[DPS_KEY_LEN + 1] = "?";
            if (nf >= 7 && len[6] == 32)
                zmq_z85_encode(pub, (const uint8_t *)f[6], 32);
            log_warn("refused a %s client from %s on %s: %s (public key %s)", mech, addr, domain, why, pub);
        }
        s_reply(z->sock, f[1], len[1], ok ? "200" : "400", ok ? "OK" : why);
    }
    return NULL;
}

zap_handler *zap_start(void *ctx, const char *authorized_dir, const char *subscriber_dir)
{
    zap_handler *z = calloc(1, sizeof *z);
    if (!z)
        return NULL;
    pthread_mutex_init(&z->mu, NULL);
    snprintf(z->authorized.dir, sizeof z->authorized.dir, "%s", authorized_dir ? authorized_dir : "");
    if (subscriber_dir) {
        z->has_subscribers = 1;
        snprintf(z->subscribers.dir, sizeof z->subscribers.dir, "%s", subscriber_dir);
    }
    s_refresh(&z->authorized);
    if (z->has_subscribers)
        s_refresh(&z->subscribers);
    z->ctx = ctx;
    z->sock = zmq_socket(ctx, ZMQ_REP);
    int linger = 0;
    if (!z->sock || zmq_setsockopt(z->sock, ZMQ_LINGER, &linger, sizeof linger) ||
        zmq_bind(z->sock, "inproc://zeromq.zap.01") != 0 || pthread_create(&z->thread, NULL, s_thread, z) != 0) {
        if (z->sock)
            zmq_close(z->sock);
        free(z);
        return NULL;
    }
    return z;
}

void zap_counts(zap_handler *z, uint64_t *accepted, uint64_t *refused)
{
    pthread_mutex_lock(&z->mu);
    *accepted = z->accepted;
    *refused = z->refused;
    pthread_mutex_unlock(&z->mu);
}

void zap_stop(zap_handler **pz)
{
    if (!pz || !*pz)
        return;
    zap_handler *z = *pz;
    z->stop = 1;
    pthread_join(z->thread, NULL);
    zmq_close(z->sock);
    free(z->authorized.keys);
    free(z->subscribers.keys);
    pthread_mutex_destroy(&z->mu);
    free(z);
    *pz = NULL;
}
