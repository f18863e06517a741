/* ingest.c - batches into dps-collector: decode and validate a message
   (refused and counted as a whole when malformed), check its key is still
   authorized, push its rows into the estimator (sealing epochs as they
   fill, for the release thread), count per producer; and the ingest memory bound (below).
   Who owns what: borrows the collector (collector.h); each message is
   released here. */
#include "collector.h"

#include <inttypes.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <zmq.h>


/* --------------------------------------------------------------- ingest */
static void s_reject(collector *c, wire_reject r, size_t len, const wire_rows *wr)
{
    uint64_t n = ++c->status.rejected[r];
    const char *why = r == WIRE_REPLAYED ? ": its producer's run already sent that seq (a replayed or reordered "
                                           "batch), and its rows are in an epoch already"
                      : r == WIRE_SLICE  ? ": it holds a slice of rows for a sharded collector (dps-collector "
                                           "--sharded); this one takes whole rows"
                                         : "";
    if (c->o.verbose || n <= 5 || n % 1000 == 0)
        log_warn("refused a %zu-byte message%s%s: %s%s (%" PRIu64 " so far)", len, wr->producer_id[0] ? " of " : "",
                 wr->producer_id, wire_reject_name(r), why, n);
}

/* A producer's connection ended while it was still running: libzmq dropped
   it, and the batches in flight on it with it (see producers.h). */
void collector_lost(collector *c, const char *id, const char *how)
{
    c->ingest.connections_dropped++;
    log_warn("producer %s %s after its connection ended: libzmq dropped that connection, and the batches in "
             "flight on it were LOST (%" PRIu64 " connections dropped so far).  It does so when a batch is above "
             "--max-batch-rows (%" PRIu64 ") or when it cannot allocate memory (is the collector under a memory "
             "limit that --ingest-buffer-mb and the estimator do not fit in?)",
             id, how, c->ingest.connections_dropped, c->o.max_batch_rows);
}

/* Connections by fd: one accepted that ends before it delivered a batch is
   counted and logged (connections_empty).  It is what a producer that does
   not ask the status endpoint and sends a batch above --max-batch-rows
   leaves (libzmq drops the message with the connection and says only
   "disconnected"), and also what a producer that sent nothing leaves, or
   one whose key was refused at the handshake (auth_refused: libzmq names no
   connection in that event): the collector cannot tell them apart.  A producer that says its run and
   asks the status endpoint learns the limit there and never sends such a
   batch; one that loses a connection after delivering is caught when it is
   heard again (collector_lost). */
enum { CONN_NONE, CONN_OPEN, CONN_DELIVERED };

static void s_conn_set(collector *c, int fd, unsigned char state)
{
    if (fd < 0)
        return;
    if ((size_t)fd >= c->ingest.conn_state_n) {
        size_t n = (size_t)fd * 2 + 64;
        unsigned char *grown = realloc(c->ingest.conn_state, n);
        if (!grown)
            return; /* not tracked: a connection ending there is not counted */
        memset(grown + c->ingest.conn_state_n, CONN_NONE, n - c->ingest.conn_state_n);
        c->ingest.conn_state = grown;
        c->ingest.conn_state_n = n;
    }
    c->ingest.conn_state[fd] = state;
}

void collector_on_accept(void *arg, int fd) { s_conn_set(arg, fd, CONN_OPEN); }

void collector_on_disconnect(void *arg, int fd)
{
    collector *c = arg;
    if (fd >= 0 && (size_t)fd < c->ingest.conn_state_n && c->ingest.conn_state[fd] == CONN_OPEN) {
        uint64_t n = ++c->ingest.connections_empty;
        if (c->o.verbose || n <= 5 || n % 100 == 0)
            log_warn("a producer connection ended without delivering a batch (%" PRIu64 " so far): a producer that "
                     "sent nothing or whose key was refused (auth_refused), or one that sent a batch above "
                     "--max-batch-rows (%" PRIu64 " rows at d %" PRIu64 "), which libzmq drops with its connection: "
                     "those rows were LOST.  A producer given the status endpoint learns the limit and splits its "
                     "batches",
                     n, c->o.max_batch_rows, c->o.d);
    }
    s_conn_set(c, fd, CONN_NONE);
    ptable_ended(&c->ingest.producers, fd);
    credit_ended(&c->ingest.credit, fd);
}

