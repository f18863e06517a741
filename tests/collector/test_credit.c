/* test_credit - the collector's credit grants (src/collector/credit.c): never
   more granted than the buffer holds, a fair share for each producer asking,
   repeated requests change nothing, credit comes back when batches are
   taken, when a producer is done, disconnects or goes silent. */
#include "check.h"
#include "credit.h"

#include <stdio.h>
#include <string.h>

int main(void)
{
    credit_pool p;
    CHECK(credit_init(&p, 12, 8) == 0, "init");
    uint64_t t = 1000;

    /* Alone, a producer gets all it asks for, up to the capacity. */
    CHECK(credit_request(&p, "a", 0, 100, t) == 12, "a alone: the whole buffer");
    CHECK(p.outstanding == 12, "outstanding %llu", (unsigned long long)p.outstanding);
    /* Idempotent: the same request again grants nothing more. */
    CHECK(credit_request(&p, "a", 0, 100, t) == 12 && p.outstanding == 12 && p.grants == 1, "repeat: same grant");
    /* A second producer waits while the buffer is committed... */
    CHECK(credit_request(&p, "b", 0, 100, t) == 0 && p.waits == 1, "b waits");
    /* ...and a does not get more back than its share (12 / 2) once batches are taken. */
    for (uint64_t s = 0; s < 4; s++)
        credit_taken(&p, "a", s, 5, t);
    CHECK(p.outstanding == 8, "4 taken: outstanding 8, got %llu", (unsigned long long)p.outstanding);
    CHECK(credit_request(&p, "a", 12, 100, t) == 12, "a holds 8 > share 6: nothing more");
    CHECK(credit_request(&p, "b", 0, 100, t) == 4, "b gets the 4 free");
    for (uint64_t s = 4; s < 12; s++)
        credit_taken(&p, "a", s, 5, t);
    CHECK(credit_request(&p, "a", 12, 100, t) == 18, "a: share 6 beyond what was taken");
    CHECK(credit_request(&p, "b", 4, 100, t) == 6, "b: up to its share of 6");
    CHECK(p.outstanding == 12, "never above capacity: %llu", (unsigned long long)p.outstanding);

    /* Many producers, a collector that takes 3 batches per round from a FIFO
       of what was sent: never more than the capacity outstanding, and every
       producer gets its turn. */
    credit_pool q;
    CHECK(credit_init(&q, 5, 64) == 0, "init q");
    uint64_t next[48] = {0}, worst = 0;
    int fifo[4096], head = 0, tail = 0;
    char id[16];
    for (int round = 0; round < 400; round++) {
        for (int i = 0; i < 48; i++) {
            snprintf(id, sizeof id, "p%d", i);
            uint64_t g = credit_request(&q, id, next[i], next[i] + 4, t + (uint64_t)round);
            if (q.outstanding > worst)
                worst = q.outstanding;
            for (; next[i] < g; next[i]++) /* send all it may */
                fifo[tail++ % 4096] = i;
        }
        for (int k = 0; k < 3 && head < tail; k++, head++) {
            int i = fifo[head % 4096];
            snprintf(id, sizeof id, "p%d", i);
            uint64_t taken = 0; /* its batches leave in order: count those taken before */
            for (int h = 0; h < head; h++)
                taken += fifo[h % 4096] == i;
            credit_taken(&q, id, taken, 10 + i, t + (uint64_t)round);
        }
    }
    uint64_t least = UINT64_MAX, most = 0;
    for (int i = 0; i < 48; i++) {
        least = next[i] < least ? next[i] : least;
        most = next[i] > most ? next[i] : most;
    }
    CHECK(worst == 5, "48 producers, capacity 5: at most %llu outstanding", (unsigned long long)worst);
    CHECK(least >= 20 && most - least <= 4, "fair: every producer sent between %llu and %llu batches",
          (unsigned long long)least, (unsigned long long)most);

    /* Done: b sent 2 of its 6 and wants no more: the other 4 come back. */
    CHECK(credit_request(&p, "b", 2, 2, t) == 2 && p.outstanding == 6 + 2, "b done: %llu outstanding",
          (unsigned long long)p.outstanding);
    /* Disconnect: a's connection (fd 5) ended; its credit comes back. */
    CHECK(credit_ended(&p, 5) == 1 && p.outstanding == 2, "a disconnected: %llu", (unsigned long long)p.outstanding);
    /* Silence: b holds 1 after its seq 0 was taken at t; reclaimed at t + silence, not before. */
    credit_taken(&p, "b", 0, 7, t);
    CHECK(p.outstanding == 1, "b holds 1");
    CHECK(credit_reclaim(&p, t + CREDIT_SILENCE_MS - 1, CREDIT_SILENCE_MS) == 0, "not yet silent");
    CHECK(credit_reclaim(&p, t + CREDIT_SILENCE_MS, CREDIT_SILENCE_MS) == 1 && p.outstanding == 0 && p.n == 0,
          "silent b reclaimed: %llu", (unsigned long long)p.outstanding);

    /* A new run under the same id (it sent fewer than we took) starts afresh. */
    CHECK(credit_request(&p, "c", 0, 3, t) == 3, "c");
    for (uint64_t s = 0; s < 3; s++)
        credit_taken(&p, "c", s, 9, t);
    CHECK(credit_request(&p, "c", 0, 2, t) == 2 && p.outstanding == 2, "c again from 0: %llu",
          (unsigned long long)p.outstanding);
    /* A batch above the grant (a producer that ignores it) is counted and moves taken on. */
    credit_taken(&p, "c", 7, 9, t);
    CHECK(p.overruns == 1 && p.outstanding == 0, "overrun counted: %llu", (unsigned long long)p.outstanding);
    /* Full table: a producer holding nothing and not asking makes room; otherwise a new one waits. */
    credit_pool r;
    CHECK(credit_init(&r, 4, 2) == 0, "init r");
    CHECK(credit_request(&r, "x", 0, 2, t) == 2 && credit_request(&r, "y", 0, 2, t) == 2, "x, y");
    CHECK(credit_request(&r, "z", 0, 2, t) == 0, "z waits: no account free");
    credit_taken(&r, "x", 1, 3, t);
    CHECK(credit_request(&r, "z", 0, 2, t + CREDIT_ACTIVE_MS) == 2 && r.n == 2, "x idle with nothing held: z in");
    credit_free(&p);
    credit_free(&q);
    credit_free(&r);
    return check_summary();
}
