/* test_producers - the collector's table of producer runs
   (src/collector/producers.c): batches recorded in order make no gap, a
   skipped seq is a gap, a seq already passed is refused as a replay, and a
   batch refused after it arrived (ptable_refused_seq: cut short for want of
   memory, or not held) is refused to its producer while its seq is passed
   like a recorded one's: no false gap for it, and sent again it is a replay;
   a replay refused passes nothing. */
#include "check.h"
#include "producers.h"

int main(void)
{
    producer_table t;
    CHECK(ptable_init(&t, 8) == 0, "init");
    const char *id = "p";
    const uint64_t run = 77;
    for (uint64_t seq = 0; seq < 3; seq++) {
        CHECK(ptable_admit(&t, id, run, seq), "seq %llu admitted", (unsigned long long)seq);
        ptable_record(&t, id, run, seq, 10);
    }
    CHECK(!ptable_admit(&t, id, run, 1), "a seq passed is a replay");
    CHECK(t.total_gaps == 0, "in order: no gap (%llu)", (unsigned long long)t.total_gaps);

    /* seq 3 cut short: refused, passed */
    CHECK(ptable_admit(&t, id, run, 3), "seq 3 admitted");
    ptable_refused_seq(&t, id, run, 3);
    const producer_entry *e = ptable_find(&t, id, run);
    CHECK(e && e->refused == 1 && e->batches == 3 && e->rows == 30, "refused to its producer, not taken: %llu %llu %llu",
          e ? (unsigned long long)e->refused : 0, e ? (unsigned long long)e->batches : 0,
          e ? (unsigned long long)e->rows : 0);
    CHECK(!ptable_admit(&t, id, run, 3), "seq 3 sent again is a replay (some of its rows were used)");
    ptable_record(&t, id, run, 4, 10);
    CHECK(t.total_gaps == 0, "seq 4 after it: no gap (%llu)", (unsigned long long)t.total_gaps);

    /* a batch that never arrived is still a gap, before a cut-short one too */
    ptable_refused_seq(&t, id, run, 6);
    CHECK(t.total_gaps == 1, "seq 5 never arrived: one gap (%llu)", (unsigned long long)t.total_gaps);
    /* a replay refused passes nothing: no restart, the run goes on at 7 */
    ptable_refused_seq(&t, id, run, 2);
    e = ptable_find(&t, id, run);
    CHECK(e && e->next_seq == 7 && e->restarts == 0 && e->refused == 3, "a replay refused: next %llu, restarts %llu",
          e ? (unsigned long long)e->next_seq : 0, e ? (unsigned long long)e->restarts : 0);
    ptable_free(&t);
    return check_summary();
}
