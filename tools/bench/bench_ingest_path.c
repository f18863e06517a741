/* bench_ingest_path - the collector's per-message work after libzmq has
   received a batch, in bytes of messages per core-second, against memcpy of
   the same bytes in the same run (one thread, CPU time of the thread):

     memcpy   each message's bytes copied to a buffer (the reference);
     decode   wire_rows_decode: the fields read, the float payload left in
              the message (wire_rows.data);
     unit     decode, then each row into the unit ball from where it lies
              (row_unit_le, ROW_NORMALISE: the estimator's) into one row
              buffer;
     path     decode, then each row into the unit ball straight into its
              slot of a block of 32 rows (dps_estimator_push_le with the
              power iteration's row_slot: its flush block): the whole path
              from a received message to a row in the mechanism, with the
              mechanism's math left out;
     encode   the producer's side: wire_rows_encode of the same rows (held as
              floats beside the messages) into a new message, then freed.

   The messages (RowBatch, wire_rows_encode: batches of up to 256 rows or
   about 1 MiB) are made once and cycled over a set larger than the last
   level cache, as a collector meets them (each fresh from the socket).
   min / median / max of --runs runs, each about --seconds per subject.

   Usage: bench-ingest-path [--d 100,1000,10000,100000] [--seconds 1] [--runs 3] */
#include "bench_common.h"
#include "rows.h"
#include "wire.h"

#include <string.h>

static const char s_synopsis[] = "usage: bench-ingest-path [--d LIST] [--seconds S] [--runs R]\n";

enum { SUBJECT_MEMCPY, SUBJECT_DECODE, SUBJECT_UNIT, SUBJECT_PATH, SUBJECT_ENCODE, SUBJECTS };
static const char *const s_names[SUBJECTS] = {"memcpy", "decode", "unit", "path", "encode"};
enum { BLOCK_ROWS = 32 };

typedef struct {
    unsigned char **msg;
    size_t *len, n, d, rows; /* messages, their bytes, how many, row length, rows per message */
    unsigned char *dst;      /* memcpy's destination */
    float *row, *block;      /* the unit row, the block of BLOCK_ROWS rows */
    float *src;              /* message i's rows as floats, at src + i rows d */
} work;

/* One subject over the messages, in order, for about seconds of CPU time;
   bytes of messages per CPU second (0 on a decode failure). */
