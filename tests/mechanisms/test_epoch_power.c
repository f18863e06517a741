/* test_epoch_power - the noisy power iteration (src/mechanisms/
   power_iteration.c) and its epoch mechanism (DPS_AGG_POWER,
   src/mechanisms/epoch_power.c): the noise has the stated law, one step is
   as accurate as Wedin's theorem allows, the warm start improves the next
   epochs, the blocks partition the epoch, and a short epoch releases. */
#include "check.h"
#include "dpsubspace.h"
#include "epoch_power.h"
#include "linalg.h"
#include "moment_groups.h"
#include "power_iteration.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The smaller eigenvalue of the 2 x 2 symmetric [[a, b], [b, c]]. */
static double s_eig2_min(double a, double b, double c)
{
    return 0.5 * (a + c) - sqrt(0.25 * (a - c) * (a - c) + b * b);
}

/* sigma_min of the 2 x b matrix U^T X for U (2 x d rows) and X (b x d rows):
   the square root of the smaller eigenvalue of its 2 x 2 Gram. */
static double s_sigma_min_2(const float *U, const float *X, size_t b, size_t d)
{
    double g00 = 0, g01 = 0, g11 = 0;
    for (size_t j = 0; j < b; j++) {
        double a0 = 0, a1 = 0;
        for (size_t i = 0; i < d; i++) {
            a0 += (double)U[i] * X[j * d + i];
            a1 += (double)U[d + i] * X[j * d + i];
        }
        g00 += a0 * a0;
        g01 += a0 * a1;
        g11 += a1 * a1;
    }
    return sqrt(fmax(0.0, s_eig2_min(g00, g01, g11)));
}

/* lambda_2 of C = sum x x^T restricted to span(U) (U 2 x d): the rows lie in
   the span up to 1e-4 per coordinate, so this is C's 2nd eigenvalue. */
static double s_lambda2(const float *rows, size_t n, const float *U, size_t d)
{
    double m00 = 0, m01 = 0, m11 = 0;
    for (size_t r = 0; r < n; r++) {
        double a0 = 0, a1 = 0;
        for (size_t i = 0; i < d; i++) {
            a0 += (double)U[i] * rows[r * d + i];
            a1 += (double)U[d + i] * rows[r * d + i];
        }
        m00 += a0 * a0;
        m01 += a0 * a1;
        m11 += a1 * a1;
    }
    return s_eig2_min(m00, m01, m11);
}

/* ||(y y^T - x x^T) X||_F for x, y of d doubles and X (d x b, column-major). */
static double s_move(const double *x, const double *y, const double *X, size_t d, size_t b)
{
    double f2 = 0;
    for (size_t j = 0; j < b; j++) {
        double xa = 0, ya = 0;
        for (size_t i = 0; i < d; i++) {
            xa += x[i] * X[j * d + i];
            ya += y[i] * X[j * d + i];
        }
        for (size_t i = 0; i < d; i++) {
            double e = y[i] * ya - x[i] * xa;
            f2 += e * e;
        }
    }
    return sqrt(f2);
}

/* 0. The sensitivity the calibration rests on (epoch_power.c, ARGUMENT):
   for ||x||, ||y|| <= 1 and ||X||_2 <= 1, ||(y y^T - x x^T) X||_F <= sqrt 2,
   and no less: orthogonal unit x, y in the span of X reach it exactly.
   Checked on 2 000 random pairs (norms in (0, 1], X orthonormal columns,
   half of the pairs inside span X, where the move is largest) and on the
   extremal pair; the triangle inequality's bound 2 is never approached. */
