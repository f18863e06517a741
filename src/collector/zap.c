/* zap.c - ZAP handler thread (see zap.h). */
#include "zap.h"
#include "dpsubspace_net.h"
#include "log.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <zmq.h>

typedef struct {
    uint8_t key[32];
    char file[256];
} authkey;

/* One directory's keys.  Written only by the handler thread (s_refresh), which
   swaps in a new array under the handler's mutex; read under that mutex. */
typedef struct {
    char dir[4096];
    const char *label; /* "authorized keys" or "subscriber keys", for the log */
    uint64_t fingerprint;
    int loaded; /* the directory was read at least once */
    size_t n;
    authkey *keys;
    uint64_t removals;
} keyset;

struct zap_handler {
    void *ctx, *sock;
    pthread_t thread;
    volatile int stop;
    volatile sig_atomic_t reload;
    keyset authorized, subscribers;
    int has_subscribers;
    pthread_mutex_t mu;
    uint64_t accepted, refused;
};

static uint64_t s_fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static int s_is_key_file(const char *name)
{
    size_t len = strlen(name);
    return len >= 5 && strcmp(name + len - 4, ".key") == 0;
}

/* A fingerprint of the directory's .key files: name and stat (followed
   through symlinks) of each, so that a rewrite in place (ctime, size), a
   replacement (inode), a touch (mtime), an addition or a removal all change it.
   Entries are combined by a sum, which does not depend on readdir's order.
   0 with *ok = 0 if the directory cannot be read. */
static uint64_t s_fingerprint(const char *dir, int *ok)
{
    DIR *dp = opendir(dir);
    *ok = dp != NULL;
    if (!dp)
        return 0;
    uint64_t sum = 0, count = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        if (!s_is_key_file(de->d_name))
            continue;
        char path[8300];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat st;
        uint64_t h = s_fnv(1469598103934665603ull, de->d_name, strlen(de->d_name) + 1);
        if (stat(path, &st) == 0) {
            uint64_t f[] = {(uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)st.st_size,
                            (uint64_t)st.st_mtim.tv_sec, (uint64_t)st.st_mtim.tv_nsec,
                            (uint64_t)st.st_ctim.tv_sec, (uint64_t)st.st_ctim.tv_nsec, (uint64_t)st.st_mode};
            h = s_fnv(h, f, sizeof f);
        }
        sum += h;
        count++;
    }
    closedir(dp);
    return s_fnv(sum, &count, sizeof count);
}

/* Read every .key file of dir into a new array (*n keys); NULL with *n = 0
   when there are none or memory ran out. */
static authkey *s_read_keys(const char *dir, size_t *n_out)
{
    *n_out = 0;
    DIR *dp = opendir(dir);
    if (!dp)
        return NULL;
    size_t cap = 16, n = 0;
    authkey *keys = malloc(cap * sizeof *keys);
    struct dirent *de;
    while (keys && (de = readdir(dp))) {
        if (!s_is_key_file(de->d_name))
            continue;
        char path[8300], z85[DPS_KEY_LEN + 1];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (dps_public_key_load(z85, path) != DPS_OK) {
            log_warn("ignoring %s: not a dpsubspace public key file", path);
            continue;
        }
        if (n == cap) {
            authkey *more = realloc(keys, 2 * cap * sizeof *keys);
            if (!more)
                break;
            keys = more;
            cap *= 2;
        }
        zmq_z85_decode(keys[n].key, z85);
        snprintf(keys[n].file, sizeof keys[n].file, "%s", de->d_name);
        n++;
    }
    closedir(dp);
    *n_out = keys ? n : 0;
    return keys;
}

static const authkey *s_find_key(const authkey *keys, size_t n, const uint8_t *key)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(keys[i].key, key, 32) == 0)
            return &keys[i];
    return NULL;
}

/* Log the keys of a that are not in b, as `what`; returns how many. */
static size_t s_log_diff(const keyset *ks, const authkey *a, size_t na, const authkey *b, size_t nb, const char *what)
{
    size_t count = 0;
    for (size_t i = 0; i < na; i++) {
        if (s_find_key(b, nb, a[i].key))
            continue;
        char z85[DPS_KEY_LEN + 1];
        zmq_z85_encode(z85, a[i].key, 32);
        log_info("%s: %s %s (file %s in %s)", ks->label, what, z85, a[i].file, ks->dir);
        count++;
    }
    return count;
}

/* Handler thread only (or zap_start before it runs): re-read the directory if
   its fingerprint changed (or force), log each key added and removed, and
   swap the new set in under mu.  A directory that cannot be read empties the
   set: nobody is let in on a key we cannot see. */
static void s_refresh(zap_handler *z, keyset *ks, int force)
{
    int readable = 0;
    uint64_t fp = s_fingerprint(ks->dir, &readable);
    if (readable && ks->loaded && fp == ks->fingerprint && !force)
        return;
    if (!readable && ks->loaded && !ks->n && !force)
        return; /* still unreadable, already said so */
    size_t n = 0;
    authkey *keys = readable ? s_read_keys(ks->dir, &n) : NULL;
    if (!readable)
        log_warn("%s directory %s cannot be read: refusing every key until it can", ks->label, ks->dir);
    size_t removed = 0;
    if (ks->loaded) {
        removed = s_log_diff(ks, ks->keys, ks->n, keys, n, "removed");
        s_log_diff(ks, keys, n, ks->keys, ks->n, "added");
    }
    pthread_mutex_lock(&z->mu);
    authkey *old = ks->keys;
    int first = !ks->loaded;
    ks->keys = keys;
    ks->n = n;
    ks->fingerprint = readable ? fp : 0;
    ks->loaded = 1;
    ks->removals += removed;
    pthread_mutex_unlock(&z->mu);
    free(old);
    if (readable && (first || force))
        log_info("%s: %zu in %s", ks->label, n, ks->dir);
}

