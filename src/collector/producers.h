/* producers.h - what the collector has taken from each producer id: batches,
   rows, sequence gaps.  Producers ask for their count before disconnecting
   (drain); gaps reveal batches lost in transit.  Bounded: the least recently
   heard producer is forgotten when the table is full. */
#ifndef DPS_PRODUCERS_H
#define DPS_PRODUCERS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char id[65];
    uint64_t next_seq, batches, rows, gaps, restarts, refused, last_ms;
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
} producer_table;

int ptable_init(producer_table *t, size_t cap);
void ptable_free(producer_table *t);
/* Record a batch taken (all its rows pushed). */
void ptable_record(producer_table *t, const char *id, uint64_t seq, uint64_t rows, uint64_t now_ms);
/* Record a batch of id refused as a whole (it carried no rows). */
void ptable_refused(producer_table *t, const char *id, uint64_t now_ms);
/* The entry of id, or NULL. */
const producer_entry *ptable_find(const producer_table *t, const char *id);
/* Lost connections (issue 9 item 5): libzmq drops a connection, with the
   batches queued on it, when it cannot allocate a batch or one is above
   ZMQ_MAXMSGSIZE, and tells no one.  A producer that drains asks only before
   it disconnects; one heard again after its connection ended (a status
   question, or a batch that does not start a new sequence) lost that
   connection while it was running.  One question may be an operator's (or a
   benchmark's) about a producer that has finished; a drain asks every few
   tens of ms until its count is reached, so only questions that go on
   (PTABLE_ASKING: 3 over 500 ms) count.
   ptable_batch_on: a batch of id came on connection fd; returns 1 if id's
   previous connection was lost.  ptable_ended: connection fd ended.
   ptable_asked: id asked for its status; returns 1 (once) if it is still
   asking after its connection ended. */
#define PTABLE_ASKING_COUNT 3
#define PTABLE_ASKING_MS 500
int ptable_batch_on(producer_table *t, const char *id, int fd, uint64_t seq);
void ptable_ended(producer_table *t, int fd);
int ptable_asked(producer_table *t, const char *id, uint64_t now_ms);
/* Whether id's last batch came with credit; producers connected (their
   connection not ended) whose last batch came without. */
void ptable_set_credit(producer_table *t, const char *id, int with_credit);
uint64_t ptable_without_credit(const producer_table *t);

#endif
