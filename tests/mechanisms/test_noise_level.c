/* test_noise_level - the snapshot's noise_level (src/mechanisms/noise_level.c)
   and the WEAK rule read from it (dps_snapshot_weak): per mechanism, on
   inputs where the answer is known: pure noise (all-zero rows: no direction
   of the data exists, so any released basis is noise) gives a level >= 1 and
   WEAK; rows on a subspace (the paper's generator at tau = 1e4 d) a small
   level and not WEAK.  And the level is a function of released quantities. */
#include "config_internal.h"
#include "check.h"
#include "dpsubspace.h"
#include "gaussian_cov.h"
#include "linalg.h"
#include "noise_level.h"
#include "stream/estimator_test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { D = 300, K = 2, T = 60, M = 20, N = T * M };

/* One epoch of n rows through the estimator configured as c: its snapshot
   (the caller's, NULL on failure) and its info. */
static dps_snapshot *s_epoch_snapshot(const dps_config *c, const float *X, size_t n, dps_snapshot_info *in)
{
    dps_estimator *e = NULL;
    memset(in, 0, sizeof *in);
    in->status = DPS_SNAP_FAILED;
    CHECK(dps_estimator_new(&e, c) == DPS_OK, "%s estimator", dps_aggregator_name(c->aggregator));
    if (!e)
        return NULL;
    dps_snapshot *s = s_run_epoch(e, X, n, c->d);
    if (s)
        dps_snapshot_get_info(s, in);
    dps_estimator_destroy(&e);
    return s;
}

static void s_epoch(const dps_config *c, const float *X, size_t n, dps_snapshot_info *in)
{
    dps_snapshot *s = s_epoch_snapshot(c, X, n, in);
    dps_snapshot_destroy(&s);
}

static dps_config s_agg_cfg(dps_aggregator a, uint64_t seed)
{
    dps_config c = s_cfg(D, K, T, M, seed);
    c.aggregator = a;
    c.rho_epoch = 1.0; /* row-intake mechanisms: the epoch is the same t m rows */
    return c;
}

/* The rows: zeros (pure noise), or the generator's rows on a K-dim subspace. */
static float *s_rows(int signal, size_t n, size_t d)
{
    float *X = calloc(n * d, sizeof *X), *B = malloc(K * d * sizeof *B);
    if (signal) {
        dps_rng *rng = NULL;
        dps_rng_new_seeded(&rng, 5);
        dps_synth_paper(rng, n, d, K, 1e4 * (double)d, X, B);
        dps_rng_destroy(&rng);
    }
    free(B);
    return X;
}

/* s_mu of the WFC release, recomputed from the released radius and w_hat and
   the public configuration (wfc.c): the level must be this function. */
static double s_mu_released(const dps_config *c, const dps_snapshot_info *in)
{
    double split = c->split_search + c->split_count + c->split_mean;
    double s_W = (1.0 / c->alpha + 1.0) / sqrt(2.0 * c->rho_epoch * c->split_count / split);
    double L = in->w_hat - s_W * sqrt(2.0 * log(1.0 / c->delta_epoch));
    return (2.0 / c->alpha + 4.0) * in->radius / L / sqrt(2.0 * c->rho_epoch * c->split_mean / split);
}

/* 1. The bucket aggregators, d = 300, k = 2, q = 20, t = 60, rho = 1.
   Pure noise: a bucket of zero rows has a random basis (completed from the
   public generator), so items are pairwise near the unrelated distance
   r_u (reference sqrt(2kq) = 8.9, projection sqrt(2k) = 2); the radius search
   stops where half the items are friends, at r >= r_u / 2 (grid factor 2);
   L = W^ - s_W sqrt(2 ln 1e8) <= t + 3 s_W - 6.07 s_W = 60 - 20.6 = 40 with
   s_W = 3 / sqrt(0.2) = 6.7 (3 sd); s_mu = 8 r / (L sqrt(1.4)) >= 0.76
   (reference) and >= 0.17 (projection).  Levels: reference s_mu (d/q)^(1/4)
   >= 0.76 * 1.97 = 1.5; projection s_mu sqrt(d/2) >= 2.1: both >= 1.
   Signal: the generator's rows are on the subspace up to 1e-4 per
   coordinate, every bucket's basis is the subspace to sin < 1e-2, so the
   search stops at r <= 2 * 1e-2 * r_u * sqrt 2 (well within the grid), and
   s_mu <= 8 * 0.25 / (40 * 1.18) = 0.04 for the reference aggregator: level
   <= 0.1 (projection: r <= 0.06, s_mu <= 0.01, level <= 0.15 is the bound;
   accept 0.2).  The histogram aggregator FAILs on pure noise (no cell gets
   many random items: nothing released, no level, not WEAK); on the signal
   it releases a cell of side l = 0.25 sqrt(k/d) = 0.02, sigma = l / sqrt 12,
   level (noise_level_rect) ~ sqrt(sigma^2 d / q) = 0.02, accept <= 0.1. */
