/* producer.c - streams rows to a collector's PULL socket as RowBatch messages.

   Who owns what: the producer owns its ZeroMQ context and PUSH socket and one
   batch buffer (batch_rows x dim).  Backpressure: ZMQ_IMMEDIATE keeps
   messages from queueing toward a peer that has not completed its handshake,
   and sends block (in slices of 200 ms, so that an authentication refusal is
   noticed) while the collector's queue and ours are full: rows are never
   dropped by us.  Before it disconnects, a producer with a status endpoint
   asks the collector until it confirms every batch was taken (drain): libzmq
   discards messages still queued toward a PULL socket when their sender's
   connection closes, so lingering alone does not guarantee delivery.
   dps_producer_close says how that ended (the batches the collector did not
   confirm); dps_producer_destroy, which cannot return it, closes if the
   caller did not and then frees.
   Credit (src/collector/credit.h): with a status endpoint
   the producer sends a batch only once the collector has granted its seq,
   asking on a REQ socket it keeps (cred) for `ahead` batches at a time (1,
   doubling up to CREDIT_AHEAD at each question: a producer with a few
   batches to send does not hold credit it will not use), again when half
   of them are left (without waiting for the reply), and with a
   backoff of 2 ms doubling to 50 ms while it has none; the
   collector grants each its share of the ingest buffer, so many producers
   slow down instead of growing the collector's memory.  A collector that
   does not grant credit (an old one: the reply's credit is false), or a
   status endpoint that does not answer the first question within
   CREDIT_FIRST_MS, leaves the producer sending as before.
   Sharded (opts.shards = R > 1): the producer is R parts, one per
   collector rank, each a producer of its own (socket, batches, seq) sending
   its slice of every row (dps_shard_slice) under one id and one random
   stream; the parts get the same rows in the same calls, so their batches
   and seqs are the same and rank r pairs its slice with rank 0's by
   (id, stream, seq).  After any part fails the producer is failed: a retry
   would send the same rows under different seqs on different parts.  Part 0
   alone has the status endpoint (rank 0's): rank 0 counts a batch taken
   only once every rank took its slice, so part 0's drain confirms all; the
   other parts close after it.
   Cancel (dps_producer_set_cancel): sends have no deadline by default (a
   slow collector is legitimate), so a collector that died or never existed
   blocks a send for good, and a program's SIGTERM handler cannot make it
   return.  Every wait here is already a loop of short slices (the send's
   ZMQ_SNDTIMEO of 200 ms, the credit reply and the handshake polled in
   slices of at most 200 ms, the drain's status queries of at most 1 s), so
   each slice also reads a caller's flag and ends the wait with
   DPS_ECANCELED once it is set: no deadline when nobody asks, a prompt end
   when someone does.  A flag the caller owns (a volatile sig_atomic_t, set
   from a signal handler) rather than a call into the producer from the
   handler: setting it is async-signal-safe, and one flag serves any number
   of producers (the parts of a sharded one share their parent's).
   Run: every producer draws a random nonzero run number and sends
   it with every batch (RowBatch.stream) and status question, so that the
   collector matches credit and counts to this run and refuses a seq of it
   twice; the parts of a sharded producer share theirs (the stream).
   A dead collector: once the collector has been heard (a status
   reply; without a status endpoint, a handshake), every wait for it --
   credit, a blocked send, the drain -- ends with DPS_EGONE after
   timeout_ms (DPS_PRODUCER_COLLECTOR_TIMEOUT_MS unless set) without a word
   from it: with a status endpoint, a question at least once a second while
   a send is blocked (the collector answers them while its ingest waits for a
   release); without, the connection down that long.  A collector that
   never answered is waited for as before (wait_ready bounds that).  A
   reply that says our key was revoked ends every wait with DPS_EAUTH.
   Batch limit: the collector's status reply names the most rows a batch
   may hold (libzmq drops a larger message with its connection); a producer
   with a status endpoint learns it with its first credit question and sends
   larger batches in pieces (not a part of a sharded producer: its parts'
   seqs must stay the same on every rank). */
#include "dpsubspace_net.h"
#include "transport.h"
#include "wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