static void s_test_sensitivity(void)
{
    size_t d = 12, b = 4;
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 77);
    double X[12 * 4], x[12], y[12], worst = 0;
    float Xf[12 * 4]; /* X: b orthonormal rows of d floats (the library's QR) */
    for (size_t i = 0; i < d * b; i++)
        Xf[i] = (float)dps_rng_gaussian(rng, 1.0);
    CHECK(la_orthonormalize_rows(Xf, b, d) == 0, "orthonormalise X");
    for (size_t i = 0; i < d * b; i++)
        X[i] = Xf[i];
    for (int r = 0; r < 2000; r++) {
        double *v[2] = {x, y};
        for (int w = 0; w < 2; w++) {
            double nn = 0;
            for (size_t i = 0; i < d; i++)
                v[w][i] = 0;
            if (r % 2) /* inside span X */
                for (size_t j = 0; j < b; j++) {
                    double c = dps_rng_gaussian(rng, 1.0);
                    for (size_t i = 0; i < d; i++)
                        v[w][i] += c * X[j * d + i];
                }
            else
                for (size_t i = 0; i < d; i++)
                    v[w][i] = dps_rng_gaussian(rng, 1.0);
            for (size_t i = 0; i < d; i++)
                nn += v[w][i] * v[w][i];
            double scale = dps_rng_uniform(rng) / sqrt(nn);
            if (r % 4 < 2)
                scale = 1 / sqrt(nn); /* unit rows, as row_unit gives */
            for (size_t i = 0; i < d; i++)
                v[w][i] *= scale;
        }
        worst = fmax(worst, s_move(x, y, X, d, b));
    }
    for (size_t i = 0; i < d; i++) { /* x = X e_1, y = X e_2 */
        x[i] = X[i];
        y[i] = X[d + i];
    }
    double extremal = s_move(x, y, X, d, b);
    NOTE("sensitivity of C X: worst of 2 000 random pairs %.4f, orthogonal pair in span X %.6f (bound sqrt 2 = %.6f)",
         worst, extremal, sqrt(2.0));
    /* X's columns are orthonormal to float precision: ||X||_2 <= 1 + 1e-6 */
    CHECK(worst <= sqrt(2.0) * (1 + 1e-6), "random pairs move C X by <= sqrt 2: %g", worst);
    CHECK(fabs(extremal - sqrt(2.0)) < 1e-5, "orthogonal unit rows in span X move C X by exactly sqrt 2: %g",
          extremal);
    dps_rng_destroy(&rng);
}

/* 1. The noise.  With no rows (all-zero rows give the same Y), Y = G, and the
   b singular values a step keeps give ||Y||_F^2 = sum sv^2, which is s^2
   times a chi-square with d b degrees of freedom: the variance estimate
   ||Y||_F^2 / (d b) has relative sd sqrt(2 / (d b)); over 10 steps at
   d = 2000, b = 10 (N = 200 000 draws) that is 0.0032: accept within 5 sd
   (1.6%).  A noise calibrated for sensitivity 1, or for 2 rho, is 50% off
   in variance; for the triangle inequality's sensitivity 2, 100%.  The
   extreme singular values of a d x b Gaussian matrix lie in
   s (sqrt d -+ sqrt b) -+ t s with probability >= 1 - 2 exp(-t^2 / 2)
   (Davidson-Szarek): t = 5 on each step.  The calibration: replacing one row
   moves C X by at most sqrt 2 in Frobenius norm (test 0), so rho-zCDP needs
   s = sqrt 2 / sqrt(2 rho) = 1 / sqrt(rho). */
