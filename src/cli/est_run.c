/* est_run.c - dps-estimate's work: the streaming estimator (rows pushed in
   batches, one snapshot per full epoch), the central methods (non-private
   top-k, Analyze Gauss) and the private mean in the subspace (DESIGN 3.8).

   Who owns what: est_run borrows the settings (and the open reader in them)
   and fills the caller's est_result, which then owns the release list, the
   last released basis and the released mean (est_result_free).  Everything
   else (the estimator, generators, accountants, row buffers) lives and dies
   inside one call. */
#include "estimate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- helpers */
/* Append a release marked "failed: did not run" with every number that does
   not apply set to NaN; NULL when out of memory. */
est_release *est_release_new(est_result *r)
{
    if (r->n_rel == r->cap_rel) {
        size_t cap = r->cap_rel ? 2 * r->cap_rel : 8;
        est_release *n = realloc(r->rel, cap * sizeof *n);
        if (!n)
            return NULL;
        r->rel = n;
        r->cap_rel = cap;
    }
    est_release *e = &r->rel[r->n_rel++];
    memset(e, 0, sizeof *e);
    e->status = DPS_SNAP_FAILED; /* until the method says otherwise */
    snprintf(e->reason, sizeof e->reason, "did not run");
    e->buckets_used = e->radius = e->w_hat = NAN;
    e->rho_epoch = e->delta_epoch = e->rho_total = e->delta_total = e->eps_total = e->delta_target = NAN;
    e->sin_to_truth = e->fro_to_truth = NAN;
    return e;
}

/* Keep V (k x d) as the last released basis and measure it against the
   truth.  Returns 0 or CLI_EXIT_RUNTIME (message printed). */
int est_basis_keep(const est_settings *s, est_result *r, est_release *rel, const float *V)
{
    size_t kd = r->k * r->d;
    if (!r->basis && !(r->basis = malloc(kd * sizeof *r->basis))) {
        cli_error("out of memory keeping the released basis");
        return CLI_EXIT_RUNTIME;
    }
    memcpy(r->basis, V, kd * sizeof *V);
    if (s->truth_basis) {
        double fro = NAN;
        rel->sin_to_truth = dps_subspace_sin(V, s->truth_basis, r->k, r->d, &fro);
        rel->fro_to_truth = fro;
    }
    return 0;
}

int est_release_finish(const est_settings *s, est_result *r, est_release *rel, const dps_accountant *acc, int code)
{
    r->spent = dps_accountant_spent(acc);
    r->eps_total = dps_accountant_eps(acc, s->cfg.cap.delta_target);
    rel->rho_total = r->spent.rho;
    rel->delta_total = r->spent.delta;
    rel->eps_total = r->eps_total;
    if (!code)
        est_report_release(s, rel, r);
    return code;
}

/* AFTER THE CHARGE NOTHING MAY DEPEND ON AN ERROR THE DATA CAN CAUSE.  The
   central methods clip every row into the unit ball (src/core/rows.c: NaN/Inf rows
   become zero, every row finite with norm <= 1, whatever its magnitude), so
   the errors their mechanisms can still return after the charge are:
   - DPS_ENOMEM: scratch whose size is a function of n, d, k (public);
   - DPS_ENUMERIC: LAPACK non-convergence (dsyevr, dgesdd) on a finite matrix
     of data plus noise, or the Bingham sampler's proposal cap (iterative);
     in principle data-dependent, no input is known to cause them, and their
     probability is not in delta;
   - rgrad: an SVD's DPS_ENUMERIC, as above.
   (Argument and limit errors are checked before the charge.)  Each is
   published as a FAILED release, exit 4, budget spent: the same observable
   outcome as the mechanism's own FAIL, so an error differs from a run
   without it only in the basis being withheld. */
void est_release_internal_error(est_release *rel, const char *method, int rc)
{
    rel->status = DPS_SNAP_FAILED;
    snprintf(rel->reason, sizeof rel->reason,
             "%s stopped on an internal error after the budget was charged (%s): published as FAILED; budget spent",
             method, dps_strerror(rc));
}

/* Count rows with NaN, Inf (and no NaN) or zero norm, like the estimator
   does; with zero_bad, NaN/Inf rows are overwritten by zeros (so that a
   non-private SVD sees the same input the estimator would). */
