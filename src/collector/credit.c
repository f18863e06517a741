/* credit.c - the grant arithmetic of credit.h. */
#include "credit.h"
#include "log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int credit_init(credit_pool *p, uint64_t capacity, size_t max_accounts)
{
    memset(p, 0, sizeof *p);
    p->acc = calloc(max_accounts ? max_accounts : 1, sizeof *p->acc);
    p->max = max_accounts;
    p->capacity = capacity;
    return p->acc ? 0 : -1;
}

void credit_free(credit_pool *p)
{
    free(p->acc);
    p->acc = NULL;
    p->n = 0;
}

static credit_account *s_find(credit_pool *p, const char *id, uint64_t run)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->acc[i].run == run && strcmp(p->acc[i].id, id) == 0)
            return &p->acc[i];
    return NULL;
}

uint64_t credit_outstanding(const credit_pool *p)
{
    uint64_t n = 0;
    for (size_t i = 0; i < p->n; i++)
        n += p->acc[i].granted - p->acc[i].taken;
    return n;
}

/* Set a's counters (granted never below taken). */
static void s_set(credit_account *a, uint64_t granted, uint64_t taken)
{
    a->granted = granted > taken ? granted : taken;
    a->taken = taken;
}

/* Close account i: its credit comes back. */
static void s_close(credit_pool *p, size_t i, const char *why)
{
    credit_account *a = &p->acc[i];
    if (a->granted > a->taken)
        log_debug("credit: %s %s, %" PRIu64 " batches of credit back", a->id, why, a->granted - a->taken);
    p->reclaimed += a->granted - a->taken;
    p->acc[i] = p->acc[--p->n];
}

/* A new account for (id, run) whose batches below from were all sent; when
   the pool is full, one that holds no credit and is not asking makes room. */
static credit_account *s_open(credit_pool *p, const char *id, uint64_t run, uint64_t from, uint64_t now_ms)
{
    if (p->n == p->max)
        for (size_t i = 0; i < p->n; i++)
            if (p->acc[i].granted == p->acc[i].taken && now_ms - p->acc[i].asked_ms >= CREDIT_ACTIVE_MS) {
                s_close(p, i, "made room");
                break;
            }
    if (p->n == p->max)
        return NULL;
    credit_account *a = &p->acc[p->n++];
    memset(a, 0, sizeof *a);
    snprintf(a->id, sizeof a->id, "%s", id);
    a->run = run;
    a->granted = a->taken = from;
    a->fd = -1;
    return a;
}

uint64_t credit_request(credit_pool *p, const char *id, uint64_t run, uint64_t from, uint64_t want_end,
                        uint64_t now_ms)
{
    if (want_end < from)
        want_end = from;
    credit_account *a = s_find(p, id, run);
    if (a && run == 0 && from == 0 && a->taken > 0) { /* a producer naming no run starts again from seq 0 */
        log_debug("credit: %s starts again at seq 0", id);
        s_set(a, 0, 0);
    }
    if (!a && !(a = s_open(p, id, run, from, now_ms))) {
        p->waits++;
        return from; /* no account free: it waits, and asks again */
    }
    a->heard_ms = a->asked_ms = now_ms;
    /* from < taken: the question left before batches we have taken since
       (a late question, not a new run): what was taken stands. */
    if (from > a->granted) /* batches sent without credit (before it knew of ours): in transit all the same */
        s_set(a, from, a->taken);
    if (want_end < a->granted && want_end >= a->taken) /* it wants fewer than it holds: the rest comes back */
        s_set(a, want_end, a->taken);
    uint64_t active = 0, outstanding = 0;
    for (size_t i = 0; i < p->n; i++) {
        active += p->acc[i].granted > p->acc[i].taken || now_ms - p->acc[i].asked_ms < CREDIT_ACTIVE_MS;
        outstanding += p->acc[i].granted - p->acc[i].taken;
    }
    uint64_t share = p->capacity / (active ? active : 1);
    share = share ? share : 1;
    /* Waiting producers are served in the order they began to wait: one batch
       of what is free stays for each that has waited longer than this one. */
    uint64_t since = a->waiting_ms ? a->waiting_ms : now_ms, older = 0;
    for (size_t i = 0; i < p->n; i++)
        older += p->acc[i].waiting_ms && p->acc[i].waiting_ms < since && now_ms - p->acc[i].asked_ms < CREDIT_ACTIVE_MS;
    uint64_t free_ = p->capacity > outstanding + older ? p->capacity - outstanding - older : 0;
    uint64_t target = a->taken + share < want_end ? a->taken + share : want_end;
    if (target > a->granted + free_)
        target = a->granted + free_;
    if (target > a->granted) {
        log_debug("credit: %s may send seq < %" PRIu64 " (+%" PRIu64 "; %" PRIu64 " of %" PRIu64
                  " batches granted, %" PRIu64 " producers active)",
                  id, target, target - a->granted, outstanding + target - a->granted, p->capacity, active);
        s_set(a, target, a->taken);
        p->grants++;
    }
    if (a->granted <= from && want_end > from) { /* nothing left to send with: it waits */
        p->waits++;
        a->waiting_ms = a->waiting_ms ? a->waiting_ms : now_ms;
    } else {
        a->waiting_ms = 0;
    }
    return a->granted;
}

int credit_taken(credit_pool *p, const char *id, uint64_t run, uint64_t seq, int fd, uint64_t now_ms)
{
    credit_account *a = s_find(p, id, run);
    if (!a)
        return 0; /* a producer that does not take credit */
    a->heard_ms = a->taken_ms = now_ms;
    if (fd >= 0)
        a->fd = fd;
    if (seq < a->taken)
        return 1; /* a batch of a previous run naming no run, or a repeat */
    if (seq >= a->granted) {
        p->overruns++;
        log_debug("credit: %s sent seq %" PRIu64 " above its grant (%" PRIu64 ")", id, seq, a->granted);
    }
    s_set(a, a->granted, seq + 1); /* the seqs it skipped, lost in transit, come back too */
    return 1;
}

size_t credit_stalled(credit_pool *p, uint64_t now_ms)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n; i++) {
        credit_account *a = &p->acc[i];
        uint64_t since = a->taken_ms > a->waiting_ms ? a->taken_ms : a->waiting_ms;
        if (!a->waiting_ms || a->granted == a->taken || now_ms - since < CREDIT_STALL_MS ||
            now_ms - a->asked_ms >= CREDIT_ACTIVE_MS)
            continue;
        p->stalls++;
        p->reclaimed += a->granted - a->taken;
        n++;
        log_warn("credit: producer %s has waited %.1f s for credit, holding %" PRIu64 " batches of it (seqs %" PRIu64
                 " to %" PRIu64 ") none of which arrived although nothing is queued: they are lost in transit or "
                 "the credit rules erred; the credit comes back (%" PRIu64 " stalls so far; please report them)",
                 a->id, (double)(now_ms - a->waiting_ms) / 1000.0, a->granted - a->taken, a->taken, a->granted - 1,
                 p->stalls);
        a->taken = a->granted;
    }
    return n;
}

size_t credit_ended(credit_pool *p, int fd)
{
    size_t n = 0;
    for (size_t i = 0; fd >= 0 && i < p->n;)
        if (p->acc[i].fd == fd) {
            s_close(p, i, "disconnected");
            n++;
        } else {
            i++;
        }
    return n;
}

size_t credit_reclaim(credit_pool *p, uint64_t now_ms, uint64_t silence_ms)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n;)
        if (now_ms - p->acc[i].heard_ms >= silence_ms) {
            s_close(p, i, "went silent");
            n++;
        } else {
            i++;
        }
    return n;
}
