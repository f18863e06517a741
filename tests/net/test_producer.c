/* test_producer - the client side's end of a job, against sockets this test
   plays the collector with: dps_producer_close reports the batches a
   collector did not confirm (gone, partial answer, refusal, no status
   endpoint) within linger_ms, a cancel flag (dps_producer_set_cancel) ends
   every wait that has no deadline, and a subscriber's from_epoch skips
   older snapshots, the welcome message included.  Over ipc:// in a temporary
   directory, plaintext (ipc is local). */
#include "check.h"
#include "dpsubspace.h"
#include "dpsubspace_net.h"
#include "transport.h"
#include "wire.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

enum { D = 8, BATCH = 4 };

/* A fake status endpoint: a REP socket answering every StatusRequest with
   these counts for whichever producer asks, until stop is set. */
typedef struct {
    void *ctx;
    char endpoint[256];
    volatile uint64_t taken, refused; /* set by the test between producers */
    volatile int credit;              /* 0: an old collector's reply, without credit */
    volatile uint64_t grant;          /* with credit: seqs below this may be sent */
    volatile int stop, ready;
} s_status_server;

static void *s_serve(void *arg)
{
    s_status_server *srv = arg;
    void *rep = zmq_socket(srv->ctx, ZMQ_REP);
    int zero = 0;
    zmq_setsockopt(rep, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_bind(rep, srv->endpoint) != 0) {
        zmq_close(rep);
        srv->ready = -1;
        return NULL;
    }
    srv->ready = 1;
    while (!srv->stop) {
        zmq_pollitem_t it = {rep, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 50) <= 0)
            continue;
        char buf[512];
        if (zmq_recv(rep, buf, sizeof buf, 0) < 0)
            continue;
        dps_collector_status st;
        memset(&st, 0, sizeof st);
        st.d = D;
        st.producer_batches = srv->taken;
        st.producer_refused = srv->refused;
        st.credit = srv->credit;
        st.credit_seq_end = srv->grant;
        unsigned char *out = NULL;
        size_t len = 0;
        if (wire_status_encode(&st, &out, &len) == DPS_OK)
            zmq_send(rep, out, len, 0);
        free(out);
    }
    zmq_close(rep);
    return NULL;
}

/* A producer of BATCH-row batches that has sent n_batches full batches and
   half a batch more (still buffered) to the PULL socket at ingest. */
static dps_producer *s_producer(const char *ingest, const char *status, int linger_ms, int n_batches)
{
    dps_producer_opts o;
    dps_producer_opts_init(&o, ingest, D);
    o.batch_rows = BATCH;
    o.status_endpoint = status;
    o.linger_ms = linger_ms;
    o.sec.plaintext = 1;
    o.producer_id = "test-producer";
    dps_producer *p = NULL;
    if (dps_producer_new(&p, &o) != DPS_OK)
        return NULL;
    if (dps_producer_wait_ready(p, 5000) != DPS_OK) {
        dps_producer_destroy(&p);
        return NULL;
    }
    float rows[BATCH * D];
    for (size_t i = 0; i < BATCH * D; i++)
        rows[i] = 0.25f;
    for (int b = 0; b < n_batches; b++)
        dps_producer_send_rows(p, rows, BATCH, D);
    dps_producer_send_rows(p, rows, BATCH / 2, D);
    return p;
}

/* close: its result, the unconfirmed count and how long it took. */
static int s_close(dps_producer *p, uint64_t *unconfirmed, uint64_t *ms)
{
    uint64_t t0 = net_now_ms();
    int rc = dps_producer_close(p, unconfirmed);
    *ms = net_now_ms() - t0;
    return rc;
}

/* A fake collector: a PULL socket bound at ingest (returned) and srv's status
   endpoint served by thread th. */
