/* produce.c - dps-produce: stream rows from a file or standard input to a
   dps-collector through the C producer API (dps_producer_*), in batches,
   optionally a slice of the input, several times, at a limited rate; then
   wait until the collector confirms it took every batch (drain).

   Reading streams: one chunk of at most --batch rows is in memory at a time
   (a slice of a regular .npy or raw file starts with a seek), so the input
   may be far larger than memory.

   Who owns what: main owns the settings (strings point into argv), the
   reader, the chunk buffer and the producer, and frees them before it
   returns.  Errors: one line on stderr naming the program, exit codes of
   args.h (documented in --help). */
#include "args.h"
#include "io.h"
#include "netopts.h"

#include "dpsubspace_net.h"

#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char s_synopsis[] =
    "Usage: dps-produce INPUT [--connect EP] [--status EP] [security] [options]\n"
    "\n"
    "Streams the rows of INPUT to a dps-collector (ZeroMQ PUSH, protobuf RowBatch\n"
    "messages of --batch rows).  INPUT is a .npy (float32 or float64, C order), a\n"
    "CSV (.csv/.txt: numbers separated by commas, one row per line, an optional\n"
    "header line), or raw little-endian float32 (.raw/.f32/.bin, needs --dim);\n"
    "- reads standard input (give --format).  Rows are read in chunks, never the\n"
    "whole file at once.  Each row is one unit of privacy at the collector.\n"
    "\n"
    "Why --status matters: libzmq discards messages still queued toward the\n"
    "collector's PULL socket when the sender disconnects, so a producer that just\n"
    "exits after its last send can lose its last batches without anyone noticing.\n"
    "With --status EP (the collector's status endpoint) dps-produce drains before it\n"
    "exits: it asks the collector until it confirms that every batch sent under\n"
    "our --id was taken.  With --status, the collector's row dimension is also\n"
    "checked before anything is sent.\n";

static const char s_epilogue[] =
    "Output: with --progress, a line on standard error at most 4 times a second:\n"
    "  rows sent, rows/s over the run, and the percentage when the total is known.\n"
    "At the end one summary line on standard output, e.g.\n"
    "  sent 2000 rows in 8 batches in 0.41 s (4878 rows/s) to ipc:///tmp/c.in;\n"
    "  the collector confirmed all 8 batches (drain)\n"
    "\"not confirmed\" there means no --status was given: the rows were handed to\n"
    "libzmq, which lingers up to 30 s to deliver them, but nobody checked.  With\n"
    "--status, a drain that did not end within --drain-timeout (the collector is\n"
    "gone or overloaded) ends the line with e.g. \"NOT confirmed: 3 of 8 batches\n"
    "(the collector confirmed 5)\", and dps-produce exits 6.\n"
    "\n"
    "Examples:\n"
    "  dps-produce rows.npy --insecure-plaintext --connect ipc:///tmp/c.in --status ipc:///tmp/c.st\n"
    "  dps-produce big.npy --rows-from 0 --rows-to 500000 --id half-1 ...   (and --rows-from 500000 --id half-2)\n"
    "  my_exporter | dps-produce - --format raw --dim 784 --server-key keys/collector.key \\\n"
    "      --key keys/trainer-1.key_secret --connect tcp://collector.example:7780 --status tcp://collector.example:7782\n"
    "\n"
    "Exit codes: 0 every row sent (and confirmed, with --status); 1 runtime\n"
    "failure (network, memory) or interrupted while sending (SIGINT/SIGTERM\n"
    "stops reading, and the rows sent are drained); SIGINT/SIGTERM before the\n"
    "collector answered, or while waiting for it (a send blocked because it is\n"
    "gone or stopped, the drain), ends it at once, with the shell's 130/143;\n"
    "2 usage (unknown flag, missing or\n"
    "bad value, plaintext to a non-local endpoint, --shards that is not the\n"
    "collector's number of ranks, checked with --status); 3 unreadable or malformed\n"
    "input, a key file that does not load, or rows whose length differs from the\n"
    "collector's d (checked with --status); 5 the collector refused our CURVE key\n"
    "(its .key is not in the collector's --authorized-keys directory); 6 timeout:\n"
    "no handshake within --wait-ready, no status answer, or the drain was not\n"
    "confirmed within --drain-timeout.\n";

