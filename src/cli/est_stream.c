/* est_stream.c - dps-estimate's --method estimator: the library's streaming
   estimator fed in batches (from the open reader, or from rows in memory for
   the mean task), one release per closed epoch (basis kept, --out-prefix
   file, progress line).

   Who owns what: borrows the settings (and the open reader in them); the
   estimator and the batch buffer live and die inside one call; the releases
   and the last basis go to the caller's est_result. */
#include "estimate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------- the estimator */
/* Where the estimator's rows come from: the open reader (streaming), or a
   matrix already in memory (the mean task needs all rows). */
typedef struct {
    cli_reader *reader;
    float *buf;          /* batch x d, for the reader                      */
    const float *X;      /* in memory                                      */
    size_t n, pos;
} s_source;

/* Next batch of at most batch rows: *rows points to them, *got counts them
   (0 at the end).  Returns 0 or an exit code (message printed). */
static int s_source_next(s_source *src, size_t batch, size_t d, const float **rows, size_t *got)
{
    if (!src->reader) {
        size_t left = src->n - src->pos;
        *got = left < batch ? left : batch;
        *rows = src->X + src->pos * d;
        src->pos += *got;
        return 0;
    }
    cli_msg m;
    int rc = cli_reader_next(src->reader, src->buf, batch, got, &m);
    if (rc)
        cli_error("%s", m.msg);
    *rows = src->buf;
    return rc;
}

/* Close the open epoch and record its snapshot (basis kept, --out-prefix
   file written, progress line).  Returns 0 or an exit code. */
static int s_close_epoch(const est_settings *s, est_result *r, dps_estimator *e)
{
    dps_snapshot *snap = NULL;
    int rc = dps_estimator_close_epoch(e, &snap);
    if (rc) {
        cli_error("closing the epoch failed: %s", dps_strerror(rc));
        return CLI_EXIT_RUNTIME;
    }
    dps_snapshot_info in;
    dps_snapshot_get_info(snap, &in);
    est_release *rel = est_release_new(r);
    if (!rel) {
        dps_snapshot_destroy(&snap);
        cli_error("out of memory recording the epoch");
        return CLI_EXIT_RUNTIME;
    }
    rel->epoch = in.epoch;
    rel->status = in.status;
    snprintf(rel->reason, sizeof rel->reason, "%s", in.reason ? in.reason : "");
    rel->rows_used = in.rows_used;
    rel->buckets_used = (double)in.buckets_used;
    rel->radius = in.radius;
    rel->w_hat = in.w_hat;
    rel->noise_level = in.noise_level;
    rel->weak = dps_snapshot_weak(&in);
    rel->power_steps = dps_snapshot_power_steps(snap);
    rel->groups = in.groups;
    for (size_t g = 0; g < in.groups; g++) {
        rel->group_level[g] = dps_snapshot_group_noise_level(snap, g);
        rel->group_weak[g] = (unsigned char)dps_snapshot_group_weak(snap, g);
    }
    rel->rho_epoch = in.epoch_cost.rho;
    rel->delta_epoch = in.epoch_cost.delta;
    rel->rho_total = in.total.rho;
    rel->delta_total = in.total.delta;
    rel->eps_total = in.eps_total;
    rel->delta_target = in.delta_target;
    int code = 0;
    const float *V = dps_snapshot_basis(snap);
    if (V) {
        code = est_basis_keep(s, r, rel, V);
        if (!code && s->out_prefix) {
            size_t len = strlen(s->out_prefix) + 32;
            char *path = malloc(len);
            cli_msg m;
            if (!path) {
                cli_error("out of memory");
                code = CLI_EXIT_RUNTIME;
            } else {
                snprintf(path, len, "%s%llu.npy", s->out_prefix, (unsigned long long)in.epoch);
                if ((code = cli_npy_write(path, V, r->k, r->d, 0, &m)) != 0)
                    cli_error("%s", m.msg);
                free(path);
            }
        }
    }
    dps_snapshot_destroy(&snap);
    est_report_release(s, rel, r, NULL);
    return code;
}

/* Where the power iteration's blocks end when every row is one epoch
   (--method power or gaussian): the epoch's t m is above any input, so the
   library's index cuts would never fall and one step would read every row;
   with the row count known in advance (a file), the T blocks are cut here at
   the rows the library would cut an epoch of exactly those rows at
   (dps_power_block_start), one step each.  Not known (standard input):
   one step, said on stderr and in the output's power_steps. */
typedef struct {
    uint64_t n, T, next; /* T = 0: no cuts; next: the next block to end at  */
    uint64_t pushed;
} s_cuts;

uint64_t est_one_epoch_steps(uint64_t T, int rows_known, uint64_t n)
{
    if (!rows_known)
        return T ? 1 : 0;
    return T < n ? T : n;
}

static s_cuts s_cuts_plan(const est_settings *s, const s_source *src, const dps_estimator *e)
{
    s_cuts cut = {0, 0, 1, 0};
    uint64_t T = dps_estimator_power_blocks(e), n = 0;
    if (!s->one_epoch || T <= 1)
        return cut;
    if (src->reader ? !cli_reader_rows(src->reader, &n) : (n = src->n, 0)) {
        fprintf(stderr, "%s: warning: the input's row count is not known in advance (a pipe, or CSV, whose rows "
                "are counted only as they are read): the power iteration takes one noisy step on every row instead "
                "of %llu blocks (give a .npy or raw float32 file to run them)\n", cli_program(),
                (unsigned long long)T);
        return cut;
    }
    cut.n = n;
    cut.T = est_one_epoch_steps(T, 1, n);
    return cut;
}