static void s_scan_rows(float *X, size_t n, size_t d, int zero_bad, est_result *r)
{
    for (size_t i = 0; i < n; i++) {
        float *x = X + i * d;
        int nan = 0, inf = 0;
        double ss = 0;
        for (size_t j = 0; j < d; j++) {
            if (isnan(x[j]))
                nan = 1;
            else if (isinf(x[j]))
                inf = 1;
            else
                ss += (double)x[j] * x[j];
        }
        if (nan)
            r->rows_nan++;
        else if (inf)
            r->rows_inf++;
        else if (ss == 0)
            r->rows_zero++;
        if ((nan || inf) && zero_bad)
            memset(x, 0, d * sizeof *x);
    }
}

/* The generator for noise drawn by this program (Analyze Gauss, the mean):
   secure, or in seeded mode a stream labelled apart from the estimator's. */
static int s_noise_rng(const est_settings *s, dps_rng **out)
{
    int rc = s->seeded ? dps_rng_new_labelled(out, s->seed, "dps-estimate central noise", 0)
                       : dps_rng_new_secure(out);
    if (rc)
        cli_error("cannot create the random generator: %s", dps_strerror(rc));
    return rc ? CLI_EXIT_RUNTIME : 0;
}

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
    est_report_release(s, rel, r);
    return code;
}

/* Run the streaming estimator over src, pushing batch rows at a time.  With
   the mean task only the first epoch is used (its rho is half the total;
   DESIGN 3.8). */
static int s_run_estimator(const est_settings *s, est_result *r, s_source *src, size_t batch)
{
    dps_estimator *e = NULL;
    int rc = dps_estimator_new(&e, &s->cfg);
    if (rc == DPS_ENOMEM) {
        cli_error("cannot start the estimator: out of memory (it needs about %.3g GB); lower --window, --t or --q",
                  (double)dps_estimator_memory_bound(&s->cfg) / 1e9);
        return CLI_EXIT_RUNTIME;
    }
    if (rc) {
        cli_error("cannot start the estimator: %s", dps_strerror(rc));
        return CLI_EXIT_RUNTIME;
    }
    size_t d = r->d;
    int code = 0, stop = 0;
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
            rc = dps_estimator_push(e, rows + off * d, got - off, d, &taken);
            off += taken;
            r->rows_subspace += taken;
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
    dps_stats st;
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
                        (unsigned long long)st.rows_in_epoch, (unsigned long long)st.epoch, s->cfg.t * s->cfg.m);
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
    r->eps_total = dps_zcdp_eps_total(r->spent, s->cfg.cap.delta_target);
    dps_estimator_destroy(&e);
    return code;
}

/* ------------------------------------------------------ central methods */
/* Non-private top-k of all rows (NaN/Inf rows zeroed first). */
static int s_run_topk(const est_settings *s, est_result *r, float *X, size_t n)
{
    s_scan_rows(X, n, r->d, 1, r);
    r->rows_subspace = n;
    float *V = malloc(r->k * r->d * sizeof *V);
    est_release *rel = est_release_new(r);
    if (!V || !rel) {
        free(V);
        cli_error("out of memory for the basis");
        return CLI_EXIT_RUNTIME;
    }
    int rc = dps_topk_basis(X, n, r->d, r->k, V, NULL);
    if (rc) {
        free(V);
        cli_error("the top-k SVD failed: %s", dps_strerror(rc));
        return CLI_EXIT_RUNTIME;
    }
    rel->status = DPS_SNAP_RELEASED;
    snprintf(rel->reason, sizeof rel->reason, "NOT PRIVATE: the exact top-%zu subspace of the rows, no noise", r->k);
    rel->rows_used = n;
    int code = est_basis_keep(s, r, rel, V);
    free(V);
    est_report_release(s, rel, r);
    return code;
}

/* Analyze Gauss on all rows: it spends (2 rho', delta) for the rho' it is
   called with, so it gets half of the subspace's budget. */