static void s_test_aggregators(void)
{
    const dps_aggregator aggs[] = {DPS_AGG_REFERENCE, DPS_AGG_PROJECTION, DPS_AGG_HISTOGRAM};
    const double signal_max[] = {0.1, 0.2, 0.1};
    for (size_t a = 0; a < 3; a++) {
        dps_config c = s_agg_cfg(aggs[a], 11 + a);
        const char *name = dps_aggregator_name(aggs[a]);
        for (int signal = 0; signal <= 1; signal++) {
            float *X = s_rows(signal, N, D);
            dps_snapshot_info in;
            s_epoch(&c, X, N, &in);
            free(X);
            NOTE("%s, %s: %s, radius %.3g, w_hat %.3g, noise level %.3g%s", name, signal ? "signal" : "zero rows",
                 dps_snapshot_status_name(in.status), in.radius, in.w_hat, in.noise_level, dps_snapshot_weak(&in) ? " WEAK" : "");
            if (aggs[a] == DPS_AGG_HISTOGRAM && !signal) {
                CHECK(in.status == DPS_SNAP_FAILED && in.noise_level == 0 && !dps_snapshot_weak(&in),
                      "histogram on zero rows: FAIL, no level, not weak (status %d)", (int)in.status);
                continue;
            }
            CHECK(in.status == DPS_SNAP_RELEASED, "%s released", name);
            if (signal)
                CHECK(in.noise_level > 0 && in.noise_level <= signal_max[a] && !dps_snapshot_weak(&in),
                      "%s on the subspace: level %g <= %g, not weak", name, in.noise_level, signal_max[a]);
            else
                CHECK(in.noise_level >= 1 && dps_snapshot_weak(&in), "%s on zero rows: level %g >= 1, weak", name,
                      in.noise_level);
            /* Post-processing: the level from the released radius, w_hat and the configuration. */
            double want = aggs[a] == DPS_AGG_REFERENCE    ? noise_level_rect(s_mu_released(&c, &in), c.q, c.d)
                          : aggs[a] == DPS_AGG_PROJECTION ? noise_level_sym(s_mu_released(&c, &in) / sqrt(2.0), c.d)
                                                          : noise_level_rect(in.radius / sqrt(12.0), c.q, c.d);
            CHECK(fabs(in.noise_level - want) <= 1e-9 * want, "%s: level %.12g is that of the released values %.12g",
                  name, in.noise_level, want);
        }
    }
}

/* 2. The Gaussian covariance mechanism, d = 300, rho = 1 (s = 1, the spike
   threshold T = s sqrt(d) = 17.3, the edge 2T = 34.6).  Zero rows: C + E = E,
   whose top eigenvalue is the edge + s d^(-1/6) TW_1 <= the detection level
   edge + 4 s d^(-1/6) (P > 0.99), so no direction counts and the level is
   max(1, edge / w_1) >= 1.  Signal: n = 1 200 rows on a 2-dim subspace, C's
   two eigenvalues about 600 each (+-3 sd of sqrt(n) spread: >= 500), so the
   level is about sqrt(T^2 (2/600) / 1200) = 0.03; accept <= 0.1. */
static void s_test_gaussian(void)
{
    for (int signal = 0; signal <= 1; signal++) {
        dps_config c = s_agg_cfg(DPS_AGG_GAUSSIAN, 21);
        float *X = s_rows(signal, N, D);
        dps_snapshot_info in;
        s_epoch(&c, X, N, &in);
        free(X);
        NOTE("gaussian, %s: noise level %.3g%s", signal ? "signal" : "zero rows", in.noise_level,
             dps_snapshot_weak(&in) ? " WEAK" : "");
        CHECK(in.status == DPS_SNAP_RELEASED, "gaussian released");
        if (signal)
            CHECK(in.noise_level > 0 && in.noise_level <= 0.1 && !dps_snapshot_weak(&in), "gaussian signal: level %g",
                  in.noise_level);
        else
            CHECK(in.noise_level >= 1 && dps_snapshot_weak(&in), "gaussian zero rows: level %g", in.noise_level);
    }
}

