/* test_bingham - the Bingham sampler (src/mechanisms/bingham.c) against the exact
   distribution: a KS test in the angle for q = 2, second moments against a
   large importance-sampling reference for q = 5, the same tests failing for
   the wrong acceptance ratio (so they have power), acceptance rates, bad
   arguments. */
#include "check.h"
#include "cov_internal.h"
#include "dpsubspace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- q = 2: x = (cos phi, sin phi), target density on [0, 2 pi) in phi
   proportional to exp(-x^T A x) (uniform measure on the circle = d phi). */
#define GRID 200000
static double g_cdf[GRID + 1];

static double s_target2(const double *A, double phi)
{
    double c = cos(phi), s = sin(phi);
    return exp(-(A[0] * c * c + 2 * A[1] * c * s + A[3] * s * s));
}

/* CDF on a grid of GRID steps by the trapezoid rule (the integrand is smooth
   and periodic: the rule converges geometrically; error far below 1e-6). */
static void s_cdf2(const double *A)
{
    double h = 2 * M_PI / GRID, acc = 0, prev = s_target2(A, 0);
    g_cdf[0] = 0;
    for (int i = 1; i <= GRID; i++) {
        double f = s_target2(A, i * h);
        acc += 0.5 * h * (prev + f);
        g_cdf[i] = acc;
        prev = f;
    }
    for (int i = 0; i <= GRID; i++)
        g_cdf[i] /= acc;
}

static double s_cdf_at(double phi)
{
    double pos = phi / (2 * M_PI) * GRID;
    int i = (int)pos;
    if (i >= GRID)
        return 1.0;
    double f = pos - i;
    return g_cdf[i] * (1 - f) + g_cdf[i + 1] * f;
}

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* KS statistic of n draws of the sampler (variant) against the exact CDF. */
static double s_ks2(const double *A, int n, dps_rng *rng, int variant, double *acc_rate)
{
    double *phi = malloc(n * sizeof *phi);
    uint64_t props = 0;
    for (int i = 0; i < n; i++) {
        double x[2];
        uint64_t np = 0;
        if (bingham_sample_variant(A, 2, rng, x, &np, variant) != DPS_OK) {
            free(phi);
            return INFINITY;
        }
        props += np;
        double p = atan2(x[1], x[0]);
        phi[i] = p < 0 ? p + 2 * M_PI : p;
    }
    qsort(phi, n, sizeof *phi, s_cmp);
    double D = 0;
    for (int i = 0; i < n; i++) {
        double F = s_cdf_at(phi[i]);
        D = fmax(D, fmax((i + 1.0) / n - F, F - (double)i / n));
    }
    free(phi);
    if (acc_rate)
        *acc_rate = (double)n / (double)props;
    return D;
}

/* A = R diag(a) R^T for a random rotation R (QR of a Gaussian matrix by
   Gram-Schmidt). */
static void s_rotated(dps_rng *rng, const double *a, size_t q, double *A)
{
    double *R = malloc(q * q * sizeof *R);
    for (size_t i = 0; i < q; i++) {
        for (;;) {
            for (size_t j = 0; j < q; j++)
                R[i * q + j] = dps_rng_gaussian(rng, 1);
            for (size_t p = 0; p < i; p++) {
                double dt = 0;
                for (size_t j = 0; j < q; j++)
                    dt += R[i * q + j] * R[p * q + j];
                for (size_t j = 0; j < q; j++)
                    R[i * q + j] -= dt * R[p * q + j];
            }
            double nr = 0;
            for (size_t j = 0; j < q; j++)
                nr += R[i * q + j] * R[i * q + j];
            if (nr > 1e-6) {
                for (size_t j = 0; j < q; j++)
                    R[i * q + j] /= sqrt(nr);
                break;
            }
        }
    }
    for (size_t i = 0; i < q; i++)
        for (size_t j = 0; j < q; j++) {
            double s = 0;
            for (size_t p = 0; p < q; p++)
                s += R[p * q + i] * a[p] * R[p * q + j];
            A[i * q + j] = s;
        }
    for (size_t i = 0; i < q; i++) /* exactly symmetric */
        for (size_t j = i + 1; j < q; j++)
            A[j * q + i] = A[i * q + j];
    free(R);
}

/* E[x x^T] and its standard errors from n draws of the sampler. */
static int s_moments(const double *A, size_t q, int n, dps_rng *rng, int variant, double *m, double *se)
{
    double *s1 = calloc(q * q, sizeof *s1), *s2 = calloc(q * q, sizeof *s2), x[16];
    int rc = 0;
    for (int t = 0; t < n && !rc; t++) {
        rc = bingham_sample_variant(A, q, rng, x, NULL, variant);
        for (size_t i = 0; i < q * q; i++) {
            double v = x[i / q] * x[i % q];
            s1[i] += v;
            s2[i] += v * v;
        }
    }
    for (size_t i = 0; i < q * q; i++) {
        m[i] = s1[i] / n;
        se[i] = sqrt(fmax(0.0, s2[i] / n - m[i] * m[i]) / n);
    }
    free(s1);
    free(s2);
    return rc;
}