static int s_run_analyze(const est_settings *s, est_result *r, float *X, size_t n, dps_rng *rng)
{
    s_scan_rows(X, n, r->d, 0, r); /* the library zeroes NaN/Inf rows and clips norms */
    r->rows_subspace = n;
    double rho_sub = s->task == EST_MEAN ? s->rho / 2 : s->rho;
    r->analyze_rho = rho_sub / 2;
    dps_zcdp cost = {rho_sub, s->delta};
    dps_accountant *acc = NULL;
    float *V = malloc(r->k * r->d * sizeof *V);
    est_release *rel = est_release_new(r);
    int rc = (V && rel) ? dps_accountant_new(&acc, &s->cfg.cap, &s->cfg.spent_before) : DPS_ENOMEM;
    if (rc) {
        free(V);
        cli_error("cannot set up Analyze Gauss: %s", dps_strerror(rc));
        return CLI_EXIT_RUNTIME;
    }
    rel->rows_used = n;
    rel->delta_target = s->cfg.cap.delta_target;
    int code = 0;
    if (!dps_accountant_fits(acc, cost)) {
        rel->status = DPS_SNAP_REFUSED;
        snprintf(rel->reason, sizeof rel->reason,
                 "running Analyze Gauss would pass the privacy budget cap: nothing was spent");
        rel->rho_epoch = rel->delta_epoch = 0;
    } else {
        dps_accountant_charge(acc, cost); /* charged before the mechanism draws noise */
        int released = 0;
        rc = dps_analyze_gauss(X, n, r->d, r->k, r->analyze_rho, s->delta, rng, V, &released);
        rel->rho_epoch = cost.rho;
        rel->delta_epoch = cost.delta;
        rel->status = released && !rc ? DPS_SNAP_RELEASED : DPS_SNAP_FAILED;
        if (rc)
            est_release_internal_error(rel, "Analyze Gauss", rc);
        else if (!released)
            snprintf(rel->reason, sizeof rel->reason,
                     "the noisy eigengap was too small (Analyze Gauss said FAIL): budget spent");
        else
            code = est_basis_keep(s, r, rel, V);
    }
    code = est_release_finish(s, r, rel, acc, code);
    dps_accountant_destroy(&acc);
    free(V);
    return code;
}

/* ----------------------------------------------------------- mean task */
/* Mean of the rows clipped to unit norm (NaN/Inf rows as zero): the quantity
   dps_gaussian_mean estimates.  out has d entries. */
static void s_exact_mean(const float *X, size_t n, size_t d, double *out)
{
    memset(out, 0, d * sizeof *out);
    for (size_t i = 0; i < n; i++) {
        const float *x = X + i * d;
        double ss = 0;
        int bad = 0;
        for (size_t j = 0; j < d; j++) {
            if (!isfinite(x[j]))
                bad = 1;
            ss += (double)x[j] * x[j];
        }
        if (bad)
            continue;
        double sc = ss > 1 ? 1 / sqrt(ss) : 1;
        for (size_t j = 0; j < d; j++)
            out[j] += x[j] * sc;
    }
    for (size_t j = 0; j < d; j++)
        out[j] /= (double)n;
}

/* ||a - b|| over d entries. */
static double s_dist(const double *a, const double *b, size_t d)
{
    double s = 0;
    for (size_t j = 0; j < d; j++)
        s += (a[j] - b[j]) * (a[j] - b[j]);
    return sqrt(s);
}

/* DESIGN 3.8: x~ = Gaussian mean with rho/2 (dps_gaussian_mean: sigma =
   (2/n)/sqrt(2 rho/2) = 2/(n sqrt(rho))), released as Pi~ x~ with Pi~ the
   subspace just released.  Charged against the same cap as the subspace. */