/* One received message: decoded, checked, its rows pushed.  The rows are
   read in place (wire_rows.data): msg outlives the batch. */
static void s_batch(collector *c, zmq_msg_t *msg)
{
    /* The connection's key may have left the authorized directory since its
       handshake: its batches are refused from the handler's next refresh on. */
    int revoked = c->zap && !zap_allowed(c->zap, "ingest", zmq_msg_gets(msg, "User-Id"));
    wire_rows wr;
    size_t len = zmq_msg_size(msg);
    int fd = zmq_msg_get(msg, ZMQ_SRCFD); /* which connection: -1 if unknown */
    /* connections that ended before this message arrived, first: the kernel
       may have given its connection the fd of one of them */
    net_monitor_poll(&c->ingest.pull_mon, 0);
    s_conn_set(c, fd, CONN_DELIVERED);
    wire_reject r = wire_rows_decode(zmq_msg_data(msg), len, c->o.d, &wr);
    if (zmq_msg_more(msg)) { /* a multipart message is not ours: drop all parts */
        r = r == WIRE_OK ? WIRE_UNDECODABLE : r;
        if (r == WIRE_UNDECODABLE)
            wire_rows_release(&wr);
        int more = 1;
        while (more) {
            zmq_msg_t part;
            zmq_msg_init(&part);
            if (zmq_msg_recv(&part, c->ingest.pull, 0) < 0) {
                zmq_msg_close(&part);
                break;
            }
            more = zmq_msg_more(&part);
            zmq_msg_close(&part);
        }
    }
    if (r == WIRE_OK && revoked) {
        uint64_t n = ++c->status.revoked;
        if (c->o.verbose || n <= 5 || n % 1000 == 0)
            log_warn("refused a batch of %zu rows from producer '%s': its key is no longer in %s (%" PRIu64
                     " refused so far)", wr.n, wr.producer_id, c->o.authorized_keys, n);
        ptable_refused(&c->ingest.producers, wr.producer_id, wr.stream);
        wire_rows_release(&wr);
        return;
    }
    if (r == WIRE_OK && wr.shards) /* a slice of a row is not a row: only a sharded collector pairs slices */
        r = WIRE_SLICE;
    else if (r == WIRE_OK && !ptable_admit(&c->ingest.producers, wr.producer_id, wr.stream, wr.seq))
        r = WIRE_REPLAYED; /* its rows are in an epoch already: used again, a row would count twice */
    if (r != WIRE_OK) {
        s_reject(c, r, len, &wr);
        if (wr.producer_id[0]) /* a draining producer learns of it */
            ptable_refused(&c->ingest.producers, wr.producer_id, wr.stream);
        wire_rows_release(&wr);
        return;
    }
    size_t done = 0;
    double t0 = net_clock_ms();
    c->stall.waited_ms = 0;
    while (done < wr.n && !collector_stop) {
        size_t taken = 0;
        int rc = dps_estimator_push_le(c->est, wr.data + done * wr.dim * sizeof(float), wr.n - done, wr.dim, &taken);
        done += taken;
        if (rc == DPS_EFULL) {
            collector_seal(c);
        } else if (rc == DPS_ESTATE) { /* the next epoch begins after the last release (a warm mechanism,
                                           or no memory for a second epoch's state or buffers) */
            collector_backpressure(c);
        } else if (rc) { /* no memory for a new epoch's first buckets, nothing releasing: counted, told */
            uint64_t cut = ++c->ingest.batches_cut_short;
            if (c->o.verbose || cut <= 5 || cut % 1000 == 0)
                log_error("a batch of %zu rows from producer '%s': %zu rows taken, the other %zu dropped: %s (%" PRIu64
                          " batches cut short so far)",
                          wr.n, wr.producer_id, done, wr.n - done, dps_strerror(rc), cut);
            ptable_refused_seq(&c->ingest.producers, wr.producer_id, wr.stream, wr.seq); /* a draining producer learns */
            break;
        }
    }
    if (dps_estimator_epoch_full(c->est) && !collector_stop)
        collector_seal(c);
    double took = net_clock_ms() - t0 - c->stall.waited_ms; /* the batch's own time: backpressure apart */
    dps_estimator_stats es;
    dps_estimator_get_stats(c->est, &es);
    if (took > c->stall.batch_ms)
        c->stall.batch_ms = took;
    if (es.epoch >= c->stall.first_epoch + 2 && took > c->stall.warm_ms) /* both epochs' memory touched once: no first-touch faults */
        c->stall.warm_ms = took;
    if (took > 5.0)
        log_debug("a batch of %zu rows took %.1f ms in the estimator (epoch %" PRIu64 ", %" PRIu64 " rows in it)",
                  wr.n, took, es.epoch, es.rows_in_epoch);
    if (done == wr.n) { /* taken: a producer draining may now disconnect */
        uint64_t gaps = c->ingest.producers.total_gaps;
        ptable_record(&c->ingest.producers, wr.producer_id, wr.stream, wr.seq, wr.n);
        int with_credit = credit_taken(&c->ingest.credit, wr.producer_id, wr.stream, wr.seq, fd, net_now_ms());
        const producer_entry *pe = ptable_find(&c->ingest.producers, wr.producer_id, wr.stream);
        c->ingest.watch_due |= !with_credit && pe && pe->fd != fd; /* a new connection without credit: count now */
        ptable_set_credit(&c->ingest.producers, wr.producer_id, wr.stream, with_credit);
        if (c->ingest.producers.total_gaps > gaps)
            log_warn("producer %s: %" PRIu64 " batches before seq %" PRIu64 " never arrived: LOST in transit",
                     wr.producer_id, c->ingest.producers.total_gaps - gaps, wr.seq);
        if (ptable_batch_on(&c->ingest.producers, wr.producer_id, wr.stream, fd, wr.seq))
            collector_lost(c, wr.producer_id, "sent again");
    }
    wire_rows_release(&wr);
}

