/* test_estimator - the streaming estimator: the randomized partition, bad
   input, accuracy on the paper's generator against a bound derived from the
   run, failure, refusal, the commit hook, reproducibility, the eps of a
   total and the eps cap by the charges' kind. */
#include "config_internal.h"
#include "check.h"
#include "estimator_test_util.h"
#include "dpsubspace.h"
#include "estimator_internal.h"
#include "linalg.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- partition capture */
typedef struct {
    size_t t, m, d;
    int *bucket_of; /* row id -> bucket, for the current epoch */
    int seen_twice;
} capture;

static void s_capture(void *arg, uint64_t epoch, size_t bucket, const float *rows, size_t m, size_t d)
{
    (void)epoch;
    capture *c = arg;
    for (size_t i = 0; i < m; i++) {
        size_t arg_max = 0;
        for (size_t j = 1; j < d; j++)
            if (rows[i * d + j] > rows[i * d + arg_max])
                arg_max = j;
        if (c->bucket_of[arg_max] >= 0)
            c->seen_twice = 1;
        c->bucket_of[arg_max] = (int)bucket; /* distinct rows: no two threads write one cell */
    }
}


/* ----------------------------------------------------------- bucket errors */
typedef struct {
    pthread_mutex_t mu;
    float *truth; /* k x d */
    size_t k;
    double *P;    /* q x d reference points of the epoch (regenerated) */
    size_t q;
    double worst_fro;  /* max_j ||Pi_j - Pi*||_F */
    double worst_ref;  /* max_j ||(Pi_j - Pi*) P^T||_F */
} bucket_err;

static void s_bucket_err(void *arg, uint64_t epoch, size_t bucket, const float *rows, size_t m, size_t d)
{
    (void)epoch; (void)bucket;
    bucket_err *b = arg;
    float *V = malloc(b->k * d * sizeof *V);
    dps_topk_basis(rows, m, d, b->k, V, NULL);
    double fro = 0;
    dps_subspace_sin(V, b->truth, b->k, d, &fro);
    /* ||(Pi_j - Pi*) P^T||_F^2 = sum_i ||Pi_j p_i - Pi* p_i||^2 */
    double ref = 0;
    double *pj = malloc(d * sizeof *pj), *ps = malloc(d * sizeof *ps);
    for (size_t i = 0; i < b->q; i++) {
        dps_project(V, b->k, d, b->P + i * d, pj);
        dps_project(b->truth, b->k, d, b->P + i * d, ps);
        for (size_t c = 0; c < d; c++)
            ref += (pj[c] - ps[c]) * (pj[c] - ps[c]);
    }
    pthread_mutex_lock(&b->mu);
    b->worst_fro = fmax(b->worst_fro, fro);
    b->worst_ref = fmax(b->worst_ref, sqrt(ref));
    pthread_mutex_unlock(&b->mu);
    free(V); free(pj); free(ps);
}

/* s_k of P V*^T (q x k) */
static double s_sk(const double *P, size_t q, const float *V, size_t k, size_t d)
{
    double *C = calloc(k * q, sizeof *C), *M = calloc(k * k, sizeof *M), *Z = calloc(k * k, sizeof *Z),
           *w = calloc(k, sizeof *w);
    for (size_t a = 0; a < k; a++)
        for (size_t i = 0; i < q; i++) {
            double s = 0;
            for (size_t c = 0; c < d; c++)
                s += V[a * d + c] * P[i * d + c];
            C[a * q + i] = s;
        }
    for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b < k; b++) {
            double s = 0;
            for (size_t i = 0; i < q; i++)
                s += C[a * q + i] * C[b * q + i];
            M[a * k + b] = s;
        }
    la_syevr_top(M, k, k, w, Z);
    double r = sqrt(w[k - 1]);
    free(C); free(M); free(Z); free(w);
    return r;
}


/* The covariance mechanism (DPS_AGG_COVARIANCE): no buckets, every row of
   the epoch used, charged (rho_epoch, 0), refused above DPS_COV_MAX_D.
   Accuracy: with rows near a 2-dim span (tau = 1e4 d) C is about
   (n/2)(b1 b1' + b2 b2'); each exponential-mechanism draw has density
   exp((eps/2) u'C u) on the sphere, whose angle to the span obeys, for large
   eps n/2, sin^2 ~ chi^2_{d-2} / (eps n / 2) (Laplace approximation).  With
   n = 1000, eps = 2 (rho = 2), d = 20: eps n/2 = 1000, and P[chi^2_18 > 60]
   < 1e-5, so sin^2 < 0.06 per draw; two draws: sin of the subspace < 0.5 with
   a wide margin for the approximation. */