static void *s_fake_collector(void *ctx, const char *ingest, s_status_server *srv, pthread_t *th)
{
    void *pull = zmq_socket(ctx, ZMQ_PULL);
    int zero = 0;
    zmq_setsockopt(pull, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(zmq_bind(pull, ingest) == 0, "bind the fake ingest");
    pthread_create(th, NULL, s_serve, srv);
    while (!srv->ready)
        usleep(1000);
    return pull;
}

static void s_test_close(const char *dir)
{
    char ingest[256], status[256], nobody[256];
    snprintf(ingest, sizeof ingest, "ipc://%s/in", dir);
    snprintf(status, sizeof status, "ipc://%s/st", dir);
    snprintf(nobody, sizeof nobody, "ipc://%s/nobody", dir);
    void *ctx = zmq_ctx_new();
    s_status_server srv = {.ctx = ctx};
    snprintf(srv.endpoint, sizeof srv.endpoint, "%s", status);
    pthread_t th;
    void *pull = s_fake_collector(ctx, ingest, &srv, &th);
    CHECK(srv.ready == 1, "bind the fake status endpoint");
    uint64_t un = 99, ms = 0;

    /* 1. The collector is gone (nothing answers on its status endpoint): 3
       full batches and the partial one were sent, none confirmed. */
    dps_producer *p = s_producer(ingest, nobody, 400, 3);
    CHECK(p != NULL, "producer 1 ready");
    if (p) {
        int rc = s_close(p, &un, &ms);
        CHECK(rc == DPS_ETIMEOUT, "collector gone: close says DPS_ETIMEOUT (got %s)", dps_strerror(rc));
        CHECK(un == 4, "collector gone: 4 batches not confirmed (got %llu)", (unsigned long long)un);
        /* linger_ms 400, then at most one status query of ~1 ms past it and
           the socket closed without lingering: 2 s is a wide margin */
        CHECK(ms >= 400 && ms < 2000, "close returned after linger_ms (%llu ms)", (unsigned long long)ms);
        float row[D] = {0};
        CHECK(dps_producer_send_rows(p, row, 1, D) == DPS_ESTATE, "no sending after close");
        uint64_t un2 = 0;
        CHECK(dps_producer_close(p, &un2) == DPS_ETIMEOUT && un2 == 4, "a second close repeats the result");
        dps_producer_destroy(&p);
        CHECK(p == NULL, "destroy after close");
    }

    /* 2. Every batch confirmed: DPS_OK, 0, without waiting for linger_ms. */
    srv.taken = 4;
    p = s_producer(ingest, status, 5000, 3);
    if (p) {
        int rc = s_close(p, &un, &ms);
        CHECK(rc == DPS_OK && un == 0, "all confirmed: DPS_OK, 0 unconfirmed (got %s, %llu)", dps_strerror(rc),
              (unsigned long long)un);
        CHECK(ms < 2000, "all confirmed: close did not wait for linger_ms (%llu ms)", (unsigned long long)ms);
        uint64_t t = 0, r = 9;
        dps_producer_confirmed(p, &t, &r);
        CHECK(t == 4 && r == 0, "dps_producer_confirmed: 4 taken, 0 refused");
        dps_producer_destroy(&p);
    }

    /* 3. Only 2 of 4 taken before the collector stopped answering for us. */
    srv.taken = 2;
    p = s_producer(ingest, status, 400, 3);
    if (p) {
        int rc = s_close(p, &un, &ms);
        CHECK(rc == DPS_ETIMEOUT && un == 2, "2 of 4 taken: DPS_ETIMEOUT, 2 unconfirmed (got %s, %llu)",
              dps_strerror(rc), (unsigned long long)un);
        dps_producer_destroy(&p);
    }

    /* 4. One refused as a whole (e.g. wrong dimension): answered, not taken. */
    srv.taken = 3;
    srv.refused = 1;
    p = s_producer(ingest, status, 5000, 3);
    if (p) {
        int rc = s_close(p, &un, &ms);
        CHECK(rc == DPS_EPROTO && un == 1, "1 refused: DPS_EPROTO, 1 unconfirmed (got %s, %llu)", dps_strerror(rc),
              (unsigned long long)un);
        dps_producer_destroy(&p);
    }

    /* 5. An explicit drain that timed out: close reports it without waiting again. */
    srv.taken = 1;
    srv.refused = 0;
    p = s_producer(ingest, status, 5000, 3);
    if (p) {
        CHECK(dps_producer_drain(p, 200) == DPS_ETIMEOUT, "drain of 4 with 1 taken times out");
        int rc = s_close(p, &un, &ms);
        CHECK(rc == DPS_ETIMEOUT && un == 3 && ms < 1000,
              "close after a failed drain: DPS_ETIMEOUT, 3 unconfirmed, no second wait (%s, %llu, %llu ms)",
              dps_strerror(rc), (unsigned long long)un, (unsigned long long)ms);
        dps_producer_destroy(&p);
    }

    /* 6. No status endpoint: nobody can confirm; DPS_OK, every batch counted. */
    p = s_producer(ingest, NULL, 200, 3);
    if (p) {
        int rc = s_close(p, &un, &ms);
        CHECK(rc == DPS_OK && un == 4, "no status endpoint: DPS_OK, all 4 unconfirmed (got %s, %llu)",
              dps_strerror(rc), (unsigned long long)un);
        dps_producer_destroy(&p);
    }
    CHECK(dps_producer_close(NULL, &un) == DPS_EINVAL && un == 0, "close(NULL): DPS_EINVAL");

    srv.stop = 1;
    pthread_join(th, NULL);
    zmq_close(pull);
    zmq_ctx_term(ctx);
}

/* Batches waiting on pull, read within ms. */
static int s_count(void *pull, int ms)
{
    int n = 0;
    zmq_pollitem_t it = {pull, 0, ZMQ_POLLIN, 0};
    while (zmq_poll(&it, 1, ms) > 0) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, pull, 0) >= 0)
            n++;
        zmq_msg_close(&m);
    }
    return n;
}

