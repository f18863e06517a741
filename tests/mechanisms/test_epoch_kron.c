/* test_epoch_kron - the Kronecker-factored epoch mechanism (DPS_AGG_KRON,
   src/mechanisms/epoch_kron.c, kron_moment.c, moment_groups.c): the side
   moments' sensitivity is what the argument says and no less, the noise the
   mechanism draws has sd sqrt(2/rho) for every group (and gaussian's stays
   1/sqrt(rho)), the pairs are chosen by the products of the eigenvalues,
   planted Kronecker-structured rows give back their factors' products, the
   noise level tells noise from signal, and the configuration checks. */
#include "check.h"
#include "dpsubspace.h"
#include "kron_moment.h"
#include "moment_groups.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A unit (or shorter) vector of n doubles: Gaussian, scaled to norm len. */
static void s_random(dps_rng *rng, double *v, size_t n, double len)
{
    double nn = 0;
    for (size_t i = 0; i < n; i++) {
        v[i] = dps_rng_gaussian(rng, 1.0);
        nn += v[i] * v[i];
    }
    for (size_t i = 0; i < n; i++)
        v[i] *= len / sqrt(nn);
}

/* ||A - B||_F^2 over n x n. */
static double s_dist2(const double *A, const double *B, size_t n)
{
    double f = 0;
    for (size_t i = 0; i < n * n; i++)
        f += (A[i] - B[i]) * (A[i] - B[i]);
    return f;
}

/* The released sums of one row x (r c floats) by the accumulator itself. */
static void s_sums(kron_moment *km, const float *x)
{
    kron_reset(km);
    kron_add(km, x);
    kron_finish(km);
}

/* The squared move of kron group (r x c, at x + off) under x -> y: the
   accumulator's C_in and C_out of each row, differenced. */
static double s_kron_move2(kron_moment *a, kron_moment *b, const float *x, const float *y)
{
    s_sums(a, x);
    s_sums(b, y);
    return s_dist2(a->Cin, b->Cin, a->c) + s_dist2(a->Cout, b->Cout, a->r);
}

/* ||y_g y_g^T - x_g x_g^T||_F^2 of a dense group (n floats). */
static double s_dense_move2(const float *x, const float *y, size_t n)
{
    double f = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double e = (double)y[i] * y[j] - (double)x[i] * x[j];
            f += e * e;
        }
    return f;
}

/* 1. Sensitivity (moment_groups.c, KRON GROUPS).  A row of two kron groups
   (3 x 4 and 5 x 2) and a dense group of 6: the squared moves of C_in and
   C_out of each kron group plus the dense group's ||D_gg||_F^2 add up to
   at most 2 (||x||^4 + ||y||^4) <= 4 for ||x||, ||y|| <= 1.  Checked on
   3 000 pairs: unit rows split across the groups, rows of all their mass
   in one kron group, rank-one blocks (the extreme case), norms below 1.
   And no less: x = u1 v1^T, y = u2 v2^T with u1 _|_ u2 and v1 _|_ v2 (unit,
   in group 1) move each side by exactly sqrt 2, 4 in all (rounding: the
   sums are of a handful of products in double, 1e-12). */