/* Settings from the command line. */
typedef struct {
    const char *input, *format, *connect, *status, *id;
    size_t dim, batch, shards;
    double rate;
    uint64_t rows_from, rows_to, repeat, wait_ready_ms, drain_ms, collector_timeout_ms;
    int progress, help;
    cli_net_flags net;
    cli_format fmt;
} produce_args;

static volatile sig_atomic_t s_interrupted; /* the signal that stopped the reading (0: none) */
/* The producer's cancel flag (dps_producer_set_cancel): set with
   s_interrupted, so that a send blocked on a collector that is gone (or
   stopped, or never was there: sends have no deadline) ends at once; cleared
   again when the signal came between sends, so that the rows sent are
   drained as before. */
static volatile sig_atomic_t s_cancel;

static void s_on_signal(int sig)
{
    s_interrupted = sig;
    s_cancel = 1;
    signal(sig, SIG_DFL); /* a second Ctrl-C ends the program at once */
}

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void s_sleep(double seconds)
{
    if (seconds <= 0)
        return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - floor(seconds)) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Check the parsed values.  Returns 0 or an exit code after printing why. */
static int s_validate(produce_args *a, const cli_opt *opts, size_t n_opts)
{
    if (!a->input) {
        cli_error("give the INPUT file (or - for standard input); see --help");
        return CLI_EXIT_USAGE;
    }
    a->fmt = CLI_FMT_AUTO;
    if (a->format && cli_format_parse(a->format, &a->fmt)) {
        cli_error("--format '%s' is not one of npy, csv, raw", a->format);
        return CLI_EXIT_USAGE;
    }
    if (a->batch < 1) {
        cli_error("--batch must be at least 1 row");
        return CLI_EXIT_USAGE;
    }
    char ep[512];
    if (a->shards < 1 || a->shards > 4096 || dps_shard_endpoint(a->connect, a->shards - 1, ep, sizeof ep) != DPS_OK) {
        cli_error("--shards %zu: give 1 to 4096 ranks, and a --connect that names each rank's endpoint "
                  "(tcp://HOST:PORT, ipc://PATH, or a comma-separated list of at least %zu)", a->shards, a->shards);
        return CLI_EXIT_USAGE;
    }
    if (cli_opt_find(opts, n_opts, "--rate")->given && !(a->rate > 0)) {
        cli_error("--rate must be a positive number of rows per second (got %g)", a->rate);
        return CLI_EXIT_USAGE;
    }
    if (cli_opt_find(opts, n_opts, "--rows-to")->given && a->rows_to <= a->rows_from) {
        cli_error("--rows-to %" PRIu64 " must be greater than --rows-from %" PRIu64 " (the slice is rows FROM..TO-1)",
                  a->rows_to, a->rows_from);
        return CLI_EXIT_USAGE;
    }
    if (a->repeat < 1) {
        cli_error("--repeat must be at least 1");
        return CLI_EXIT_USAGE;
    }
    if (a->repeat > 1 && strcmp(a->input, "-") == 0) {
        cli_error("--repeat %" PRIu64 " needs a file: standard input can be read only once", a->repeat);
        return CLI_EXIT_USAGE;
    }
    if (a->wait_ready_ms > 3600000 || a->drain_ms > 86400000 || a->collector_timeout_ms > 86400000) {
        cli_error("--wait-ready is at most 3600000 ms, --drain-timeout and --collector-timeout at most 86400000 ms");
        return CLI_EXIT_USAGE;
    }
    if (a->id) {
        size_t n = strlen(a->id);
        int bad = n > 64;
        for (const char *c = a->id; *c && !bad; c++)
            bad = (unsigned char)*c < 0x20 || *c == 0x7f;
        if (bad) {
            cli_error("--id must be 1 to 64 printable bytes (got %zu bytes)", n);
            return CLI_EXIT_USAGE;
        }
    }
    return 0;
}

/* One progress line on stderr; final ends it with a newline. */
static void s_progress(uint64_t rows, double secs, uint64_t total, int final)
{
    double rate = secs > 0 ? (double)rows / secs : 0;
    int tty = isatty(fileno(stderr));
    fprintf(stderr, "%sdps-produce: %" PRIu64 " rows sent, %.0f rows/s", tty ? "\r" : "", rows, rate);
    if (total)
        fprintf(stderr, ", %.1f%%", 100.0 * (double)rows / (double)total);
    fputs(tty && !final ? "   " : "\n", stderr);
    fflush(stderr);
}