int collector_ingest(collector *c)
{
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    int got = zmq_msg_recv(&msg, c->ingest.pull, ZMQ_DONTWAIT) >= 0;
    if (got)
        s_batch(c, &msg);
    zmq_msg_close(&msg);
    return got;
}

/* --------------------------------------------------------- ingest memory
   Issue 9 item 5.  libzmq queues up to ZMQ_RCVHWM messages per connected
   producer (the mark is per pipe), so memory grew with the number of
   producers, and under a memory limit libzmq, unable to allocate a batch,
   dropped connections with the batches queued on them and told no one.
   What bounds the bytes of batches in transit, for the whole collector:
   - ZMQ_MAXMSGSIZE = plan.msg_max caps a message (libzmq drops a larger one
     with its connection);
   - ZMQ_RCVHWM = --rcvhwm (default 1; 2 with CURVE, where the credential
     libzmq makes of ZAP's User-Id takes one place), fixed before bind: libzmq 4.3 gives
     each new connection the mark its listener copied at bind time, and
     re-applies a changed mark only to pipes the socket has already attached
     (both checked against the installed 4.3.4).  Raising the mark while
     few producers are connected does not bound it: a
     producer that connects before we see it starts at the mark of bind time,
     and those already attached keep their deeper queues until drained, so
     the bound would hold only between arrivals;
   - credit (credit.h), what makes the bound hold whatever the number of
     producers: a producer with a status endpoint sends only the batches the
     collector granted it, and the collector grants at most capacity =
     (budget - loop) / msg_max batches to all producers together (one fewer
     with CURVE: libzmq holds a batch's ciphertext while it makes its
     plaintext, one batch at a time in its one I/O thread).  Every batch of a
     credit-taking producer in transit, wherever it is (its own queue, the
     kernel, libzmq's queue or decoder, this loop), is one it was granted and
     we have not taken, so those batches take at most capacity x msg_max +
     loop <= budget.  The round trip costs about one status question per
     fair share of batches (see credit.h; tools/bench/README.md measures it);
   - a producer that takes no credit (no status endpoint, an old producer,
     a raw PUSH) is bounded only by libzmq: per connection at most rcvhwm + 2
     batches (its queue, one decoded while the queue is full, and under
     CURVE one ciphertext while its plaintext is made), plus its 8 KB read
     buffer (not in the bound: 128 KB for 16 producers); this loop at most
     INGEST_LOOP_BATCHES (options.h).  Those producers come
     on top of the credit: plan.producers of them fit the buffer alone
     (options_ingest_plan), and with more than that connected the collector
     says so in a warning with the excess.  Neither refused nor parked:
     libzmq 4.3 can turn a connection away only through ZAP, and a producer
     refused there never reconnects (checked: one ZAP request, then its
     sends block for good); parking would mean holding some ZAP replies while
     answering others (a ROUTER where zap.c has a REP) and counting the slots
     of parked producers that give up, which is not done;
   - outside the process, the kernel buffers up to 2 x ZMQ_RCVBUF (1 MB) per
     tcp connection.
   (glibc keeps freed batches for reuse; mmap'ing every block from 256 KB up
   lowered the peak RSS of 16 producers at d = 1e4 from 383 to 376 MB and
   cost about a third of the ingest rate, so it is not done.)
   Message buffers are reused, not mapped afresh: libzmq allocates each
   received batch with malloc, which by default maps a block that large and
   unmaps it when the batch is closed, or trims the heap's top, so that the
   next batch faults its pages in again (a sixth of the I/O thread's time
   at d = 1e4).  s_keep_batches raises glibc's mmap threshold above a batch
   and its trim threshold to the ingest buffer: freed batches stay in the
   heap for the next ones.  The bound holds: what the heap keeps was
   held by batches in transit, which the buffer bounds. */
