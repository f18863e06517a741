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

#endif
