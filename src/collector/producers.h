/* producers.h - what the collector has taken from each producer run: batches,
   rows, sequence gaps, refusals.  A run is (producer id, run number): the
   number a producer draws at random when it starts and sends with every
   batch and status question (proto's RowBatch.stream; 0 from a producer that
   names none).  Producers ask for their run's count before disconnecting
   (drain); gaps reveal batches lost in transit; a seq the run already passed
   is a replay and is refused before its rows are used (the unit of privacy
   is one row: a row used twice would be two).  Bounded: the least recently
   heard run is forgotten when the table is full.
   Who owns what: the collector owns one table; the entries live in it. */
#ifndef DPS_PRODUCERS_H
#define DPS_PRODUCERS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char id[65];
    uint64_t run;
    uint64_t next_seq, batches, rows, gaps, restarts, refused;
    uint64_t heard; /* the table's count of events when it was last heard: the most recent is the largest */
    int used;
    int fd;    /* the connection its last batch came on (-1: none known) */
    int ended; /* that connection ended and the producer has not been heard since */
    uint64_t asked, asked_ms; /* status questions since it ended; the time of the first */
    int no_credit; /* its last batch came without credit (credit.h) */
} producer_entry;

typedef struct {
    producer_entry *slots;
    size_t cap;
    uint64_t total_gaps;
    uint64_t events; /* batches and refusals recorded */
} producer_table;

int ptable_init(producer_table *t, size_t cap);
void ptable_free(producer_table *t);
/* Whether a batch of run (id, run) with seq may be taken: 1, or 0 if the run
   already passed seq (a replay, or batches reordered).  A producer that names
   no run (run 0) starts a new run with seq 0. */
int ptable_admit(const producer_table *t, const char *id, uint64_t run, uint64_t seq);
/* Record a batch taken (all its rows pushed; ptable_admit said 1). */
void ptable_record(producer_table *t, const char *id, uint64_t run, uint64_t seq, uint64_t rows);
/* Record a batch of (id, run) refused as a whole (it carried no rows). */
void ptable_refused(producer_table *t, const char *id, uint64_t run);
/* Record a batch of (id, run) whose seq is known (decoded) refused, whole or
   cut short (some rows used, the rest dropped for want of memory): refused
   to its producer, and its seq passed as a recorded one's when the run had
   not passed it (no gap for it, which arrived; sent again, it is a replay). */
void ptable_refused_seq(producer_table *t, const char *id, uint64_t run, uint64_t seq);
/* The entry of (id, run), or NULL.  run 0 names the most recently heard run
   of id (an operator's question names no run). */
const producer_entry *ptable_find(const producer_table *t, const char *id, uint64_t run);
/* Lost connections: libzmq drops a connection, with the
   batches queued on it, when it cannot allocate a batch or one is above
   ZMQ_MAXMSGSIZE, and tells no one.  A producer that drains asks only before
   it disconnects; one heard again after its connection ended (a status
   question of its own run, or a batch of the same run) lost that connection
   while it was running.  Only questions that name the run count (an
   operator's dps-status --producer names none), and only those that go on
   (PTABLE_ASKING: 3 over 500 ms: a drain asks every few tens of ms).
   ptable_batch_on: a batch of (id, run) came on connection fd; returns 1 if
   the run's previous connection was lost.  ptable_ended: connection fd
   ended.  ptable_asked: (id, run) asked for its status; returns 1 (once) if
   it is still asking after its connection ended. */
#define PTABLE_ASKING_COUNT 3
#define PTABLE_ASKING_MS 500
int ptable_batch_on(producer_table *t, const char *id, uint64_t run, int fd, uint64_t seq);
void ptable_ended(producer_table *t, int fd);
int ptable_asked(producer_table *t, const char *id, uint64_t run, uint64_t now_ms);
/* Whether (id, run)'s last batch came with credit; producers connected
   (their connection not ended) whose last batch came without. */
void ptable_set_credit(producer_table *t, const char *id, uint64_t run, int with_credit);
uint64_t ptable_without_credit(const producer_table *t);

#endif