static void s_test_sensitivity(void)
{
    enum { R1 = 3, C1 = 4, R2 = 5, C2 = 2, DD = 6, D = R1 * C1 + R2 * C2 + DD };
    kron_moment a1, b1, a2, b2;
    CHECK(kron_init(&a1, R1, C1, 2) == DPS_OK && kron_init(&b1, R1, C1, 2) == DPS_OK &&
              kron_init(&a2, R2, C2, 2) == DPS_OK && kron_init(&b2, R2, C2, 2) == DPS_OK,
          "accumulators");
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 31);
    double worst = 0, worst_bound = 0;
    for (int t = 0; t < 3000; t++) {
        float x[D], y[D];
        float *v[2] = {x, y};
        for (int w = 0; w < 2; w++) {
            double buf[D], len = t % 3 == 2 ? dps_rng_uniform(rng) : 1.0;
            memset(buf, 0, sizeof buf);
            int kind = (t + w) % 4;
            if (kind == 0) { /* spread over the whole row */
                s_random(rng, buf, D, len);
            } else if (kind == 1) { /* all in group 1 */
                s_random(rng, buf, R1 * C1, len);
            } else { /* rank one in group 1 or group 2 */
                size_t r = kind == 2 ? R1 : R2, c = kind == 2 ? C1 : C2, off = kind == 2 ? 0 : R1 * C1;
                double u[8], vv[8];
                s_random(rng, u, r, 1.0);
                s_random(rng, vv, c, len);
                for (size_t i = 0; i < r; i++)
                    for (size_t j = 0; j < c; j++)
                        buf[off + i * c + j] = u[i] * vv[j];
            }
            for (size_t i = 0; i < D; i++)
                v[w][i] = (float)buf[i];
        }
        double m2 = s_kron_move2(&a1, &b1, x, y) + s_kron_move2(&a2, &b2, x + R1 * C1, y + R1 * C1) +
                    s_dense_move2(x + R1 * C1 + R2 * C2, y + R1 * C1 + R2 * C2, DD);
        double nx = 0, ny = 0;
        for (size_t i = 0; i < D; i++) {
            nx += (double)x[i] * x[i];
            ny += (double)y[i] * y[i];
        }
        worst = fmax(worst, m2);
        worst_bound = fmax(worst_bound, m2 - 2 * (nx * nx + ny * ny));
    }
    /* the extreme pair: orthogonal factors, all in group 1 */
    float x[R1 * C1] = {0}, y[R1 * C1] = {0};
    x[0 * C1 + 0] = 1; /* u1 = e1, v1 = e1 */
    y[1 * C1 + 1] = 1; /* u2 = e2, v2 = e2 */
    double extreme = s_kron_move2(&a1, &b1, x, y);
    NOTE("kron sensitivity: worst squared move of 3 000 pairs %.4f (bound 4), worst over 2 (|x|^4 + |y|^4) %+.2e, "
         "orthogonal rank-one pair %.12f", worst, worst_bound, extreme);
    CHECK(worst <= 4 * (1 + 1e-6), "squared moves add up to at most 4: %g", worst);
    CHECK(worst_bound <= 1e-6, "and to at most 2 (|x|^4 + |y|^4): %g over", worst_bound);
    CHECK(worst > 3.0, "random pairs come near the bound: %g", worst);
    CHECK(fabs(extreme - 4) < 1e-12, "orthogonal rank-one blocks move the sides by exactly 4: %.15g", extreme);
    kron_free(&a1);
    kron_free(&b1);
    kron_free(&a2);
    kron_free(&b2);
    dps_rng_destroy(&rng);
}

/* 2. The pairs, by hand. */
static void s_test_pairs(void)
{
    size_t pi[6], pj[6], next[3];
    const double wo[3] = {5, 3, 1}, wi[2] = {4, 2};
    kron_pairs(wo, 3, wi, 2, 6, pi, pj, next); /* products 20 12 10 6 4 2 */
    CHECK(pi[0] == 0 && pj[0] == 0 && pi[1] == 1 && pj[1] == 0 && pi[2] == 0 && pj[2] == 1 && pi[3] == 1 &&
              pj[3] == 1 && pi[4] == 2 && pj[4] == 0 && pi[5] == 2 && pj[5] == 1,
          "pairs by product: (%zu %zu) (%zu %zu) (%zu %zu) (%zu %zu)", pi[0], pj[0], pi[1], pj[1], pi[2], pj[2], pi[3],
          pj[3]);
    const double to[2] = {2, 1}, ti[2] = {1, 0.5}; /* (0,1) and (1,0) tie at 1: the smaller i first */
    kron_pairs(to, 2, ti, 2, 3, pi, pj, next);
    CHECK(pi[1] == 0 && pj[1] == 1 && pi[2] == 1 && pj[2] == 0, "a tie goes to the smaller i");
    const double no[2] = {3, -1}, ni[3] = {2, -5, -6}; /* clamped at 0: 6, then zeros in index order */
    kron_pairs(no, 2, ni, 3, 4, pi, pj, next);
    CHECK(pi[0] == 0 && pj[0] == 0 && pi[1] == 0 && pj[1] == 1 && pi[2] == 0 && pj[2] == 2 && pi[3] == 1 &&
              pj[3] == 0,
          "negative eigenvalues count as 0, ties by index: (%zu %zu) (%zu %zu) (%zu %zu)", pi[1], pj[1], pi[2], pj[2],
          pi[3], pj[3]);
}