static void s_refresh_all(zap_handler *z, int force)
{
    s_refresh(z, &z->authorized, force);
    if (z->has_subscribers)
        s_refresh(z, &z->subscribers, force);
}

/* Under mu. */
static int s_has(const keyset *ks, const uint8_t *key) { return s_find_key(ks->keys, ks->n, key) != NULL; }

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

static void s_reply(void *sock, const char *id, int idlen, const char *code, const char *text, const char *user)
{
    zmq_send(sock, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(sock, id, (size_t)idlen, ZMQ_SNDMORE);
    zmq_send(sock, code, strlen(code), ZMQ_SNDMORE);
    zmq_send(sock, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(sock, user, strlen(user), ZMQ_SNDMORE); /* the connection's User-Id (zap_allowed) */
    zmq_send(sock, "", 0, 0);
}

static uint64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The key set that decides domain, or NULL when the domain admits any CURVE
   client (publish without a subscriber-keys directory). */
static keyset *s_keyset(zap_handler *z, const char *domain)
{
    if (strcmp(domain, "publish") == 0)
        return z->has_subscribers ? &z->subscribers : NULL;
    return &z->authorized;
}

static void *s_thread(void *arg)
{
    zap_handler *z = arg;
    uint64_t last = s_now_ms();
    while (!z->stop) {
        if (z->reload) {
            z->reload = 0;
            log_info("reading the key directories again (SIGHUP)");
            s_refresh_all(z, 1);
            last = s_now_ms();
        } else if (s_now_ms() - last >= ZAP_REFRESH_MS) {
            s_refresh_all(z, 0); /* keys removed reach connections made before */
            last = s_now_ms();
        }
        uint64_t now = s_now_ms(), due = last + ZAP_REFRESH_MS; /* wake for the next refresh, or stop */
        long wait = due > now ? (long)(due - now) : 0;
        zmq_pollitem_t it = {z->sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, wait < 200 ? wait : 200) <= 0)
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
                s_reply(z->sock, f[1], len[1], "500", "malformed ZAP request", "");
            continue;
        }
        char domain[64], mech[16], addr[64], pub[DPS_KEY_LEN + 1] = "";
        snprintf(domain, sizeof domain, "%.*s", len[2], f[2]);
        snprintf(addr, sizeof addr, "%.*s", len[3], f[3]);
        snprintf(mech, sizeof mech, "%.*s", len[5], f[5]);
        int ok = 0;
        const char *why = "unknown key";
        if (strcmp(mech, "CURVE") == 0 && nf >= 7 && len[6] == 32) {
            zmq_z85_encode(pub, (const uint8_t *)f[6], 32);
            keyset *ks = s_keyset(z, domain);
            if (ks)
                s_refresh(z, ks, 0); /* a change made just before this handshake counts */
            pthread_mutex_lock(&z->mu);
            ok = !ks || s_has(ks, (const uint8_t *)f[6]);
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
        if (!ok)
            log_warn("refused a %s client from %s on %s: %s (public key %s)", mech, addr, domain, why,
                     pub[0] ? pub : "?");
        s_reply(z->sock, f[1], len[1], ok ? "200" : "400", ok ? "OK" : why, ok ? pub : "");
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
    z->authorized.label = "authorized keys";
    z->subscribers.label = "subscriber keys";
    if (subscriber_dir) {
        z->has_subscribers = 1;
        snprintf(z->subscribers.dir, sizeof z->subscribers.dir, "%s", subscriber_dir);
    }
    s_refresh_all(z, 0);
    z->ctx = ctx;
    z->sock = zmq_socket(ctx, ZMQ_REP);
    int linger = 0;
    if (!z->sock || zmq_setsockopt(z->sock, ZMQ_LINGER, &linger, sizeof linger) ||
        zmq_bind(z->sock, "inproc://zeromq.zap.01") != 0 || pthread_create(&z->thread, NULL, s_thread, z) != 0) {
        if (z->sock)
            zmq_close(z->sock);
        free(z->authorized.keys);
        free(z->subscribers.keys);
        pthread_mutex_destroy(&z->mu);
        free(z);
        return NULL;
    }
    return z;
}

int zap_allowed(zap_handler *z, const char *domain, const char *user_id)
{
    keyset *ks = s_keyset(z, domain);
    if (!ks)
        return 1;
    uint8_t key[32];
    if (!user_id || strlen(user_id) != DPS_KEY_LEN || !zmq_z85_decode(key, user_id))
        return 0;
    pthread_mutex_lock(&z->mu);
    int ok = s_has(ks, key);
    pthread_mutex_unlock(&z->mu);
    return ok;
}

uint64_t zap_removals(zap_handler *z, const char *domain)
{
    keyset *ks = s_keyset(z, domain);
    if (!ks)
        return 0;
    pthread_mutex_lock(&z->mu);
    uint64_t n = ks->removals;
    pthread_mutex_unlock(&z->mu);
    return n;
}

void zap_reload(zap_handler *z)
{
    if (z)
        z->reload = 1;
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