struct dps_producer {
    void *ctx, *sock;
    net_monitor mon;
    char status_ep[256];
    char keys[3][DPS_KEY_LEN + 1]; /* server, public, secret: copies for drain */
    dps_security sec;
    size_t dim, batch_rows;
    char id[WIRE_MAX_PRODUCER_ID + 1];
    int send_timeout_ms, linger_ms;
    float *buf;
    size_t nbuf;
    uint64_t seq, rows_sent, batches_sent;
    uint64_t taken, refused; /* the collector's last answer about our batches */
    uint64_t drained_at;     /* batches_sent when the last drain ended (UINT64_MAX: none) */
    int drain_rc;            /* how it ended: close does not wait again for the same batches */
    int closed, close_rc;    /* dps_producer_close ran, and what it returned */
    uint64_t unconfirmed;    /* its count of batches not confirmed taken */
    void *cred;              /* REQ to the status endpoint, for credit */
    int credit;              /* 0: not known yet; 1: the collector grants credit; -1: send without */
    uint64_t credit_end;     /* the collector's grant: we may send every seq below it */
    uint64_t ahead;          /* batches asked for at the last question */
    int asking;              /* a question is out on cred, its reply not read yet */
    wire_shard shard;        /* a part of a sharded producer: the slice its batches hold */
    const wire_shard *sharded; /* &shard in a part, NULL otherwise */
    dps_producer **part;     /* sharded: the R parts (NULL: not sharded)         */
    size_t parts;
    float *split;            /* sharded: batch_rows x the widest slice, scratch   */
    int failed;              /* sharded: a part failed; nothing more is sent      */
    const volatile sig_atomic_t *cancel; /* the caller's flag: nonzero ends every wait */
    uint64_t run;            /* our run (RowBatch.stream): shard.stream */
    size_t limit;            /* the collector's max_batch_rows (0: not known) */
    int timeout_ms;          /* the collector timeout (0: none) */
    uint64_t heard_ms;       /* the collector's last status reply (0: none yet) */
    uint64_t pinged_ms;      /* our last question while a send was blocked */
    int revoked;             /* a reply said our key left the authorized keys */
};

#define CREDIT_AHEAD 64      /* batches asked for at a time (the collector grants at most a fair share) */
#define CREDIT_FIRST_MS 2000 /* an unanswered first question: send without credit */

void dps_producer_opts_init(dps_producer_opts *o, const char *endpoint, size_t dim)
{
    memset(o, 0, sizeof *o);
    o->endpoint = endpoint;
    o->dim = dim;
    o->batch_rows = 256;
    o->producer_id = NULL;
    o->sndhwm = 64;
    o->linger_ms = 30000;
}

static int s_sharded_new(dps_producer **out, const dps_producer_opts *o);

/* A random nonzero run number (the collector refuses a sharded batch naming
   none, and 0 means "no run" to it). */
static int s_draw_run(uint64_t *run)
{
    dps_rng *r = NULL;
    int rc = dps_rng_new_secure(&r);
    *run = rc ? 0 : dps_rng_u64(r) | 1;
    dps_rng_destroy(&r);
    return rc;
}

/* The caller's cancel flag is set: the wait in progress ends (DPS_ECANCELED). */
static int s_canceled(const dps_producer *p) { return p->cancel && *p->cancel; }

/* A producer's struct with its row shape, for both kinds (checked options). */
static dps_producer *s_alloc(const dps_producer_opts *o)
{
    dps_producer *p = calloc(1, sizeof *p);
    if (p) {
        p->dim = o->dim;
        p->batch_rows = o->batch_rows;
    }
    return p;
}

/* The producer's id: the caller's, or one of our own, unique, so that the
   collector's per-producer counts are ours alone. */
static void s_set_id(dps_producer *p, const char *given)
{
    if (given) {
        snprintf(p->id, sizeof p->id, "%s", given);
        return;
    }
    dps_rng *r = NULL;
    uint64_t tag = (dps_rng_new_secure(&r) == DPS_OK) ? dps_rng_u64(r) : net_now_ms();
    dps_rng_destroy(&r);
    snprintf(p->id, sizeof p->id, "producer-%ld-%08llx", (long)getpid(), (unsigned long long)(tag & 0xffffffffu));
}