#define INGEST_RCVBUF (1 << 20)

static void s_keep_batches(const ingest_plan *plan)
{
#ifdef __GLIBC__
    /* only ever raised: from glibc's defaults (128 KiB each), up to its
       largest mmap threshold on 64-bit hosts (32 MiB: larger batches are
       still mapped each) */
    const uint64_t dflt = (uint64_t)128 << 10, mmap_max = (uint64_t)32 << 20;
    uint64_t above = 2 * plan->msg_max, trim = plan->budget < INT32_MAX ? plan->budget : INT32_MAX;
    above = above < mmap_max ? above : mmap_max;
    mallopt(M_MMAP_THRESHOLD, (int)(above > dflt ? above : dflt));
    mallopt(M_TRIM_THRESHOLD, (int)(trim > dflt ? trim : dflt));
#else
    (void)plan;
#endif
}

int collector_ingest_setup(collector *c)
{
    options_ingest_plan(&c->o, &c->ingest.plan);
    s_keep_batches(&c->ingest.plan);
    uint64_t cap = c->ingest.plan.budget > c->ingest.plan.loop ? (c->ingest.plan.budget - c->ingest.plan.loop) / c->ingest.plan.msg_max : 0;
    cap -= !c->o.insecure_plaintext && cap > 1; /* CURVE: the plaintext made while its ciphertext is held */
    if (credit_init(&c->ingest.credit, cap ? cap : 1, 4096) != 0)
        return -1;
    int64_t maxmsg = (int64_t)c->ingest.plan.msg_max;
    int hwm = (int)c->o.rcvhwm, rcvbuf = INGEST_RCVBUF;
    zmq_setsockopt(c->ingest.pull, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    zmq_setsockopt(c->ingest.pull, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(c->ingest.pull, ZMQ_RCVBUF, &rcvbuf, sizeof rcvbuf);
    return 0;
}

/* The kB of a /proc/self/status line (VmSize, VmRSS, VmHWM), or 0. */
static uint64_t s_proc_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long v = 0;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            sscanf(line + n + 1, "%llu", &v);
            break;
        }
    if (f)
        fclose(f);
    return (uint64_t)v;
}