static void s_test_noise(void)
{
    size_t d = 2000, k = 3, b = 10, reps = 10;
    double rho = 0.5, s = power_noise_sd(rho);
    CHECK(fabs(s - sqrt(2.0) / sqrt(2.0 * rho)) < 1e-12, "s = sqrt 2 / sqrt(2 rho): %g", s);
    power_iteration p;
    CHECK(power_init(&p, d, k, b) == DPS_OK, "init");
    dps_rng *pub = NULL, *noise = NULL;
    dps_rng_new_labelled(&pub, 1, "test", 0);
    dps_rng_new_seeded(&noise, 2);
    CHECK(power_start(&p, NULL, pub) == DPS_OK, "start");
    float *zero = calloc(d, sizeof *zero);
    double f2 = 0;
    int extremes = 1;
    double sv_hi = s * (sqrt((double)d) + sqrt((double)b)) + 5 * s;
    double sv_lo = s * (sqrt((double)d) - sqrt((double)b)) - 5 * s;
    for (size_t r = 0; r < reps; r++) {
        for (int i = 0; i < 40; i++)
            power_add(&p, zero);
        CHECK(power_step(&p, s, noise) == DPS_OK, "step");
        for (size_t j = 0; j < b; j++)
            f2 += p.sv[j] * p.sv[j];
        extremes &= p.sv[0] <= sv_hi && p.sv[b - 1] >= sv_lo;
    }
    double v = f2 / (double)(d * b * reps);
    NOTE("power noise at rho %.2f: entry variance %.4f (s^2 = %.4f), last extremes %.1f %.1f in [%.1f, %.1f]", rho,
         v, s * s, p.sv[0], p.sv[b - 1], sv_lo, sv_hi);
    CHECK(fabs(v / (s * s) - 1) < 5 * sqrt(2.0 / (double)(d * b * reps)), "noise variance %g, want %g", v, s * s);
    CHECK(extremes, "the singular values of the noise within s (sqrt d -+ sqrt b) -+ 5 s");
    /* X stays orthonormal and ||X||_2 <= 1 (the guard) */
    double worst = 0, over = 0;
    for (size_t i = 0; i < b; i++)
        for (size_t j = 0; j < b; j++) {
            double g = 0;
            for (size_t c = 0; c < d; c++)
                g += (double)p.X[i * d + c] * p.X[j * d + c];
            worst = fmax(worst, fabs(g - (i == j)));
            if (i == j)
                over = fmax(over, g - 1);
        }
    CHECK(worst < 1e-5 && over <= 0, "X orthonormal (%g) with column norms <= 1 (excess %g)", worst, over);
    /* ||X||_2 <= 1 itself (what the sensitivity uses, not implied by the
       column norms): the top eigenvalue of the b x b Gram X^T X in double,
       by 200 power steps on it (its eigenvalues are within 1e-5 of 1, a
       start with all ones has a component on the top one) */
    double G[10 * 10], u[10], w[10], top = 0;
    for (size_t i = 0; i < b; i++)
        for (size_t j = 0; j < b; j++) {
            double g = 0;
            for (size_t c = 0; c < d; c++)
                g += (double)p.X[i * d + c] * p.X[j * d + c];
            G[i * b + j] = g;
        }
    for (size_t i = 0; i < b; i++)
        u[i] = 1 / sqrt((double)b);
    for (int it = 0; it < 200; it++) {
        double nn = 0;
        for (size_t i = 0; i < b; i++) {
            w[i] = 0;
            for (size_t j = 0; j < b; j++)
                w[i] += G[i * b + j] * u[j];
            nn += w[i] * w[i];
        }
        top = sqrt(nn);
        for (size_t i = 0; i < b; i++)
            u[i] = w[i] / top;
    }
    NOTE("guarded X: ||X||_2^2 = %.9f", top);
    CHECK(top <= 1.0, "||X||_2^2 = %.12g <= 1 (the norm guard)", top);
    float *V = malloc(k * d * sizeof *V);
    CHECK(power_basis(&p, V, NULL) == DPS_OK, "basis");
    free(V);
    free(zero);
    power_free(&p);
    power_free(&p); /* twice is harmless */
    dps_rng_destroy(&pub);
    dps_rng_destroy(&noise);
}

/* 1b. The noise the MECHANISM draws for a power group (not the s a test
   hands to power_step): an epoch of zero rows through the table's hooks,
   gaussian aggregator with a dense group (d 50) beside a power group
   (d 3 000 > dense_max_d 100, k 1, b 11), at rho 0.25 (s^2 = 1/rho = 4, so
   a wrong power of rho shows), one block.  Y = G, so the last step's b
   singular values give ||G||_F^2 = sum sv^2, s^2 times a chi-square with
   d b = 33 000 degrees of freedom: relative sd sqrt(2 / 33 000) = 0.0078;
   accept within 5 sd (3.9%).  The first calibration (s^2 = 2/rho = 8) is
   100% off, a tenth of the noise 99%. */