/* Open the input and skip to --rows-from.  *avail is the number of rows the
   slice will have when the input says how many it has (else 0). */
static int s_open(const produce_args *a, cli_reader **r, uint64_t *avail)
{
    cli_msg m;
    int rc = cli_reader_open(r, a->input, a->fmt, a->dim, &m);
    if (rc) {
        cli_error("%s", m.msg);
        return rc;
    }
    uint64_t n = 0, skipped = 0;
    *avail = 0;
    if (cli_reader_rows(*r, &n)) {
        if (a->rows_from >= n) {
            cli_error("--rows-from %" PRIu64 " is past the end of %s (%" PRIu64 " rows, numbered from 0)",
                      a->rows_from, a->input, n);
            return CLI_EXIT_USAGE;
        }
        if (a->rows_to > n) {
            cli_error("--rows-to %" PRIu64 " is past the end of %s (%" PRIu64 " rows); give at most %" PRIu64,
                      a->rows_to, a->input, n, n);
            return CLI_EXIT_USAGE;
        }
        *avail = (a->rows_to ? a->rows_to : n) - a->rows_from;
    }
    if (a->rows_from && (rc = cli_reader_skip(*r, a->rows_from, &skipped, &m)) != 0) {
        cli_error("%s", m.msg);
        return rc;
    }
    if (skipped < a->rows_from) {
        cli_error("%s ended after %" PRIu64 " rows, before --rows-from %" PRIu64, a->input, skipped, a->rows_from);
        return CLI_EXIT_INPUT;
    }
    return 0;
}