int dps_producer_new(dps_producer **out, const dps_producer_opts *o)
{
    if (!out || !o || !o->endpoint || o->dim == 0 || o->batch_rows == 0 || o->sndhwm < 1)
        return DPS_EINVAL;
    *out = NULL;
    if ((o->producer_id && strlen(o->producer_id) > WIRE_MAX_PRODUCER_ID) || o->batch_rows > SIZE_MAX / 4 / o->dim)
        return DPS_EINVAL;
    if (o->shards > 1 && !o->full_dim)
        return s_sharded_new(out, o);
    char shard_ep[512];
    const char *endpoint = o->endpoint;
    if (o->full_dim) { /* one shard of rows held elsewhere in whole (see dpsubspace_net.h) */
        size_t c0, c1;
        dps_shard_slice(o->full_dim, o->shards, o->shard, &c0, &c1);
        if (o->shards < 2 || o->shard >= o->shards || o->full_dim < o->shards || o->full_dim > UINT32_MAX ||
            o->dim != c1 - c0 || o->stream == 0 || !o->producer_id ||
            dps_shard_endpoint(o->endpoint, o->shard, shard_ep, sizeof shard_ep) != DPS_OK)
            return DPS_EINVAL;
        endpoint = shard_ep;
    }
    dps_producer *p = s_alloc(o);
    if (!p)
        return DPS_ENOMEM;
    p->drained_at = UINT64_MAX;
    p->timeout_ms = DPS_PRODUCER_COLLECTOR_TIMEOUT_MS;
    p->send_timeout_ms = o->send_timeout_ms;
    p->linger_ms = o->linger_ms;
    s_set_id(p, o->producer_id);
    if (o->status_endpoint)
        snprintf(p->status_ep, sizeof p->status_ep, "%s", o->status_endpoint);
    p->sec.plaintext = o->sec.plaintext;
    const char *k3[3] = {o->sec.server_public_key, o->sec.public_key, o->sec.secret_key};
    for (int i = 0; i < 3; i++)
        if (k3[i])
            snprintf(p->keys[i], sizeof p->keys[i], "%s", k3[i]);
    p->sec.server_public_key = o->sec.server_public_key ? p->keys[0] : NULL;
    p->sec.public_key = o->sec.public_key ? p->keys[1] : NULL;
    p->sec.secret_key = o->sec.secret_key ? p->keys[2] : NULL;
    p->buf = malloc(o->batch_rows * o->dim * sizeof *p->buf);
    p->ctx = zmq_ctx_new();
    int rc = (p->buf && p->ctx) ? DPS_OK : DPS_ENOMEM;
    if (!rc && !(p->sock = zmq_socket(p->ctx, ZMQ_PUSH)))
        rc = DPS_ENET;
    if (!rc)
        rc = net_client_security(p->sock, endpoint, &o->sec);
    int one = 1, hwm = o->sndhwm, slice = 200;
    if (!rc && (zmq_setsockopt(p->sock, ZMQ_IMMEDIATE, &one, sizeof one) ||
                zmq_setsockopt(p->sock, ZMQ_SNDHWM, &hwm, sizeof hwm) ||
                zmq_setsockopt(p->sock, ZMQ_SNDTIMEO, &slice, sizeof slice)))
        rc = DPS_ENET;
    if (!rc) /* with disconnects: a client's monitor tracks whether its connection is up */
        rc = net_monitor_start(p->ctx, p->sock, &p->mon, 1);
    if (!rc && zmq_connect(p->sock, endpoint) != 0)
        rc = DPS_ENET;
    if (rc) {
        p->linger_ms = 0;
        dps_producer_destroy(&p);
        return rc;
    }
    if (o->full_dim) {
        p->shard = (wire_shard){(uint32_t)o->shard, (uint32_t)o->shards, (uint32_t)o->full_dim, o->stream};
    } else if ((rc = s_draw_run(&p->shard.stream)) != DPS_OK) {
        dps_producer_destroy(&p);
        return rc;
    }
    p->sharded = &p->shard;
    p->run = p->shard.stream;
    *out = p;
    return DPS_OK;
}

/* R parts, each a producer of one rank's slice (see the top of the file). */
static int s_sharded_new(dps_producer **out, const dps_producer_opts *o)
{
    if (o->shards > o->dim)
        return DPS_EINVAL;
    dps_producer *p = s_alloc(o);
    if (!p)
        return DPS_ENOMEM;
    p->parts = o->shards;
    uint64_t stream = 0;
    int rc = s_draw_run(&stream);
    p->run = stream;
    s_set_id(p, o->producer_id);
    size_t c0, c1;
    dps_shard_slice(o->dim, o->shards, 0, &c0, &c1); /* shard 0 is a widest */
    p->part = calloc(o->shards, sizeof *p->part);
    if (!p->part)
        p->parts = 0;
    p->split = o->batch_rows > SIZE_MAX / sizeof(float) / (c1 - c0) ? NULL
                                                                     : malloc(o->batch_rows * (c1 - c0) * sizeof(float));
    if (!rc && (!p->part || !p->split))
        rc = DPS_ENOMEM;
    for (size_t s = 0; s < o->shards && !rc; s++) { /* each part: a producer of one shard (full_dim) */
        dps_producer_opts po = *o;
        dps_shard_slice(o->dim, o->shards, s, &c0, &c1);
        po.dim = c1 - c0;
        po.full_dim = o->dim;
        po.shard = s;
        po.stream = stream;
        po.producer_id = p->id;
        po.status_endpoint = s == 0 ? o->status_endpoint : NULL;
        rc = dps_producer_new(&p->part[s], &po);
    }
    if (rc) {
        dps_producer_destroy(&p);
        return rc;
    }
    *out = p;
    return DPS_OK;
}