static void s_test_mechanism_noise(void)
{
    size_t dd = 50, dp = 3000;
    dps_config c;
    dps_config_init(&c, dd + dp, 2);
    c.aggregator = DPS_AGG_GAUSSIAN;
    c.groups = 2;
    c.group_d[0] = dd;
    c.group_d[1] = dp;
    c.group_k[0] = 1;
    c.group_k[1] = 1;
    c.dense_max_d = 100;
    c.power_blocks = 1;
    c.rho_epoch = 0.25;
    c.t = 10;
    c.m = 10;
    c.window = c.t;
    const char *why = "";
    CHECK(dps_config_check(&c, &why) == DPS_OK, "mixed configuration: %s", why);
    const epoch_mechanism *m = epoch_mechanism_for(c.aggregator);
    epoch_state *st = NULL;
    dps_rng *noise = NULL;
    dps_rng_new_seeded(&noise, 9);
    float *zero = calloc(dd + dp, sizeof *zero), *basis = calloc(2 * (dd + dp), sizeof *basis);
    CHECK(m && m->create(&st, &c, NULL) == DPS_OK && st, "create");
    CHECK(m->begin(st, 0, noise) == DPS_OK, "begin");
    for (size_t i = 0; i < c.t * c.m; i++)
        m->take_row(st, zero);
    epoch_input in;
    epoch_outcome out;
    memset(&in, 0, sizeof in);
    memset(&out, 0, sizeof out);
    in.rows = c.t * c.m;
    in.noise = noise;
    CHECK(m->release(st, &in, basis, &out) == DPS_OK, "release");
    const power_iteration *p = moment_group_power(st, 1);
    CHECK(p && !moment_group_power(st, 0), "group 2 is power, group 1 dense");
    if (p) {
        double f2 = 0;
        for (size_t j = 0; j < p->b; j++)
            f2 += p->sv[j] * p->sv[j];
        double v = f2 / (double)(p->d * p->b), want = 1.0 / c.rho_epoch;
        NOTE("mechanism's power-group noise at rho %.2f: entry variance %.4f, want 1/rho = %.4f", c.rho_epoch, v,
             want);
        CHECK(fabs(v / want - 1) < 5 * sqrt(2.0 / (double)(p->d * p->b)), "power group's noise variance %g, want %g",
              v, want);
    }
    m->destroy(&st);
    free(zero);
    free(basis);
    dps_rng_destroy(&noise);
}

/* 2. One step from a public random start, n = 4 000 rows near a 2-dim
   subspace span(U) of R^200 (the paper's generator at tau = 1e4 d), b = 12.
   C X_0 = U (U^T C U)(U^T X_0) has rank 2 up to the 1e-4 residual, with
   sigma_2(C X_0) >= lambda_2(C) sigma_min(U^T X_0) (both measured: lambda_2
   about n/2, sigma_min about (sqrt b - sqrt k) / sqrt d = 0.14).  The noise
   G has ||G||_2 <= s (sqrt d + sqrt b + 5) with probability >= 1 - e^-12.5
   (test 1).  Wedin's theorem (the left singular subspace of C X_0 + G; the
   third singular value of C X_0 is 0) gives
   sin <= ||G|| / (sigma_2(C X_0) - ||G||); accept sin below that. */