/* 2b. The group's level by hand (s = 1).  Out: r = 4 (T 2, edge 4,
   detection 4 + 4 x 4^(-1/6) = 7.2), w = 20.2, 5: lambda = (20.2 +
   sqrt(20.2^2 - 16))/2 = 20, keeping 1 - 4/400 = 0.99; 5 does not clear,
   keeps the random share (2 - 1)/(4 - 1) = 1/3, and the trace 17 leaves it
   17 - 20 + 2 T = 1.  In: c = 16 (T 4, edge 8, detection 10.5), w = 40.4, 7:
   lambda 40, keeping 0.99; 7 keeps 1/15, the trace 34 leaves it 2.  k = 3
   pairs by product: (0,0), (1,0) (5 x 40.4 = 202), (0,1) (141), weighing
   800, 40 and 40: kept = (800 x 0.99^2 + 40 x 0.99/3 + 40 x 0.99/15) / 880
   = 0.909; the group weighs the smaller side's 21, lost 21 (1 - kept).
   Both sides seen.  (With T each and the product of the sides' shares the
   group would read kept 0.84.) */
static void s_test_level_by_hand(void)
{
    kron_moment km;
    CHECK(kron_init(&km, 4, 16, 3) == DPS_OK, "init");
    km.wout[0] = 20.2, km.wout[1] = 5, km.wout[2] = 1;
    km.win[0] = 40.4, km.win[1] = 7, km.win[2] = 6;
    km.tr_out = 17, km.tr_in = 34;
    kron_pairs(km.wout, km.kout, km.win, km.kin, km.k, km.pi, km.pj, km.next);
    km.used_out = km.used_in = 2;
    CHECK(km.pi[1] == 1 && km.pj[1] == 0 && km.pi[2] == 0 && km.pj[2] == 1, "the pairs (0,0) (1,0) (0,1)");
    double lost = 0, total = 0, kept = (800 * 0.99 * 0.99 + 40 * 0.99 / 3 + 40 * 0.99 / 15) / 880;
    int side[2] = {0, 0};
    CHECK(kron_noise_parts(&km, 1.0, &lost, &total, side) && side[0] && side[1], "both sides seen");
    CHECK(fabs(total - 21) < 1e-9 && fabs(lost - 21 * (1 - kept)) < 1e-9, "lost %.12g of %.12g, want %.12g of 21",
          lost, total, 21 * (1 - kept));
    km.win[0] = 9; /* below the in side's detection level: that side is not seen */
    lost = total = 0;
    CHECK(!kron_noise_parts(&km, 1.0, &lost, &total, side) && side[0] && !side[1], "the in side unseen");
    kron_free(&km);
}

/* A kron configuration: group 0 dense (DD columns, rank 1), group 1 kron
   R x C (rank K), group 2 power when DP > 0 (rank 1, above dense_max_d). */
static void s_config(dps_config *c, size_t dd, size_t r, size_t cols, size_t k, size_t dp, double rho)
{
    dps_config_init(c, dd + r * cols + dp, 2 + k);
    c->aggregator = DPS_AGG_KRON;
    c->groups = dp ? 3 : 2;
    c->group_d[0] = dd;
    c->group_k[0] = 1;
    c->group_d[1] = r * cols;
    c->group_k[1] = k;
    c->group_rows[1] = r;
    c->group_d[2] = dp;
    c->group_k[2] = dp ? 1 : 0;
    c->k = 1 + k + (dp ? 1 : 0);
    c->dense_max_d = 100;
    c->power_blocks = 1;
    c->rho_epoch = rho;
    c->t = 10;
    c->m = 10;
    c->window = c->t;
    c->workers = 1;
}