/* Credit (issue 9 item 5): a producer with a status endpoint sends only the
   batches granted, and against an old collector (a reply without credit) it
   sends as before. */
static void s_test_credit(const char *dir)
{
    char ingest[256], status[256];
    snprintf(ingest, sizeof ingest, "ipc://%s/cin", dir);
    snprintf(status, sizeof status, "ipc://%s/cst", dir);
    void *ctx = zmq_ctx_new();
    s_status_server srv = {.ctx = ctx, .taken = 3};
    snprintf(srv.endpoint, sizeof srv.endpoint, "%s", status);
    pthread_t th;
    void *pull = s_fake_collector(ctx, ingest, &srv, &th);
    float rows[3 * BATCH * D];
    for (size_t i = 0; i < 3 * BATCH * D; i++)
        rows[i] = 0.25f;
    dps_producer_opts o;
    dps_producer_opts_init(&o, ingest, D);
    o.batch_rows = BATCH;
    o.status_endpoint = status;
    o.linger_ms = 2000;
    o.send_timeout_ms = 300;
    o.sec.plaintext = 1;
    o.producer_id = "credit-producer";

    /* An old collector: its reply has no credit; all 3 batches go. */
    dps_producer *p = NULL;
    CHECK(dps_producer_new(&p, &o) == DPS_OK && dps_producer_wait_ready(p, 5000) == DPS_OK, "producer ready");
    int rc = dps_producer_send_rows(p, rows, 3 * BATCH, D);
    CHECK(rc == DPS_OK, "old collector: sent without credit (%s)", dps_strerror(rc));
    int got = s_count(pull, 300);
    CHECK(got == 3, "old collector: 3 batches arrived (%d)", got);
    dps_producer_destroy(&p);

    /* A collector that grants seqs 0 and 1: the third batch waits, and times out after send_timeout_ms. */
    srv.credit = 1;
    srv.grant = 2;
    CHECK(dps_producer_new(&p, &o) == DPS_OK && dps_producer_wait_ready(p, 5000) == DPS_OK, "producer ready");
    uint64_t t0 = net_now_ms();
    rc = dps_producer_send_rows(p, rows, 3 * BATCH, D);
    uint64_t ms = net_now_ms() - t0;
    got = s_count(pull, 300);
    CHECK(rc == DPS_ETIMEOUT && got == 2, "granted 2: 2 batches sent, the third waited (%s, %d arrived)",
          dps_strerror(rc), got);
    CHECK(ms >= 300 && ms < 2000, "it waited send_timeout_ms (%llu ms)", (unsigned long long)ms);
    /* The grant grows: the waiting batch, kept in the buffer (sending its
       rows again would send them twice), goes with a flush. */
    srv.grant = 3;
    rc = dps_producer_flush(p);
    got = s_count(pull, 300);
    CHECK(rc == DPS_OK && got == 1, "granted 3: the third batch sent (%s, %d arrived)", dps_strerror(rc), got);
    dps_producer_destroy(&p);
    srv.stop = 1;
    pthread_join(th, NULL);
    zmq_close(pull);
    zmq_ctx_term(ctx);
}