static void s_test_covariance(void)
{
    size_t d = 20, k = 2, t = 125, m = 8, n = t * m;
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 41);
    float *X = malloc(n * d * sizeof *X), *B = malloc(k * d * sizeof *B);
    dps_synth_paper(rng, n, d, k, 1e4 * d, X, B);
    dps_config c = s_cfg(d, k, t, m, 9);
    c.aggregator = DPS_AGG_COVARIANCE;
    c.rho_epoch = 2.0;
    const char *why = NULL;
    CHECK(dps_config_check(&c, &why) == DPS_OK, "covariance config: %s", why);
    ledger l = {0};
    c.commit = s_commit;
    c.commit_arg = &l;
    dps_estimator *e = NULL;
    CHECK(dps_estimator_new(&e, &c) == DPS_OK, "covariance estimator");
    double worst = 0;
    for (int ep = 0; ep < 3 && e; ep++) {
        dps_snapshot *snap = s_run_epoch(e, X, n, d);
        dps_snapshot_info in;
        dps_snapshot_get_info(snap, &in);
        CHECK(in.status == DPS_SNAP_RELEASED && in.aggregator == DPS_AGG_COVARIANCE, "covariance released");
        CHECK(in.rows_used == n && in.buckets_used == 0, "every row used: %llu", (unsigned long long)in.rows_used);
        CHECK(in.epoch_cost.rho == 2.0 && in.epoch_cost.delta == 0.0, "charged (rho, 0)");
        CHECK(!dps_snapshot_weak(&in), "not flagged weak (no radius)");
        double sn = dps_snapshot_basis(snap) ? dps_subspace_sin(dps_snapshot_basis(snap), B, k, d, NULL) : 1;
        worst = fmax(worst, sn);
        dps_snapshot_destroy(&snap);
    }
    NOTE("covariance mechanism: worst sin over 3 epochs %.3f (bound 0.5)", worst);
    CHECK(worst < 0.5, "covariance accuracy %g", worst);
    CHECK(l.calls == 3 && fabs(l.rho_seen - 6.0) < 1e-12, "ledger saw 3 charges of rho 2");
    dps_estimator_stats st;
    dps_estimator_get_stats(e, &st);
    CHECK(st.rows_discarded == 0 && st.rows_accepted == 3 * n, "no row discarded");
    /* An epoch with no rows is not run and spends nothing. */
    dps_snapshot *none = NULL;
    dps_estimator_close_epoch(e, &none);
    dps_snapshot_info in;
    dps_snapshot_get_info(none, &in);
    CHECK(in.status == DPS_SNAP_FAILED && in.epoch_cost.rho == 0 && l.calls == 3, "empty epoch: not run");
    dps_snapshot_destroy(&none);
    dps_estimator_destroy(&e);

    /* The epoch spends what it is charged: with every row = e_1 (d = 3, 10
       rows), C = 10 e_1 e_1' exactly, and the released direction's sin^2 to
       e_1 has the law of dps_cov_iterative at eps = sqrt(2 rho) = 1.  Compare
       the mean over 1500 epochs with 6000 direct draws at eps = 1 (within 5
       combined se) and at eps = 2 (the law a doubled exponent would give:
       more than 5 se away). */
    {
        size_t dd = 3, nn = 10;
        float *E1 = calloc(nn * dd, sizeof *E1);
        double *C1 = calloc(dd * dd, sizeof *C1);
        for (size_t i = 0; i < nn; i++)
            E1[i * dd] = 1.0f;
        C1[0] = (double)nn;
        dps_config ce = s_cfg(dd, 1, 5, 2, 77);
        ce.aggregator = DPS_AGG_COVARIANCE;
        ce.rho_epoch = 0.5;
        ce.workers = 1;
        dps_estimator *ee = NULL;
        CHECK(dps_estimator_new(&ee, &ce) == DPS_OK, "small covariance estimator");
        double m_ep = 0, v_ep = 0, m1 = 0, v1 = 0, m2 = 0, v2 = 0;
        size_t R_ep = 1500, R = 6000;
        for (size_t r = 0; r < R_ep && ee; r++) {
            dps_snapshot *sn = s_run_epoch(ee, E1, nn, dd);
            const float *v = dps_snapshot_basis(sn);
            double s2 = v ? 1.0 - (double)v[0] * v[0] : 1.0;
            m_ep += s2 / R_ep;
            v_ep += s2 * s2 / R_ep;
            dps_snapshot_destroy(&sn);
        }
        for (int which = 0; which < 2; which++)
            for (size_t r = 0; r < R; r++) {
                dps_iterative_params ip = {.k = 1, .eps = which ? 2.0 : 1.0, .eps_values = 0,
                                           .split = DPS_SPLIT_UNIFORM};
                float v[3];
                dps_cov_iterative(C1, nn, dd, &ip, rng, v, NULL, NULL, NULL);
                double s2 = 1.0 - (double)v[0] * v[0];
                *(which ? &m2 : &m1) += s2 / R;
                *(which ? &v2 : &v1) += s2 * s2 / R;
            }
        double se1 = sqrt((v_ep - m_ep * m_ep) / R_ep + (v1 - m1 * m1) / R);
        double se2 = sqrt((v_ep - m_ep * m_ep) / R_ep + (v2 - m2 * m2) / R);
        NOTE("covariance epoch: mean sin^2 %.4f; direct eps 1: %.4f, eps 2: %.4f", m_ep, m1, m2);
        CHECK(fabs(m_ep - m1) < 5 * se1, "epoch draws at eps = sqrt(2 rho): %g vs %g (se %g)", m_ep, m1, se1);
        CHECK(fabs(m_ep - m2) > 5 * se2, "and not at twice that: %g vs %g (se %g)", m_ep, m2, se2);
        dps_estimator_destroy(&ee);
        free(E1); free(C1);
    }
    dps_config_init(&c, DPS_COV_MAX_D + 1, 2);
    c.aggregator = DPS_AGG_COVARIANCE;
    CHECK(dps_config_check(&c, &why) == DPS_ELIMIT, "covariance d limit");
    free(X); free(B);
    dps_rng_destroy(&rng);
}

