/* producers.c - per-run counters in an open-addressing table keyed by
   (producer id, run). */
#include "producers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t s_hash(const char *s, uint64_t run)
{
    size_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    for (int i = 0; i < 8; i++)
        h = (h ^ ((run >> (8 * i)) & 0xff)) * 1099511628211ull;
    return h;
}

int ptable_init(producer_table *t, size_t cap)
{
    memset(t, 0, sizeof *t);
    t->slots = calloc(cap, sizeof *t->slots);
    t->cap = cap;
    return t->slots ? 0 : -1;
}

void ptable_free(producer_table *t)
{
    free(t->slots);
    t->slots = NULL;
}

static producer_entry *s_slot(const producer_table *t, const char *id, uint64_t run, int *found)
{
    size_t i = s_hash(id, run) % t->cap;
    for (size_t n = 0; n < t->cap; n++, i = (i + 1) % t->cap) {
        producer_entry *e = &t->slots[i];
        if (!e->used) {
            *found = 0;
            return e;
        }
        if (e->run == run && strcmp(e->id, id) == 0) {
            *found = 1;
            return e;
        }
    }
    *found = 0;
    return NULL;
}

/* The entry of (id, run) for the collector's own bookkeeping (run 0 is a run
   of its own: a producer that names none). */
static producer_entry *s_exact(const producer_table *t, const char *id, uint64_t run)
{
    int found = 0;
    producer_entry *e = s_slot(t, id, run, &found);
    return found ? e : NULL;
}

const producer_entry *ptable_find(const producer_table *t, const char *id, uint64_t run)
{
    if (run)
        return s_exact(t, id, run);
    const producer_entry *best = NULL; /* the most recently heard run of id */
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].used && strcmp(t->slots[i].id, id) == 0 && (!best || t->slots[i].heard > best->heard))
            best = &t->slots[i];
    return best;
}

/* The entry of (id, run), created (evicting the least recently heard when full). */
static producer_entry *s_entry(producer_table *t, const char *id, uint64_t run, uint64_t seq)
{
    int found = 0;
    producer_entry *e = s_slot(t, id, run, &found);
    if (!e) { /* full: forget the least recently heard run, then rebuild */
        size_t old = 0;
        for (size_t i = 1; i < t->cap; i++)
            if (t->slots[i].heard < t->slots[old].heard)
                old = i;
        producer_entry *keep = t->slots;
        t->slots = calloc(t->cap, sizeof *t->slots);
        if (!t->slots) {
            t->slots = keep;
            return NULL;
        }
        for (size_t i = 0; i < t->cap; i++)
            if (i != old && keep[i].used) {
                int f = 0;
                *s_slot(t, keep[i].id, keep[i].run, &f) = keep[i];
            }
        free(keep);
        e = s_slot(t, id, run, &found);
        if (!e)
            return NULL;
    }
    if (!found) {
        memset(e, 0, sizeof *e);
        snprintf(e->id, sizeof e->id, "%s", id);
        e->run = run;
        e->used = 1;
        e->next_seq = seq; /* the first batch heard of a run: what came before is not ours to count */
        e->fd = -1;
    }
    e->heard = ++t->events;
    return e;
}

int ptable_admit(const producer_table *t, const char *id, uint64_t run, uint64_t seq)
{
    const producer_entry *e = s_exact(t, id, run);
    return !e || seq >= e->next_seq || (run == 0 && seq == 0);
}

void ptable_refused(producer_table *t, const char *id, uint64_t run)
{
    producer_entry *e = s_entry(t, id, run, 0);
    if (e)
        e->refused++;
}

/* seq of e arrived (admitted): the ones it passed are gaps, and the run goes on after it. */
static void s_arrived(producer_table *t, producer_entry *e, uint64_t seq)
{
    if (seq > e->next_seq) {
        e->gaps += seq - e->next_seq;
        t->total_gaps += seq - e->next_seq;
    } else if (seq < e->next_seq) { /* admitted below next_seq: only seq 0 of a producer naming no run */
        e->restarts++;
    }
    e->next_seq = seq + 1;
}

void ptable_record(producer_table *t, const char *id, uint64_t run, uint64_t seq, uint64_t rows)
{
    producer_entry *e = s_entry(t, id, run, seq);
    if (!e)
        return;
    s_arrived(t, e, seq);
    e->batches++;
    e->rows += rows;
}

void ptable_refused_seq(producer_table *t, const char *id, uint64_t run, uint64_t seq)
{
    producer_entry *e = s_entry(t, id, run, seq);
    if (!e)
        return;
    if (seq >= e->next_seq) /* a replay passes nothing */
        s_arrived(t, e, seq);
    e->refused++;
}

int ptable_batch_on(producer_table *t, const char *id, uint64_t run, int fd, uint64_t seq)
{
    producer_entry *e = s_exact(t, id, run);
    if (!e || fd < 0)
        return 0;
    int lost = e->ended && (run != 0 || seq != 0); /* run 0, seq 0: a new run under the same id */
    e->fd = fd;
    e->ended = 0;
    return lost;
}

void ptable_ended(producer_table *t, int fd)
{
    if (fd < 0)
        return;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].used && t->slots[i].fd == fd) {
            t->slots[i].fd = -1;
            t->slots[i].ended = 1;
            t->slots[i].asked = 0;
        }
}

int ptable_asked(producer_table *t, const char *id, uint64_t run, uint64_t now_ms)
{
    producer_entry *e = run ? s_exact(t, id, run) : NULL; /* questions naming no run may be anyone's */
    if (!e || !e->ended)
        return 0;
    if (e->asked++ == 0)
        e->asked_ms = now_ms;
    if (e->asked < PTABLE_ASKING_COUNT || now_ms - e->asked_ms < PTABLE_ASKING_MS)
        return 0;
    e->ended = 0; /* once per lost connection */
    return 1;
}

void ptable_set_credit(producer_table *t, const char *id, uint64_t run, int with_credit)
{
    producer_entry *e = s_exact(t, id, run);
    if (e)
        e->no_credit = !with_credit;
}

uint64_t ptable_without_credit(const producer_table *t)
{
    uint64_t n = 0;
    for (size_t i = 0; i < t->cap; i++)
        n += t->slots[i].used && t->slots[i].fd >= 0 && !t->slots[i].ended && t->slots[i].no_credit;
    return n;
}