/* 2b. The noisy power iteration (and a group of the gaussian aggregator
   wider than dense_max_d): s = 1 at rho 1, b = K + 10 = 12, the noise
   edge s (sqrt 300 + sqrt 12) = 20.8.  Zero rows: Y is pure noise, its top
   singular value passes the edge by a Tracy-Widom fluctuation of scale
   s (1/sqrt 300 + 1/sqrt 12)^(1/3) / 2 = 0.35, so it stays below the
   detection level edge + 4 such scales (P > 0.99) and the level is >= 1:
   WEAK.  Signal: n = 1 200 rows on a 2-dim subspace in 2 blocks of 600
   (C_i's eigenvalues about 300 each).  Block 1 starts cold: C_1 X_0 has
   singular values about 300 sqrt(b/d) = 60 against the edge 21, so X_1 is
   within sin 0.4 of the span; block 2's signal is then about 300 x 0.9 =
   270 and the predicted sine T/theta = s sqrt(d) / 270 = 0.06; accept
   <= 0.3 and not WEAK. */
static void s_test_power(void)
{
    for (int signal = 0; signal <= 1; signal++) {
        dps_config c = s_agg_cfg(DPS_AGG_POWER, 23);
        c.power_blocks = 2;
        float *X = s_rows(signal, N, D);
        dps_snapshot_info in;
        s_epoch(&c, X, N, &in);
        free(X);
        NOTE("power, %s: noise level %.3g%s", signal ? "signal" : "zero rows", in.noise_level,
             dps_snapshot_weak(&in) ? " WEAK" : "");
        CHECK(in.status == DPS_SNAP_RELEASED, "power released");
        if (signal)
            CHECK(in.noise_level > 0 && in.noise_level <= 0.3 && !dps_snapshot_weak(&in), "power signal: level %g",
                  in.noise_level);
        else
            CHECK(in.noise_level >= 1 && dps_snapshot_weak(&in), "power zero rows: level %g", in.noise_level);
    }
}

/* 2c. A release that mixes a dense and a power group weighs each group's
   directions in the epoch's units.  d = 80 + 220, dense_max_d 100: group 1
   (k 2) dense with the n = 1 200 unit rows on a 2-dim subspace (eigenvalues
   about 600 each, the spike threshold sqrt 80: lost 2 x 80 / 600 = 0.27 of
   a total 1 200 within 1%), group 2 (k 1) power with zero columns: its Y is
   noise, below detection (P > 0.99, as in 2b), so it counts as lost with
   the threshold T = s sqrt(220) = 14.8 of ONE block's C, i.e. u T in the
   epoch's units, u = rows / the last block's rows = the blocks.  The level
   is sqrt((u T + 0.27) / (u T + 1 200)): 0.112 with 1 block, 0.190 with 3;
   accept within 3%.  (Weighing the power group in block units, as the first
   version did, gives 0.112 with 3 blocks too: a cold power group's lost
   directions counted for a third of what they hold.) */
static void s_test_mixed_units(void)
{
    static const size_t group_d[2] = {80, 220}, group_k[2] = {2, 1};
    float *X1 = s_rows(1, N, 80), *X = calloc((size_t)N * 300, sizeof *X);
    for (size_t i = 0; i < N; i++)
        memcpy(X + i * 300, X1 + i * 80, 80 * sizeof *X);
    for (size_t blocks = 1; blocks <= 3; blocks += 2) {
        dps_config c = s_cfg(300, 3, T, M, 29);
        c.aggregator = DPS_AGG_GAUSSIAN;
        c.rho_epoch = 1.0;
        c.groups = 2;
        for (size_t g = 0; g < 2; g++) {
            c.group_d[g] = group_d[g];
            c.group_k[g] = group_k[g];
        }
        c.dense_max_d = 100;
        c.power_blocks = blocks;
        dps_snapshot_info in;
        s_epoch(&c, X, N, &in);
        double uT = (double)blocks * sqrt(220.0), want = sqrt((uT + 0.27) / (uT + 1200.0));
        NOTE("mixed groups, %zu power block(s): level %.4f, want %.4f", blocks, in.noise_level, want);
        CHECK(in.status == DPS_SNAP_RELEASED && fabs(in.noise_level / want - 1) < 0.03,
              "mixed groups, %zu block(s): level %g, want %g (the power group in the epoch's units)", blocks,
              in.noise_level, want);
    }
    free(X1);
    free(X);
}