/* 3. The noise the MECHANISM draws, through the table's hooks: epochs of
   zero rows, so the released N_in and N_out are the noise E alone.  A dense
   group of 50 (dense_max_d 100), a kron group 40 x 60, a power group of
   3 000 (b = 11), at rho = 0.25: every entry's variance must be
   s^2 = 2/rho = 8.  Over 10 epochs the kron group's upper triangles hold
   N = 10 (820 + 1 830) = 26 500 draws: the variance estimate's relative sd
   is sqrt(2/N) = 0.0087; the power group's last Y, ||G||_F^2 = sum sv^2 over
   d b = 33 000 draws per epoch, 330 000 in all: 0.0025; accept within 5 sd
   (4.3%, 1.2%).  The gaussian aggregator's 1/rho (4) is 50% off, a
   sensitivity of 4 instead of 2 (s^2 = 16) 100%.  The mean of the
   off-diagonal entries: |mean| < 5 s / sqrt(N).  And the gaussian and power
   aggregators' s stays 1/sqrt(rho). */
static void s_test_noise(void)
{
    size_t dd = 50, r = 40, cols = 60, dp = 3000, reps = 10;
    dps_config c;
    s_config(&c, dd, r, cols, 2, dp, 0.25);
    const char *why = "";
    CHECK(dps_config_check(&c, &why) == DPS_OK, "kron with dense and power groups: %s", why);
    double want = 2.0 / c.rho_epoch;
    CHECK(fabs(moment_noise_sd(&c) - sqrt(want)) < 1e-12, "kron: s = sqrt(2/rho) = %g", moment_noise_sd(&c));
    dps_config g = c;
    g.aggregator = DPS_AGG_GAUSSIAN;
    memset(g.group_rows, 0, sizeof g.group_rows);
    CHECK(dps_config_check(&g, &why) == DPS_OK && fabs(moment_noise_sd(&g) - 1 / sqrt(g.rho_epoch)) < 1e-12,
          "gaussian: s = 1/sqrt(rho) (%s)", why);
    g.aggregator = DPS_AGG_POWER;
    CHECK(dps_config_check(&g, &why) == DPS_OK && fabs(moment_noise_sd(&g) - 1 / sqrt(g.rho_epoch)) < 1e-12,
          "power: s = 1/sqrt(rho) (%s)", why);
    const epoch_mechanism *m = epoch_mechanism_for(c.aggregator);
    CHECK(m && m->kind == DPS_CHARGE_GAUSSIAN && m->cost(&c).rho == c.rho_epoch && m->cost(&c).delta == 0,
          "charged (rho, 0) as a Gaussian mechanism");
    epoch_state *st = NULL;
    dps_rng *noise = NULL;
    dps_rng_new_seeded(&noise, 12);
    float *zero = calloc(c.d, sizeof *zero), *basis = calloc(c.k * c.d, sizeof *basis);
    CHECK(m && m->create(&st, &c, NULL) == DPS_OK && st, "create");
    double s2 = 0, s1 = 0, pf2 = 0, worst_level = 1e9;
    size_t n = 0, no = 0, np = 0;
    int symmetric = 1;
    for (size_t e = 0; e < reps && st; e++) {
        CHECK(m->begin(st, e, noise) == DPS_OK, "begin");
        for (size_t i = 0; i < c.t * c.m; i++)
            m->take_row(st, zero);
        epoch_input in;
        epoch_outcome out;
        memset(&in, 0, sizeof in);
        memset(&out, 0, sizeof out);
        in.rows = c.t * c.m;
        in.noise = noise;
        CHECK(m->release(st, &in, basis, &out) == DPS_OK, "release");
        worst_level = fmin(worst_level, fmin(out.noise_level, out.group_level[1]));
        const kron_moment *km = moment_group_kron(st, 1);
        const power_iteration *p = moment_group_power(st, 2);
        CHECK(km && p && !moment_group_kron(st, 0) && !moment_group_power(st, 1), "the groups' kinds");
        if (!km || !p)
            break;
        const double *N[2] = {km->Nout, km->Nin};
        size_t sz[2] = {km->r, km->c};
        for (int side = 0; side < 2; side++)
            for (size_t i = 0; i < sz[side]; i++)
                for (size_t j = i; j < sz[side]; j++) {
                    double v = N[side][i * sz[side] + j];
                    s2 += v * v;
                    n++;
                    if (j > i) {
                        s1 += v;
                        no++;
                        symmetric &= v == N[side][j * sz[side] + i];
                    }
                }
        for (size_t j = 0; j < p->b; j++)
            pf2 += p->sv[j] * p->sv[j];
        np += p->d * p->b;
    }
    double v = s2 / (double)n, vp = pf2 / (double)np, mean = s1 / (double)no;
    NOTE("kron noise at rho %.2f: side entries' variance %.4f over %zu draws, power group's %.4f over %zu "
         "(want 2/rho = %.4f), off-diagonal mean %.5f; zero rows' level at least %.2f",
         c.rho_epoch, v, n, vp, np, want, mean, worst_level);
    CHECK(fabs(v / want - 1) < 5 * sqrt(2.0 / (double)n), "kron sides' noise variance %g, want %g", v, want);
    CHECK(fabs(vp / want - 1) < 5 * sqrt(2.0 / (double)np), "power group's noise variance %g, want %g", vp, want);
    CHECK(fabs(mean) < 5 * sqrt(want / (double)no), "off-diagonal mean %g", mean);
    CHECK(symmetric, "the noisy sides are symmetric");
    CHECK(worst_level >= 1.0, "zero rows: the kron group and the release at random level (%g)", worst_level);
    m->destroy(&st);
    free(zero);
    free(basis);
    dps_rng_destroy(&noise);
}

