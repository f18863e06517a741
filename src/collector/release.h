/* release.h - the hand-over of released epochs between dps-collector's loop,
   its release thread and its writer thread (release.c): one sealed epoch for
   the release thread, one released result for the writer, one stored result
   for the loop, each at most, under one mutex.

   Who owns what: the collector holds one release_handoff; the fields are
   the three threads' under mu (the threads and the pipe are release.c's);
   a result's snapshot and buffer belong to whoever holds the result. */
#ifndef DPS_COLLECTOR_RELEASE_H
#define DPS_COLLECTOR_RELEASE_H

#include "dpsubspace.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* A released epoch's snapshot on its way out: numbered, encoded and stored
   by the release thread (collector_prepare), sent by the loop
   (collector_send), which then owns `numbered` as its latest. */
typedef struct {
    dps_snapshot *numbered;
    unsigned char *buf;
    size_t len;
    dps_snapshot_info info;
    char weak_groups[160]; /* "; WEAK groups 1 (level 1), ..." for the log
                              line, from the estimator's snapshot (the
                              numbered copy does not carry group levels) */
} collector_outgoing;

/* One epoch's result on its way from the release thread through the
   writer to the loop. */
typedef struct {
    collector_outgoing out; /* its snapshot numbered and encoded (stored after the writer) */
    int rc;                 /* the release's return (or REL_LOST: release.c) */
    uint64_t epoch;
    uint64_t release_ms, store_ms;
} collector_result;

typedef struct {
    pthread_t rel_thread, wr_thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pipe[2];           /* the writer writes a byte when a release is stored; the loop polls [0] */
    int asked;             /* an epoch is sealed for the release thread */
    int busy;              /* the release thread holds one (releasing, numbering, handing over) */
    int wr_has;            /* a released epoch waits for the writer (wr_in) */
    int wr_busy;           /* the writer is storing one */
    int has;               /* a stored epoch waits for the loop to publish it (done) */
    int stop;
    int halt;              /* the ledger failed (DPS_ECOMMIT): no more releases; the loop stops */
    collector_result wr_in, done;
    uint64_t seq;          /* the release thread's last snapshot number (starts at last_seq) */
    uint64_t epoch;        /* the epoch sealed for the release thread */
} release_handoff;

#endif