/* 2d. A wide group at random level does not hide behind clean small ones:
   the level per group, and the release's weighing the groups by the energy
   they can hold.  d = 20 + 8 000 + 4, dense_max_d 100, rho 1 (s = 1), one
   cold epoch of n = t m = 1 000 unit rows in 3 blocks cut by index:
   - group 1 (20 columns, k 2, dense): sqrt(0.3) a_i, a_i a random unit
     vector of span(e_1, e_2): eigenvalues 150 +- 4 each (sum 300 exactly),
     T = sqrt 20, so lost 2 x 20/150 = 0.27 of 300: level 0.03 (accept
     <= 0.1), not WEAK;
   - group 2 (8 000 columns, k 1, power, b = 2): +-sqrt(0.7) v, one fixed
     unit v: C_2 = 700 v v^T, so the group-wise top-1 holds 700 of the
     epoch's 1 000.  A cold step sees it through the random start's overlap,
     about (233 per block) sqrt(b/d) = 3.7, far below the rank-one detection
     threshold s (d b)^(1/4) = 11.2 of a d x b noise, so each of the 3 steps
     releases the noise's direction: no singular value clears (its theta^2
     would need sv >= sqrt(2) s sqrt(d) = 126 against the noise's edge 91),
     level 1, WEAK;
   - group 3 (4 columns, k 4, dense, zero rows): its basis spans its
     columns, nothing is lost: level 0, not WEAK; its basis is its identity
     whatever the data, so it does not enter the release's level.
   What the release keeps of the group-wise reference: about 300 of 1 000
   (group 2's random direction keeps 700/8 000 on average), 0.30, so the
   level must not read as mostly signal: 1 - level^2 <= 0.4, i.e. level >=
   0.775, WEAK.  The release's level: group 2 enters with the rows' energy
   that the seen groups do not claim, t m - 300 = 700, all lost (but
   1/8 000): sqrt((0.27 + 700) / (300 + 700)) = 0.837 (group 3 entering
   with its 4 T_3 = 8, lost 0, would read 0.834).  An average over all
   directions (group 2 weighed by its k T u = 3 sqrt(8 000) = 268) reads
   sqrt((0.27 + 268) / (300 + 268)) = 0.69: 0.53 kept, not WEAK.
   The same rows as a partial epoch (t m = 1 200): the count is not taken as
   public, group 2 enters with k T u, u = 1 000 / 200 (the epoch's rows over
   the last block's: cuts at 400 and 800): sqrt((0.27 + 447) / 747) = 0.774
   (within 0.02). */
