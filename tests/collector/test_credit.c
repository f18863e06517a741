/* test_credit - the collector's credit grants (src/collector/credit.c): never
   more granted than the buffer holds, a fair share for each producer asking,
   repeated requests change nothing, credit comes back when batches are
   taken, when a producer is done, disconnects or goes silent. */
#include "check.h"
#include "credit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fleet of producers as src/net/producer.c runs them, against the pool:
   each asks for credit (1, then doubling up to 64 batches ahead) and asks
   again when half of its grant is left without waiting for the reply, so a
   question travels on its own channel (the status socket) while batches sent
   after it travel on another (the PULL socket) and may be taken first.  The
   collector runs as its loop does (collector.c): a turn answers one status
   question, then takes up to 64 queued batches.  Producers step three times
   as often as the collector turns (seeded).  Returns the batches taken in
   all; every producer is done when that is nprod x each.  *worst: the most
   ever outstanding; *wrong: turns after which some account's taken was not
   what was taken from that producer (the issue 31 deadlock began there: a
   late question reset the account, and the batches taken since were booked
   as in flight for good); *stalls: the watchdog's count. */
enum { SIM_MAX = 48, SIM_QUEUE = 1 << 16 };
static uint64_t s_simulate(uint64_t capacity, int nprod, uint64_t each, unsigned seed, uint64_t *worst,
                           uint64_t *wrong, uint64_t *stalls)
{
    credit_pool p;
    credit_init(&p, capacity, 4096);
    struct { uint64_t seq, end, ahead, reply, taken; int asking, has_reply; } pr[SIM_MAX] = {{0}};
    typedef struct { int who; uint64_t seq, from, want; } sim_msg; /* a batch (seq) or a question (from, want) */
    sim_msg *bq = calloc(SIM_QUEUE, sizeof *bq), *qq = calloc(SIM_QUEUE, sizeof *qq);
    size_t bh = 0, bt = 0, qh = 0, qt = 0;
    uint64_t taken = 0, now = 1000;
    char id[16];
    *worst = *wrong = 0;
    srand(seed);
    for (long tick = 0; tick < 4000000 && taken < (uint64_t)nprod * each; tick++) {
        now += rand() % 2; /* about 2 ticks a millisecond */
        if (rand() % 4) { /* a producer steps */
            int i = rand() % nprod;
            if (pr[i].has_reply) { /* a grant is cumulative: the largest one stands */
                pr[i].end = pr[i].reply > pr[i].end ? pr[i].reply : pr[i].end;
                pr[i].has_reply = pr[i].asking = 0;
            }
            if (pr[i].seq < each && pr[i].seq < pr[i].end)
                bq[bt++ % SIM_QUEUE] = (sim_msg){i, pr[i].seq++, 0, 0};
            int low = pr[i].end - pr[i].seq <= pr[i].ahead / 2 || pr[i].seq >= pr[i].end;
            if (pr[i].seq < each && !pr[i].asking && low) {
                pr[i].ahead = pr[i].ahead ? (2 * pr[i].ahead < 64 ? 2 * pr[i].ahead : 64) : 1;
                qq[qt++ % SIM_QUEUE] = (sim_msg){i, 0, pr[i].seq, pr[i].seq + pr[i].ahead};
                pr[i].asking = 1;
            }
            continue;
        }
        if (qh < qt) { /* the collector's turn: one question ... */
            int i = qq[qh % SIM_QUEUE].who;
            snprintf(id, sizeof id, "p%d", i);
            pr[i].reply = credit_request(&p, id, 100 + (uint64_t)i, qq[qh % SIM_QUEUE].from, qq[qh % SIM_QUEUE].want, now);
            pr[i].has_reply = 1;
            qh++;
        }
        for (int k = 0; k < 64 && bh < bt; k++, bh++) { /* ... then the batches queued */
            int i = bq[bh % SIM_QUEUE].who;
            snprintf(id, sizeof id, "p%d", i);
            credit_taken(&p, id, 100 + (uint64_t)i, bq[bh % SIM_QUEUE].seq, 10 + i, now);
            pr[i].taken++;
            taken++;
        }
        int bad = 0;
        for (size_t a = 0; a < p.n; a++)
            bad |= p.acc[a].taken != pr[atoi(p.acc[a].id + 1)].taken;
        *wrong += bad;
        uint64_t out = credit_outstanding(&p);
        *worst = out > *worst ? out : *worst;
        if (bh == bt) /* as the collector: only with nothing queued */
            credit_stalled(&p, now);
    }
    *stalls = p.stalls;
    credit_free(&p);
    free(bq);
    free(qq);
    return taken;
}

