/* test_wfc - the pieces of the weighted FriendlyCore proof (src/mechanisms/wfc.c):
   friend counts, weights, |W - W'| <= 1/alpha + 1 and
   ||mu - mu'|| <= (2r/alpha + 4r)/max(W, W') on adversarial neighbours,
   the failure branch, and the noise scales. */
#include "check.h"
#include "dpsubspace.h"
#include "wfc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { T = 11, DIM = 2 };

static void s_d2(const double *y, size_t t, double *D2)
{
    for (size_t i = 0; i < t; i++)
        for (size_t j = 0; j < t; j++) {
            double s = 0;
            for (int c = 0; c < DIM; c++)
                s += (y[i * DIM + c] - y[j * DIM + c]) * (y[i * DIM + c] - y[j * DIM + c]);
            D2[i * t + j] = s;
        }
}

/* W and mu of the WFC at radius r. */
static double s_wfc_mean(const double *y, size_t t, double r, double alpha, double *mu)
{
    double D2[T * T], w[T];
    size_t c[T];
    s_d2(y, t, D2);
    wfc_friend_counts(D2, t, r, c);
    double W = wfc_weights(c, t, alpha, w);
    for (int k = 0; k < DIM; k++) {
        mu[k] = 0;
        for (size_t i = 0; i < t; i++)
            mu[k] += w[i] * y[i * DIM + k];
        mu[k] = W > 0 ? mu[k] / W : 0;
    }
    return W;
}