int dps_producer_set_cancel(dps_producer *p, const volatile sig_atomic_t *flag)
{
    if (!p)
        return DPS_EINVAL;
    p->cancel = flag;
    for (size_t r = 0; r < p->parts; r++)
        if (p->part[r])
            p->part[r]->cancel = flag;
    return DPS_OK;
}

int dps_producer_wait_ready(dps_producer *p, int timeout_ms)
{
    if (!p)
        return DPS_EINVAL;
    uint64_t end = net_now_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);
    for (size_t r = 0; r < p->parts; r++) { /* every rank's handshake, within one timeout_ms for all */
        uint64_t now = net_now_ms();
        int rc = dps_producer_wait_ready(p->part[r], end > now ? (int)(end - now) : 0);
        if (rc)
            return rc;
    }
    if (p->parts)
        return DPS_OK;
    for (;;) {
        net_monitor_poll(&p->mon, 50);
        if (p->mon.auth_failed)
            return DPS_EAUTH;
        if (p->mon.succeeded)
            return DPS_OK;
        if (s_canceled(p))
            return DPS_ECANCELED;
        if (net_now_ms() >= end)
            return DPS_ETIMEOUT;
    }
}

int dps_producer_set_collector_timeout(dps_producer *p, int timeout_ms)
{
    if (!p || timeout_ms < 0)
        return DPS_EINVAL;
    p->timeout_ms = timeout_ms;
    for (size_t r = 0; r < p->parts; r++)
        if (p->part[r])
            p->part[r]->timeout_ms = timeout_ms;
    return DPS_OK;
}

/* A question on the kept status socket: credit up to want_end (0: none, a
   question that only says we are here). */
static int s_ask(dps_producer *p, uint64_t want_end)
{
    wire_status_request q = {.run = p->run, .credit_from = p->seq, .credit_seq_end = want_end};
    snprintf(q.producer_id, sizeof q.producer_id, "%s", p->id);
    int rc = net_status_send(p->cred, &q);
    p->asking = rc == DPS_OK;
    return rc;
}

/* Ask for credit up to p->seq + ahead (ahead doubling up to CREDIT_AHEAD);
   the reply is read by s_credit_reply. */
static int s_credit_ask(dps_producer *p)
{
    p->ahead = p->ahead ? (2 * p->ahead < CREDIT_AHEAD ? 2 * p->ahead : CREDIT_AHEAD) : 1;
    return s_ask(p, p->seq + p->ahead);
}

/* What a reply tells us whatever the question: the collector is there, its
   batch limit, and whether our key was revoked. */
static void s_heard(dps_producer *p, const dps_collector_status *st)
{
    p->heard_ms = net_now_ms();
    if (st->refused[0])
        p->revoked = 1;
    else if (st->max_batch_rows && !p->shard.shards) /* a part keeps its batches: see the top of the file */
        p->limit = st->max_batch_rows;
}

/* Read the reply to the question out, waiting up to wait_ms: DPS_OK when
   read (the grant, or credit off from a collector that grants none). */
static int s_credit_reply(dps_producer *p, int wait_ms)
{
    dps_collector_status st;
    int rc = net_status_recv(p->cred, wait_ms, &st);
    if (rc == DPS_ETIMEOUT)
        return rc;
    p->asking = 0;
    if (rc == DPS_OK)
        s_heard(p, &st);
    if (rc == DPS_OK && st.refused[0]) {
        /* nothing else in it */
    } else if (rc == DPS_OK && !st.credit) {
        p->credit = -1;
    } else if (rc == DPS_OK) {
        p->credit = 1;
        if (st.credit_seq_end > p->credit_end)
            p->credit_end = st.credit_seq_end;
    }
    return rc;
}

/* DPS_EGONE once the collector, heard before, has been silent for the
   collector timeout, counted from its last word or from since (when the
   wait in progress began), whichever is later: a producer idle for longer
   than the timeout has not heard the collector because it asked nothing;
   DPS_EAUTH once it said our key was revoked.  Only a
   collector that grants credit answers while its ingest waits for a release
   (a sharded one does not): for the others, the connection is what counts. */