static void s_test_one_step(void)
{
    size_t d = 200, k = 2, b = 12, n = 4000;
    double rho = 1.0, s = power_noise_sd(rho);
    dps_rng *gen = NULL, *pub = NULL, *noise = NULL;
    dps_rng_new_seeded(&gen, 3);
    dps_rng_new_labelled(&pub, 4, "test", 0);
    dps_rng_new_seeded(&noise, 5);
    float *X = malloc(n * d * sizeof *X), *U = malloc(k * d * sizeof *U), *V = malloc(k * d * sizeof *V);
    dps_synth_paper(gen, n, d, k, 1e4 * d, X, U);
    power_iteration p;
    CHECK(power_init(&p, d, k, b) == DPS_OK, "init");
    CHECK(power_start(&p, NULL, pub) == DPS_OK, "start");
    double smin = s_sigma_min_2(U, p.X, b, d), lam2 = s_lambda2(X, n, U, d);
    for (size_t r = 0; r < n; r++)
        power_add(&p, X + r * d);
    CHECK(power_step(&p, s, noise) == DPS_OK, "step");
    double sv[2];
    CHECK(power_basis(&p, V, sv) == DPS_OK, "basis");
    double g = s * (sqrt((double)d) + sqrt((double)b) + 5), sig = lam2 * smin;
    double bound = sig > g ? g / (sig - g) : 1.0;
    double sn = dps_subspace_sin(V, U, k, d, NULL);
    NOTE("one power step, d %zu, n %zu, rho %.1f: lambda_2 %.0f, sigma_min(U'X0) %.3f, ||G|| <= %.1f: sin %.4f "
         "(Wedin bound %.4f); sv %.0f %.0f", d, n, rho, lam2, smin, g, sn, bound, sv[0], sv[1]);
    CHECK(bound < 0.5 && sn <= bound, "one step: sin %g within Wedin's %g", sn, bound);
    CHECK(sv[0] >= sv[1] && sv[1] >= sig - g, "singular values largest first, the 2nd above the signal's minus noise");
    power_free(&p);
    free(X);
    free(U);
    free(V);
    dps_rng_destroy(&gen);
    dps_rng_destroy(&pub);
    dps_rng_destroy(&noise);
}

static dps_config s_cfg(size_t d, size_t k, size_t t, size_t m, size_t blocks, size_t p)
{
    dps_config c;
    dps_config_init(&c, d, k);
    c.t = t;
    c.m = m;
    c.window = t;
    c.aggregator = DPS_AGG_POWER;
    c.power_blocks = blocks;
    c.power_oversample = p;
    c.rho_epoch = 1.0;
    c.seeded = 1;
    c.seed = 11;
    c.workers = 1;
    return c;
}

/* 3. The warm start, through the estimator: the same n = 1 000 rows near a
   2-dim span of R^1000 in 5 epochs (one block each, b = 12, rho 1).  From a
   random start sigma_min(U^T X_0) is about 0.065, so the first epoch's
   signal lambda_2 sigma_min (about 32) is below the noise
   ||G|| <= s (sqrt d + sqrt b + 5) = 57: no guarantee, a poor basis.  Epoch
   e + 1 starts from epoch e's basis, so sigma_min(U^T X_0) >= cos(theta_e),
   and Wedin gives sin_{e+1} <= ||G|| / (lambda_2 cos(theta_e) - ||G||)
   whenever that is positive: check it on every epoch where it applies, that
   it applies from some epoch on, and that the last epoch is better than the
   first (a warm start that did nothing would leave every epoch at the first's
   level). */