/* Ask the collector's status endpoint for its d before sending anything. */
static int s_check_collector(const produce_args *a, const dps_security *sec, size_t dim)
{
    dps_collector_status st;
    int ms = a->wait_ready_ms ? (int)a->wait_ready_ms : 5000;
    int rc = dps_collector_status_query(a->status, sec, ms, &st);
    if (rc == DPS_ETIMEOUT) {
        cli_error("no answer from the collector's --status %s in %d ms: is it running there, with the same "
                  "security (CURVE keys vs --insecure-plaintext)?",
                  a->status, ms);
        return CLI_EXIT_TIMEOUT;
    }
    if (rc) {
        cli_error("status query to %s failed: %s", a->status, dps_strerror(rc));
        return cli_net_exit_code(rc);
    }
    if (st.d != dim) {
        cli_error("%s has rows of length %zu but the collector at %s expects d = %zu; nothing was sent (fix the "
                  "input or --dim)",
                  strcmp(a->input, "-") == 0 ? "standard input" : a->input, dim, a->status, st.d);
        return CLI_EXIT_INPUT;
    }
    size_t ranks = st.shards > 1 ? st.shards : 1; /* 0: one process (or a collector older than 0.3) */
    if (ranks != a->shards) {
        if (ranks > 1)
            cli_error("the collector at %s is sharded over %zu MPI ranks: give --shards %zu (each row split, slice r "
                      "to rank r; --connect rank 0's ingest endpoint); nothing was sent", a->status, ranks, ranks);
        else
            cli_error("the collector at %s is one process, not sharded: drop --shards %zu; nothing was sent",
                      a->status, a->shards);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

typedef struct {
    uint64_t handed;        /* rows given to the producer             */
    uint64_t total;         /* rows expected over all passes (0: unknown) */
    double t0, last_progress;
    int canceled;           /* a signal ended a send blocked on the collector */
} s_run_state;

/* Stream one pass of the input.  Returns 0 or an exit code (printed). */
static int s_pass(const produce_args *a, cli_reader *r, dps_producer *p, float *buf, size_t chunk, size_t d,
                  s_run_state *rs)
{
    cli_msg m;
    uint64_t want_total = a->rows_to ? a->rows_to - a->rows_from : UINT64_MAX, done = 0;
    while (done < want_total && !s_interrupted) {
        size_t want = want_total - done < chunk ? (size_t)(want_total - done) : chunk, got = 0;
        int rc = cli_reader_next(r, buf, want, &got, &m);
        if (rc) {
            cli_error("%s", m.msg);
            return rc;
        }
        if (got == 0)
            break;
        if (a->rate > 0) /* hand rows over no faster than --rate */
            s_sleep(rs->t0 + (double)rs->handed / a->rate - s_now());
        rc = dps_producer_send_rows(p, buf, got, d);
        if (rc == DPS_ECANCELED) { /* SIGINT/SIGTERM while the collector took nothing */
            rs->canceled = 1;
            return 0;
        }
        if (rc == DPS_EAUTH) {
            char why[2048];
            cli_net_auth_sentence(&a->net, a->connect, "--authorized-keys", why, sizeof why);
            cli_error("%s", why);
            return CLI_EXIT_AUTH;
        }
        if (rc == DPS_EGONE) {
            cli_error("the collector at %s went silent for --collector-timeout %" PRIu64 " ms while we sent (killed, "
                      "crashed or unreachable): stopped after %" PRIu64 " rows; the batches it did not confirm are "
                      "counted below", a->status ? a->status : a->connect, a->collector_timeout_ms, rs->handed);
            return CLI_EXIT_TIMEOUT;
        }
        if (rc) {
            cli_error("sending to %s failed: %s", a->connect, dps_strerror(rc));
            return cli_net_exit_code(rc);
        }
        done += got;
        rs->handed += got;
        double now = s_now();
        if (a->progress && now - rs->last_progress >= 0.25) {
            uint64_t sent = 0;
            dps_producer_counts(p, &sent, NULL);
            s_progress(sent, now - rs->t0, rs->total, 0);
            rs->last_progress = now;
        }
    }
    if (a->rows_to && done < want_total && !s_interrupted) {
        cli_error("%s ended at row %" PRIu64 ", before --rows-to %" PRIu64, a->input, a->rows_from + done,
                  a->rows_to);
        return CLI_EXIT_INPUT;
    }
    return 0;
}

/* Rows taken after the collector's budget cap is spent are never released:
   say so when rows wait in its open epoch (confirmed is not the same as
   used; rows of the epoch that spent the cap were released). */
static void s_warn_budget_spent(const produce_args *a, const dps_security *sec)
{
    dps_collector_status st;
    if (dps_collector_status_query(a->status, sec, 2000, &st) != DPS_OK || strcmp(st.budget_unit, "none") == 0 ||
        !st.budget_unit[0] || st.budget_left > 0 || st.rows_in_epoch == 0)
        return;
    cli_error("warning: the collector at %s has spent its privacy budget cap (%s left 0, %g spent): it takes rows "
              "but will release no further snapshot from them; an operator raises the cap or starts a new state "
              "directory",
              a->status, st.budget_unit, strcmp(st.budget_unit, "rho") == 0 ? st.rho_total : st.eps_total);
}

/* Connect, stream every pass, drain, print the summary.  Returns the exit code. */
static int s_run(produce_args *a, const cli_net_sec *ns)
{
    cli_reader *r = NULL;
    uint64_t avail = 0;
    int code = s_open(a, &r, &avail);
    if (code) {
        cli_reader_close(&r);
        return code;
    }
    size_t d = cli_reader_dim(r);
    char idbuf[80];
    if (!a->id) { /* our own unique id: the drain asks the collector about it */
        dps_rng *g = NULL;
        uint64_t tag = dps_rng_new_secure(&g) == DPS_OK ? dps_rng_u64(g) : (uint64_t)time(NULL);
        dps_rng_destroy(&g);
        snprintf(idbuf, sizeof idbuf, "dps-produce-%ld-%08" PRIx64, (long)getpid(), tag & 0xffffffffu);
        a->id = idbuf;
    }
    dps_producer_opts o;
    dps_producer_opts_init(&o, a->connect, d);
    o.batch_rows = a->batch;
    o.producer_id = a->id;
    o.status_endpoint = a->status;
    o.sec = ns->sec;
    o.shards = a->shards;
    /* with --status, dps_producer_close drains for up to linger_ms */
    o.linger_ms = a->status ? (int)a->drain_ms : 30000;
    dps_producer *p = NULL;
    int rc = dps_producer_new(&p, &o);
    if (rc) {
        cli_error("cannot connect to %s: %s", a->connect, dps_strerror(rc));
        cli_reader_close(&r);
        return cli_net_exit_code(rc);
    }
    dps_producer_set_cancel(p, &s_cancel);
    dps_producer_set_collector_timeout(p, (int)a->collector_timeout_ms);
    if (a->wait_ready_ms && (rc = dps_producer_wait_ready(p, (int)a->wait_ready_ms)) != DPS_OK) {
        char why[2048];
        if (rc == DPS_EAUTH)
            cli_net_auth_sentence(&a->net, a->connect, "--authorized-keys", why, sizeof why);
        else if (rc == DPS_ETIMEOUT && a->shards > 1)
            snprintf(why, sizeof why,
                     "no handshake within %" PRIu64 " ms (--wait-ready) with one of the %zu ranks' ingest "
                     "endpoints (--connect %s: rank r at its port + r, or the r-th of a list): is the collector "
                     "running on %zu ranks (mpirun -np %zu dps-collector --sharded), with the same security?",
                     a->wait_ready_ms, a->shards, a->connect, a->shards, a->shards);
        else if (rc == DPS_ETIMEOUT)
            snprintf(why, sizeof why,
                     "no handshake with the collector at %s within %" PRIu64 " ms (--wait-ready): is it running "
                     "there, with the same security (CURVE keys vs --insecure-plaintext) and --server-key?",
                     a->connect, a->wait_ready_ms);
        else
            snprintf(why, sizeof why, "connecting to %s failed: %s", a->connect, dps_strerror(rc));
        cli_error("%s", why);
        dps_producer_destroy(&p);
        cli_reader_close(&r);
        return cli_net_exit_code(rc);
    }
    if (a->status && (code = s_check_collector(a, &ns->sec, d)) != 0) {
        dps_producer_destroy(&p);
        cli_reader_close(&r);
        return code;
    }
    size_t chunk = a->batch;
    if (a->rate > 0 && a->rate / 10 < (double)chunk) /* about 10 hand-overs a second */
        chunk = a->rate / 10 < 1 ? 1 : (size_t)(a->rate / 10);
    float *buf = malloc(chunk * d * sizeof *buf);
    if (!buf) {
        cli_error("out of memory for a chunk of %zu rows of %zu values; lower --batch", chunk, d);
        dps_producer_destroy(&p);
        cli_reader_close(&r);
        return CLI_EXIT_RUNTIME;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    s_run_state rs = {0, avail * a->repeat, s_now(), 0, 0};
    rs.last_progress = rs.t0;
    for (uint64_t pass = 0; pass < a->repeat && !code && !s_interrupted; pass++) {
        if (pass > 0) {
            cli_reader_close(&r);
            if ((code = s_open(a, &r, &avail)) != 0)
                break;
        }
        code = s_pass(a, r, p, buf, chunk, d, &rs);
    }
    free(buf);
    cli_reader_close(&r);
    if (s_interrupted && !rs.canceled)
        s_cancel = 0; /* the signal came between sends: drain the rows sent (a second signal ends the wait) */

    /* Send the partial batch and wait for the collector's confirmation
       (close: both within linger_ms, so a collector that is gone cannot hold
       us longer). */
    const char *confirmed = "not confirmed (no --status: nobody checked that the collector took them, nor that its "
                            "d is the rows')";
    char conf[256];
    uint64_t rows = 0, batches = 0, unconfirmed = 0, taken = 0, refused = 0;
    rc = dps_producer_close(p, &unconfirmed);
    dps_producer_counts(p, &rows, &batches);
    dps_producer_confirmed(p, &taken, &refused);
    if (rc == DPS_ECANCELED)
        rs.canceled = 1; /* the drain (or the last send) was waiting when the signal came */
    if (code == CLI_EXIT_AUTH) {
        /* said already */
    } else if (rs.canceled) {
        if (a->status && batches)
            snprintf(conf, sizeof conf, "NOT confirmed: %" PRIu64 " of %" PRIu64 " batches (interrupted while "
                     "waiting for the collector)", unconfirmed, taken + unconfirmed);
        else
            snprintf(conf, sizeof conf, "not confirmed (interrupted while waiting for the collector)");
        confirmed = conf;
    } else if (!a->status) {
        uint64_t drops = dps_producer_disconnects(p);
        if (rc == DPS_ENET && drops && !code) {
            cli_error("the collector at %s ended our connection %" PRIu64 " time%s while we sent: the batches in "
                      "flight on it were LOST (a --batch of %zu above its --max-batch-rows, or it restarted).  Give "
                      "--status: the collector then names its limit, larger batches are split, and every batch is "
                      "confirmed", a->connect, drops, drops == 1 ? "" : "s", a->batch);
            code = CLI_EXIT_RUNTIME;
        } else if (rc && !code) {
            cli_error("sending the last batch to %s failed: %s", a->connect, dps_strerror(rc));
            code = cli_net_exit_code(rc);
        }
    } else if (rc == DPS_OK) {
        snprintf(conf, sizeof conf, "the collector confirmed all %" PRIu64 " batches (drain)", batches);
        confirmed = conf;
        s_warn_budget_spent(a, &ns->sec);
    } else {
        snprintf(conf, sizeof conf,
                 "NOT confirmed: %" PRIu64 " of %" PRIu64 " batches (the collector confirmed %" PRIu64 "%s)",
                 unconfirmed, taken + unconfirmed, taken, refused ? " and refused the others" : "");
        confirmed = conf;
        if (!code) {
            if (rc == DPS_EPROTO)
                cli_error("the collector at %s refused %" PRIu64 " of our %" PRIu64 " batches (wrong "
                          "dimension or --batch above its --max-batch-rows: refused whole; or no memory to take "
                          "them all: the rest of their rows dropped; dps-status counts which; %s)",
                          a->status, refused, batches,
                          a->shards > 1 ? "split for the wrong number of ranks?"
                                        : "a collector sharded over MPI ranks takes rows split by --shards R");
            else
                cli_error("the collector at %s did not confirm %" PRIu64 " of our %" PRIu64
                          " batches within %" PRIu64 " ms (--drain-timeout): %s",
                          a->status, unconfirmed, taken + unconfirmed, a->drain_ms,
                          rc == DPS_ETIMEOUT ? "it may be overloaded or gone"
                          : rc == DPS_EGONE  ? "it went silent for --collector-timeout (killed, crashed or "
                                               "unreachable), and those rows may be lost"
                                             : dps_strerror(rc));
            code = cli_net_exit_code(rc);
        }
    }
    double secs = s_now() - rs.t0;
    if (a->progress)
        s_progress(rows, secs, rs.total, 1);
    dps_producer_destroy(&p);
    if (code == CLI_EXIT_AUTH)
        confirmed = "refused (authentication)";
    printf("sent %" PRIu64 " rows in %" PRIu64 " batches in %.2f s (%.0f rows/s) to %s as '%s'%s; %s\n", rows,
           batches, secs, secs > 0 ? (double)rows / secs : 0.0, a->connect, a->id,
           s_interrupted ? " (interrupted)" : "", confirmed);
    fflush(stdout);
    if (s_interrupted && rs.canceled && !code) {
        /* the help's promise: a signal while waiting for the collector ends it with the shell's 130/143 */
        cli_error("interrupted: stopped reading after %" PRIu64 " rows, while waiting for the collector at %s "
                  "(gone, stopped or not there yet)",
                  rs.handed, a->connect);
        code = 128 + (int)s_interrupted;
    } else if (s_interrupted && !code) {
        cli_error("interrupted: stopped reading after %" PRIu64 " rows", rs.handed);
        code = CLI_EXIT_RUNTIME;
    }
    return code;
}

/* Parse the flags, print --help, or stream; returns the exit code. */
int main(int argc, char **argv)
{
    cli_set_program("dps-produce");
    produce_args a = {.connect = "tcp://127.0.0.1:7780", .batch = 256, .shards = 1, .repeat = 1, .wait_ready_ms = 10000,
                      .drain_ms = 30000, .collector_timeout_ms = DPS_PRODUCER_COLLECTOR_TIMEOUT_MS};
    cli_opt opts[] = {
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Input:", 0},
        {"--format", CLI_OPT_STRING, &a.format, "npy|csv|raw", "from the extension",
         "the input's format (required when INPUT is -, standard input)", 0},
        {"--dim", CLI_OPT_SIZE, &a.dim, "D", "from the file",
         "row length: required for raw; for npy/CSV it must match the file", 0},
        {"--rows-from", CLI_OPT_U64, &a.rows_from, "N", "0",
         "send rows N.. of the input (rows are numbered from 0): several producers can share one file", 0},
        {"--rows-to", CLI_OPT_U64, &a.rows_to, "M", "the end",
         "stop before row M (the slice is rows N..M-1); an input that ends earlier is an error", 0},
        {"--repeat", CLI_OPT_U64, &a.repeat, "N", "1", "stream the input (or the slice) N times (files only)", 0},
        {NULL, CLI_OPT_SECTION, NULL, NULL, NULL, "Collector:", 0},
        {"--connect", CLI_OPT_STRING, &a.connect, "EP", "tcp://127.0.0.1:7780",
         "the collector's ingest endpoint (its --ingest)", 0},
        {"--status", CLI_OPT_STRING, &a.status, "EP", "none: no drain, no check",
         "the collector's status endpoint (its --status): check its d first, and drain before exit, i.e. wait "
         "until it confirms every batch was taken (libzmq drops messages still queued at a PULL socket when "
         "the sender disconnects)",
         0},
        {"--shards", CLI_OPT_SIZE, &a.shards, "R", "1",
         "the collector is sharded over R ranks (dps-collector --sharded under mpirun -np R): each row is split "
         "into R slices of its coordinates and slice r sent to rank r's ingest endpoint, --connect's port + r "
         "(or the r-th of a comma-separated --connect list); --status is rank 0's, which confirms a batch once "
         "every rank took its slice",
         0},
        {"--id", CLI_OPT_STRING, &a.id, "NAME", "dps-produce-PID-RANDOM",
         "producer id (1-64 printable bytes), unique per producer: the collector counts batches per id", 0},
        {"--batch", CLI_OPT_SIZE, &a.batch, "N", "256",
         "rows per message.  With --status, a batch above the collector's --max-batch-rows (sized from its "
         "--ingest-buffer-mb, see dps-collector --help) is sent in pieces of that limit, which the collector "
         "names; without --status the collector drops a larger message with the connection (dps-produce says "
         "so and exits 1 when it saw that before it ended)",
         0},
        {"--rate", CLI_OPT_DOUBLE, &a.rate, "ROWS_PER_S", "no limit",
         "hand rows to the producer at most this fast (they leave in batches of --batch)", 0},
        {"--wait-ready", CLI_OPT_U64, &a.wait_ready_ms, "MS", "10000",
         "wait up to MS for the handshake with the collector before reading; a refused key is reported at once "
         "(exit 5); 0: do not wait (sends block until the collector is there)",
         0},
        {"--drain-timeout", CLI_OPT_U64, &a.drain_ms, "MS", "30000",
         "with --status: how long to wait for the collector's confirmation at the end", 0},
        {"--collector-timeout", CLI_OPT_U64, &a.collector_timeout_ms, "MS", "15000",
         "once the collector has answered, give up when it is silent this long (killed, crashed, unreachable): "
         "with --status no answer to a question (asked every second while a send waits), without it the "
         "connection down; exit 6 with the batches not confirmed.  0: wait for ever",
         0},
        {"--progress", CLI_OPT_FLAG, &a.progress, NULL, NULL,
         "a progress line on standard error (at most 4 updates a second): rows sent, rows/s, percent when "
         "the total is known",
         0},
        CLI_NET_OPTS(a.net, "our own NAME.key_secret (dps-keygen NAME); NAME.key must be in the collector's "
                            "--authorized-keys directory"),
        {"--help", CLI_OPT_FLAG, &a.help, NULL, NULL, "print this help and exit", 0},
    };
    size_t n_opts = sizeof opts / sizeof opts[0];
    const char *pos[1] = {NULL};
    size_t n_pos = 0;
    int rc = cli_parse_or_help(argc, argv, opts, n_opts, pos, 1, &n_pos, &a.help, s_synopsis, s_epilogue);
    if (rc >= 0)
        return rc;
    a.input = n_pos ? pos[0] : NULL;
    if ((rc = s_validate(&a, opts, n_opts)) != 0)
        return rc;
    cli_net_sec ns;
    cli_msg m;
    const char *eps[2] = {a.connect, a.status};
    if ((rc = cli_net_security(&a.net, eps, 2, &ns, &m)) != 0) {
        cli_error("%s", m.msg);
        return rc;
    }
    rc = s_run(&a, &ns);
    memset(&ns, 0, sizeof ns);
    return rc;
}
