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

static credit_account *s_find(credit_pool *p, const char *id)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->acc[i].id, id) == 0)
            return &p->acc[i];
    return NULL;
}

/* Set a's counters, keeping outstanding the sum of granted - taken. */
static void s_set(credit_pool *p, credit_account *a, uint64_t granted, uint64_t taken)
{
    p->outstanding -= a->granted - a->taken;
    a->granted = granted > taken ? granted : taken;
    a->taken = taken;
    p->outstanding += a->granted - a->taken;
}

/* Close account i: its credit comes back. */
static void s_close(credit_pool *p, size_t i, const char *why)
{
    credit_account *a = &p->acc[i];
    if (a->granted > a->taken)
        log_debug("credit: %s %s, %" PRIu64 " batches of credit back", a->id, why, a->granted - a->taken);
    p->outstanding -= a->granted - a->taken;
    p->reclaimed += a->granted - a->taken;
    p->acc[i] = p->acc[--p->n];
}

/* A new account for id whose batches below from were all sent; when the pool
   is full, one that holds no credit and is not asking makes room. */
static credit_account *s_open(credit_pool *p, const char *id, uint64_t from, uint64_t now_ms)
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
    a->granted = a->taken = from;
    a->fd = -1;
    return a;
}

uint64_t credit_request(credit_pool *p, const char *id, uint64_t from, uint64_t want_end, uint64_t now_ms)
{
    if (want_end < from)
        want_end = from;
    credit_account *a = s_find(p, id);
    if (a && from < a->taken) { /* it sent fewer than we took: a new run under the same id */
        log_debug("credit: %s starts again at seq %" PRIu64, id, from);
        s_set(p, a, from, from);
    }
    if (!a && !(a = s_open(p, id, from, now_ms))) {
        p->waits++;
        return from; /* no account free: it waits, and asks again */
    }
    a->heard_ms = a->asked_ms = now_ms;
    if (from > a->granted) /* batches sent without credit (before it knew of ours): in transit all the same */
        s_set(p, a, from, a->taken);
    if (want_end < a->granted) /* it wants fewer than it holds: the rest comes back */
        s_set(p, a, want_end, a->taken);
    uint64_t active = 0;
    for (size_t i = 0; i < p->n; i++)
        active += p->acc[i].granted > p->acc[i].taken || now_ms - p->acc[i].asked_ms < CREDIT_ACTIVE_MS;
    uint64_t share = p->capacity / (active ? active : 1);
    share = share ? share : 1;
    /* Waiting producers are served in the order they began to wait: one batch
       of what is free stays for each that has waited longer than this one. */
    uint64_t since = a->waiting_ms ? a->waiting_ms : now_ms, older = 0;
    for (size_t i = 0; i < p->n; i++)
        older += p->acc[i].waiting_ms && p->acc[i].waiting_ms < since && now_ms - p->acc[i].asked_ms < CREDIT_ACTIVE_MS;
    uint64_t free_ = p->capacity > p->outstanding + older ? p->capacity - p->outstanding - older : 0;
    uint64_t target = a->taken + share < want_end ? a->taken + share : want_end;
    if (target > a->granted + free_)
        target = a->granted + free_;
    if (target > a->granted) {
        log_debug("credit: %s may send seq < %" PRIu64 " (+%" PRIu64 "; %" PRIu64 " of %" PRIu64
                  " batches granted, %" PRIu64 " producers active)",
                  id, target, target - a->granted, p->outstanding + target - a->granted, p->capacity, active);
        s_set(p, a, target, a->taken);
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

int credit_taken(credit_pool *p, const char *id, uint64_t seq, int fd, uint64_t now_ms)
{
    credit_account *a = s_find(p, id);
    if (!a)
        return 0; /* a producer that does not take credit */
    a->heard_ms = now_ms;
    if (fd >= 0)
        a->fd = fd;
    if (seq < a->taken)
        return 1; /* an old batch of a previous run, or a repeat */
    if (seq >= a->granted) {
        p->overruns++;
        log_debug("credit: %s sent seq %" PRIu64 " above its grant (%" PRIu64 ")", id, seq, a->granted);
    }
    s_set(p, a, a->granted, seq + 1); /* the seqs it skipped, lost in transit, come back too */
    return 1;
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