static void s_test_warm_start(void)
{
    size_t d = 1000, k = 2, n = 1000, epochs = 5;
    dps_config c = s_cfg(d, k, 10, 100, 1, 10);
    const char *why = "";
    CHECK(dps_config_check(&c, &why) == DPS_OK, "power config: %s", why);
    CHECK(!dps_config_uses_buckets(&c), "no buckets");
    dps_zcdp cost = dps_config_epoch_cost(&c);
    CHECK(cost.rho == 1.0 && cost.delta == 0.0, "charged (rho, 0): (%g, %g)", cost.rho, cost.delta);
    dps_rng *gen = NULL;
    dps_rng_new_seeded(&gen, 6);
    float *X = malloc(n * d * sizeof *X), *U = malloc(k * d * sizeof *U);
    dps_synth_paper(gen, n, d, k, 1e4 * d, X, U);
    double lam2 = s_lambda2(X, n, U, d), s = power_noise_sd(c.rho_epoch);
    double g = s * (sqrt((double)d) + sqrt((double)(k + c.power_oversample)) + 5);
    dps_estimator *e = NULL;
    CHECK(dps_estimator_new(&e, &c) == DPS_OK, "power estimator");
    double sn[8] = {0};
    int bounded = 0, within = 1;
    for (size_t ep = 0; ep < epochs && e; ep++) {
        dps_estimator_push(e, X, n, d, NULL);
        dps_snapshot *snap = NULL;
        CHECK(dps_estimator_close_epoch(e, &snap) == DPS_OK && snap, "epoch closed");
        dps_snapshot_info in;
        dps_snapshot_get_info(snap, &in);
        CHECK(in.status == DPS_SNAP_RELEASED && in.aggregator == DPS_AGG_POWER && in.rows_used == n &&
                  in.buckets_used == 0 && in.epoch_cost.rho == 1.0 && in.epoch_cost.delta == 0.0,
              "released, every row used, charged (1, 0): status %d", (int)in.status);
        const float *V = dps_snapshot_basis(snap);
        sn[ep] = V ? dps_subspace_sin(V, U, k, d, NULL) : 1.0;
        if (ep > 0) {
            double sig = lam2 * sqrt(fmax(0.0, 1 - sn[ep - 1] * sn[ep - 1]));
            if (sig > 2 * g) {
                bounded++;
                within &= sn[ep] <= g / (sig - g);
            }
        }
        dps_snapshot_destroy(&snap);
    }
    NOTE("power warm start, d %zu, n %zu: lambda_2 %.0f, ||G|| <= %.0f; sin by epoch %.3f %.3f %.3f %.3f %.3f "
         "(fixed point of the bound %.3f)", d, n, lam2, g, sn[0], sn[1], sn[2], sn[3], sn[4], g / (lam2 - g));
    CHECK(bounded >= 2 && within, "from some epoch on, every epoch within Wedin's bound from the last (%d)", bounded);
    CHECK(sn[epochs - 1] < sn[0] && sn[epochs - 1] < 0.25, "the warm start helps: %g after %g", sn[epochs - 1],
          sn[0]);
    dps_estimator_stats st;
    dps_estimator_get_stats(e, &st);
    CHECK(st.rows_discarded == 0 && st.epochs_internal_error == 0, "nothing discarded, no internal error");
    dps_estimator_destroy(&e);
    free(X);
    free(U);
    dps_rng_destroy(&gen);
}

/* 4. The blocks: floor(i N / T) partitions [0, N) into T blocks whose sizes
   differ by at most one; an epoch closed after 150 of N = 400 rows with
   T = 4 runs block 0 and the partial block 1, and releases; so does one
   closed inside block 0.  More blocks than rows: every row is a block. */