static void s_test_dead_wide_group(void)
{
    enum { DA = 20, DB = 8000, DC = 4, DW = DA + DB + DC, NR = 1000 };
    float *X = calloc((size_t)NR * DW, sizeof *X);
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 47);
    for (size_t i = 0; i < NR; i++) {
        double phi = 2 * M_PI * dps_rng_uniform(rng);
        X[i * DW] = (float)(sqrt(0.3) * cos(phi));
        X[i * DW + 1] = (float)(sqrt(0.3) * sin(phi));
        X[i * DW + DA + 17] = (float)((dps_rng_uniform(rng) < 0.5 ? -1 : 1) * sqrt(0.7));
    }
    dps_rng_destroy(&rng);
    dps_config c = s_cfg(DW, 7, 50, 20, 53), partial;
    c.aggregator = DPS_AGG_GAUSSIAN;
    c.rho_epoch = 1.0;
    c.groups = 3;
    const size_t gd[3] = {DA, DB, DC}, gk[3] = {2, 1, 4};
    for (size_t g = 0; g < 3; g++) {
        c.group_d[g] = gd[g];
        c.group_k[g] = gk[g];
    }
    c.dense_max_d = 100;
    c.power_oversample = 1;
    partial = c;
    partial.t = 60;
    dps_snapshot_info in;
    s_epoch(&partial, X, NR, &in);
    double floor = sqrt((0.27 + 5 * sqrt(8000.0) * (1 - 1 / 8000.0)) / (300 + 5 * sqrt(8000.0)));
    CHECK(in.status == DPS_SNAP_RELEASED && fabs(in.noise_level - floor) < 0.02,
          "a partial epoch: level %g, want %g (the dead group by k T u: no public row count)", in.noise_level, floor);
    dps_snapshot *s = s_epoch_snapshot(&c, X, NR, &in);
    free(X);
    CHECK(s && in.status == DPS_SNAP_RELEASED, "grouped release");
    if (!s)
        return;
    double l1 = dps_snapshot_group_noise_level(s, 0), l2 = dps_snapshot_group_noise_level(s, 1),
           l3 = dps_snapshot_group_noise_level(s, 2);
    NOTE("dead wide group: levels %.3g / %.3g / %.3g, release %.3g%s", l1, l2, l3, in.noise_level,
         dps_snapshot_weak(&in) ? " WEAK" : "");
    CHECK(l1 > 0 && l1 <= 0.1 && !dps_snapshot_group_weak(s, 0), "the clean dense group: level %g, not WEAK", l1);
    CHECK(l2 >= DPS_NOISE_LEVEL_WEAK && dps_snapshot_group_weak(s, 1), "the dead power group: level %g, WEAK", l2);
    CHECK(l3 == 0 && !dps_snapshot_group_weak(s, 2), "a group spanning its columns: level %g (0), not WEAK", l3);
    CHECK(1 - in.noise_level * in.noise_level <= 0.4 && dps_snapshot_weak(&in),
          "the release kept about 0.3: level %g must read at most 0.4 kept (>= 0.775), WEAK", in.noise_level);
    CHECK(fabs(in.noise_level - 0.837) < 0.02, "the release's level %g, want sqrt(700.3 / 1000) = 0.837",
          in.noise_level);
    CHECK(isnan(dps_snapshot_group_noise_level(s, 3)) && !dps_snapshot_group_weak(s, 3), "no group 4: no level");
    /* A copy (as read from disk or the wire) carries noise_level only. */
    dps_snapshot *copy = NULL;
    CHECK(dps_snapshot_new(&copy, &in, dps_snapshot_basis(s)) == DPS_OK, "copy");
    if (copy)
        CHECK(isnan(dps_snapshot_group_noise_level(copy, 1)) && !dps_snapshot_group_weak(copy, 1),
              "a copy has no group levels");
    dps_snapshot_destroy(&copy);
    dps_snapshot_destroy(&s);
}

/* 2e. One group: its level is the snapshot's (the accessors agree with
   noise_level and dps_snapshot_weak whatever the mechanism). */
static void s_test_one_group_accessors(void)
{
    for (int signal = 0; signal <= 1; signal++) {
        dps_config c = s_agg_cfg(signal ? DPS_AGG_REFERENCE : DPS_AGG_GAUSSIAN, 57);
        float *X = s_rows(signal, N, D);
        dps_snapshot_info in;
        dps_snapshot *s = s_epoch_snapshot(&c, X, N, &in);
        free(X);
        CHECK(s && in.status == DPS_SNAP_RELEASED, "released");
        if (!s)
            continue;
        CHECK(dps_snapshot_group_noise_level(s, 0) == in.noise_level &&
                  dps_snapshot_group_weak(s, 0) == dps_snapshot_weak(&in) &&
                  isnan(dps_snapshot_group_noise_level(s, 1)),
              "%s: group 0 is the whole row (level %g)", dps_aggregator_name(c.aggregator), in.noise_level);
        dps_snapshot_destroy(&s);
    }
}

/* 3. gauss_noise_level on known spectra: C = L (e_1 e_1^T + e_2 e_2^T) + E at
   d = 400, s = 1 (T = 20).  L = 10 T: each noisy eigenvalue is
   L + T^2/L +- O(s), de-biased to L within 2%, so the level is
   sqrt((2 T^2 / L) / (2 L)) = T / L = 0.1 within 5%.  L = 0.5 T (below the
   spike threshold): nothing separates from the bulk, level >= 1. */
