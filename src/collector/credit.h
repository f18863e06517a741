/* credit.h - credit-based flow control of ingest.

   libzmq bounds a PULL socket's queue per connection, never across
   connections, so the collector bounds the batches in transit itself: a
   producer with a status endpoint asks for credit (StatusRequest
   credit_seq_end: "may I send every seq below this?") and sends only the
   sequence numbers granted (StatusReply credit_seq_end, cumulative, so a lost
   or repeated reply does no harm).  The pool keeps, per producer, granted
   (every seq below it may be sent) and taken (every seq below it was taken or
   skipped), and the sum over producers of granted - taken, `outstanding`.

   Grant rule: a producer asking gets at most its fair share, share =
   max(1, capacity / active) batches beyond what was taken from it (active:
   producers holding credit or asking in the last CREDIT_ACTIVE_MS), and only
   from what is free, capacity - outstanding, less one batch kept for each
   producer that has waited longer (so waiting producers are served in turn,
   whoever asks most often).  So outstanding never exceeds
   capacity through grants: every batch a credit-taking producer has in
   transit (its PUSH queue, the kernel, libzmq's queue and decoder, this loop)
   is one of its granted - taken, and capacity x msg_max fits the buffer.
   Credit comes back when the batch is taken, when the producer says it wants
   fewer (credit_seq_end below its grant: a producer that is done), when its
   connection ends (libzmq drops what was queued on it), or after
   CREDIT_SILENCE_MS without a request or batch from it.  Batches sent
   without credit (old producers, producers without a status endpoint) are
   not limited here: they only move taken on.

   Accounts are per producer run (id, run: producers.h), never inferred from
   sequence numbers: a question is answered out of order with the batches
   (they travel on two sockets), so a question naming seqs the collector has
   already taken is an ordinary late one, not a new run; a new run has a new
   run number and opens its own account.  A producer naming no run (run 0, an
   older one) starts a new run only by asking from seq 0.  Outstanding credit
   is recomputed from the accounts at each question (never carried as a sum
   that a missed update could leave wrong).  A watchdog (credit_stalled,
   called while the ingest queue is empty) catches credit booked as in flight
   that is not: a producer asking for more, having sent all it was granted,
   with none of its batches taken for CREDIT_STALL_MS although the collector
   has nothing left to take.  Those batches are not coming (lost in transit,
   or a flaw of these rules): the stall is logged and counted, and the
   account's credit is recomputed from what was taken, so that the producer
   is granted again instead of waiting for good.
   Who owns what: the collector owns one pool; the accounts live in it, at
   most max_accounts (a new producer beyond that waits for one to leave). */
#ifndef DPS_CREDIT_H
#define DPS_CREDIT_H

#include <stddef.h>
#include <stdint.h>

#define CREDIT_ACTIVE_MS 1000   /* a producer waiting for credit asks at least every 50 ms */
#define CREDIT_SILENCE_MS 10000 /* credit of a producer not heard for this long comes back */
#define CREDIT_STALL_MS 5000    /* a producer asking this long while credit is free is a stall */

typedef struct {
    char id[65];
    uint64_t run;
    uint64_t granted, taken; /* seqs below granted may be sent; below taken were taken */
    uint64_t heard_ms, asked_ms, taken_ms; /* last heard (a batch or a question), asked, batch taken */
    uint64_t waiting_ms; /* when it began to wait for credit (0: it has some) */
    int fd; /* the connection its last batch came on (-1: none known) */
} credit_account;

typedef struct {
    credit_account *acc; /* acc[0 .. n) in use */
    size_t n, max;
    uint64_t capacity;    /* batches the ingest buffer holds */
    uint64_t grants, waits, reclaimed, overruns, stalls;
} credit_pool;

int credit_init(credit_pool *p, uint64_t capacity, size_t max_accounts);
void credit_free(credit_pool *p);
/* Producer run (id, run) has sent every seq below from and asks to send
   every seq below want_end (>= from); returns its grant: it may send every
   seq below it. */
uint64_t credit_request(credit_pool *p, const char *id, uint64_t run, uint64_t from, uint64_t want_end,
                        uint64_t now_ms);
/* A batch of (id, run) with seq was taken, on connection fd (-1: unknown);
   returns 1 if the run takes credit (it has an account). */
int credit_taken(credit_pool *p, const char *id, uint64_t run, uint64_t seq, int fd, uint64_t now_ms);
/* The batches granted and not yet taken, over every account. */
uint64_t credit_outstanding(const credit_pool *p);
/* With the ingest queue empty: accounts waiting (asking, all their grant
   sent) that hold credit no batch of which was taken for CREDIT_STALL_MS;
   each is logged and counted (stalls) and its credit comes back.  Returns
   how many. */
size_t credit_stalled(credit_pool *p, uint64_t now_ms);
/* Connection fd ended: the credit of the producers whose batches came on it
   comes back.  Returns how many accounts were closed. */
size_t credit_ended(credit_pool *p, int fd);
/* The credit of producers not heard since now - silence_ms comes back. */
size_t credit_reclaim(credit_pool *p, uint64_t now_ms, uint64_t silence_ms);

#endif
