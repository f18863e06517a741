/* example_producer.c - the C producer API (include/dpsubspace_net.h) on one
   page: connect to a dps-collector, check its row dimension, send rows,
   close, and check that the collector confirmed every batch.  It is built
   with the project against the shared library, as a program of yours would
   be (cc my_producer.c $(pkg-config --cflags --libs dpsubspace) -ldpsubspace_net),
   and src/cli/test_net_cli.sh runs it against a real collector.

   usage: example_producer INGEST STATUS D N [SERVER_KEY KEY_SECRET]
     INGEST, STATUS  the collector's ingest and status endpoints; STATUS "-"
                     means none, and then nothing can be confirmed
     D, N            the rows' dimension (the collector's --d), rows to send
     SERVER_KEY      the collector's public key (NAME.key from dps-keygen) and
     KEY_SECRET      this producer's key pair (its .key in the collector's
                     --authorized-keys); without them the connection is
                     plaintext, which the library allows only on ipc:// and
                     loopback TCP
   Exit codes: 0 every batch confirmed; 1 an error; 2 usage; 3 sent, but not
   every batch was confirmed (those rows may be lost).

   The rows here are Gaussian noise.  Yours are one row per unit of privacy
   (one example, one example's gradient): never an aggregate of several. */
#include <dpsubspace_net.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 100 /* rows handed to the producer per call; it sends batch_rows per message */

static int s_error(const char *what, int rc)
{
    fprintf(stderr, "example_producer: %s: %s\n", what, dps_strerror(rc));
    return 1;
}

/* Send n random rows of dimension d in chunks; the first error ends it. */
static int s_send(dps_producer *p, size_t n, size_t d)
{
    dps_rng *rng = NULL;
    float *rows = malloc(CHUNK * d * sizeof *rows);
    int rc = rows ? dps_rng_new_seeded(&rng, 1) : DPS_ENOMEM;
    for (size_t sent = 0; rc == DPS_OK && sent < n; sent += CHUNK) {
        size_t m = n - sent < CHUNK ? n - sent : CHUNK;
        dps_rng_gaussian_fill_f(rng, 1.0, rows, m * d);
        rc = dps_producer_send_rows(p, rows, m, d); /* blocks while the collector is behind */
    }
    dps_rng_destroy(&rng);
    free(rows);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 7) {
        fprintf(stderr, "usage: example_producer INGEST STATUS|- D N [SERVER_KEY KEY_SECRET]\n");
        return 2;
    }
    const char *status_ep = strcmp(argv[2], "-") ? argv[2] : NULL;
    size_t d = strtoul(argv[3], NULL, 10), n = strtoul(argv[4], NULL, 10);
    if (d == 0 || d > 1000000 || n == 0) {
        fprintf(stderr, "example_producer: D and N are positive whole numbers (D <= 1000000)\n");
        return 2;
    }

    dps_producer_opts o;
    dps_producer_opts_init(&o, argv[1], d);
    o.status_endpoint = status_ep; /* where close asks whether every batch was taken */
    o.linger_ms = 10000;           /* how long close waits for that answer */
    char server_key[DPS_KEY_LEN + 1];
    dps_keypair kp;
    if (argc == 7) {
        int rc = dps_public_key_load(server_key, argv[5]);
        if (rc != DPS_OK)
            return s_error(argv[5], rc);
        if ((rc = dps_keypair_load(&kp, argv[6])) != DPS_OK)
            return s_error(argv[6], rc);
        o.sec.server_public_key = server_key;
        o.sec.public_key = kp.public_key;
        o.sec.secret_key = kp.secret_key;
    } else {
        o.sec.plaintext = 1;
    }

    /* A collector refuses, as a whole, batches of another dimension: ask it first. */
    if (status_ep) {
        dps_collector_status st;
        int rc = dps_collector_status_query(status_ep, &o.sec, 5000, &st);
        if (rc != DPS_OK)
            return s_error(status_ep, rc);
        if (st.d != d) {
            fprintf(stderr, "example_producer: the collector expects rows of d = %zu, not %zu\n", st.d, d);
            return 1;
        }
    }

    dps_producer *p = NULL;
    int rc = dps_producer_new(&p, &o); /* connects in the background */
    if (rc != DPS_OK)
        return s_error("dps_producer_new", rc);
    rc = dps_producer_wait_ready(p, 5000); /* DPS_EAUTH: the collector refused our key */
    if (rc != DPS_OK) {
        dps_producer_destroy(&p);
        return s_error("the handshake with the collector", rc);
    }
    rc = s_send(p, n, d);
    if (rc != DPS_OK) {
        dps_producer_destroy(&p);
        return s_error("dps_producer_send_rows", rc);
    }

    /* Flush, wait for the collector's confirmation (up to linger_ms), disconnect.
       libzmq drops what is still queued toward the collector when we disconnect:
       the unconfirmed count is how a producer knows whether its rows arrived. */
    uint64_t unconfirmed = 0, rows_sent = 0, batches = 0;
    rc = dps_producer_close(p, &unconfirmed);
    dps_producer_counts(p, &rows_sent, &batches);
    printf("sent %" PRIu64 " rows in %" PRIu64 " batches as %s; ", rows_sent, batches, dps_producer_id(p));
    int code = 0;
    if (rc == DPS_OK && unconfirmed == 0) {
        printf("the collector confirmed every batch\n");
    } else if (unconfirmed > 0) {
        printf("%" PRIu64 " of them NOT confirmed (%s)\n", unconfirmed,
               rc != DPS_OK ? dps_strerror(rc) : "no status endpoint to ask");
        code = 3;
    } else {
        printf("close failed\n");
        code = s_error("dps_producer_close", rc);
    }
    dps_producer_destroy(&p);
    return code;
}