static void s_test_gauss_spectra(void)
{
    size_t d = 400, k = 2;
    double *A = malloc(d * d * sizeof *A), *Z = malloc(d * k * sizeof *Z), w[2];
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 31);
    const double Ls[] = {200, 10};
    for (size_t r = 0; r < 2; r++) {
        memset(A, 0, d * d * sizeof *A);
        A[0] = A[d + 1] = Ls[r];
        gauss_cov_add_noise(A, d, 1.0, rng);
        CHECK(la_syevr_top(A, d, k, w, Z) == DPS_OK, "eigenvalues");
        double lv = gauss_noise_level(w, k, d, 1.0);
        NOTE("gauss_noise_level, spikes %g at d %zu, s 1: w %.4g %.4g, level %.4g", Ls[r], d, w[0], w[1], lv);
        if (r == 0)
            CHECK(fabs(lv - 0.1) < 0.005, "level %g, want T/L = 0.1", lv);
        else
            CHECK(lv >= 1, "below the threshold: level %g >= 1", lv);
    }
    dps_rng_destroy(&rng);
    free(A);
    free(Z);
}

/* 3b. A direction below the detection level keeps what a random one would:
   the k - m undetected released directions are uniformly spread over the
   d - m dimensions left, so each keeps (k - m)/(d - m) of its energy.
   d = 16, k = 10, s = 1 (T = 4, edge 8, detection 10.5): one eigenvalue
   w = 40.4 (lambda = (40.4 + sqrt(40.4^2 - 64))/2 = 40), nine at 7 (below):
   lost = 16/40 + 9 x 4 x (1 - 9/15) = 14.8 of 40 + 36, level
   sqrt(14.8 / 76) = 0.441 (counting the nine as lost whole: 0.692, WEAK,
   for a basis of 10 of 16 columns that keeps most of what the group holds).
   k = d = 10 (T = sqrt 10): the nine keep all (lost 10/40.15 of 68.6:
   level 0.060). */
static void s_test_random_share(void)
{
    double w[10] = {40.4, 7, 7, 7, 7, 7, 7, 7, 7, 7};
    double lv = gauss_noise_level(w, 10, 16, 1.0);
    CHECK(fabs(lv - sqrt(14.8 / 76)) < 1e-3, "10 of 16, one detected: level %g, want 0.441", lv);
    lv = gauss_noise_level(w, 10, 10, 1.0);
    double T = sqrt(10.0), lambda = 0.5 * (40.4 + sqrt(40.4 * 40.4 - 4 * T * T));
    double want = sqrt(T * T / lambda / (lambda + 9 * T));
    CHECK(fabs(lv - want) < 1e-9, "10 of 10: level %g, want %g", lv, want);
}

/* 3c. The trace bounds what the undetected directions hold together: the
   spectrum of 3b with tr(C + E) = 46 (d = 16, T = 4): R = 46 - 40 + 2 T =
   14 over the nine, 14/9 each (below T), so lost = 16/40 + 14 x (1 - 9/15)
   = 6 of 40 + 14, level sqrt(6 / 54) = 0.333 (against 0.441 with T each); a
   trace that leaves more than 9 T gives T each (3b's 0.441); one below the
   cleared energy less 2 T leaves them nothing.  Without the trace (NAN): T
   each. */
static void s_test_trace_bound(void)
{
    double w[10] = {40.4, 7, 7, 7, 7, 7, 7, 7, 7, 7}, T = 4, edge = 8;
    double lambda = 0.5 * (40.4 + sqrt(40.4 * 40.4 - edge * edge)), cos_lost = T * T / lambda;
    size_t m = gauss_noise_cleared(w, 10, 16, 1.0);
    CHECK(m == 1, "one of ten cleared (%zu)", m);
    double tr = lambda + 6, lost = 0, total = 0;
    CHECK(fabs(gauss_noise_weak(w, 10, 16, 1.0, m, tr) - 14.0 / 9) < 1e-12, "the nine hold 14/9 each");
    CHECK(gauss_noise_parts(w, 10, 16, 1.0, tr, &lost, &total), "seen");
    CHECK(fabs(lost - (cos_lost + 14 * 0.4)) < 1e-12 && fabs(total - (lambda + 14)) < 1e-12,
          "trace-bounded sums: lost %g of %g, want %g of %g", lost, total, cos_lost + 14 * 0.4, lambda + 14);
    CHECK(gauss_noise_weak(w, 10, 16, 1.0, m, lambda + 100) == T, "a large trace: T each");
    CHECK(gauss_noise_weak(w, 10, 16, 1.0, m, lambda - 2 * T - 1) == 0, "a trace below the cleared less 2 T: 0");
    CHECK(gauss_noise_weak(w, 10, 16, 1.0, m, NAN) == T, "no trace: T each");
}