int main(void)
{
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 20260421);

    /* 1. q = 2, KS against the exact CDF in the angle.  n = 20000 draws; the
       KS critical value at level 0.001 is 1.949/sqrt(n) = 0.0138 (asymptotic
       Kolmogorov distribution; the grid CDF's error is < 1e-6).  The three A
       have eigenvalues (0, 0.5), (0, 5), (1, 41) at a random rotation. */
    const int nks = 20000;
    double crit = 1.949 / sqrt((double)nks);
    double pairs[3][2] = {{0, 0.5}, {0, 5}, {1, 41}};
    for (int c = 0; c < 3; c++) {
        double A[4], rate = 0;
        s_rotated(rng, pairs[c], 2, A);
        s_cdf2(A);
        double D = s_ks2(A, nks, rng, BINGHAM_CORRECT, &rate);
        NOTE("q=2 eig (%g, %g): KS D = %.4f (critical %.4f), acceptance %.3f", pairs[c][0], pairs[c][1], D, crit,
             rate);
        CHECK(D < crit, "q=2 KS %g >= %g for eig (%g, %g)", D, crit, pairs[c][0], pairs[c][1]);
        if (c >= 1) {
            /* The wrong ratio samples exp(-s)(1 + 2s/b)^(-2): far from the
               target when the eigenvalues differ by >= 5. */
            double Dw = s_ks2(A, nks, rng, BINGHAM_WRONG, NULL);
            NOTE("q=2 eig (%g, %g): WRONG variant KS D = %.4f", pairs[c][0], pairs[c][1], Dw);
            CHECK(Dw > crit, "the KS test has no power against the wrong variant: %g", Dw);
        }
    }

    /* 2. q = 5: E[x x^T] against an importance-sampling reference: N = 2e6
       uniform points on S^4 weighted by exp(-x^T A x); the ratio estimator's
       standard error per entry by the delta method.  The sampler's 50000
       draws give their own standard error; every entry must agree within
       5 combined standard errors (25 entries: a false alarm has probability
       < 25 * 6e-7). */
    {
        const size_t q = 5;
        double a[5] = {0, 0.5, 2, 5, 12}, A[25], ref[25], rse[25], m[25], se[25];
        s_rotated(rng, a, q, A);
        const int nref = 2000000;
        double sw = 0, sw2 = 0, swx[25] = {0}, sw2x2[25] = {0}, sw2x[25] = {0};
        for (int t = 0; t < nref; t++) {
            double x[5], nr = 0;
            for (size_t j = 0; j < q; j++) {
                x[j] = dps_rng_gaussian(rng, 1);
                nr += x[j] * x[j];
            }
            nr = sqrt(nr);
            double s = 0;
            for (size_t j = 0; j < q; j++)
                x[j] /= nr;
            for (size_t i = 0; i < q; i++)
                for (size_t j = 0; j < q; j++)
                    s += x[i] * A[i * q + j] * x[j];
            double w = exp(-s);
            sw += w;
            sw2 += w * w;
            for (size_t i = 0; i < q * q; i++) {
                double v = x[i / q] * x[i % q];
                swx[i] += w * v;
                sw2x[i] += w * w * v;
                sw2x2[i] += w * w * v * v;
            }
        }
        for (size_t i = 0; i < q * q; i++) {
            ref[i] = swx[i] / sw;
            /* var of sum w (v - ref) / sum w */
            double num = sw2x2[i] - 2 * ref[i] * sw2x[i] + ref[i] * ref[i] * sw2;
            rse[i] = sqrt(fmax(0.0, num)) / sw;
        }
        CHECK(s_moments(A, q, 50000, rng, BINGHAM_CORRECT, m, se) == DPS_OK, "q=5 draws");
        double worst = 0, worst_w = 0;
        double mw[25], sew[25];
        for (size_t i = 0; i < q * q; i++)
            worst = fmax(worst, fabs(m[i] - ref[i]) / sqrt(se[i] * se[i] + rse[i] * rse[i]));
        CHECK(worst < 5, "q=5 E[xx^T] off by %.2f standard errors", worst);
        CHECK(s_moments(A, q, 50000, rng, BINGHAM_WRONG, mw, sew) == DPS_OK, "q=5 wrong draws");
        for (size_t i = 0; i < q * q; i++)
            worst_w = fmax(worst_w, fabs(mw[i] - ref[i]) / sqrt(sew[i] * sew[i] + rse[i] * rse[i]));
        NOTE("q=5 eig (0, .5, 2, 5, 12): E[xx^T] within %.2f se of the reference; WRONG variant off by %.1f se",
             worst, worst_w);
        CHECK(worst_w > 5, "the moment test has no power against the wrong variant: %.2f", worst_w);
    }

    /* 3. A = 0: b = q, Omega = I, M = 1: every proposal is accepted. */
    {
        double A[9] = {0}, x[3];
        uint64_t np = 0, tot = 0;
        for (int t = 0; t < 1000; t++) {
            CHECK(dps_bingham_sample(A, 3, rng, x, &np) == DPS_OK, "A=0");
            tot += np;
        }
        CHECK(tot == 1000, "A = 0 must accept every proposal: %llu", (unsigned long long)tot);
    }

    /* 4. b solves sum 1/(b + 2 a_j) = 1 (to 1e-12). */
    {
        double a[4] = {0, 1, 3, 100};
        double b = bingham_solve_b(a, 4), s = 0;
        for (int j = 0; j < 4; j++)
            s += 1 / (b + 2 * a[j]);
        CHECK(fabs(s - 1) < 1e-12 && b >= 1 && b <= 4, "b = %g, sum %g", b, s);
    }

    /* 5. Acceptance rates (accepted / proposals), for the log: eigenvalues
       0..kappa evenly spread ("spread") or (0, kappa, ..., kappa) ("spike"). */
    {
        size_t qs[] = {2, 5, 10, 20, 50};
        double kappas[] = {1, 100, 10000};
        for (size_t iq = 0; iq < sizeof qs / sizeof *qs; iq++) {
            size_t q = qs[iq];
            double *A = calloc(q * q, sizeof *A), *x = malloc(q * sizeof *x);
            char line[512];
            int pos = snprintf(line, sizeof line, "acceptance q=%-2zu", q);
            for (int shape = 0; shape < 2; shape++)
                for (size_t ik = 0; ik < 3; ik++) {
                    for (size_t j = 0; j < q; j++)
                        A[j * q + j] = shape == 0 ? kappas[ik] * (double)j / (double)(q - 1)
                                                  : (j == 0 ? 0 : kappas[ik]);
                    int draws = q >= 20 ? 300 : 2000;
                    uint64_t props = 0, np = 0;
                    int ok = 1;
                    for (int t = 0; t < draws; t++) {
                        ok &= dps_bingham_sample(A, q, rng, x, &np) == DPS_OK;
                        props += np;
                    }
                    CHECK(ok, "acceptance run q=%zu", q);
                    pos += snprintf(line + pos, sizeof line - pos, " %s k=%g: %.3f", shape ? "spike" : "spread",
                                    kappas[ik], (double)draws / (double)props);
                }
            NOTE("%s", line);
            free(A);
            free(x);
        }
    }

    /* 6. q = 1 (S^0) and bad arguments. */
    {
        double A1 = 3, x[3];
        int plus = 0;
        for (int t = 0; t < 200; t++) {
            CHECK(dps_bingham_sample(&A1, 1, rng, x, NULL) == DPS_OK && fabs(fabs(x[0]) - 1) == 0, "q=1");
            plus += x[0] > 0;
        }
        /* Binomial(200, 1/2): 5 sd = 35. */
        CHECK(plus > 65 && plus < 135, "q=1 signs uniform: %d of 200", plus);
        double nonsym[4] = {1, 2, 0, 1}, neg[4] = {-1, 0, 0, 0}, nan[4] = {NAN, 0, 0, 0}, ok4[4] = {1, 0, 0, 2};
        CHECK(dps_bingham_sample(nonsym, 2, rng, x, NULL) == DPS_EINVAL, "not symmetric");
        CHECK(dps_bingham_sample(neg, 2, rng, x, NULL) == DPS_EINVAL, "not PSD");
        CHECK(dps_bingham_sample(nan, 2, rng, x, NULL) == DPS_EINVAL, "NaN");
        CHECK(dps_bingham_sample(ok4, 0, rng, x, NULL) == DPS_EINVAL, "q = 0");
        CHECK(dps_bingham_sample(NULL, 2, rng, x, NULL) == DPS_EINVAL, "NULL A");
        CHECK(dps_bingham_sample(ok4, 2, NULL, x, NULL) == DPS_EINVAL, "NULL rng");
        CHECK(dps_bingham_sample(ok4, 2, rng, NULL, NULL) == DPS_EINVAL, "NULL x");
        CHECK(dps_bingham_sample(ok4, DPS_COV_MAX_D + 1, rng, x, NULL) == DPS_ELIMIT, "q above the limit");
    }

    dps_rng_destroy(&rng);
    return check_summary();
}