/* 4. Planted Kronecker structure, through the estimator (push, close).
   Group 1 is 8 x 12: G = a b^T with a = z1 u1 + 0.7 z2 u2 + 0.02 n_a,
   b = w1 v1 + 0.3 w2 v2 + 0.02 n_b (z, w, n iid N(0, 1); u, v orthonormal
   pairs of random directions), the row = (0.3 x_0, 0.95 G / ||G||_F)
   normalised, x_0 a random direction of the dense group 0 (10 columns).
   The block's direction is a/|a| (x) b/|b|, independent sides symmetric in
   each coordinate, so C_out and C_in have eigenvectors u1, u2 (eigenvalue
   ratio about 0.49) and v1, v2 (about 0.09), and with k = 3 the pairs are
   (u1, v1), (u2, v1), (u1, v2) (products 1, 0.49, 0.09; the next 0.044):
   here the top 3 of the full covariance E[vec G vec G^T] = E[a a^T] (x)
   E[b b^T] too.  n = 2 000 rows at rho = 1e4 (s = 0.014, edges < 0.1):
   the noise is negligible against eigenvalues of hundreds; the sampling
   error of an eigenvector is about the off-diagonal sqrt(n) sd / gap <
   45 / 300 for u2 against u1 (v2 against the 0.02 floor is further), so
   each released row's |cosine| with its planted product is above
   (1 - 0.15^2)^2 = 0.95: accept 0.9.  The rows are orthonormal (1e-5),
   zero outside the group's columns, and the levels small (< 0.2).  Then the
   same rows at rho = 1e-6 (s = 1 414, Wigner edges 8 000 and 9 800) where
   no eigenvalue can exceed the group's trace, at most n = 2 000: no
   direction clears either side's edge, and the group's level must say
   WEAK (>= 0.75; it is the edge's margin over the top noisy eigenvalue). */
