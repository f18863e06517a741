/* est_run.c - dps-estimate's dispatch: which module runs the method (the
   streaming estimator est_stream.c, the central methods est_central.c, the
   covariance methods est_cov.c, the exact case est_ss.c), then the mean task
   (est_central.c); and which JSON block belongs to the method.  The modules
   below it call none of these: main -> est_run -> a method -> the result and
   the report (est_release.c, est_report.c).

   Who owns what: est_run borrows the settings (and the open reader in them);
   it reads all rows when the method needs them and frees them (unless main
   read them already, to choose k), and owns the noise generator of the
   central methods. */
#include "estimate.h"

#include <math.h>
#include <stdlib.h>

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

int est_run(const est_settings *s, est_result *r)
{
    r->d = dps_config_int(s->cfg, DPS_PARAM_D);
    r->k = dps_config_int(s->cfg, DPS_PARAM_K);
    r->analyze_rho = NAN;
    r->eps_total = NAN;
    if (s->method == EST_ESTIMATOR && s->task == EST_SUBSPACE && !s->rows)
        return est_stream_run_reader(s, r); /* streaming: rows are never all in memory */
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
        dps_blas_set_threads((int)dps_config_int(s->cfg, DPS_PARAM_WORKERS)); /* central SVDs: on the workers */
    if (!code) {
        if (s->method == EST_ESTIMATOR) {
            code = est_stream_run_rows(s, r, X, n);
            if (!code && s->task == EST_MEAN && r->rows_subspace < n)
                snprintf(r->note, sizeof r->note,
                         "mean task: the subspace used the first epoch only (%llu rows, rho/2); the mean used all "
                         "%zu rows (rho/2)",
                         (unsigned long long)r->rows_subspace, n);
        } else if (s->method == EST_TOPK) {
            code = est_central_topk(s, r, X, n);
        } else if (est_is_cov(s->method)) {
            code = est_cov_run(s, r, X, n, rng);
        } else if (s->method == EST_EXACT) {
            code = est_run_exact(s, r, X, n, rng);
        } else {
            code = est_central_analyze(s, r, X, n, rng);
        }
    }
    if (!code && s->task == EST_MEAN)
        code = est_mean_run(s, r, X, n, rng);
    dps_rng_destroy(&rng);
    if (X != s->rows)
        free(X);
    return code;
}

est_json_fn est_method_json(est_method m)
{
    if (m == EST_ANALYZE_GAUSS)
        return est_central_json;
    if (est_is_cov(m))
        return est_cov_json;
    if (m == EST_EXACT)
        return est_ss_json;
    return NULL;
}