static int s_collector_alive(const dps_producer *p, uint64_t since)
{
    if (p->revoked)
        return DPS_EAUTH;
    if (!p->timeout_ms)
        return DPS_OK;
    uint64_t now = net_now_ms(), limit = (uint64_t)p->timeout_ms;
    uint64_t last = p->status_ep[0] && p->credit > 0 ? p->heard_ms /* it answers questions: the last answer */
                    : p->mon.up ? 0 : p->mon.down_ms; /* without questions: the connection, once it was up */
    if (!last)
        return DPS_OK;
    last = last > since ? last : since;
    return now - last >= limit ? DPS_EGONE : DPS_OK;
}

/* While a send is blocked: a question once a second (its reply read when it
   comes; one still unanswered is asked again, as a collector restarted
   meanwhile never answers it), so that a collector that is gone is noticed. */
static void s_ping(dps_producer *p)
{
    if (!p->cred || p->credit <= 0)
        return;
    if (p->asking)
        s_credit_reply(p, 0);
    uint64_t now = net_now_ms();
    if (now - p->pinged_ms >= 1000) {
        s_ask(p, 0);
        p->pinged_ms = now;
    }
}

/* Wait until the collector grants p->seq (DPS_OK at once when credit is
   off); up to send_timeout_ms from start, or deadline, like a send.  With
   half of the last question's batches left it asks again without waiting
   (the reply is read at a later batch), so a steady producer does not run
   dry while the collector answers. */
static int s_credit(dps_producer *p, uint64_t start, uint64_t deadline)
{
    if (!p->status_ep[0] || p->credit < 0)
        return DPS_OK;
    if (!p->cred && !(p->cred = net_status_socket(p->ctx, p->status_ep, &p->sec))) {
        p->credit = -1;
        return DPS_OK;
    }
    if (p->asking)
        s_credit_reply(p, 0);
    if (p->revoked)
        return DPS_EAUTH;
    if (p->seq < p->credit_end) {
        if (p->credit > 0 && !p->asking && p->credit_end - p->seq <= p->ahead / 2)
            s_credit_ask(p);
        return DPS_OK;
    }
    int backoff = 2;
    uint64_t asked_ms = 0, waited_from = net_now_ms();
    for (;;) {
        if (s_canceled(p))
            return DPS_ECANCELED;
        int alive = s_collector_alive(p, waited_from);
        if (alive)
            return alive;
        uint64_t now = net_now_ms(), wait = p->credit ? 1000 : CREDIT_FIRST_MS;
        if (!p->asking || now - asked_ms >= 1000) { /* a question unanswered for 1 s is asked again */
            if (s_credit_ask(p) != DPS_OK) {
                p->credit = -1;
                return DPS_OK;
            }
            asked_ms = now;
        }
        if (p->send_timeout_ms > 0)
            wait = start + (uint64_t)p->send_timeout_ms > now ? start + (uint64_t)p->send_timeout_ms - now : 0;
        if (deadline)
            wait = deadline > now ? (deadline - now < wait ? deadline - now : wait) : 0;
        /* slices of 200 ms: the cancel flag is read between them (an
           unanswered question is still asked again only after 1 s) */
        int rc = s_credit_reply(p, (int)(wait < 200 ? wait : 200) + 1);
        if (p->revoked)
            return DPS_EAUTH;
        if (p->credit < 0 || p->seq < p->credit_end)
            return DPS_OK;
        if (rc != DPS_OK && !p->credit && net_now_ms() - start >= CREDIT_FIRST_MS) {
            p->credit = -1; /* never answered: the drain will say whether anything arrived */
            return DPS_OK;
        }
        now = net_now_ms();
        if ((p->send_timeout_ms > 0 && now - start >= (uint64_t)p->send_timeout_ms) || (deadline && now >= deadline))
            return DPS_ETIMEOUT;
        if (rc == DPS_OK) { /* no credit yet: ask again soon */
            struct timespec ts = {0, (long)backoff * 1000000};
            nanosleep(&ts, NULL);
            backoff = backoff < 25 ? 2 * backoff : 50;
        }
    }
}