static void s_test_blocks(void)
{
    int ok = 1;
    for (uint64_t n = 1; n < 60; n++)
        for (uint64_t t = 1; t <= n; t++) {
            uint64_t lo = n / t, hi = (n + t - 1) / t;
            ok &= power_block_start(n, t, 0) == 0 && power_block_start(n, t, t) == n;
            for (uint64_t i = 0; i < t; i++) {
                uint64_t size = power_block_start(n, t, i + 1) - power_block_start(n, t, i);
                ok &= size == lo || size == hi;
            }
        }
    ok &= power_block_start(UINT64_MAX / 2, 1000, 999) == (UINT64_MAX / 2) / 1000 * 999 + ((UINT64_MAX / 2) % 1000) * 999 / 1000;
    CHECK(ok, "the blocks partition the epoch, sizes within one");
    size_t d = 30, k = 2;
    dps_rng *gen = NULL;
    dps_rng_new_seeded(&gen, 8);
    float *X = malloc(400 * d * sizeof *X), *U = malloc(k * d * sizeof *U);
    dps_synth_paper(gen, 400, d, k, 1e4 * d, X, U);
    size_t pushes[] = {150, 60, 400};
    for (size_t blocks = 1; blocks <= 512; blocks *= 8)
        for (size_t i = 0; i < 3; i++) {
            dps_config c = s_cfg(d, k, 4, 100, blocks, 4);
            dps_estimator *e = NULL;
            CHECK(dps_estimator_new(&e, &c) == DPS_OK, "estimator");
            dps_estimator_push(e, X, pushes[i], d, NULL);
            dps_snapshot *snap = NULL;
            CHECK(dps_estimator_close_epoch(e, &snap) == DPS_OK && snap, "closed");
            dps_snapshot_info in;
            dps_snapshot_get_info(snap, &in);
            CHECK(in.status == DPS_SNAP_RELEASED && in.rows_used == pushes[i], "T %zu, %zu of 400 rows: released",
                  blocks, pushes[i]);
            dps_snapshot_destroy(&snap);
            dps_estimator_destroy(&e);
        }
    dps_config c = s_cfg(d, k, 4, 100, 0, 4);
    const char *why = "";
    dps_plan plan;
    double floor3 = 3 * power_noise_sd(1.0) * (sqrt((double)d) + sqrt((double)power_columns(&c))) / (4.0 * 100);
    CHECK(dps_config_check(&c, &why) == DPS_OK && dps_config_plan(&c, &plan) == DPS_OK &&
              fabs(plan.floor[0] - floor3) < 1e-12 * floor3,
          "power_blocks 0: 3 blocks while cold (plan floor %g, want %g)", plan.floor[0], floor3);
    c.power_blocks = POWER_MAX_BLOCKS + 1;
    CHECK(dps_config_check(&c, &why) == DPS_EINVAL, "power_blocks above the cap refused");
    c = s_cfg(d, k, 4, 100, 1, 100);
    CHECK(dps_config_check(&c, &why) == DPS_EINVAL, "power_oversample above d refused");
    c.power_oversample = 28;
    CHECK(dps_config_check(&c, &why) == DPS_OK && power_columns(&c) == 30, "b capped at d: %zu", power_columns(&c));
    free(X);
    free(U);
    dps_rng_destroy(&gen);
}

/* 5. Blocks cut by the caller (dps_estimator_end_block): cuts at the index
   blocks' own rows (dps_power_block_start) on an epoch too long for any
   index cut give the same release as the index blocks, bit for bit (the
   same steps on the same rows with the same seeded noise), and both report
   their steps (dps_snapshot_power_steps); steps follow the cuts, not the
   rows (an empty block still steps); a mechanism without power groups
   refuses a cut. */