static int s_run_mean(const est_settings *s, est_result *r, const float *X, size_t n, dps_rng *rng)
{
    est_mean_result *mr = &r->mean;
    size_t d = r->d;
    mr->ran = 1;
    mr->rows = n;
    mr->rho = 0;
    mr->sigma = mr->error = mr->bias = NAN;
    int have_basis = r->n_rel > 0 && r->rel[r->n_rel - 1].status == DPS_SNAP_RELEASED && r->basis;
    if (!have_basis) {
        mr->status = "not run";
        snprintf(mr->reason, sizeof mr->reason,
                 "the subspace step released no basis, so the mean was not computed (nothing spent on it)");
        est_report_mean(s, r);
        return 0;
    }
    double rho_mean = s->rho / 2;
    dps_zcdp cost = {rho_mean, 0};
    dps_accountant *acc = NULL;
    double *xt = malloc(d * sizeof *xt), *exact = malloc(d * sizeof *exact), *tmp = malloc(d * sizeof *tmp);
    mr->released = malloc(d * sizeof *mr->released);
    int rc = (xt && exact && tmp && mr->released) ? dps_accountant_new(&acc, &s->cfg.cap, &r->spent) : DPS_ENOMEM;
    int code = 0;
    if (rc) {
        cli_error("cannot set up the mean: %s", dps_strerror(rc));
        code = CLI_EXIT_RUNTIME;
    } else if (!dps_accountant_fits(acc, cost)) {
        mr->status = "refused";
        snprintf(mr->reason, sizeof mr->reason,
                 "the mean's rho/2 would pass the privacy budget cap: nothing was spent on it");
        free(mr->released);
        mr->released = NULL;
    } else {
        dps_accountant_charge(acc, cost);
        rc = dps_gaussian_mean(X, n, d, rho_mean, rng, xt);
        if (rc) { /* after the charge: reported like a FAIL (see est_release_internal_error) */
            mr->status = "failed";
            mr->rho = rho_mean;
            snprintf(mr->reason, sizeof mr->reason,
                     "the Gaussian mean stopped on an internal error after the budget was charged (%s): nothing "
                     "released; budget spent", dps_strerror(rc));
            free(mr->released);
            mr->released = NULL;
        } else {
            dps_project(r->basis, r->k, d, xt, mr->released);
            s_exact_mean(X, n, d, exact);
            dps_project(r->basis, r->k, d, exact, tmp);
            mr->status = "released";
            mr->reason[0] = '\0';
            mr->rho = rho_mean;
            mr->sigma = (2.0 / (double)n) / sqrt(2.0 * rho_mean);
            mr->error = s_dist(mr->released, exact, d);
            mr->bias = s_dist(tmp, exact, d);
        }
    }
    if (acc) {
        r->spent = dps_accountant_spent(acc);
        r->eps_total = dps_accountant_eps(acc, s->cfg.cap.delta_target);
    }
    dps_accountant_destroy(&acc);
    free(xt);
    free(exact);
    free(tmp);
    if (!code)
        est_report_mean(s, r);
    return code;
}

/* ----------------------------------------------------------------- run */
int est_run(const est_settings *s, est_result *r)
{
    r->d = s->cfg.d;
    r->k = s->cfg.k;
    r->analyze_rho = NAN;
    r->eps_total = NAN;
    if (s->method == EST_ESTIMATOR && s->task == EST_SUBSPACE && !s->rows) {
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
    float *X = (float *)s->rows; /* read already (to choose k): main owns them */
    size_t n = s->n_rows_read;
    cli_msg m;
    int code = X ? 0 : cli_reader_read_all(s->reader, &X, &n, &m);
    if (code) {
        cli_error("%s", m.msg);
        r->input_error = code == CLI_EXIT_INPUT;
        return code;
    }
    r->n_rows = n;
    dps_rng *rng = NULL;
    if (s->method != EST_TOPK || s->task == EST_MEAN)
        code = s_noise_rng(s, &rng);
    if (s->method != EST_ESTIMATOR)
        dps_blas_set_threads(s->cfg.workers); /* central SVDs: let OpenBLAS use the workers */
    if (!code) {
        if (s->method == EST_ESTIMATOR) {
            s_source src = {NULL, NULL, X, n, 0};
            code = s_run_estimator(s, r, &src, s->batch);
            if (!code && s->task == EST_MEAN && r->rows_subspace < n)
                snprintf(r->note, sizeof r->note,
                         "mean task: the subspace used the first epoch only (%llu rows, rho/2); the mean used all "
                         "%zu rows (rho/2)",
                         (unsigned long long)r->rows_subspace, n);
        } else if (s->method == EST_TOPK) {
            code = s_run_topk(s, r, X, n);
        } else if (est_is_cov(s->method)) {
            code = est_cov_run(s, r, X, n, rng);
        } else if (s->method == EST_EXACT) {
            code = est_run_exact(s, r, X, n, rng);
        } else {
            code = s_run_analyze(s, r, X, n, rng);
        }
    }
    if (!code && s->task == EST_MEAN)
        code = s_run_mean(s, r, X, n, rng);
    dps_rng_destroy(&rng);
    if (X != s->rows)
        free(X);
    return code;
}


void est_result_free(est_result *r)
{
    free(r->rel);
    free(r->basis);
    free(r->mean.released);
    est_cov_result_free(r);
    r->rel = NULL;
    r->basis = NULL;
    r->mean.released = NULL;
    r->n_rel = r->cap_rel = 0;
}