/* Epochs of agg at rho 0.25 under an eps cap of 6.6 at 1e-5, from spent
   (0.25 each) of kind spent_kind: how many are released before the first
   refusal (at most 8), and the last snapshot's eps_total. */
static int s_eps_capped(dps_aggregator agg, double spent, dps_charge_kind spent_kind, double *eps_total,
                        double *eps_est)
{
    size_t d = 20, k = 2, t = 10, m = 4, n = t * m;
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 5);
    float *X = malloc(n * d * sizeof *X);
    dps_synth_paper(rng, n, d, k, 10.0 * d, X, NULL);
    dps_config c = s_cfg(d, k, t, m, 3);
    c.aggregator = agg;
    c.rho_epoch = 0.25;
    c.cap = (dps_budget){0, 6.6, 1e-5};
    c.spent_before = (dps_zcdp){spent, 0};
    dps_estimator *e = NULL;
    int released = 0, rc = dps_estimator_new_resumed(&e, &c, spent_kind);
    CHECK(rc == DPS_OK, "%s: estimator: %s", dps_aggregator_name(agg), dps_strerror(rc));
    for (int ep = 0; e && ep < 8; ep++) {
        dps_snapshot *s = s_run_epoch(e, X, n, d);
        dps_snapshot_info in;
        dps_snapshot_get_info(s, &in);
        *eps_total = in.eps_total;
        dps_snapshot_destroy(&s);
        if (in.status == DPS_SNAP_REFUSED)
            break;
        released++;
    }
    *eps_est = e ? dps_estimator_eps(e, 0) : NAN;
    dps_estimator_destroy(&e);
    free(X);
    dps_rng_destroy(&rng);
    return released;
}

/* The eps of the total and the eps cap follow the charges' kind: gaussian
   and power epochs alone are the Gaussian mechanism of mu = sqrt(2 rho)
   (rho 1: eps 6.57 at 1e-5, so four epochs of 0.25 fit a cap of 6.6), any
   other (covariance: pure eps-DP) or a spent_before of unknown kind makes
   the CKS conversion's (rho 1: 7.08, three fit). */
static void s_test_eps_kind(void)
{
    const double g1 = dps_gaussian_eps_at(sqrt(2.0), 1e-5), c1 = dps_zcdp_eps_at(1.0, 1e-5);
    double eps, est;
    int n = s_eps_capped(DPS_AGG_GAUSSIAN, 0, DPS_CHARGE_ZCDP, &eps, &est);
    NOTE("gaussian, rho 0.25 an epoch, eps cap 6.6: %d released, the refusal states eps %.4f", n, eps);
    CHECK(n == 4 && fabs(eps - g1) < 1e-9 && fabs(est - g1) < 1e-9 && fabs(eps - 6.57) < 0.005,
          "gaussian: 4 epochs fit, eps_total %.4f is the exact Gaussian one", eps);
    n = s_eps_capped(DPS_AGG_POWER, 0, DPS_CHARGE_ZCDP, &eps, &est);
    CHECK(n == 4 && fabs(eps - g1) < 1e-9, "power: 4 epochs fit, eps_total %.4f", eps);
    n = s_eps_capped(DPS_AGG_COVARIANCE, 0, DPS_CHARGE_ZCDP, &eps, &est);
    NOTE("covariance (pure eps-DP), the same: %d released, eps %.4f", n, eps);
    CHECK(n == 3 && fabs(eps - dps_zcdp_eps_at(0.75, 1e-5)) < 1e-9 && fabs(est - eps) < 1e-12,
          "covariance: 3 fit, eps_total by the CKS conversion (%.4f)", eps);
    /* Resumed from rho 0.5: Gaussian, two more fit (6.57); of unknown kind
       (dps_estimator_new's reading), one (rho 1 would be 7.08). */
    n = s_eps_capped(DPS_AGG_GAUSSIAN, 0.5, DPS_CHARGE_GAUSSIAN, &eps, &est);
    CHECK(n == 2 && fabs(eps - g1) < 1e-9, "resumed Gaussian: 2 more fit, eps %.4f", eps);
    n = s_eps_capped(DPS_AGG_GAUSSIAN, 0.5, DPS_CHARGE_ZCDP, &eps, &est);
    NOTE("gaussian resumed from rho 0.5 of unknown kind: %d released, eps %.4f (CKS of rho 1: %.4f)", n, eps, c1);
    CHECK(n == 1 && fabs(eps - dps_zcdp_eps_at(0.75, 1e-5)) < 1e-9, "resumed as zCDP: 1 more fits, eps %.4f", eps);
    dps_config c = s_cfg(20, 2, 10, 4, 3);
    c.aggregator = DPS_AGG_GAUSSIAN;
    c.spent_before = (dps_zcdp){0.5, 1e-9};
    dps_estimator *e = NULL;
    CHECK(dps_estimator_new_resumed(&e, &c, DPS_CHARGE_GAUSSIAN) == DPS_EINVAL && !e,
          "a Gaussian spent_before with a delta is refused");
}