int main(void)
{
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 3);

    /* 1. Friend counts and weights by hand: points 0, .1, .2, 5, 10 on a line,
       r = 0.15; t = 5, alpha = 1/2: w = clamp((c - 3)/2, 0, 1). */
    {
        double pos[5] = {0, 0.1, 0.2, 5, 10}, D2[25], w[5];
        size_t c[5];
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 5; j++)
                D2[i * 5 + j] = (pos[i] - pos[j]) * (pos[i] - pos[j]);
        wfc_friend_counts(D2, 5, 0.15, c);
        CHECK(c[0] == 2 && c[1] == 3 && c[2] == 2 && c[3] == 1 && c[4] == 1, "counts %zu %zu %zu %zu %zu", c[0],
              c[1], c[2], c[3], c[4]);
        /* D2 holds upper bounds, so a friend must be strictly inside r (with
           a margin of 2^-50 for the rounding of r^2): at r = 5 exactly the
           point at distance 5 is not one, just above it is. */
        wfc_friend_counts(D2, 5, 5.0, c);
        CHECK(c[0] == 3 && c[3] == 3 && c[4] == 1, "counts r=5: the points at distance exactly 5 are not friends");
        wfc_friend_counts(D2, 5, 5.0 * (1 + 0x1p-45), c); /* 0,.1,.2,5 within 5 of each other; 10 of 5 */
        CHECK(c[0] == 4 && c[3] == 5 && c[4] == 2, "counts r=5+");
        double W = wfc_weights(c, 5, 0.5, w);
        /* c = 4,4,4,5,2 -> w = .5,.5,.5,1,0 */
        CHECK(fabs(W - 2.5) < 1e-12 && w[3] == 1 && w[4] == 0 && fabs(w[0] - 0.5) < 1e-12, "weights W=%g", W);
    }

    /* 2. Adversarial neighbours.  Random clusters in the plane whose friend
       counts sit near the threshold (t+1)/2; replace one item by each point of
       a grid (the adversary's search) and keep the worst ratios. */
    {
        double alpha_list[3] = {0.5, 0.25, 1.0};
        double worst_w = 0, worst_mu = 0;
        for (int ai = 0; ai < 3; ai++) {
            double alpha = alpha_list[ai];
            for (int trial = 0; trial < 60; trial++) {
                double y[T * DIM], y2[T * DIM], mu[DIM], mu2[DIM], r = 1.0;
                for (int i = 0; i < T; i++) {
                    /* two clusters of 6 and 5 at distance ~1.5, spread ~0.6 */
                    double cx = (i < 6) ? 0 : 1.5;
                    y[i * DIM] = cx + dps_rng_gaussian(rng, 0.4);
                    y[i * DIM + 1] = dps_rng_gaussian(rng, 0.4);
                }
                double W = s_wfc_mean(y, T, r, alpha, mu);
                int k = (int)dps_rng_below(rng, T);
                for (int gx = -8; gx <= 12; gx++)
                    for (int gy = -8; gy <= 8; gy++) {
                        memcpy(y2, y, sizeof y);
                        y2[k * DIM] = gx * 0.25;
                        y2[k * DIM + 1] = gy * 0.25;
                        double W2 = s_wfc_mean(y2, T, r, alpha, mu2);
                        double dw = fabs(W - W2) / wfc_weight_sensitivity(alpha);
                        worst_w = fmax(worst_w, dw);
                        double Wmax = fmax(W, W2);
                        if (Wmax > 0 && W > 0 && W2 > 0) {
                            double dm = hypot(mu[0] - mu2[0], mu[1] - mu2[1]);
                            double bound = (2 * r / alpha + 4 * r) / Wmax;
                            worst_mu = fmax(worst_mu, dm / bound);
                        }
                    }
            }
        }
        NOTE("adversarial neighbours: max |W-W'|/(1/alpha+1) = %.3f, max ||mu-mu'||/bound = %.3f", worst_w, worst_mu);
        CHECK(worst_w <= 1.0 + 1e-12, "weight sensitivity bound broken: %g", worst_w);
        CHECK(worst_mu <= 1.0 + 1e-12, "mean sensitivity bound broken: %g", worst_mu);
        CHECK(worst_w > 0.3, "the search reached boundary cases (ratio %g)", worst_w);
    }

    /* 3. Grid and query count: xi_min 1e-6 .. xi_max 1 -> 21 radii, S = 5. */
    CHECK(wfc_grid_size(1e-6, 1.0) == 21, "grid size %zu", wfc_grid_size(1e-6, 1.0));
    CHECK(wfc_grid_size(1.0, 1.0) == 1, "grid of one");

    /* 4. A tight cluster with a big budget: released, small radius, scales as stated. */
    size_t t = 100;
    double *D2 = malloc(t * t * sizeof *D2), *w = malloc(t * sizeof *w);
    double *pts = malloc(t * sizeof *pts);
    for (size_t i = 0; i < t; i++)
        pts[i] = i < 90 ? dps_rng_gaussian(rng, 1e-3) : 10 + i;
    for (size_t i = 0; i < t; i++)
        for (size_t j = 0; j < t; j++)
            D2[i * t + j] = (pts[i] - pts[j]) * (pts[i] - pts[j]);
    wfc_params p = {.alpha = 0.5, .tau = 0.5, .rho_search = 2, .rho_count = 1, .rho_mean = 7,
                    .delta1 = 1e-5, .xi_min = 1e-6, .xi_max = 1000};
    wfc_result res;
    CHECK(wfc_run(D2, t, &p, rng, w, &res) == DPS_OK, "run");
    NOTE("cluster of 90 (sd 1e-3) + 10 outliers: r = %.3g, W = %.2f, W^ = %.2f, L = %.2f, queries %zu",
         res.radius, res.W, res.W_hat, res.L, res.queries);
    CHECK(!res.failed, "released");
    CHECK(res.radius > 1e-3 && res.radius < 0.05, "radius fits the cluster: %g", res.radius);
    CHECK(res.grid_points == 31 && res.queries == 5, "grid of 31 radii (1e-6 .. 1073) needs ceil(log2 31) = 5 queries: %zu, %zu", res.grid_points, res.queries);
    CHECK(fabs(res.s_W - 3.0 / sqrt(2.0)) < 1e-12, "s_W = (1/alpha+1)/sqrt(2 rho_W)");
    CHECK(fabs(res.L - (res.W_hat - res.s_W * sqrt(2 * log(1e5)))) < 1e-9, "L");
    CHECK(fabs(res.s_mu - (8.0 * res.radius / res.L) / sqrt(14.0)) < 1e-12, "s_mu = ((2/a+4) r/L)/sqrt(2 rho_mu)");
    for (size_t i = 90; i < t; i++)
        CHECK(w[i] == 0, "outlier %zu has weight 0", i);

    /* 5. The noise on W is N(0, s_W^2): 4000 runs; the sample variance of
       W^ - W over n = 4000 has relative sd sqrt(2/n) = 0.022: accept +-0.1 (4.5 sd). */
    {
        double ss = 0, sum = 0;
        int n = 4000;
        wfc_params pq = p;
        pq.rho_count = 0.5; /* s_W = 3 */
        for (int i = 0; i < n; i++) {
            wfc_run(D2, t, &pq, rng, w, &res);
            double e = res.W_hat - res.W;
            ss += e * e;
            sum += e;
        }
        double var = ss / n;
        NOTE("W^ - W: mean %.3f, variance %.3f (stated 9)", sum / n, var);
        CHECK(fabs(var / 9.0 - 1) < 0.1, "noise variance %g", var);
        CHECK(fabs(sum / n) < 5 * 3 / sqrt((double)n), "noise mean %g", sum / n);
    }

    /* 6. Failure branch: t = 10 spread points, tiny rho_W: L < 1 -> FAIL and no
       mean noise prescribed.  s_W = 3/sqrt(0.02) = 21, L ~ W - 102 < 1 always
       unless the noise exceeds 4.3 sd. */
    {
        size_t t2 = 10;
        double D[100], ww[10];
        for (size_t i = 0; i < t2; i++)
            for (size_t j = 0; j < t2; j++)
                D[i * t2 + j] = (double)(i - j) * (double)(i - j);
        wfc_params pf = p;
        pf.rho_count = 0.01;
        int fails = 0;
        for (int i = 0; i < 50; i++) {
            wfc_run(D, t2, &pf, rng, ww, &res);
            fails += res.failed;
            if (res.failed)
                CHECK(res.s_mu == 0, "failed: no mean");
        }
        CHECK(fails == 50, "fails %d / 50", fails);
    }

    /* 7. Bad parameters refused. */
    wfc_params bad = p;
    bad.alpha = 0;
    CHECK(wfc_run(D2, t, &bad, rng, w, &res) == DPS_EINVAL, "alpha 0");
    CHECK(wfc_run(D2, 1, &p, rng, w, &res) == DPS_EINVAL, "t = 1");

    free(D2); free(w); free(pts);
    dps_rng_destroy(&rng);
    return check_summary();
}