/* Address space OpenBLAS maps for each thread that calls it, at its first
   call (Debian's 0.3.21: blas_memory_alloc maps 128 MB; under a limit it
   retries forever instead of failing). */
#define BLAS_THREAD_BUFFER (128.0 * (1 << 20))

/* Say what memory the collector needs, and warn when an address-space
   limit (ulimit -v) leaves less than that. */
void collector_ingest_report(collector *c, const dps_config *cfg)
{
    const double mb = 1 << 20;
    double est = (double)dps_estimator_memory_bound_pipelined(cfg) / mb; /* one epoch releasing, the next filling */
    log_info("ingest buffer %.0f MB for all producers: batches up to %.1f MB (--max-batch-rows %" PRIu64
             " at d %" PRIu64 "); producers that take credit (a status endpoint) share %" PRIu64 " batches "
             "whatever their number; each that does not can queue %" PRIu64 " (%" PRIu64 " in its queue + 2), "
             "so the buffer holds %" PRIu64 " of those (see --help).  The estimator adds at most %.0f MB "
             "(two epochs: one releasing on its own thread while the next fills)",
             (double)c->ingest.plan.budget / mb, (double)c->ingest.plan.msg_max / mb, c->o.max_batch_rows, c->o.d,
             c->ingest.credit.capacity, options_batch_slots(&c->o) + 2, options_batch_slots(&c->o), c->ingest.plan.producers, est);
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return;
    double have = (double)rl.rlim_cur / mb - (double)s_proc_kb("VmSize") / 1024;
    double blas = (double)(c->o.workers + 1) * BLAS_THREAD_BUFFER / mb;
    if (have < (double)c->ingest.plan.budget / mb + est + blas)
        log_warn("the address-space limit (ulimit -v) of %.0f MB leaves %.0f MB after start-up, less than the "
                 "ingest buffer (%.0f MB), the estimator (%.0f MB) and OpenBLAS (%.0f MB of address space for "
                 "%" PRIu64 " threads) need: when libzmq cannot allocate a batch it drops the connection with the "
                 "batches in flight on it, and OpenBLAS retries for ever.  Lower --ingest-buffer-mb or raise the "
                 "limit",
                 (double)rl.rlim_cur / mb, have, (double)c->ingest.plan.budget / mb, est, blas, c->o.workers + 1);
}

/* Warn once each time more producers are connected than the buffer holds
   without credit: those that take credit share
   the buffer whatever their number; the others may each queue
   plan.per_producer.  Counted (a scan of the table) when one comes on a new
   connection, and once a second. */
void collector_ingest_watch(collector *c)
{
    if (!c->ingest.watch_due && net_now_ms() - c->ingest.watched_ms < 1000)
        return;
    c->ingest.watch_due = 0;
    c->ingest.watched_ms = net_now_ms();
    uint64_t open = ptable_without_credit(&c->ingest.producers);
    if (open > c->ingest.plan.producers && !c->ingest.over_plan) {
        c->ingest.over_plan = 1;
        log_warn("%" PRIu64 " producers connected without credit (no status endpoint, or an old producer), more "
                 "than the %" PRIu64 " that --ingest-buffer-mb %.0f holds: the batches they queue may take up to "
                 "%.0f MB more than the buffer",
                 open, c->ingest.plan.producers, c->o.ingest_buffer_mb,
                 (double)((open - c->ingest.plan.producers) * c->ingest.plan.per_producer) / (1 << 20));
    } else if (open <= c->ingest.plan.producers && c->ingest.over_plan) {
        c->ingest.over_plan = 0;
        log_info("%" PRIu64 " producers connected without credit: within --ingest-buffer-mb again", open);
    }
}