static void s_test_planted(void)
{
    enum { DD = 10, R = 8, C = 12, DG = R * C, D = DD + DG, K = 3 };
    size_t n = 2000;
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 44);
    double u[2][R], v[2][C], x0[DD];
    s_random(rng, u[0], R, 1);
    s_random(rng, v[0], C, 1);
    s_random(rng, x0, DD, 1);
    for (int side = 0; side < 2; side++) { /* the second direction, orthogonal to the first */
        double *p = side ? v[1] : u[1], *q = side ? v[0] : u[0];
        size_t len = side ? C : R;
        s_random(rng, p, len, 1);
        double dot = 0, nn = 0;
        for (size_t i = 0; i < len; i++)
            dot += p[i] * q[i];
        for (size_t i = 0; i < len; i++) {
            p[i] -= dot * q[i];
            nn += p[i] * p[i];
        }
        for (size_t i = 0; i < len; i++)
            p[i] /= sqrt(nn);
    }
    float *X = malloc(n * D * sizeof *X);
    for (size_t t = 0; t < n; t++) {
        double a[R], b[C], z1 = dps_rng_gaussian(rng, 1), z2 = dps_rng_gaussian(rng, 0.7);
        double w1 = dps_rng_gaussian(rng, 1), w2 = dps_rng_gaussian(rng, 0.3), g2 = 0, row[D], nn = 0;
        for (size_t i = 0; i < R; i++)
            a[i] = z1 * u[0][i] + z2 * u[1][i] + dps_rng_gaussian(rng, 0.02);
        for (size_t j = 0; j < C; j++)
            b[j] = w1 * v[0][j] + w2 * v[1][j] + dps_rng_gaussian(rng, 0.02);
        for (size_t i = 0; i < R; i++)
            for (size_t j = 0; j < C; j++)
                g2 += a[i] * b[j] * a[i] * b[j];
        for (size_t i = 0; i < DD; i++)
            row[i] = 0.3 * x0[i] + dps_rng_gaussian(rng, 0.01);
        for (size_t i = 0; i < R; i++)
            for (size_t j = 0; j < C; j++)
                row[DD + i * C + j] = 0.95 * a[i] * b[j] / sqrt(g2);
        for (size_t i = 0; i < D; i++)
            nn += row[i] * row[i];
        for (size_t i = 0; i < D; i++)
            X[t * D + i] = (float)(row[i] / sqrt(nn));
    }
    const size_t want_i[K] = {0, 1, 0}, want_j[K] = {0, 0, 1};
    for (int weak = 0; weak < 2; weak++) {
        dps_config c;
        dps_config_init(&c, D, 1 + K);
        c.aggregator = DPS_AGG_KRON;
        c.groups = 2;
        c.group_d[0] = DD;
        c.group_k[0] = 1;
        c.group_d[1] = DG;
        c.group_k[1] = K;
        c.group_rows[1] = R;
        c.rho_epoch = weak ? 1e-6 : 1e4;
        c.t = 20;
        c.m = n / 20;
        c.window = c.t;
        c.seeded = 1;
        c.seed = 5;
        c.workers = 1;
        const char *why = "";
        CHECK(dps_config_check(&c, &why) == DPS_OK, "planted configuration: %s", why);
        dps_estimator *e = NULL;
        CHECK(dps_estimator_new(&e, &c) == DPS_OK, "kron estimator");
        dps_snapshot *snap = NULL;
        size_t taken = 0;
        if (e) {
            dps_estimator_push(e, X, n, D, &taken);
            dps_estimator_close_epoch(e, &snap);
        }
        dps_snapshot_info in;
        memset(&in, 0, sizeof in);
        if (snap)
            dps_snapshot_get_info(snap, &in);
        const float *V = snap ? dps_snapshot_basis(snap) : NULL;
        CHECK(V && in.status == DPS_SNAP_RELEASED && in.aggregator == DPS_AGG_KRON && in.k == 1 + K &&
                  in.groups == 2 && in.epoch_cost.rho == c.rho_epoch && in.epoch_cost.delta == 0,
              "released, charged (rho, 0): status %d", (int)in.status);
        double level = snap ? dps_snapshot_group_noise_level(snap, 1) : NAN;
        if (V && !weak) {
            double worst_cos = 1, worst_orth = 0;
            int zero_outside = 1;
            for (size_t p = 0; p < K; p++) {
                const float *row = V + (1 + p) * D;
                double dot = 0;
                for (size_t i = 0; i < DD; i++)
                    zero_outside &= row[i] == 0;
                for (size_t i = 0; i < R; i++)
                    for (size_t j = 0; j < C; j++)
                        dot += row[DD + i * C + j] * u[want_i[p]][i] * v[want_j[p]][j];
                worst_cos = fmin(worst_cos, fabs(dot));
                for (size_t q = 0; q <= p; q++) {
                    double g = 0;
                    for (size_t i = 0; i < D; i++)
                        g += (double)row[i] * V[(1 + q) * D + i];
                    worst_orth = fmax(worst_orth, fabs(g - (p == q)));
                }
            }
            for (size_t i = DD; i < D; i++)
                zero_outside &= V[i] == 0; /* the dense group's row */
            NOTE("planted 8 x 12 Kronecker rows at rho 1e4, n %zu: worst |cos| with the planted products %.4f "
                 "(accept 0.9), orthonormality %.1e, group level %.3f, overall %.3f", n, worst_cos, worst_orth, level,
                 in.noise_level);
            CHECK(worst_cos > 0.9, "the basis is the planted products in order: %g", worst_cos);
            CHECK(worst_orth < 1e-5, "orthonormal rows: %g", worst_orth);
            CHECK(zero_outside, "each group's rows are zero outside its columns");
            CHECK(level < 0.2 && in.noise_level < 0.2, "clean: levels %g, %g", level, in.noise_level);
        } else if (V) {
            NOTE("planted rows at rho 1e-6: group level %.3f, overall %.3f", level, in.noise_level);
            CHECK(level >= DPS_NOISE_LEVEL_WEAK && snap && dps_snapshot_group_weak(snap, 1), "noise: WEAK (%g)",
                  level);
        }
        dps_snapshot_destroy(&snap);
        dps_estimator_destroy(&e);
    }
    free(X);
    dps_rng_destroy(&rng);
}