/* dps_estimator_push_le: the same rows as little-endian bytes at an odd
   address (a payload inside a received message) give the release, bit for
   bit, and the counts of dps_estimator_push of the floats, through each
   intake: a random bucket slot (reference), the estimator's own row buffer
   (gaussian), and the mechanism's block (power's row_slot). */
static void s_test_push_le(dps_rng *rng)
{
    const dps_aggregator aggs[] = {DPS_AGG_REFERENCE, DPS_AGG_GAUSSIAN, DPS_AGG_POWER};
    size_t d = 40, k = 2, t = 125, m = 4, n = t * m;
    float *rows = malloc(n * d * sizeof *rows);
    unsigned char *bytes = malloc(n * d * 4 + 1), *at = bytes + 1;
    dps_synth_paper(rng, n, d, k, 10.0 * d, rows, NULL);
    rows[3 * d + 5] = NAN; /* a NaN row and a zero row: counted the same way */
    memset(rows + 7 * d, 0, d * sizeof *rows);
    for (size_t i = 0; i < n * d; i++) {
        uint32_t v;
        memcpy(&v, rows + i, 4);
        for (int b = 0; b < 4; b++)
            at[4 * i + (size_t)b] = (unsigned char)(v >> (8 * b));
    }
    for (size_t a = 0; a < sizeof aggs / sizeof *aggs; a++) {
        dps_config c = s_cfg(d, k, t, m, 31);
        c.aggregator = aggs[a];
        float *basis[2] = {NULL, NULL};
        dps_estimator_stats st[2];
        for (int le = 0; le <= 1; le++) {
            dps_estimator *e = NULL;
            CHECK(dps_estimator_new(&e, &c) == DPS_OK, "aggregator %d: new", (int)aggs[a]);
            size_t taken = 0, half = n / 2 + 3;
            int rc = le ? dps_estimator_push_le(e, at, half, d, &taken) : dps_estimator_push(e, rows, half, d, &taken);
            size_t more = 0;
            rc |= le ? dps_estimator_push_le(e, at + half * d * 4, n - half, d, &more)
                     : dps_estimator_push(e, rows + half * d, n - half, d, &more);
            CHECK(rc == DPS_OK && taken + more == n, "aggregator %d (%s): every row taken", (int)aggs[a],
                  le ? "bytes" : "floats");
            dps_snapshot *s = NULL;
            dps_estimator_close_epoch(e, &s);
            dps_estimator_get_stats(e, &st[le]);
            const float *b = s ? dps_snapshot_basis(s) : NULL;
            basis[le] = malloc(k * d * sizeof(float));
            if (b)
                memcpy(basis[le], b, k * d * sizeof(float));
            CHECK(b != NULL, "aggregator %d (%s): released", (int)aggs[a], le ? "bytes" : "floats");
            dps_snapshot_destroy(&s);
            dps_estimator_destroy(&e);
        }
        CHECK(memcmp(basis[0], basis[1], k * d * sizeof(float)) == 0, "aggregator %d: the same basis from bytes",
              (int)aggs[a]);
        CHECK(st[0].rows_nan == 1 && st[1].rows_nan == 1 && st[0].rows_zero == 1 && st[1].rows_zero == 1,
              "aggregator %d: the NaN and zero rows counted both ways", (int)aggs[a]);
        free(basis[0]);
        free(basis[1]);
    }
    dps_estimator *e = NULL;
    dps_config c = s_cfg(d, k, t, m, 31);
    dps_estimator_new(&e, &c);
    size_t taken = 9;
    CHECK(dps_estimator_push_le(e, at, 2, d + 1, &taken) == DPS_EDIM && taken == 0, "bytes: wrong dim refused");
    CHECK(dps_estimator_push_le(e, at, 0, d, &taken) == DPS_EEMPTY, "bytes: no rows refused");
    CHECK(dps_estimator_push_le(e, NULL, 2, d, &taken) == DPS_EINVAL, "bytes: NULL refused");
    dps_estimator_destroy(&e);
    free(rows);
    free(bytes);
}