int main(void)
{
    credit_pool p;
    CHECK(credit_init(&p, 12, 8) == 0, "init");
    uint64_t t = 1000;

    /* Alone, a producer gets all it asks for, up to the capacity. */
    CHECK(credit_request(&p, "a", 1, 0, 100, t) == 12, "a alone: the whole buffer");
    CHECK(credit_outstanding(&p) == 12, "outstanding %llu", (unsigned long long)credit_outstanding(&p));
    /* Idempotent: the same request again grants nothing more. */
    CHECK(credit_request(&p, "a", 1, 0, 100, t) == 12 && credit_outstanding(&p) == 12 && p.grants == 1, "repeat: same grant");
    /* A second producer waits while the buffer is committed... */
    CHECK(credit_request(&p, "b", 1, 0, 100, t) == 0 && p.waits == 1, "b waits");
    /* ...and a does not get more back than its share (12 / 2) once batches are taken. */
    for (uint64_t s = 0; s < 4; s++)
        credit_taken(&p, "a", 1, s, 5, t);
    CHECK(credit_outstanding(&p) == 8, "4 taken: outstanding 8, got %llu", (unsigned long long)credit_outstanding(&p));
    CHECK(credit_request(&p, "a", 1, 12, 100, t) == 12, "a holds 8 > share 6: nothing more");
    CHECK(credit_request(&p, "b", 1, 0, 100, t) == 4, "b gets the 4 free");
    for (uint64_t s = 4; s < 12; s++)
        credit_taken(&p, "a", 1, s, 5, t);
    CHECK(credit_request(&p, "a", 1, 12, 100, t) == 18, "a: share 6 beyond what was taken");
    CHECK(credit_request(&p, "b", 1, 4, 100, t) == 6, "b: up to its share of 6");
    CHECK(credit_outstanding(&p) == 12, "never above capacity: %llu", (unsigned long long)credit_outstanding(&p));

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
            uint64_t g = credit_request(&q, id, 1, next[i], next[i] + 4, t + (uint64_t)round);
            if (credit_outstanding(&q) > worst)
                worst = credit_outstanding(&q);
            for (; next[i] < g; next[i]++) /* send all it may */
                fifo[tail++ % 4096] = i;
        }
        for (int k = 0; k < 3 && head < tail; k++, head++) {
            int i = fifo[head % 4096];
            snprintf(id, sizeof id, "p%d", i);
            uint64_t taken = 0; /* its batches leave in order: count those taken before */
            for (int h = 0; h < head; h++)
                taken += fifo[h % 4096] == i;
            credit_taken(&q, id, 1, taken, 10 + i, t + (uint64_t)round);
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
    CHECK(credit_request(&p, "b", 1, 2, 2, t) == 2 && credit_outstanding(&p) == 6 + 2, "b done: %llu outstanding",
          (unsigned long long)credit_outstanding(&p));
    /* Disconnect: a's connection (fd 5) ended; its credit comes back. */
    CHECK(credit_ended(&p, 5) == 1 && credit_outstanding(&p) == 2, "a disconnected: %llu", (unsigned long long)credit_outstanding(&p));
    /* Silence: b holds 1 after its seq 0 was taken at t; reclaimed at t + silence, not before. */
    credit_taken(&p, "b", 1, 0, 7, t);
    CHECK(credit_outstanding(&p) == 1, "b holds 1");
    CHECK(credit_reclaim(&p, t + CREDIT_SILENCE_MS - 1, CREDIT_SILENCE_MS) == 0, "not yet silent");
    CHECK(credit_reclaim(&p, t + CREDIT_SILENCE_MS, CREDIT_SILENCE_MS) == 1 && credit_outstanding(&p) == 0 && p.n == 0,
          "silent b reclaimed: %llu", (unsigned long long)credit_outstanding(&p));

    /* A question answered late (sent before batches we have taken since) is
       not a new run: what was taken stands, and nothing is booked twice. */
    CHECK(credit_request(&p, "c", 1, 0, 3, t) == 3, "c");
    for (uint64_t s = 0; s < 3; s++)
        credit_taken(&p, "c", 1, s, 9, t);
    CHECK(credit_request(&p, "c", 1, 1, 5, t) == 5 && credit_outstanding(&p) == 2, "c's late question: %llu",
          (unsigned long long)credit_outstanding(&p));
    /* A new run under the same id has its own account; the old one's credit
       comes back when it goes silent. */
    CHECK(credit_request(&p, "c", 2, 0, 2, t) == 2 && credit_outstanding(&p) == 4, "c's new run: %llu",
          (unsigned long long)credit_outstanding(&p));
    CHECK(credit_reclaim(&p, t + CREDIT_SILENCE_MS, CREDIT_SILENCE_MS) == 2 && credit_outstanding(&p) == 0, "reclaimed");
    /* A producer naming no run (run 0) starts again by asking from seq 0. */
    CHECK(credit_request(&p, "o", 0, 0, 3, t) == 3, "o");
    for (uint64_t s = 0; s < 3; s++)
        credit_taken(&p, "o", 0, s, 9, t);
    CHECK(credit_request(&p, "o", 0, 0, 2, t) == 2 && credit_outstanding(&p) == 2, "o again from 0: %llu",
          (unsigned long long)credit_outstanding(&p));
    /* A batch above the grant (a producer that ignores it) is counted and moves taken on. */
    credit_taken(&p, "o", 0, 7, 9, t);
    CHECK(p.overruns == 1 && credit_outstanding(&p) == 0, "overrun counted: %llu",
          (unsigned long long)credit_outstanding(&p));
    /* Full table: a producer holding nothing and not asking makes room; otherwise a new one waits. */
    credit_pool r;
    CHECK(credit_init(&r, 4, 2) == 0, "init r");
    CHECK(credit_request(&r, "x", 1, 0, 2, t) == 2 && credit_request(&r, "y", 1, 0, 2, t) == 2, "x, y");
    CHECK(credit_request(&r, "z", 1, 0, 2, t) == 0, "z waits: no account free");
    credit_taken(&r, "x", 1, 1, 3, t);
    CHECK(credit_request(&r, "z", 1, 0, 2, t + CREDIT_ACTIVE_MS) == 2 && r.n == 2, "x idle with nothing held: z in");

    /* The watchdog: s sent both batches it was granted and asks for more; they
       never arrive (lost in transit, or credit booked wrongly).  With nothing
       queued, after CREDIT_STALL_MS of asking the stall is counted and the
       credit comes back, so s is granted again instead of waiting for good. */
    credit_pool w;
    CHECK(credit_init(&w, 2, 4) == 0, "init w");
    CHECK(credit_request(&w, "s", 1, 0, 2, t) == 2, "s granted 2");
    CHECK(credit_request(&w, "s", 1, 2, 4, t) == 2, "s sent both and waits");
    CHECK(credit_request(&w, "s", 1, 2, 4, t + CREDIT_STALL_MS - 1) == 2 &&
              credit_stalled(&w, t + CREDIT_STALL_MS - 1) == 0, "not yet a stall");
    CHECK(credit_request(&w, "s", 1, 2, 4, t + CREDIT_STALL_MS) == 2 && credit_stalled(&w, t + CREDIT_STALL_MS) == 1 &&
              w.stalls == 1 && credit_outstanding(&w) == 0, "a stall: counted, its credit back");
    CHECK(credit_request(&w, "s", 1, 2, 4, t + CREDIT_STALL_MS) == 4, "s granted again");
    credit_taken(&w, "s", 1, 0, 3, t + CREDIT_STALL_MS); /* a lost batch arrives after all: nothing booked twice */
    CHECK(credit_outstanding(&w) == 2 && credit_stalled(&w, t + 2 * CREDIT_STALL_MS) == 0, "late batch: %llu",
          (unsigned long long)credit_outstanding(&w));
    /* A producer whose batches are taken is no stall, however long it has waited. */
    credit_pool v;
    CHECK(credit_init(&v, 1, 4) == 0, "init v");
    for (uint64_t s = 0, now = t; s < 20; s++, now += 1000) {
        credit_request(&v, "u", 1, s, s + 1, now);
        credit_taken(&v, "u", 1, s, 3, now + 999);
        credit_request(&v, "u", 1, s + 1, s + 2, now + 999);
    }
    CHECK(credit_stalled(&v, t + 20000) == 0 && v.stalls == 0, "a slow producer is no stall");
    credit_free(&v);

    /* Fleets whose questions are answered late, out of order with their
       batches (the d = 1e4 deadlock of issue 31, where a late question reset
       the account and booked taken batches as in flight for good): every
       batch of every producer is taken, never more than the capacity is
       outstanding, and no producer waits while credit is free.  16 and 48
       producers of 300 batches, capacity 8 and 48 (the ingest plan's range at
       d = 1e4 and 1e3), three seeds each. */
    const struct { uint64_t cap; int n; } fleets[] = {{8, 16}, {8, 48}, {48, 16}, {48, 48}};
    for (size_t f = 0; f < sizeof fleets / sizeof *fleets; f++)
        for (unsigned seed = 1; seed <= 3; seed++) {
            uint64_t worst = 0, wrong = 0, stalls = 0, each = 300;
            uint64_t got = s_simulate(fleets[f].cap, fleets[f].n, each, seed, &worst, &wrong, &stalls);
            CHECK(got == (uint64_t)fleets[f].n * each && worst <= fleets[f].cap && wrong == 0 && stalls == 0,
                  "%d producers, capacity %llu, seed %u: %llu of %llu batches taken, at most %llu outstanding, "
                  "%llu turns with an account's taken wrong, %llu stalls", fleets[f].n,
                  (unsigned long long)fleets[f].cap, seed, (unsigned long long)got,
                  (unsigned long long)fleets[f].n * each, (unsigned long long)worst, (unsigned long long)wrong,
                  (unsigned long long)stalls);
        }
    credit_free(&w);
    credit_free(&p);
    credit_free(&q);
    credit_free(&r);
    return check_summary();
}