static void s_test_caller_blocks(void)
{
    size_t d = 300, k = 2, n = 600, T = 3;
    dps_rng *gen = NULL;
    dps_rng_new_seeded(&gen, 8);
    float *X = malloc(n * d * sizeof *X), *U = malloc(k * d * sizeof *U);
    dps_synth_paper(gen, n, d, k, 1e4 * d, X, U);
    dps_config by_index = s_cfg(d, k, 6, 100, T, 4), by_caller = s_cfg(d, k, 1000, 100, 1, 4);
    dps_estimator *a = NULL, *b = NULL;
    CHECK(dps_estimator_new(&a, &by_index) == DPS_OK && dps_estimator_new(&b, &by_caller) == DPS_OK, "estimators");
    dps_config cold = s_cfg(d, k, 6, 100, 0, 4);
    CHECK(dps_config_power_blocks(&by_index) == T && dps_config_power_blocks(&cold) == 3,
          "a first epoch's T from the configuration: power_blocks, or 3 by default");
    CHECK(dps_estimator_power_blocks(a) == T && dps_estimator_power_blocks(b) == 1, "T of each: %llu, %llu",
          (unsigned long long)dps_estimator_power_blocks(a), (unsigned long long)dps_estimator_power_blocks(b));
    dps_estimator_push(a, X, n, d, NULL);
    for (uint64_t i = 0; i < T; i++) {
        uint64_t r0 = dps_power_block_start(n, T, i), r1 = dps_power_block_start(n, T, i + 1);
        dps_estimator_push(b, X + r0 * d, r1 - r0, d, NULL);
        if (i + 1 < T)
            CHECK(dps_estimator_end_block(b) == DPS_OK, "cut %llu", (unsigned long long)i);
    }
    dps_snapshot *sa = NULL, *sb = NULL;
    CHECK(dps_estimator_close_epoch(a, &sa) == DPS_OK && dps_estimator_close_epoch(b, &sb) == DPS_OK, "closed");
    const float *Va = sa ? dps_snapshot_basis(sa) : NULL, *Vb = sb ? dps_snapshot_basis(sb) : NULL;
    CHECK(Va && Vb && memcmp(Va, Vb, k * d * sizeof *Va) == 0, "caller cuts at the index cuts: the same basis");
    CHECK(dps_snapshot_power_steps(sa) == T && dps_snapshot_power_steps(sb) == T, "%zu steps each: %llu, %llu", T,
          (unsigned long long)dps_snapshot_power_steps(sa), (unsigned long long)dps_snapshot_power_steps(sb));
    dps_snapshot_destroy(&sa);
    dps_snapshot_destroy(&sb);
    /* four cuts, the first before any row and two in a row: 5 steps whatever the blocks held */
    CHECK(dps_estimator_end_block(b) == DPS_OK, "a cut before any row starts the epoch");
    dps_estimator_push(b, X, 10, d, NULL);
    CHECK(dps_estimator_end_block(b) == DPS_OK && dps_estimator_end_block(b) == DPS_OK, "two cuts in a row");
    dps_estimator_push(b, X + 10 * d, 10, d, NULL);
    CHECK(dps_estimator_end_block(b) == DPS_OK, "a fourth cut");
    dps_estimator_push(b, X + 20 * d, 10, d, NULL);
    CHECK(dps_estimator_close_epoch(b, &sb) == DPS_OK && sb, "closed");
    CHECK(dps_snapshot_power_steps(sb) == 5, "4 cuts and the rows after the last: 5 steps, got %llu",
          (unsigned long long)dps_snapshot_power_steps(sb));
    dps_snapshot_destroy(&sb);
    dps_estimator_destroy(&a);
    dps_estimator_destroy(&b);
    dps_config dense = s_cfg(d, k, 6, 100, 1, 4);
    dense.aggregator = DPS_AGG_GAUSSIAN;
    CHECK(dps_estimator_new(&a, &dense) == DPS_OK, "gaussian estimator");
    CHECK(dps_estimator_end_block(a) == DPS_EINVAL && dps_estimator_power_blocks(a) == 0 &&
              dps_config_power_blocks(&dense) == 0,
          "no power group: no cut, no blocks");
    dps_estimator_push(a, X, n, d, NULL);
    int rc = dps_estimator_close_epoch(a, &sa);
    dps_snapshot_info in = {0};
    if (sa)
        dps_snapshot_get_info(sa, &in);
    CHECK(rc == DPS_OK && in.status == DPS_SNAP_RELEASED && dps_snapshot_power_steps(sa) == 0,
          "a dense release took no power step: rc %d, status %d", rc, (int)in.status);
    dps_snapshot_destroy(&sa);
    dps_estimator_destroy(&a);
    free(X);
    free(U);
    dps_rng_destroy(&gen);
}

int main(void)
{
    s_test_sensitivity();
    s_test_noise();
    s_test_mechanism_noise();
    s_test_one_step();
    s_test_warm_start();
    s_test_blocks();
    s_test_caller_blocks();
    return check_summary();
}
