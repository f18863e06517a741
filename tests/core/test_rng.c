/* test_rng - the random sources and samplers against their distributions. */
#include "check.h"
#include "dpsubspace.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double s_normal_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }
static double s_laplace_cdf(double x) { return x < 0 ? 0.5 * exp(x) : 1 - 0.5 * exp(-x); }

/* Kolmogorov-Smirnov statistic of sorted samples against cdf. */
static double s_ks(double *x, size_t n, double (*cdf)(double))
{
    qsort(x, n, sizeof *x, s_cmp);
    double dmax = 0;
    for (size_t i = 0; i < n; i++) {
        double f = cdf(x[i]);
        double a = fabs(f - (double)i / n), b = fabs((double)(i + 1) / n - f);
        dmax = fmax(dmax, fmax(a, b));
    }
    return dmax;
}

int main(void)
{
    enum { N = 200000 };
    double *x = malloc(N * sizeof *x);
    dps_rng *r = NULL;
    CHECK(dps_rng_new_seeded(&r, 42) == DPS_OK, "seeded");
    CHECK(dps_rng_is_seeded(r) == 1, "seeded flag");

    /* Gaussian: KS against N(0,1).  For n = 2e5 the KS critical value at
       p = 0.001 is 1.95/sqrt(n) = 0.0044 (asymptotic Kolmogorov distribution). */
    for (size_t i = 0; i < N; i++)
        x[i] = dps_rng_gaussian(r, 1.0);
    double mean = 0, var = 0;
    for (size_t i = 0; i < N; i++)
        mean += x[i];
    mean /= N;
    for (size_t i = 0; i < N; i++)
        var += (x[i] - mean) * (x[i] - mean);
    var /= N - 1;
    /* mean ~ N(0, 1/n): 5 sd = 5/sqrt(2e5) = 0.011; var sd = sqrt(2/n) = 0.0032, 5 sd = 0.016. */
    CHECK(fabs(mean) < 0.011, "gaussian mean %g", mean);
    CHECK(fabs(var - 1) < 0.016, "gaussian var %g", var);
    double ks = s_ks(x, N, s_normal_cdf);
    NOTE("gaussian KS D = %.5f (critical 0.0044)", ks);
    CHECK(ks < 1.95 / sqrt((double)N), "gaussian KS %g", ks);
    /* sigma scales: sd of sigma*Z */
    double sq = 0;
    for (size_t i = 0; i < N; i++) {
        double v = dps_rng_gaussian(r, 3.0);
        sq += v * v;
    }
    sq /= N;
    CHECK(fabs(sq / 9.0 - 1) < 0.016, "gaussian sigma=3 var ratio %g", sq / 9.0);

    /* Laplace(0, 1): var 2; KS against the Laplace cdf. */
    for (size_t i = 0; i < N; i++)
        x[i] = dps_rng_laplace(r, 1.0);
    double lv = 0;
    for (size_t i = 0; i < N; i++)
        lv += x[i] * x[i];
    lv /= N;
    /* var of X^2 for Laplace(1) is E X^4 - 4 = 24 - 4 = 20: sd of the mean of X^2 = sqrt(20/n) = 0.01; 5 sd = 0.05 */
    CHECK(fabs(lv - 2) < 0.05, "laplace var %g", lv);
    ks = s_ks(x, N, s_laplace_cdf);
    NOTE("laplace KS D = %.5f (critical 0.0044)", ks);
    CHECK(ks < 1.95 / sqrt((double)N), "laplace KS %g", ks);

    /* Uniform in (0,1): never 0 or 1; KS against identity. */
    int in_range = 1;
    for (size_t i = 0; i < N; i++) {
        x[i] = dps_rng_uniform(r);
        in_range &= x[i] > 0 && x[i] < 1;
    }
    CHECK(in_range, "uniform in (0,1)");
    for (size_t i = 0; i < N; i++)
        x[i] = s_normal_cdf(0) * 0 + x[i]; /* identity cdf below */
    qsort(x, N, sizeof *x, s_cmp);
    double du = 0;
    for (size_t i = 0; i < N; i++)
        du = fmax(du, fmax(fabs(x[i] - (double)i / N), fabs((double)(i + 1) / N - x[i])));
    CHECK(du < 1.95 / sqrt((double)N), "uniform KS %g", du);

    /* below(n): chi-square over 7 cells, 6 dof: p = 0.001 critical value 22.46. */
    long cnt[7] = {0};
    for (size_t i = 0; i < 70000; i++)
        cnt[dps_rng_below(r, 7)]++;
    double chi = 0;
    for (int i = 0; i < 7; i++)
        chi += (cnt[i] - 10000.0) * (cnt[i] - 10000.0) / 10000.0;
    CHECK(chi < 22.46, "below chi2 %g", chi);
    CHECK(dps_rng_below(r, 1) == 0, "below(1)");

    /* Reproducibility: same seed same stream; different seeds/labels differ. */
    dps_rng *a = NULL, *b = NULL, *c = NULL, *l1 = NULL, *l2 = NULL;
    dps_rng_new_seeded(&a, 7);
    dps_rng_new_seeded(&b, 7);
    dps_rng_new_seeded(&c, 8);
    int same = 1, differ = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t va = dps_rng_u64(a), vb = dps_rng_u64(b), vc = dps_rng_u64(c);
        same &= va == vb;
        differ |= va != vc;
    }
    CHECK(same, "same seed, same stream");
    CHECK(differ, "different seeds differ");
    dps_rng_new_labelled(&l1, 7, "reference-points", 3);
    dps_rng_new_labelled(&l2, 7, "reference-points", 4);
    CHECK(dps_rng_u64(l1) != dps_rng_u64(l2), "labelled index separates streams");
    dps_rng *f1 = NULL, *f2 = NULL;
    CHECK(dps_rng_fork(a, &f1) == DPS_OK && dps_rng_fork(a, &f2) == DPS_OK, "fork");
    CHECK(dps_rng_u64(f1) != dps_rng_u64(f2), "forks differ");
    CHECK(dps_rng_is_seeded(f1), "fork of seeded is seeded");
    { /* rng_rekey is dps_rng_fork without the allocation: the same stream from the same parent state, whatever
         the child held before (here a used secure generator), and the parent's mode */
        dps_rng *p1 = NULL, *p2 = NULL, *forked = NULL, *rekeyed = NULL;
        dps_rng_new_seeded(&p1, 21);
        dps_rng_new_seeded(&p2, 21);
        dps_rng_new_secure(&rekeyed);
        dps_rng_gaussian(rekeyed, 1.0); /* leaves a spare normal and a used buffer behind */
        dps_rng_fork(p1, &forked);
        rng_rekey(rekeyed, p2);
        int same_stream = dps_rng_is_seeded(rekeyed);
        for (int i = 0; i < 300; i++) /* past one keystream buffer, and the Gaussians' spare */
            same_stream &= dps_rng_gaussian(forked, 1.0) == dps_rng_gaussian(rekeyed, 1.0);
        same_stream &= dps_rng_u64(p1) == dps_rng_u64(p2); /* the parents moved alike */
        CHECK(same_stream, "rng_rekey is dps_rng_fork's stream");
        dps_rng_destroy(&p1);
        dps_rng_destroy(&p2);
        dps_rng_destroy(&forked);
        dps_rng_destroy(&rekeyed);
    }

    /* Secure mode: not seeded, two sources differ. */
    dps_rng *s1 = NULL, *s2 = NULL;
    CHECK(dps_rng_new_secure(&s1) == DPS_OK && dps_rng_new_secure(&s2) == DPS_OK, "secure");
    CHECK(!dps_rng_is_seeded(s1), "secure flag");
    CHECK(dps_rng_u64(s1) != dps_rng_u64(s2), "secure sources differ");
    dps_rng *sf = NULL;
    dps_rng_fork(s1, &sf);
    CHECK(!dps_rng_is_seeded(sf), "fork of secure is secure");

    /* The fills (and add) draw the keystream in blocks: they must give exactly
       the values (bits) of one dps_rng_gaussian call per sample, and leave the
       same spare, for lengths odd and even, below and across a block (128
       pairs) and a keystream refill, with a spare pending at the start. */
    {
        static const size_t lens[] = {1, 2, 3, 255, 256, 257, 1000, 4097};
        double *want = malloc(4097 * sizeof *want), *got = malloc(4097 * sizeof *got), *sum = malloc(4097 * sizeof *sum);
        float *gotf = malloc(4097 * sizeof *gotf);
        dps_rng *g1 = NULL, *g2 = NULL, *g3 = NULL, *g4 = NULL;
        dps_rng_new_seeded(&g1, 11);
        dps_rng_new_seeded(&g2, 11);
        dps_rng_new_seeded(&g3, 11);
        dps_rng_new_seeded(&g4, 11);
        size_t bad = 0, badf = 0, bada = 0;
        for (size_t t = 0; t < sizeof lens / sizeof *lens; t++) {
            size_t n = lens[t];
            double sigma = 0.5 + (double)t;
            for (size_t i = 0; i < n; i++)
                want[i] = dps_rng_gaussian(g1, sigma);
            dps_rng_gaussian_fill(g2, sigma, got, n);
            dps_rng_gaussian_fill_f(g3, sigma, gotf, n);
            for (size_t i = 0; i < n; i++)
                sum[i] = 0.25 * (double)i;
            dps_rng_gaussian_add(g4, sigma, sum, n);
            for (size_t i = 0; i < n; i++) {
                double wa = 0.25 * (double)i + want[i];
                bada += memcmp(&wa, &sum[i], sizeof wa) != 0;
                bad += memcmp(&want[i], &got[i], sizeof *got) != 0;
                float wf = (float)want[i];
                badf += memcmp(&wf, &gotf[i], sizeof wf) != 0;
            }
        }
        double w1 = dps_rng_gaussian(g1, 1.0), w2 = dps_rng_gaussian(g2, 1.0), w3 = dps_rng_gaussian(g3, 1.0),
               w4 = dps_rng_gaussian(g4, 1.0);
        CHECK(bad == 0 && badf == 0 && bada == 0, "fills differ from single draws: %zu doubles, %zu floats, %zu adds",
              bad, badf, bada);
        CHECK(w1 == w2 && w1 == w3 && w1 == w4, "the streams continue alike after the fills (spare and keystream)");
        dps_rng_destroy(&g1);
        dps_rng_destroy(&g2);
        dps_rng_destroy(&g3);
        dps_rng_destroy(&g4);
        free(want); free(got); free(gotf); free(sum);
    }

    dps_rng *all[] = {r, a, b, c, l1, l2, f1, f2, s1, s2, sf};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        dps_rng_destroy(&all[i]);
    CHECK(all[0] == NULL, "destroy nulls");
    free(x);
    return check_summary();
}