/* 5. What the configuration check refuses, with its sentence, and the plan. */
static void s_test_config(void)
{
    dps_config c;
    const char *why = "";
    s_config(&c, 50, 40, 60, 2, 0, 1.0);
    CHECK(dps_config_check(&c, &why) == DPS_OK, "kron: %s", why);
    dps_plan plan;
    CHECK(dps_config_plan(&c, &plan) == DPS_OK && strstr(plan.method[1], "kron 40x60") &&
              strstr(plan.method[0], "dense"),
          "plan: %s / %s", plan.method[1], plan.method[0]);
    CHECK(fabs(plan.floor[1] * (double)plan.rows - 2 * sqrt(2.0) * sqrt(60.0)) < 1e-9,
          "the floor: the wider side's Wigner edge 2 s sqrt(60)");
    CHECK(epoch_mechanism_for(DPS_AGG_KRON)->memory(&c) >= kron_bytes(40, 60, 2) + 60 * 60 * sizeof(double) &&
              kron_bytes(40, 60, 2) >= 2 * (40 * 40 + 60 * 60) * sizeof(double),
          "memory counts the kron group");
    c.group_rows[1] = 7;
    CHECK(dps_config_check(&c, &why) == DPS_EINVAL && strstr(why, "divide"), "a shape that does not divide: %s", why);
    c.group_rows[1] = 0;
    CHECK(dps_config_check(&c, &why) == DPS_EINVAL && strstr(why, "needs a group with a shape RxC"),
          "kron without a shape: %s", why);
    c.group_rows[1] = 40;
    c.group_k[1] = 0;
    c.group_k[0] = 3;
    CHECK(dps_config_check(&c, &why) == DPS_EINVAL && strstr(why, "needs a group with a shape RxC"),
          "kron whose shaped group has rank 0: %s", why);
    c.group_k[1] = 2;
    c.group_k[0] = 1;
    c.group_rows[1] = 24; /* 24 x 100: a side above dense_max_d = 60 */
    c.dense_max_d = 60;
    CHECK(dps_config_check(&c, &why) == DPS_ELIMIT && strstr(why, "group 2") && strstr(why, "24x100"),
          "a side above the dense limit: %s", why);
    c.dense_max_d = 100;
    c.group_rows[1] = 40;
    c.group_rows[2] = 1;
    CHECK(dps_config_check(&c, &why) == DPS_EINVAL && strstr(why, "past the last"), "a shape past the groups: %s",
          why);
    c.group_rows[2] = 0;
    c.aggregator = DPS_AGG_GAUSSIAN;
    CHECK(dps_config_check(&c, &why) == DPS_EINVAL && strstr(why, "kron only"), "a shape with gaussian: %s", why);
    /* without groups: group_rows[0] is the whole row's shape */
    dps_config_init(&c, 20, 3);
    c.aggregator = DPS_AGG_KRON;
    c.group_rows[0] = 4;
    CHECK(dps_config_check(&c, &why) == DPS_OK && dps_config_plan(&c, &plan) == DPS_OK &&
              strstr(plan.method[0], "kron 4x5"),
          "one group, the row as 4 x 5: %s", why);
}

int main(void)
{
    s_test_sensitivity();
    s_test_pairs();
    s_test_level_by_hand();
    s_test_noise();
    s_test_planted();
    s_test_config();
    return check_summary();
}