static void s_free_encoded(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* Send one batch of n rows (at most the collector's limit), blocking under
   backpressure: up to send_timeout_ms (0: without limit), or until deadline
   (net_now_ms; 0: none) when given, or until the collector is gone.
   ZeroMQ takes the encoded buffer as it is (zmq_msg_init_data) and frees it
   when sent, instead of copying it once more (1 MB a batch by default). */
static int s_send_one(dps_producer *p, const float *rows, size_t n, uint64_t start, uint64_t deadline)
{
    unsigned char *enc = NULL;
    size_t len = 0;
    int rc = wire_rows_encode(p->id, p->seq, rows, n, p->dim, p->sharded, &enc, &len);
    if (rc)
        return rc;
    zmq_msg_t msg;
    if (zmq_msg_init_data(&msg, enc, len, s_free_encoded, NULL) != 0) {
        free(enc);
        return DPS_ENOMEM;
    }
    for (;;) {
        if (zmq_msg_send(&msg, p->sock, 0) >= 0)
            break; /* ZeroMQ owns the buffer now */
        if (errno != EAGAIN && errno != EINTR) {
            rc = DPS_ENET;
            break;
        }
        net_monitor_poll(&p->mon, 0);
        if (p->mon.auth_failed && !p->mon.succeeded) {
            rc = DPS_EAUTH;
            break;
        }
        if (s_canceled(p)) { /* after a slice of ZMQ_SNDTIMEO (200 ms) */
            rc = DPS_ECANCELED;
            break;
        }
        s_ping(p);
        if ((rc = s_collector_alive(p, start)) != DPS_OK)
            break;
        if ((p->send_timeout_ms > 0 && net_now_ms() - start >= (uint64_t)p->send_timeout_ms) ||
            (deadline && net_now_ms() >= deadline)) {
            rc = DPS_ETIMEOUT;
            break;
        }
    }
    if (rc)
        zmq_msg_close(&msg); /* not sent: still ours (frees the buffer) */
    if (!rc) {
        p->seq++;
        p->rows_sent += n;
        p->batches_sent++;
    }
    return rc;
}

/* Send n rows as batches of at most the collector's limit, each once the
   collector granted its seq (credit); *sent: the rows sent, also on error
   (the caller keeps the rest). */
static int s_send(dps_producer *p, const float *rows, size_t n, uint64_t deadline, size_t *sent)
{
    uint64_t start = net_now_ms();
    *sent = 0;
    while (*sent < n) {
        int rc = s_credit(p, start, deadline); /* the first reply names the limit */
        size_t m = n - *sent;
        if (p->limit && m > p->limit)
            m = p->limit;
        if (!rc)
            rc = s_send_one(p, rows + *sent * p->dim, m, start, deadline);
        if (rc)
            return rc;
        *sent += m;
    }
    return DPS_OK;
}

/* ---------------------------------------------------------------- sharded */
/* Every part gets rows [0, n) in chunks of batch_rows, its slice copied out. */
static int s_sharded_send(dps_producer *p, const float *rows, size_t n)
{
    if (p->failed)
        return DPS_ESTATE;
    for (size_t i0 = 0; i0 < n; i0 += p->batch_rows) {
        size_t m = n - i0 < p->batch_rows ? n - i0 : p->batch_rows;
        for (size_t r = 0; r < p->parts; r++) {
            size_t c0, c1;
            dps_shard_slice(p->dim, p->parts, r, &c0, &c1);
            for (size_t i = 0; i < m; i++)
                memcpy(p->split + i * (c1 - c0), rows + (i0 + i) * p->dim + c0, (c1 - c0) * sizeof *rows);
            int rc = dps_producer_send_rows(p->part[r], p->split, m, c1 - c0);
            if (rc) {
                p->failed = 1;
                return rc;
            }
        }
    }
    return DPS_OK;
}

/* Flush every part (their last batches out), close part 0 (its drain
   confirms every rank's slices), then the others. */
static int s_sharded_close(dps_producer *p, uint64_t *unconfirmed)
{
    int rc = p->failed ? DPS_ESTATE : s_canceled(p) ? DPS_ECANCELED : DPS_OK;
    for (size_t r = 1; r < p->parts && !rc; r++)
        rc = dps_producer_flush(p->part[r]);
    int rc0 = p->part[0] ? dps_producer_close(p->part[0], &p->unconfirmed) : DPS_ESTATE;
    for (size_t r = 1; r < p->parts; r++) {
        int rr = p->part[r] ? dps_producer_close(p->part[r], NULL) : DPS_OK;
        if (!rc && rr && p->part[0] && !p->part[0]->status_ep[0])
            rc = rr; /* without a status endpoint the parts' own closes are all there is */
    }
    p->close_rc = rc ? rc : rc0;
    p->closed = 1;
    if (unconfirmed)
        *unconfirmed = p->unconfirmed;
    return p->close_rc;
}

static int s_flush(dps_producer *p, uint64_t deadline);

int dps_producer_send_rows(dps_producer *p, const float *rows, size_t n, size_t dim)
{
    if (!p || (!rows && n))
        return DPS_EINVAL;
    if (p->closed)
        return DPS_ESTATE;
    if (dim != p->dim)
        return DPS_EDIM;
    if (p->parts)
        return s_sharded_send(p, rows, n);
    size_t i = 0;
    while (i < n) {
        if (p->nbuf == 0 && n - i >= p->batch_rows) { /* whole batches straight from the caller */
            size_t sent = 0;
            int rc = s_send(p, rows + i * p->dim, p->batch_rows, 0, &sent);
            if (rc) { /* the rows of this batch not sent stay buffered */
                p->nbuf = p->batch_rows - sent;
                memcpy(p->buf, rows + (i + sent) * p->dim, p->nbuf * p->dim * sizeof *rows);
                return rc;
            }
            i += p->batch_rows;
            continue;
        }
        size_t take = p->batch_rows - p->nbuf;
        if (take > n - i)
            take = n - i;
        memcpy(p->buf + p->nbuf * p->dim, rows + i * p->dim, take * p->dim * sizeof *rows);
        p->nbuf += take;
        i += take;
        if (p->nbuf == p->batch_rows) {
            int rc = s_flush(p, 0);
            if (rc)
                return rc;
        }
    }
    return DPS_OK;
}

/* Send the buffered rows, if any, by deadline (0: none); those not sent stay. */
static int s_flush(dps_producer *p, uint64_t deadline)
{
    if (p->nbuf == 0)
        return DPS_OK;
    size_t sent = 0;
    int rc = s_send(p, p->buf, p->nbuf, deadline, &sent);
    p->nbuf -= sent;
    if (sent && p->nbuf)
        memmove(p->buf, p->buf + sent * p->dim, p->nbuf * p->dim * sizeof *p->buf);
    return rc;
}

int dps_producer_flush(dps_producer *p)
{
    if (!p)
        return DPS_EINVAL;
    for (size_t r = 0; r < p->parts; r++) {
        int rc = p->failed ? DPS_ESTATE : dps_producer_flush(p->part[r]);
        if (rc) {
            p->failed = 1;
            return rc;
        }
    }
    if (p->parts)
        return DPS_OK;
    return p->closed ? (p->nbuf ? DPS_ESTATE : DPS_OK) : s_flush(p, 0);
}

/* Ask the status endpoint until the collector has answered for every batch
   sent, or until deadline; records its counts and how the drain ended. */
static int s_drain(dps_producer *p, uint64_t deadline)
{
    int rc;
    uint64_t drain_from = net_now_ms();
    wire_status_request q = {.run = p->run};
    snprintf(q.producer_id, sizeof q.producer_id, "%s", p->id);
    if (p->credit > 0 && p->credit_end > p->seq) { /* the credit we will not use goes back at once */
        dps_collector_status st;
        p->asking = 0; /* REQ_CORRELATE drops the reply to a question still out */
        wire_status_request back = q;
        back.credit_from = back.credit_seq_end = p->seq;
        if (net_status_ask(p->cred, &back, 100, &st) == DPS_OK) {
            s_heard(p, &st);
            p->credit_end = st.credit_seq_end;
        }
    }
    for (;;) {
        dps_collector_status st;
        if (s_canceled(p))
            return DPS_ECANCELED; /* not how the drain ended: a later one asks again */
        uint64_t now = net_now_ms(), left = deadline > now ? deadline - now : 0;
        rc = net_status_query(p->status_ep, &p->sec, (int)(left < 1000 ? left : 1000) + 1, &q, &st);
        if (rc == DPS_OK) {
            s_heard(p, &st);
            p->taken = st.producer_batches;
            p->refused = st.producer_refused;
            if (st.producer_batches + st.producer_refused >= p->batches_sent) {
                rc = st.producer_refused ? DPS_EPROTO : DPS_OK;
                break;
            }
        } else if (rc == DPS_EAUTH) {
            break;
        } else if (rc != DPS_ETIMEOUT) {
            return rc; /* not an answer about our batches: a later drain asks again */
        }
        net_monitor_poll(&p->mon, 0);
        if (s_collector_alive(p, drain_from) == DPS_EGONE) {
            rc = DPS_EGONE;
            break;
        }
        if (net_now_ms() >= deadline) {
            rc = DPS_ETIMEOUT;
            break;
        }
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
    p->drained_at = p->batches_sent;
    p->drain_rc = rc;
    return rc;
}

int dps_producer_drain(dps_producer *p, int timeout_ms)
{
    if (!p)
        return DPS_EINVAL;
    if (p->parts) { /* every part's batches out, then rank 0 confirms all */
        int rc = dps_producer_flush(p);
        return rc ? rc : dps_producer_drain(p->part[0], timeout_ms);
    }
    if (!p->status_ep[0] || p->closed)
        return DPS_ESTATE;
    int rc = dps_producer_flush(p);
    if (rc)
        return rc;
    return s_drain(p, net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0));
}

const char *dps_producer_id(const dps_producer *p) { return p ? p->id : ""; }

uint64_t dps_producer_disconnects(const dps_producer *p)
{
    if (p && p->parts) {
        uint64_t n = 0;
        for (size_t r = 0; r < p->parts; r++)
            n += p->part[r] ? dps_producer_disconnects(p->part[r]) : 0;
        return n;
    }
    return p ? p->mon.disconnects : 0;
}

void dps_producer_counts(const dps_producer *p, uint64_t *rows_sent, uint64_t *batches_sent)
{
    if (p && p->parts) /* the parts send the same batches; part 0's were confirmed */
        p = p->part[0];
    if (rows_sent)
        *rows_sent = p->rows_sent;
    if (batches_sent)
        *batches_sent = p->batches_sent;
}

void dps_producer_confirmed(const dps_producer *p, uint64_t *taken, uint64_t *refused)
{
    if (p && p->parts)
        p = p->part[0];
    if (taken)
        *taken = p ? p->taken : 0;
    if (refused)
        *refused = p ? p->refused : 0;
}

int dps_producer_close(dps_producer *p, uint64_t *unconfirmed)
{
    if (unconfirmed)
        *unconfirmed = 0;
    if (!p)
        return DPS_EINVAL;
    if (p->closed) {
        if (unconfirmed)
            *unconfirmed = p->unconfirmed;
        return p->close_rc;
    }
    if (p->parts)
        return s_sharded_close(p, unconfirmed);
    int rc = DPS_OK;
    uint64_t deadline = net_now_ms() + (uint64_t)(p->linger_ms > 0 ? p->linger_ms : 0);
    if (p->sock) {
        if (p->mon.auth_failed && !p->mon.succeeded)
            rc = DPS_EAUTH;
        else if (s_canceled(p))
            rc = DPS_ECANCELED; /* told to stop: no flush, no drain, no linger */
        else
            rc = s_flush(p, deadline); /* a dead collector must not hold us past linger_ms */
        int drc = DPS_OK;
        if (p->status_ep[0] && !rc && p->batches_sent) {
            if (p->drained_at == p->batches_sent) /* a drain already ended for these batches */
                drc = p->drain_rc;
            else
                drc = s_drain(p, deadline);
        }
        if (!rc)
            rc = drc;
        net_monitor_poll(&p->mon, 0);
        if (!rc && !p->status_ep[0] && p->mon.disconnects)
            rc = DPS_ENET; /* nobody confirms, but the collector ended our connection: what was on it is lost */
        net_monitor_stop(p->sock, &p->mon);
        if (p->cred)
            zmq_close(p->cred);
        p->cred = NULL;
        /* after a failed drain lingering would only delay the report: the
           collector's PULL socket drops what it has not taken when we go */
        int linger = rc || p->mon.auth_failed ? 0 : p->linger_ms;
        zmq_setsockopt(p->sock, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(p->sock);
        p->sock = NULL;
    }
    /* without a status endpoint nobody confirmed anything: every batch counts */
    uint64_t taken = p->status_ep[0] ? p->taken : 0;
    p->unconfirmed = (p->batches_sent > taken ? p->batches_sent - taken : 0) + (p->nbuf ? 1 : 0);
    p->closed = 1;
    p->close_rc = rc;
    if (unconfirmed)
        *unconfirmed = p->unconfirmed;
    return rc;
}

void dps_producer_destroy(dps_producer **pp)
{
    if (!pp || !*pp)
        return;
    dps_producer *p = *pp;
    dps_producer_close(p, NULL);
    for (size_t r = 0; r < p->parts; r++)
        dps_producer_destroy(&p->part[r]);
    free(p->part);
    free(p->split);
    if (p->ctx)
        zmq_ctx_term(p->ctx);
    free(p->buf);
    free(p);
    *pp = NULL;
}