/* ------------------------------------------------------------- cancel */
/* The flag a signal handler would set, set by a thread after 300 ms. */
static volatile sig_atomic_t s_cancel_flag;

static void *s_raise_later(void *arg)
{
    (void)arg;
    usleep(300 * 1000);
    s_cancel_flag = 1;
    return NULL;
}

typedef enum { OP_SEND, OP_DRAIN, OP_READY } s_op;

/* Run op on p with the flag clear, set 300 ms later: its result and how long it took. */
static int s_canceled_op(dps_producer *p, s_op op, uint64_t *ms)
{
    float rows[BATCH * D];
    for (size_t i = 0; i < BATCH * D; i++)
        rows[i] = 0.25f;
    s_cancel_flag = 0;
    uint64_t t0 = net_now_ms();
    pthread_t th;
    pthread_create(&th, NULL, s_raise_later, NULL);
    int rc = op == OP_SEND    ? dps_producer_send_rows(p, rows, BATCH, D)
             : op == OP_DRAIN ? dps_producer_drain(p, 15000)
                              : dps_producer_wait_ready(p, 15000);
    *ms = net_now_ms() - t0;
    pthread_join(th, NULL);
    return rc;
}

/* A producer of BATCH-row batches to ingest with a cancel flag; sends and
   waits give up after 15 s, so that a flag that is not read fails the test
   instead of hanging it. */
static dps_producer *s_cancelable(const char *ingest, const char *status, size_t shards)
{
    dps_producer_opts o;
    dps_producer_opts_init(&o, ingest, D);
    o.batch_rows = BATCH;
    o.status_endpoint = status;
    o.send_timeout_ms = 15000;
    o.shards = shards;
    o.sec.plaintext = 1;
    dps_producer *p = NULL;
    if (dps_producer_new(&p, &o) != DPS_OK || dps_producer_set_cancel(p, &s_cancel_flag) != DPS_OK)
        dps_producer_destroy(&p);
    return p;
}

/* Each wait without a deadline -- a send to nobody (a collector gone or
   never there), a sharded send with one rank gone, waiting for credit, the
   drain, the handshake -- ends with DPS_ECANCELED soon after the flag is set
   (300 ms in), and close then returns at once (no flush, drain or linger:
   linger_ms is the default 30 s here). */