int main(void)
{
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 11);
    s_test_eps_kind();
    s_test_push_le(rng);

    /* 1. The partition: one-hot rows e_0..e_49, t = 10 buckets of m = 5, 2000
       epochs.  Every row lands in exactly one bucket per epoch.  Uniformity:
       the 50 x 10 table of (row, bucket) counts has expected 200 per cell;
       chi^2 with 50 * 9 = 450 dof has mean 450, sd 30: accept < 450 + 4 * 30.
       Pairs: P(rows 0 and 1 share a bucket) = (m-1)/(tm-1) = 4/49; over 2000
       epochs the count has mean 163.3, sd 12.2: accept within 4.5 sd. */
    {
        size_t t = 10, m = 5, d = 50, epochs = 2000;
        dps_config c = s_cfg(d, 2, t, m, 21);
        c.rho_epoch = 100; /* so that t = 10 buckets may run (min buckets); privacy is not tested here */
        dps_estimator *e = NULL;
        CHECK(dps_estimator_new(&e, &c) == DPS_OK, "new");
        capture cap = {t, m, d, malloc(d * sizeof(int)), 0};
        dps_estimator_set_bucket_hook(e, s_capture, &cap);
        float *rows = calloc(d * d, sizeof *rows);
        for (size_t i = 0; i < d; i++)
            rows[i * d + i] = 1;
        long *table = calloc(d * t, sizeof *table);
        long pair = 0;
        int all_once = 1;
        for (size_t ep = 0; ep < epochs; ep++) {
            for (size_t i = 0; i < d; i++)
                cap.bucket_of[i] = -1;
            dps_snapshot *s = s_run_epoch(e, rows, d, d);
            dps_snapshot_destroy(&s);
            for (size_t i = 0; i < d; i++) {
                if (cap.bucket_of[i] < 0)
                    all_once = 0;
                else
                    table[i * t + (size_t)cap.bucket_of[i]]++;
            }
            pair += cap.bucket_of[0] == cap.bucket_of[1];
        }
        CHECK(all_once && !cap.seen_twice, "every row exactly once per epoch");
        double chi = 0, expect = (double)epochs / t;
        for (size_t i = 0; i < d * t; i++)
            chi += (table[i] - expect) * (table[i] - expect) / expect;
        double pexp = epochs * 4.0 / 49.0, psd = sqrt(epochs * (4.0 / 49) * (45.0 / 49));
        NOTE("partition: chi^2 = %.1f on 450 dof; pair count %ld (expected %.1f, sd %.1f)", chi, pair, pexp, psd);
        CHECK(chi < 450 + 4 * 30, "bucket membership not uniform: chi2 %g", chi);
        CHECK(fabs(pair - pexp) < 4.5 * psd, "pair co-membership %ld", pair);
        dps_estimator_destroy(&e);

        /* Window W = 2 < t: still every row exactly once. */
        c.window = 2;
        CHECK(dps_estimator_new(&e, &c) == DPS_OK, "new W=2");
        dps_estimator_set_bucket_hook(e, s_capture, &cap);
        for (size_t i = 0; i < d; i++)
            cap.bucket_of[i] = -1;
        dps_snapshot *s = s_run_epoch(e, rows, d, d);
        int ok = 1;
        for (size_t i = 0; i < d; i++)
            ok &= cap.bucket_of[i] >= 0;
        CHECK(ok && !cap.seen_twice, "W=2: every row exactly once");
        dps_snapshot_destroy(&s);
        dps_estimator_destroy(&e);
        free(rows); free(table); free(cap.bucket_of);
    }

    /* 2. Bad input: NaN, Inf, zero rows take their slot and are counted; wrong
       dimension and empty batches are refused and counted. */
    {
        size_t d = 20;
        dps_config c = s_cfg(d, 2, 4, 4, 5);
        c.rho_epoch = 1000; /* t = 4 buckets may run only with a huge rho; bad input is the point here */
        dps_estimator *e = NULL;
        CHECK(dps_estimator_new(&e, &c) == DPS_OK, "new t=4");
        float rows[6 * 20];
        dps_rng_gaussian_fill_f(rng, 1.0, rows, 6 * d);
        rows[0 * d + 3] = NAN;
        rows[1 * d + 0] = INFINITY;
        rows[2 * d + 5] = -INFINITY;
        rows[2 * d + 6] = NAN; /* NaN and Inf: counted as NaN */
        memset(rows + 3 * d, 0, d * sizeof(float));
        size_t taken = 99;
        CHECK(dps_estimator_push(e, rows, 6, d, &taken) == DPS_OK && taken == 6, "push 6");
        CHECK(dps_estimator_push(e, rows, 2, d + 1, &taken) == DPS_EDIM && taken == 0, "wrong dim refused");
        CHECK(dps_estimator_push(e, rows, 0, d, &taken) == DPS_EEMPTY, "empty refused");
        dps_estimator_stats st;
        dps_estimator_get_stats(e, &st);
        CHECK(st.rows_nan == 2 && st.rows_inf == 1 && st.rows_zero == 1, "row counts nan %llu inf %llu zero %llu",
              (unsigned long long)st.rows_nan, (unsigned long long)st.rows_inf, (unsigned long long)st.rows_zero);
        CHECK(st.rows_accepted == 6 && st.rows_in_epoch == 6, "all six took slots");
        CHECK(st.batches_dim == 1 && st.batches_empty == 1, "batch counts");
        /* Capacity t*m = 16: pushing 20 more takes 10 and says full. */
        float more[20 * 20];
        dps_rng_gaussian_fill_f(rng, 1.0, more, 20 * d);
        CHECK(dps_estimator_push(e, more, 20, d, &taken) == DPS_EFULL && taken == 10, "full after 16: %zu", taken);
        CHECK(dps_estimator_epoch_full(e), "epoch full");
        dps_snapshot *s = NULL;
        CHECK(dps_estimator_close_epoch(e, &s) == DPS_OK && s, "close");
        dps_snapshot_info in;
        dps_snapshot_get_info(s, &in);
        CHECK(in.buckets_used == 4 && in.rows_used == 16, "all buckets used");
        CHECK(in.seeded == 1, "seeded snapshot says so");
        dps_snapshot_destroy(&s);
        /* A partial epoch: 6 rows, at most 1 bucket of 4 completes: fewer than
           the minimum, not run, nothing spent, rows of open buckets discarded. */
        dps_zcdp before = dps_estimator_spent(e);
        dps_estimator_push(e, more, 6, d, &taken);
        CHECK(dps_estimator_close_epoch(e, &s) == DPS_OK, "close partial");
        dps_snapshot_get_info(s, &in);
        dps_estimator_get_stats(e, &st);
        CHECK(in.status == DPS_SNAP_FAILED && in.epoch_cost.rho == 0, "too few buckets: failed, nothing spent");
        NOTE("partial epoch: %s", in.reason);
        CHECK(dps_estimator_spent(e).rho == before.rho, "spent unchanged");
        CHECK(st.rows_discarded == 6 - 4 * in.buckets_used, "discarded %llu", (unsigned long long)st.rows_discarded);
        dps_snapshot_destroy(&s);
        dps_estimator_destroy(&e);
        CHECK(e == NULL, "destroy nulls");
    }

    /* 3. Accuracy on the paper's generator: k = 4, tau = 10 d, n = 250 k = 1000
       rows (t = 125, m = 8), rho = 1 (the subspace half of Figure 2's rho = 2),
       delta = 1e-5.  Bound: as in test_aggregate, Wedin on Z = y* + B + N with
       ||B|| <= max_j ||(Pi_j - Pi*) P^T||_F (measured from the buckets by the
       hook, P regenerated from the public seed) and ||N||_2 <= s_mu (sqrt q +
       sqrt d + sqrt(2 ln 1e6)), s_mu = (8 r / L) / sqrt(2 * 0.7 rho) with r and
       L = W^ - s_W sqrt(2 ln(1/delta)) from the snapshot.  Failure probability
       of the bound: 1e-6 (noise tail) + 1e-5 (L <= W). */
    size_t dims[3] = {100, 1000, 10000};
    for (int di = 0; di < 3; di++) {
        size_t d = dims[di], k = 4, n = 1000, q = 40;
        float *rows = malloc(n * d * sizeof *rows), *truth = malloc(k * d * sizeof *truth);
        dps_synth_paper(rng, n, d, k, 10.0 * d, rows, truth);
        dps_config c = s_cfg(d, k, 125, 8, 100 + di);
        c.delta_epoch = 1e-5;
        c.public_seed = 77;
        dps_estimator *e = NULL;
        CHECK(dps_estimator_new(&e, &c) == DPS_OK, "new d=%zu", d);
        bucket_err be = {PTHREAD_MUTEX_INITIALIZER, truth, k, malloc(q * d * sizeof(double)), q, 0, 0};
        float *Pf = malloc(q * d * sizeof *Pf); /* public: recomputed from the public seed */
        dps_reference_points(77, 0, q, d, Pf);
        for (size_t i = 0; i < q * d; i++)
            be.P[i] = Pf[i];
        free(Pf);
        dps_estimator_set_bucket_hook(e, s_bucket_err, &be);
        dps_snapshot *s = s_run_epoch(e, rows, n, d);
        dps_snapshot_info in;
        dps_snapshot_get_info(s, &in);
        CHECK(in.status == DPS_SNAP_RELEASED, "released d=%zu (%s)", d, in.reason);
        if (in.status == DPS_SNAP_RELEASED) {
            double fro = 0, sn = dps_subspace_sin(dps_snapshot_basis(s), truth, k, d, &fro);
            double s_W = 3.0 / sqrt(2 * 0.1);
            double L = in.w_hat - s_W * sqrt(2 * log(1e5));
            double s_mu = (8 * in.radius / L) / sqrt(2 * 0.7);
            double E = be.worst_ref + s_mu * (sqrt((double)q) + sqrt((double)d) + sqrt(2 * log(1e6)));
            double sk = s_sk(be.P, q, truth, k, d);
            double bound = E < sk ? E / (sk - E) : 1;
            NOTE("d=%5zu: sin = %.4f  ||Pi-Pi*||_F = %.4f  bound %.4f  (r = %.3g, W^ = %.1f, worst bucket ||Pi_j-Pi*||_F = %.4f)",
                 d, sn, fro, bound, in.radius, in.w_hat, be.worst_fro);
            CHECK(sn <= bound, "accuracy d=%zu: %g > bound %g", d, sn, bound);
            CHECK(bound < 0.5, "the bound is informative at d=%zu: %g", d, bound);
            CHECK(fabs(in.epoch_cost.rho - 1.0) < 1e-12 && in.epoch_cost.delta == 1e-5, "epoch cost");
        }
        dps_snapshot_destroy(&s);
        dps_estimator_destroy(&e);
        free(rows); free(truth); free(be.P);
    }

    /* 4. FAIL.  t = 60 buckets (the minimum at rho 1 is 56) of m = 2 isotropic
       rows in d = 3, k = 1: bucket directions are unrelated, their distances
       spread, and the noisy count W^ (sd 6.7) often lands below the
       threshold L >= 1, i.e. W^ < 41.7 (a probe measured 7 FAILs in 20
       epochs).  Seeded: run up to 20 epochs and check the first FAIL. */
    {
        size_t d = 3, k = 1, t = 60, m = 2;
        dps_config c = s_cfg(d, k, t, m, 9);
        c.q = 10;
        dps_estimator *e = NULL;
        CHECK(dps_estimator_new(&e, &c) == DPS_OK, "new");
        float *rows = malloc(t * m * d * sizeof *rows);
        int found = 0;
        for (int ep = 0; ep < 20 && !found; ep++) {
            dps_rng_gaussian_fill_f(rng, 1.0, rows, t * m * d);
            dps_snapshot *s = s_run_epoch(e, rows, t * m, d);
            dps_snapshot_info in;
            dps_snapshot_get_info(s, &in);
            if (in.status == DPS_SNAP_FAILED) {
                found = 1;
                CHECK(dps_snapshot_basis(s) == NULL, "no basis on FAIL");
                CHECK(fabs(in.epoch_cost.rho - 1.0) < 1e-12 && fabs(in.total.rho - (ep + 1.0)) < 1e-12,
                      "FAIL still spends its epoch");
                NOTE("FAIL path at epoch %d (W^ = %.1f, radius %.3g): %s", ep, in.w_hat, in.radius, in.reason);
            }
            dps_snapshot_destroy(&s);
        }
        CHECK(found, "a FAIL within 20 seeded epochs");
        dps_estimator_destroy(&e);
        free(rows);
        /* t below the minimum is refused at configuration */
        c.t = c.window = 20;
        const char *why = "";
        CHECK(dps_config_check(&c, &why) == DPS_EINVAL && strstr(why, "too few"), "t = 20 refused: %s", why);
        NOTE("%s", why);
    }

    /* 5. Budget cap: rho_cap 2.5 with rho 1 per epoch: epochs 0 and 1 are
       released and committed, 2 and 3 are refused, nothing more is spent. */
    {
        size_t d = 40, k = 2, n = 125 * 4;
        dps_config c = s_cfg(d, k, 125, 4, 13);
        c.cap = (dps_budget){2.5, 0, 1e-5};
        ledger led = {0, 0, 0};
        c.commit = s_commit;
        c.commit_arg = &led;
        dps_estimator *e = NULL;
        dps_estimator_new(&e, &c);
        float *rows = malloc(n * d * sizeof *rows);
        dps_synth_paper(rng, n, d, k, 10.0 * d, rows, NULL);
        dps_snapshot_status st[4];
        for (int ep = 0; ep < 4; ep++) {
            dps_snapshot *s = s_run_epoch(e, rows, n, d);
            dps_snapshot_info in;
            dps_snapshot_get_info(s, &in);
            st[ep] = in.status;
            if (ep >= 2)
                CHECK(in.epoch_cost.rho == 0 && in.total.rho == 2.0, "refused epoch spends nothing");
            CHECK(strcmp(in.budget_unit, "rho") == 0 && fabs(in.budget_left - (2.5 - in.total.rho)) < 1e-12,
                  "epoch %d: the snapshot says what the cap leaves (%g %s)", ep, in.budget_left, in.budget_unit);
            CHECK(in.epoch == (uint64_t)ep, "epoch numbers");
            dps_snapshot_destroy(&s);
        }
        CHECK(st[0] == DPS_SNAP_RELEASED && st[1] == DPS_SNAP_RELEASED, "first two released");
        CHECK(st[2] == DPS_SNAP_REFUSED && st[3] == DPS_SNAP_REFUSED, "then refused");
        CHECK(led.calls == 2 && fabs(led.rho_seen - 2.0) < 1e-12, "commit hook called for the two releases");
        CHECK(fabs(dps_estimator_spent(e).rho - 2.0) < 1e-12, "spent 2");
        /* A cap raised while running (the collector's SIGHUP) lets the next
           epoch through; one out of range changes nothing. */
        dps_budget bad = {-1, 0, 1e-5}, raised = {3.5, 0, 1e-5};
        CHECK(dps_estimator_set_cap(e, &bad) == DPS_EINVAL, "set_cap refuses a negative cap");
        dps_snapshot *s4 = s_run_epoch(e, rows, n, d);
        dps_snapshot_info in4;
        dps_snapshot_get_info(s4, &in4);
        CHECK(in4.status == DPS_SNAP_REFUSED, "a refused set_cap left the cap as it was");
        dps_snapshot_destroy(&s4);
        CHECK(dps_estimator_set_cap(e, &raised) == DPS_OK, "set_cap");
        s4 = s_run_epoch(e, rows, n, d);
        dps_snapshot_get_info(s4, &in4);
        CHECK(in4.status == DPS_SNAP_RELEASED && fabs(in4.total.rho - 3.0) < 1e-12 && led.calls == 3,
              "after set_cap 3.5 the next epoch is released and committed (total %g)", in4.total.rho);
        CHECK(fabs(in4.budget_left - 0.5) < 1e-12, "and leaves 0.5 of the new cap (%g)", in4.budget_left);
        dps_snapshot_destroy(&s4);

        /* 6. A failing commit hook: DPS_ECOMMIT, no snapshot, nothing charged. */
        dps_estimator_destroy(&e);
        c.cap = (dps_budget){0, 0, 1e-5};
        led.fail = 1;
        dps_estimator_new(&e, &c);
        size_t taken;
        dps_estimator_push(e, rows, n, d, &taken);
        dps_snapshot *s = (dps_snapshot *)&led; /* must be reset to NULL */
        CHECK(dps_estimator_close_epoch(e, &s) == DPS_ECOMMIT && s == NULL, "commit failure aborts the release");
        CHECK(dps_estimator_spent(e).rho == 0, "nothing charged");
        dps_estimator_destroy(&e);

        /* 7. Reproducible in seeded mode, whatever the worker count; the
           projection aggregator runs through the estimator too. */
        c.commit = NULL;
        float *b1 = malloc(k * d * sizeof *b1);
        int same = 1;
        for (int workers = 1; workers <= 2; workers++) {
            c.workers = workers;
            dps_estimator_new(&e, &c);
            s = s_run_epoch(e, rows, n, d);
            if (workers == 1)
                memcpy(b1, dps_snapshot_basis(s), k * d * sizeof *b1);
            else
                same = memcmp(b1, dps_snapshot_basis(s), k * d * sizeof *b1) == 0;
            dps_snapshot_destroy(&s);
            dps_estimator_destroy(&e);
        }
        CHECK(same, "same seed: same snapshot with 1 or 2 workers");
        c.aggregator = DPS_AGG_PROJECTION;
        dps_estimator_new(&e, &c);
        s = s_run_epoch(e, rows, n, d);
        dps_snapshot_info in;
        dps_snapshot_get_info(s, &in);
        CHECK(in.status == DPS_SNAP_RELEASED && in.aggregator == DPS_AGG_PROJECTION, "projection released");
        dps_snapshot_destroy(&s);
        dps_estimator_destroy(&e);
        c.seeded = 0;
        c.aggregator = DPS_AGG_REFERENCE;
        dps_estimator_new(&e, &c);
        s = s_run_epoch(e, rows, n, d);
        dps_snapshot_get_info(s, &in);
        CHECK(in.seeded == 0, "secure mode snapshot not marked seeded");
        dps_snapshot_destroy(&s);
        dps_estimator_destroy(&e);
        free(rows); free(b1);
    }

    /* 8. Configuration errors have sentences. */
    {
        dps_config c;
        const char *why = NULL;
        dps_config_init(&c, 10, 10);
        CHECK(dps_config_check(&c, &why) == DPS_EINVAL && strstr(why, "k must"), "k >= d refused: %s", why);
        dps_config_init(&c, 20000, 2);
        c.aggregator = DPS_AGG_PROJECTION;
        CHECK(dps_config_check(&c, &why) == DPS_ELIMIT, "projection d limit");
        dps_config_init(&c, 100, 20);
        c.m = 10;
        CHECK(dps_config_check(&c, &why) == DPS_EINVAL && strstr(why, "m (rows per bucket)"), "m < k refused for "
              "buckets: %s", why);
        c.aggregator = DPS_AGG_GAUSSIAN; /* an epoch of t m rows: m < k is fine */
        CHECK(dps_config_check(&c, &why) == DPS_OK, "m < k accepted for the row-intake gaussian epoch: %s", why);
        c.aggregator = DPS_AGG_POWER;
        CHECK(dps_config_check(&c, &why) == DPS_OK, "m < k accepted for the row-intake power epoch: %s", why);
        dps_config_init(&c, 10, 2);
        c.window = c.t + 1;
        CHECK(dps_config_check(&c, &why) == DPS_EINVAL && strstr(why, "window"), "window above t: %s", why);
        dps_estimator *e = NULL;
        CHECK(dps_estimator_new(&e, &c) == DPS_EINVAL && e == NULL, "new refuses");
        /* dps_estimator_new returns the check's code, DPS_ELIMIT too, whose sentence is the check's */
        dps_config_init(&c, 10, 2);
        c.aggregator = DPS_AGG_GAUSSIAN;
        c.dense_max_d = 20000;
        CHECK(dps_config_check(&c, &why) == DPS_ELIMIT && strstr(why, "dense_max_d"), "dense_max_d: %s", why);
        CHECK(dps_estimator_new(&e, &c) == DPS_ELIMIT && e == NULL, "new: DPS_ELIMIT, as the check");
    }
    dps_rng_destroy(&rng);
    s_test_covariance();
    return check_summary();
}