static double s_run(const work *w, int subject, double seconds)
{
    double bytes = 0, t0 = b_thread_cpu(), t = t0;
    size_t slot = 0;
    for (size_t i = 0; t - t0 < seconds; i = (i + 1) % w->n) {
        if (subject == SUBJECT_MEMCPY) {
            memcpy(w->dst, w->msg[i], w->len[i]);
        } else if (subject == SUBJECT_ENCODE) {
            unsigned char *enc = NULL;
            size_t len = 0;
            if (wire_rows_encode("bench", i, w->src + i * w->rows * w->d, w->rows, w->d, NULL, &enc, &len) != DPS_OK)
                return 0;
            free(enc);
        } else {
            wire_rows r;
            if (wire_rows_decode(w->msg[i], w->len[i], w->d, &r) != WIRE_OK)
                return 0;
            for (size_t k = 0; subject != SUBJECT_DECODE && k < r.n; k++) {
                float *dst = subject == SUBJECT_PATH ? w->block + slot * w->d : w->row;
                row_unit_le(r.data + k * w->d * sizeof(float), w->d, ROW_NORMALISE, dst);
                slot = (slot + 1) % BLOCK_ROWS;
            }
            wire_rows_release(&r);
        }
        bytes += (double)w->len[i];
        if (i % 8 == 7)
            t = b_thread_cpu();
    }
    t = b_thread_cpu();
    return bytes / (t - t0);
}

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    cli_set_program("bench-ingest-path");
    size_t ds_v[8] = {100, 1000, 10000, 100000};
    b_size_list ds = {ds_v, 4, 8};
    double seconds = 1.0;
    size_t runs = 3;
    int help = 0;
    cli_opt flags[] = {
        B_SIZES("--d", &ds, "LIST", "100,1000,10000,100000", "row lengths"),
        {"--seconds", CLI_OPT_DOUBLE, &seconds, "S", "1", "CPU seconds per subject and run", 0},
        B_SIZE("--runs", &runs, "R", "3", "runs, alternating the subjects"),
        B_HELP(&help),
    };
    int prc = b_parse(argc, argv, flags, sizeof flags / sizeof flags[0], &help, s_synopsis);
    if (prc >= 0)
        return prc;
    if (runs < 1 || runs > 64 || !(seconds > 0))
        CLI_USAGE("--runs must be 1..64 and --seconds positive");
    b_header("bench-ingest-path: a received batch to rows in the mechanism, and a batch encoded, against memcpy (one thread)", 1);
    printf("%8s %6s %8s", "d", "rows", "msg MB");
    for (int s = 0; s < SUBJECTS; s++)
        printf("   %-30s", s_names[s]);
    printf("   path / memcpy\n");
    for (size_t di = 0; di < ds.n; di++) {
        size_t d = ds.v[di], rows = (size_t)(1048576.0 / (4.0 * (double)d));
        rows = rows < 1 ? 1 : rows > 256 ? 256 : rows;
        size_t msg_bytes = rows * d * 4, n = (size_t)(96e6 / (double)msg_bytes) + 2; /* ~96 MB of messages */
        work w = {.n = n, .d = d, .rows = rows};
        w.msg = calloc(n, sizeof *w.msg);
        w.len = calloc(n, sizeof *w.len);
        w.dst = b_alloc(msg_bytes + 4096);
        w.row = b_alloc(d * sizeof *w.row);
        w.block = b_alloc(BLOCK_ROWS * d * sizeof *w.block);
        w.src = b_alloc(n * rows * d * sizeof *w.src);
        b_rng g;
        b_seed(&g, 7);
        int ok = w.msg && w.len;
        for (size_t i = 0; ok && i < n; i++) {
            float *X = w.src + i * rows * d;
            for (size_t j = 0; j < rows * d; j++)
                X[j] = (float)b_gauss(&g);
            ok = wire_rows_encode("bench", i, X, rows, d, NULL, &w.msg[i], &w.len[i]) == DPS_OK;
        }
        if (!ok) {
            fprintf(stderr, "bench-ingest-path: cannot make the messages at d %zu\n", d);
            return 1;
        }
        double v[SUBJECTS][64];
        for (size_t r = 0; r < runs; r++)
            for (int s = 0; s < SUBJECTS; s++)
                v[s][r] = s_run(&w, s, seconds);
        printf("%8zu %6zu %8.2f", d, rows, (double)w.len[0] / 1e6);
        double med[SUBJECTS];
        for (int s = 0; s < SUBJECTS; s++) {
            qsort(v[s], runs, sizeof v[s][0], s_cmp);
            med[s] = v[s][runs / 2];
            printf("   %7.2f / %7.2f / %7.2f GB/s", v[s][0] / 1e9, med[s] / 1e9, v[s][runs - 1] / 1e9);
        }
        printf("   %.3f\n", med[SUBJECT_PATH] / med[SUBJECT_MEMCPY]);
        printf("RESULT ingest_path d=%zu rows=%zu memcpy_gbs=%.3f decode_gbs=%.3f unit_gbs=%.3f path_gbs=%.3f "
               "path_over_memcpy=%.4f encode_gbs=%.3f encode_over_memcpy=%.4f\n",
               d, rows, med[0] / 1e9, med[1] / 1e9, med[2] / 1e9, med[3] / 1e9, med[3] / med[0], med[4] / 1e9,
               med[4] / med[0]);
        fflush(stdout);
        for (size_t i = 0; i < n; i++)
            free(w.msg[i]);
        free(w.msg);
        free(w.len);
        free(w.dst);
        free(w.row);
        free(w.block);
        free(w.src);
    }
    b_footer();
    return 0;
}