/* How many of `want` rows to push before the next cut. */
static size_t s_cuts_room(const s_cuts *cut, size_t want)
{
    if (cut->next >= cut->T)
        return want;
    uint64_t left = dps_power_block_start(cut->n, cut->T, cut->next) - cut->pushed;
    return left < want ? (size_t)left : want;
}

/* After `taken` rows: end every block whose last row was pushed. */
static int s_cuts_after(s_cuts *cut, dps_estimator *e, size_t taken)
{
    cut->pushed += taken;
    int rc = DPS_OK;
    while (!rc && cut->next < cut->T && cut->pushed == dps_power_block_start(cut->n, cut->T, cut->next)) {
        rc = dps_estimator_end_block(e);
        cut->next++;
    }
    return rc;
}

/* Run the streaming estimator over src, pushing batch rows at a time.  With
   the mean task only the first epoch is used (its rho is half the total;
   DESIGN 3.8). */
static int s_run_estimator(const est_settings *s, est_result *r, s_source *src, size_t batch)
{
    dps_estimator *e = NULL;
    int rc = dps_estimator_new(&e, s->cfg);
    if (rc == DPS_ENOMEM) {
        cli_error("cannot start the estimator: out of memory (it needs about %.3g GB); lower --window, --t or --q",
                  (double)dps_estimator_memory_bound(s->cfg) / 1e9);
        return CLI_EXIT_RUNTIME;
    }
    if (rc) {
        cli_error("cannot start the estimator: %s", dps_strerror(rc));
        return CLI_EXIT_RUNTIME;
    }
    size_t d = r->d;
    int code = 0, stop = 0;
    s_cuts cut = s_cuts_plan(s, src, e);
    while (!code && !stop) {
        const float *rows = NULL;
        size_t got = 0;
        if ((code = s_source_next(src, batch, d, &rows, &got)) != 0) {
            r->input_error = code == CLI_EXIT_INPUT;
            snprintf(r->note, sizeof r->note,
                     "the input failed part way; epochs closed before that were released, the open epoch was not");
            break;
        }
        if (got == 0)
            break;
        if (src->reader)
            r->n_rows += got;
        for (size_t off = 0; off < got && !code && !stop;) {
            size_t taken = 0;
            rc = dps_estimator_push(e, rows + off * d, s_cuts_room(&cut, got - off), d, &taken);
            off += taken;
            r->rows_subspace += taken;
            if (rc == DPS_OK)
                rc = s_cuts_after(&cut, e, taken);
            if (rc != DPS_OK && rc != DPS_EFULL) {
                cli_error("pushing rows into the estimator failed: %s", dps_strerror(rc));
                code = CLI_EXIT_RUNTIME;
            } else if (dps_estimator_epoch_full(e)) {
                code = s_close_epoch(s, r, e);
                stop = s->task == EST_MEAN;
            } else if (rc == DPS_EFULL) {
                cli_error("the estimator says the epoch is full but it is not; this is a bug");
                code = CLI_EXIT_RUNTIME;
            }
        }
    }
    dps_estimator_stats st;
    dps_estimator_get_stats(e, &st);
    if (!code && !stop && st.rows_in_epoch > 0) {
        if (s->close_partial) {
            code = s_close_epoch(s, r, e);
            dps_estimator_get_stats(e, &st);
        } else {
            r->rows_not_closed = st.rows_in_epoch;
            if (s->progress)
                fprintf(s->progress,
                        "input ended with %llu rows in the open epoch %llu (an epoch takes t*m = %zu): not closed, "
                        "its rows are dropped (pass --close-partial to close it)\n",
                        (unsigned long long)st.rows_in_epoch, (unsigned long long)st.epoch,
                        (size_t)est_rows_per_epoch(s));
        }
    } else if (!code && !stop && st.rows_in_epoch == 0 && r->n_rel == 0 && s->progress) {
        fprintf(s->progress, "no rows reached the estimator\n");
    }
    if (r->input_error || (code && st.rows_in_epoch > 0))
        r->rows_not_closed = st.rows_in_epoch;
    r->rows_nan = st.rows_nan;
    r->rows_inf = st.rows_inf;
    r->rows_zero = st.rows_zero;
    r->rows_discarded = st.rows_discarded;
    r->batches_dim = st.batches_dim;
    r->batches_empty = st.batches_empty;
    r->spent = dps_estimator_spent(e);
    r->spent_kind = dps_estimator_spent_kind(e);
    r->eps_total = dps_estimator_eps(e, est_cap(s).delta_target); /* exact while every charge is Gaussian */
    dps_estimator_destroy(&e);
    return code;
}

int est_stream_run_reader(const est_settings *s, est_result *r)
{
    uint64_t known = 0;
    size_t rows = s->batch; /* no bigger buffer than the input needs */
    if (cli_reader_rows(s->reader, &known) && known < rows)
        rows = (size_t)known;
    s_source src = {s->reader, malloc(rows * r->d * sizeof(float)), NULL, 0, 0};
    if (!src.buf) {
        cli_error("out of memory for a batch of %zu rows; lower --batch", rows);
        return CLI_EXIT_RUNTIME;
    }
    int code = s_run_estimator(s, r, &src, rows);
    free(src.buf);
    return code;
}

int est_stream_run_rows(const est_settings *s, est_result *r, const float *X, size_t n)
{
    s_source src = {NULL, NULL, X, n, 0};
    return s_run_estimator(s, r, &src, s->batch);
}