static void s_test_cancel(const char *dir)
{
    char ingest[256], status[256], nobody[256], shard0[256];
    snprintf(ingest, sizeof ingest, "ipc://%s/xin", dir);
    snprintf(status, sizeof status, "ipc://%s/xst", dir);
    snprintf(nobody, sizeof nobody, "ipc://%s/xnobody", dir);
    snprintf(shard0, sizeof shard0, "ipc://%s/xshard", dir);
    CHECK(strcmp(dps_strerror(DPS_ECANCELED), "unknown error") != 0, "DPS_ECANCELED has a sentence");
    CHECK(dps_producer_set_cancel(NULL, &s_cancel_flag) == DPS_EINVAL, "set_cancel(NULL): DPS_EINVAL");
    uint64_t ms = 0, un = 9;

    /* 1. A send to nobody (ZMQ_IMMEDIATE: nothing queues toward a peer that never shook hands). */
    dps_producer *p = s_cancelable(nobody, NULL, 1);
    CHECK(p != NULL, "producer to nobody made");
    if (p) {
        int rc = s_canceled_op(p, OP_SEND, &ms);
        CHECK(rc == DPS_ECANCELED && ms >= 290 && ms < 10000, "send to nobody: DPS_ECANCELED after the flag (%s, %llu ms)",
              dps_strerror(rc), (unsigned long long)ms);
        uint64_t t0 = net_now_ms();
        rc = dps_producer_close(p, &un);
        ms = net_now_ms() - t0;
        CHECK(rc == DPS_ECANCELED && ms < 10000, "close with the flag set: DPS_ECANCELED, no linger (%s, %llu ms)",
              dps_strerror(rc), (unsigned long long)ms);
        /* the handshake too */
        dps_producer_destroy(&p);
        p = s_cancelable(nobody, NULL, 1);
        rc = p ? s_canceled_op(p, OP_READY, &ms) : DPS_ENOMEM;
        CHECK(rc == DPS_ECANCELED && ms >= 290 && ms < 10000, "wait_ready for nobody: DPS_ECANCELED (%s, %llu ms)",
              dps_strerror(rc), (unsigned long long)ms);
        dps_producer_destroy(&p);
    }

    /* 2. Sharded, rank 0 there and rank 1 not: part 1's send is canceled, and the producer is failed. */
    void *ctx = zmq_ctx_new(), *pull0 = zmq_socket(ctx, ZMQ_PULL);
    int zero = 0;
    zmq_setsockopt(pull0, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(zmq_bind(pull0, shard0) == 0, "rank 0's PULL bound");
    p = s_cancelable(shard0, NULL, 2);
    CHECK(p != NULL, "sharded producer made");
    if (p) {
        int rc = s_canceled_op(p, OP_SEND, &ms);
        CHECK(rc == DPS_ECANCELED && ms >= 290 && ms < 10000,
              "sharded, rank 1 not there: DPS_ECANCELED after the flag (%s, %llu ms)", dps_strerror(rc),
              (unsigned long long)ms);
        float row[D] = {0};
        CHECK(dps_producer_send_rows(p, row, 1, D) == DPS_ESTATE, "sharded: failed after the canceled send");
        uint64_t t0 = net_now_ms();
        dps_producer_destroy(&p);
        ms = net_now_ms() - t0;
        CHECK(ms < 10000, "sharded: destroy with the flag set does not linger (%llu ms)", (unsigned long long)ms);
    }
    zmq_close(pull0);

    /* 3. Credit never granted (the collector's buffer full), then a drain never answered in full. */
    s_status_server srv = {.ctx = ctx, .credit = 1, .grant = 0};
    snprintf(srv.endpoint, sizeof srv.endpoint, "%s", status);
    pthread_t th;
    void *pull = s_fake_collector(ctx, ingest, &srv, &th);
    p = s_cancelable(ingest, status, 1);
    CHECK(p != NULL && dps_producer_wait_ready(p, 5000) == DPS_OK, "producer with credit ready");
    if (p) {
        int rc = s_canceled_op(p, OP_SEND, &ms);
        CHECK(rc == DPS_ECANCELED && ms >= 290 && ms < 10000, "no credit granted: DPS_ECANCELED (%s, %llu ms)",
              dps_strerror(rc), (unsigned long long)ms);
        srv.grant = 1; /* one batch goes; the collector never confirms it */
        s_cancel_flag = 0;
        rc = dps_producer_flush(p); /* the canceled send's rows stayed buffered */
        CHECK(rc == DPS_OK, "granted: the batch sent (%s)", dps_strerror(rc));
        rc = s_canceled_op(p, OP_DRAIN, &ms);
        CHECK(rc == DPS_ECANCELED && ms >= 290 && ms < 10000, "drain never confirmed: DPS_ECANCELED (%s, %llu ms)",
              dps_strerror(rc), (unsigned long long)ms);
        srv.taken = 1; /* the flag cleared, a later drain asks again */
        s_cancel_flag = 0;
        rc = dps_producer_close(p, &un);
        CHECK(rc == DPS_OK && un == 0, "flag cleared: close drains as before (%s, %llu)", dps_strerror(rc),
              (unsigned long long)un);
        dps_producer_destroy(&p);
    }
    srv.stop = 1;
    pthread_join(th, NULL);
    zmq_close(pull);
    zmq_ctx_term(ctx);
}

/* A released snapshot of epoch e, published as number seq. */
static int s_publish(void *pub, uint64_t e, uint64_t seq)
{
    enum { K = 2 };
    float basis[K * D] = {0};
    basis[0] = 1;
    basis[D + 1] = 1;
    dps_snapshot_info in;
    memset(&in, 0, sizeof in);
    in.epoch = e;
    in.d = D;
    in.k = K;
    in.status = DPS_SNAP_RELEASED;
    in.reason = "";
    in.seq = seq;
    in.delta_target = 1e-5;
    dps_snapshot *s = NULL;
    unsigned char *buf = NULL;
    size_t len = 0;
    int rc = dps_snapshot_new(&s, &in, basis);
    if (!rc)
        rc = dps_snapshot_encode(s, &buf, &len);
    if (!rc && zmq_send(pub, buf, len, 0) < 0)
        rc = DPS_ENET;
    free(buf);
    dps_snapshot_destroy(&s);
    return rc;
}

/* The epochs a subscriber receives (up to 8; -1 ends), after an XPUB sent
   epochs 0, 1, 2 to it; from_epoch 0: no setting. */
static int s_epochs_seen(const char *dir, uint64_t from_epoch, long out[8], uint64_t *missed)
{
    char ep[256];
    snprintf(ep, sizeof ep, "ipc://%s/pub", dir);
    void *ctx = zmq_ctx_new();
    void *xpub = zmq_socket(ctx, ZMQ_XPUB);
    int zero = 0;
    zmq_setsockopt(xpub, ZMQ_LINGER, &zero, sizeof zero);
    int rc = zmq_bind(xpub, ep) == 0 ? DPS_OK : DPS_ENET;
    dps_security sec = {.plaintext = 1};
    dps_subscriber *s = NULL;
    if (!rc)
        rc = dps_subscriber_new(&s, ep, &sec);
    if (!rc && from_epoch)
        rc = dps_subscriber_set_from_epoch(s, from_epoch);
    char sub[16];
    zmq_pollitem_t it = {xpub, 0, ZMQ_POLLIN, 0};
    if (!rc && (zmq_poll(&it, 1, 5000) != 1 || zmq_recv(xpub, sub, sizeof sub, 0) < 1))
        rc = DPS_ETIMEOUT; /* the subscription did not arrive */
    for (uint64_t e = 0; e < 3 && !rc; e++)
        rc = s_publish(xpub, e, e + 1);
    int n = 0;
    while (!rc && n < 7) {
        dps_snapshot *snap = NULL;
        if (dps_subscriber_recv(s, 500, &snap) != DPS_OK)
            break;
        dps_snapshot_info in;
        dps_snapshot_get_info(snap, &in);
        out[n++] = (long)in.epoch;
        dps_snapshot_destroy(&snap);
    }
    out[n] = -1;
    if (s)
        dps_subscriber_counts(s, NULL, missed, NULL);
    if (s && dps_subscriber_latest(s)) {
        dps_snapshot_info in;
        dps_snapshot_get_info(dps_subscriber_latest(s), &in);
        if ((long)in.epoch != (n ? out[n - 1] : -2))
            rc = DPS_ESTATE;
    }
    dps_subscriber_destroy(&s);
    zmq_close(xpub);
    zmq_ctx_term(ctx);
    return rc;
}

static void s_test_from_epoch(const char *dir)
{
    long seen[8];
    uint64_t missed = 9;
    CHECK(s_epochs_seen(dir, 0, seen, &missed) == DPS_OK, "subscriber without from_epoch");
    CHECK(seen[0] == 0 && seen[1] == 1 && seen[2] == 2 && seen[3] == -1, "without from_epoch: epochs 0, 1, 2");
    CHECK(s_epochs_seen(dir, 1, seen, &missed) == DPS_OK, "subscriber from epoch 1");
    CHECK(seen[0] == 1 && seen[1] == 2 && seen[2] == -1, "from epoch 1: epochs 1, 2 (got %ld, %ld, %ld)", seen[0],
          seen[1], seen[2]);
    CHECK(missed == 0, "a skipped snapshot is not counted as missed (%llu)", (unsigned long long)missed);
    CHECK(s_epochs_seen(dir, 3, seen, &missed) == DPS_OK && seen[0] == -1, "from epoch 3: nothing, no latest basis");
    CHECK(dps_subscriber_set_from_epoch(NULL, 1) == DPS_EINVAL, "set_from_epoch(NULL): DPS_EINVAL");
}

/* A sharded producer (opts.shards = 2): each part's batches reach its own
   endpoint (ipc://...-1 for shard 1), under one id, one nonzero stream, the
   same seqs, each with its slice; the slices put back together are the rows.
   Then the FSDP-style producer of one shard: what it refuses. */
static void s_test_shards(const char *dir)
{
    enum { DS = 7, N = 5 };
    char base[256], ep1[300];
    snprintf(base, sizeof base, "ipc://%s/shard", dir);
    CHECK(dps_shard_endpoint(base, 1, ep1, sizeof ep1) == DPS_OK, "rank 1's endpoint");
    void *ctx = zmq_ctx_new(), *pull[2] = {zmq_socket(ctx, ZMQ_PULL), zmq_socket(ctx, ZMQ_PULL)};
    CHECK(zmq_bind(pull[0], base) == 0 && zmq_bind(pull[1], ep1) == 0, "two ranks' PULL sockets bound");
    dps_producer_opts o;
    dps_producer_opts_init(&o, base, DS);
    o.batch_rows = 2;
    o.shards = 2;
    o.sec.plaintext = 1;
    o.linger_ms = 2000;
    dps_producer *p = NULL;
    CHECK(dps_producer_new(&p, &o) == DPS_OK && dps_producer_wait_ready(p, 5000) == DPS_OK, "sharded producer ready");
    float rows[N * DS], back[N * DS];
    for (size_t i = 0; i < N * DS; i++)
        rows[i] = (float)i + 0.5f;
    memset(back, 0, sizeof back);
    CHECK(p && dps_producer_send_rows(p, rows, N, DS) == DPS_OK && dps_producer_flush(p) == DPS_OK, "sent and flushed");
    int fields = 1, rowsback = 0;
    uint64_t stream = 0;
    for (int r = 0; r < 2; r++) {
        size_t c0, c1, got = 0;
        dps_shard_slice(DS, 2, (size_t)r, &c0, &c1);
        for (uint64_t seq = 0; seq < 3; seq++) { /* 2 + 2 + 1 rows */
            zmq_msg_t m;
            zmq_msg_init(&m);
            int rcv = zmq_msg_recv(&m, pull[r], 0);
            wire_rows wr;
            if (rcv < 0 || wire_rows_decode(zmq_msg_data(&m), zmq_msg_size(&m), c1 - c0, &wr) != WIRE_OK) {
                fields = 0;
                zmq_msg_close(&m);
                break;
            }
            if (wire_rows_own(&wr) != DPS_OK) {
                fields = 0;
                wire_rows_release(&wr);
                zmq_msg_close(&m);
                break;
            }
            if (!stream)
                stream = wr.stream;
            fields &= wr.shard == (uint32_t)r && wr.shards == 2 && wr.full_dim == DS && wr.stream == stream &&
                      wr.seq == seq && !strcmp(wr.producer_id, dps_producer_id(p));
            for (size_t i = 0; i < wr.n && got + i < N; i++)
                memcpy(back + (got + i) * DS + c0, wr.rows + i * wr.dim, wr.dim * sizeof(float));
            got += wr.n;
            wire_rows_release(&wr);
            zmq_msg_close(&m);
        }
        rowsback += (int)got;
    }
    CHECK(fields && stream != 0, "each part's batches: its shard, one nonzero stream, one id, seqs 0, 1, 2");
    CHECK(rowsback == 2 * N && memcmp(back, rows, sizeof rows) == 0, "the slices put back together are the rows");
    dps_producer_destroy(&p);
    /* one shard of rows held elsewhere (FSDP): refused without a stream, an id, the shard's width */
    dps_producer_opts f;
    dps_producer_opts_init(&f, base, 3); /* shard 1 of 7 over 2: [4, 7), width 3 */
    f.shards = 2;
    f.full_dim = DS;
    f.shard = 1;
    f.sec.plaintext = 1;
    f.producer_id = "fsdp";
    f.stream = 0;
    CHECK(dps_producer_new(&p, &f) == DPS_EINVAL, "a shard without a stream refused");
    f.stream = 9;
    f.dim = 4;
    CHECK(dps_producer_new(&p, &f) == DPS_EINVAL, "a shard of the wrong width refused");
    f.dim = 3;
    f.shard = 2;
    CHECK(dps_producer_new(&p, &f) == DPS_EINVAL, "shard >= shards refused");
    f.shard = 1;
    f.producer_id = NULL;
    CHECK(dps_producer_new(&p, &f) == DPS_EINVAL, "a shard without a shared producer id refused");
    f.producer_id = "fsdp";
    f.linger_ms = 0;
    CHECK(dps_producer_new(&p, &f) == DPS_OK, "a valid shard producer");
    dps_producer_destroy(&p);
    zmq_close(pull[0]);
    zmq_close(pull[1]);
    zmq_ctx_term(ctx);
}

int main(void)
{
    char dir[] = "/tmp/dps-test-producer-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    s_test_close(dir);
    s_test_credit(dir);
    s_test_from_epoch(dir);
    s_test_shards(dir);
    s_test_cancel(dir);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        NOTE("could not remove %s", dir);
    return check_summary();
}