/* 4. The pure-DP covariance mechanism releases no eigenvalue: its level is
   the public floor sqrt(k (d - 1) / (eps n)), the same on zero rows and on
   the signal.  d = 300, k = 2, eps = sqrt 2: n = 1 200 gives 0.59 (below
   DPS_NOISE_LEVEL_WEAK: not weak, a floor promises nothing more); n = 100
   would give 2.06 (random level whatever the data), n = 60 000 0.084. */
static void s_test_covariance(void)
{
    double want = sqrt(2.0 * 299.0 / (sqrt(2.0) * N));
    for (int signal = 0; signal <= 1; signal++) {
        dps_config c = s_agg_cfg(DPS_AGG_COVARIANCE, 41);
        float *X = s_rows(signal, N, D);
        dps_snapshot_info in;
        s_epoch(&c, X, N, &in);
        free(X);
        CHECK(in.status == DPS_SNAP_RELEASED && fabs(in.noise_level - want) < 1e-12,
              "covariance: level %g is the floor %g", in.noise_level, want);
        CHECK(dps_snapshot_weak(&in) == (want >= DPS_NOISE_LEVEL_WEAK), "covariance weak from the floor");
    }
    CHECK(fabs(cov_noise_level_floor(60000, D, K, sqrt(2.0)) - 0.0840) < 1e-3, "floor at n = 60 000");
    CHECK(fabs(cov_noise_level_floor(100, D, K, sqrt(2.0)) - 2.056) < 1e-3, "floor at n = 100");
    CHECK(cov_noise_level_floor(0, D, K, 1.0) == 0, "no rows: not computed");
}

/* 5. The formulas' shape: the rectangular level is mu past the threshold,
   continuous at mu = 1, and increasing in sigma; the symmetric one is
   sigma sqrt(d). */
static void s_test_formulas(void)
{
    size_t q = 20, d = 300;
    double at1 = pow((double)q / (double)d, 0.25); /* sigma with mu = 1 */
    CHECK(fabs(noise_level_rect(2 * at1, q, d) - 2) < 1e-12, "mu = 2 past the threshold");
    CHECK(fabs(noise_level_rect(at1 * (1 - 1e-9), q, d) - 1) < 1e-4, "continuous at the threshold");
    double prev = 0;
    int up = 1;
    for (double s = 1e-3; s < 3; s *= 1.3) {
        double v = noise_level_rect(s, q, d);
        up &= v > prev;
        prev = v;
    }
    CHECK(up, "increasing in sigma");
    CHECK(noise_level_rect(0, q, d) == 0 && noise_level_sym(0, d) == 0, "no noise: not computed (0)");
    CHECK(fabs(noise_level_sym(0.1, 400) - 2) < 1e-12, "sigma sqrt(d)");
}

/* 6. The weak rule: the level when there is one, the radius rule for older
   snapshots (no level), never for failed or refused ones. */
static void s_test_weak_rule(void)
{
    dps_snapshot_info in;
    memset(&in, 0, sizeof in);
    in.status = DPS_SNAP_RELEASED;
    in.radius = 0.9;
    in.radius_unrelated = 1;
    in.noise_level = DPS_NOISE_LEVEL_WEAK * 0.99;
    CHECK(!dps_snapshot_weak(&in), "a level below the threshold is not weak, whatever the radius");
    in.noise_level = DPS_NOISE_LEVEL_WEAK;
    in.radius = 0;
    CHECK(dps_snapshot_weak(&in), "a level at the threshold is weak");
    in.noise_level = 0;
    in.radius = 0.6;
    CHECK(dps_snapshot_weak(&in), "no level: the radius rule");
    in.radius = 0.4;
    CHECK(!dps_snapshot_weak(&in), "no level, small radius: not weak");
    in.noise_level = 5;
    in.status = DPS_SNAP_FAILED;
    CHECK(!dps_snapshot_weak(&in), "failed: never weak");
}

int main(void)
{
    s_test_formulas();
    s_test_weak_rule();
    s_test_gauss_spectra();
    s_test_random_share();
    s_test_trace_bound();
    s_test_covariance();
    s_test_gaussian();
    s_test_power();
    s_test_mixed_units();
    s_test_dead_wide_group();
    s_test_one_group_accessors();
    s_test_aggregators();
    return check_summary();
}
