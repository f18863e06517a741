/* test_aggregate - the aggregators' distance identities against explicit items,
   the parallel Gram's determinism, and both aggregators on agreeing buckets. */
#include "aggregate.h"
#include "check.h"
#include "dpsubspace.h"
#include "linalg.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* t bases near a common one: V_j = orth(V0 + eps G_j). */
static void s_bases(dps_rng *rng, float *V, size_t t, size_t k, size_t d, double eps, float *V0)
{
    dps_rng_gaussian_fill_f(rng, 1.0, V0, k * d);
    la_orthonormalize_rows(V0, k, d);
    for (size_t j = 0; j < t; j++) {
        float *Vj = V + j * k * d;
        for (size_t i = 0; i < k * d; i++)
            Vj[i] = V0[i] + (float)(eps * dps_rng_gaussian(rng, 1.0));
        la_orthonormalize_rows(Vj, k, d);
    }
}

static double f2_of(const float *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return s;
}

/* Exact squared distances of near-identical items, in long double from the
   explicit items (products of floats are exact there with a 64-bit
   significand; each item entry sums k of them, so each difference carries at
   most 2 k 2^-64 max|y| ~ 1e-20 of error against differences ~1e-8: about
   1e-12 relative, and the squares and sums add (q d + 2) 2^-64: far below the
   1e-9 relative the caller allows).  proj: items V_j^T V_j (d x d), else
   A_j^T V_j (q x d).  Needs long double wider than double (checked). */
static long double s_exact_d2(const float *V, const float *A, size_t j, size_t l, size_t k, size_t d, size_t q,
                              int proj)
{
    size_t rows = proj ? d : q;
    long double s = 0;
    for (size_t i = 0; i < rows; i++)
        for (size_t c = 0; c < d; c++) {
            long double yj = 0, yl = 0;
            for (size_t a = 0; a < k; a++) {
                const float *Lj = proj ? V + j * k * d + a * d + i : A + j * k * q + a * q + i;
                const float *Ll = proj ? V + l * k * d + a * d + i : A + l * k * q + a * q + i;
                yj += (long double)*Lj * V[j * k * d + a * d + c];
                yl += (long double)*Ll * V[l * k * d + a * d + c];
            }
            s += (yj - yl) * (yj - yl);
        }
    return s;
}

int main(void)
{
    dps_rng *rng = NULL;
    dps_rng_new_seeded(&rng, 5);
    dps_pool *pool = pool_new(2);
    size_t t = 12, k = 3, d = 400, q = 30, n = t * k;
    float *V = malloc(t * k * d * sizeof *V), *V0 = malloc(k * d * sizeof *V0);
    s_bases(rng, V, t, k, d, 1e-3, V0);
    float *P = malloc(q * d * sizeof *P), *A = malloc(t * k * q * sizeof *A);
    dps_rng_gaussian_fill_f(rng, 1.0, P, q * d);
    for (size_t j = 0; j < t; j++)
        la_project_reference(V + j * k * d, k, d, P, q, A + j * k * q);

    /* 1. Gram: parallel lanes equal a direct double computation; same bits on
       a pool of another size. */
    double *G = malloc(n * n * sizeof *G), *G1 = malloc(n * n * sizeof *G1);
    agg_ws *ws = agg_ws_new(60, k, q, d, 2, 1); /* room for part 4's 60 buckets */
    CHECK(ws != NULL, "workspace");
    CHECK(agg_gram(pool, ws, V, n, d, G) == DPS_OK, "gram");
    dps_pool *pool1 = pool_new(1);
    agg_gram(pool1, ws, V, n, d, G1);
    CHECK(memcmp(G, G1, n * n * sizeof *G) == 0, "gram identical with 1 or 2 workers");
    pool_free(&pool1);
    double worst = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0;
            for (size_t c = 0; c < d; c++)
                s += (double)V[i * d + c] * V[j * d + c];
            worst = fmax(worst, fabs(s - G[i * n + j]));
        }
    CHECK(worst < 1e-12, "gram %g", worst);

    /* 2. Reference distances against the explicit items y^j = A_j^T V_j (q x d). */
    agg_input in = {V, A, t, k, d, q, 1.0};
    double *D2 = malloc(t * t * sizeof *D2);
    CHECK(agg_distances_reference(&in, G, D2, NULL) == DPS_OK, "distances");
    double *Y = malloc(t * q * d * sizeof *Y);
    for (size_t j = 0; j < t; j++)
        for (size_t i = 0; i < q; i++)
            for (size_t c = 0; c < d; c++) {
                double s = 0;
                for (size_t a = 0; a < k; a++)
                    s += (double)A[j * k * q + a * q + i] * V[j * k * d + a * d + c];
                Y[j * q * d + i * d + c] = s;
            }
    double rel = 0, mind = INFINITY;
    for (size_t j = 0; j < t; j++)
        for (size_t l = j + 1; l < t; l++) {
            double s = 0;
            for (size_t i = 0; i < q * d; i++) {
                double e = Y[j * q * d + i] - Y[l * q * d + i];
                s += e * e;
            }
            rel = fmax(rel, fabs(s - D2[j * t + l]) / s);
            mind = fmin(mind, s);
        }
    NOTE("reference distances: smallest ||y^j - y^l||^2 = %.3e, worst relative error %.2e", mind, rel);
    /* The items differ by ~1e-3 while ||y^j||^2 ~ kq = 90: the Gram identity in
       double keeps relative error ~1e-16 * 90 / 1e-4 ~ 1e-10. */
    CHECK(rel < 1e-6, "reference distance identity %g", rel);

    /* 2b. The distances are certified upper bounds (what WFC's friend test
       needs: aggregate.c, "certified distance bounds").  Near-identical bases
       (perturbations of 1e-7: exact squared distances ~1e-12 against
       ||y^j||^2 ~ kq = 90) put the computed s_j + s_l - 2 c_jl near the level
       of its rounding: without the bound's margin this check fails (checked
       by removing it: all 36 pairs below the exact value, by 1e-15 to 2e-13;
       the near-identical items share their roundings' pattern).  The margin
       must also stay small: below 1e-9 (the bound is about 1e-13 (X_j +
       X_l)^2 here, X_j ~ k sqrt(q): 1.1e-10 reference, 6.6e-12 projection). */
    CHECK(LDBL_MANT_DIG >= 64, "long double has %d significant bits: part 2b needs 64", LDBL_MANT_DIG);
    if (LDBL_MANT_DIG >= 64) {
        size_t t3 = 9, n3 = t3 * k;
        float *W = malloc(n3 * d * sizeof *W), *A3 = malloc(t3 * k * q * sizeof *A3), *V3 = malloc(k * d * sizeof *V3);
        double *G3 = malloc(n3 * n3 * sizeof *G3), *U = malloc(t3 * t3 * sizeof *U);
        s_bases(rng, W, t3, k, d, 1e-7, V3);
        for (size_t j = 0; j < t3; j++)
            la_project_reference(W + j * k * d, k, d, P, q, A3 + j * k * q);
        CHECK(agg_gram(pool, ws, W, n3, d, G3) == DPS_OK, "gram (near-identical bases)");
        agg_input in3 = {W, A3, t3, k, d, q, 1.0};
        for (int proj = 0; proj < 2; proj++) {
            if (proj)
                CHECK(agg_distances_projection(&in3, G3, U) == DPS_OK, "projection distances (near-identical)");
            else
                CHECK(agg_distances_reference(&in3, G3, U, pool) == DPS_OK, "distances (near-identical)");
            size_t below = 0;
            double worst_margin = 0, smallest = INFINITY;
            for (size_t j = 0; j < t3; j++)
                for (size_t l = j + 1; l < t3; l++) {
                    long double ex = s_exact_d2(W, A3, j, l, k, d, q, proj);
                    below += (long double)U[j * t3 + l] < ex * (1 - 1e-9L);
                    worst_margin = fmax(worst_margin, (double)((long double)U[j * t3 + l] - ex));
                    smallest = fmin(smallest, (double)ex);
                }
            NOTE("%s distances of near-identical items: smallest exact %.2e, largest margin %.2e", proj ? "projection" : "reference",
                 smallest, worst_margin);
            CHECK(below == 0, "%s: %zu bounds below the exact squared distance", proj ? "projection" : "reference", below);
            CHECK(worst_margin < 1e-9, "%s: margin %g too loose", proj ? "projection" : "reference", worst_margin);
        }
        free(W); free(A3); free(V3); free(G3); free(U);
    }

    /* 3. Projection distances against ||Pi_j - Pi_l||_F^2 built explicitly. */
    CHECK(agg_distances_projection(&in, G, D2) == DPS_OK, "projection distances");
    rel = 0;
    for (size_t j = 0; j < t; j++)
        for (size_t l = j + 1; l < t; l++) {
            double s = 0;
            for (size_t a = 0; a < d; a++)
                for (size_t b = 0; b < d; b++) {
                    double pj = 0, pl = 0;
                    for (size_t c = 0; c < k; c++) {
                        pj += (double)V[j * k * d + c * d + a] * V[j * k * d + c * d + b];
                        pl += (double)V[l * k * d + c * d + a] * V[l * k * d + c * d + b];
                    }
                    s += (pj - pl) * (pj - pl);
                }
            rel = fmax(rel, fabs(s - D2[j * t + l]) / s);
        }
    CHECK(rel < 1e-6, "projection distance identity %g", rel);

    /* 4. Both aggregators on agreeing buckets, against a bound derived from
       the run's own noise scale.  Reference: the released basis spans the top-k
       right singular subspace of Z = y* + B + N, y* = P Pi0 (rank k), B the bias
       of the weighted mean (||B||_2 <= max_j ||y^j - y*||_F), N Gaussian q x d
       with sd s_mu, ||N||_2 <= s_mu (sqrt q + sqrt d + sqrt(2 ln 1e6)) with
       probability 1 - 1e-6 (Davidson-Szarek).  Wedin: sin <= E / (s_k(y*) - E),
       E = ||B|| + ||N||.  Projection: symmetric noise (N + N^T)/2 has norm <=
       s_mu (2 sqrt d + sqrt(2 ln 1e6)); Davis-Kahan with eigengap 1 of Pi0:
       sin <= E / (1 - E). */
    {
        size_t t2 = 60, n2 = t2 * k;
        float *W = malloc(n2 * d * sizeof *W);
        float *A2 = malloc(t2 * k * q * sizeof *A2);
        s_bases(rng, W, t2, k, d, 1e-4, V0);
        for (size_t j = 0; j < t2; j++)
            la_project_reference(W + j * k * d, k, d, P, q, A2 + j * k * q);
        /* s_k(y*) = s_k(V0 P^T); bias bounds from explicit items */
        double C[3 * 30], M[9], ev[3], Z[9];
        for (size_t a = 0; a < k; a++)
            for (size_t i = 0; i < q; i++) {
                double s2 = 0;
                for (size_t c = 0; c < d; c++)
                    s2 += (double)V0[a * d + c] * P[i * d + c];
                C[a * q + i] = s2;
            }
        for (size_t a = 0; a < k; a++)
            for (size_t b = 0; b < k; b++) {
                double s2 = 0;
                for (size_t i = 0; i < q; i++)
                    s2 += C[a * q + i] * C[b * q + i];
                M[a * k + b] = s2;
            }
        la_syevr_top(M, k, k, ev, Z);
        double sk = sqrt(ev[k - 1]);
        double bias_ref = 0, bias_proj = 0;
        for (size_t j = 0; j < t2; j++) {
            double fro = 0;
            double sn = dps_subspace_sin(W + j * k * d, V0, k, d, &fro);
            (void)sn;
            bias_proj = fmax(bias_proj, fro); /* ||Pi_j - Pi0||_F */
        }
        double pnorm = 0; /* ||P||_2 <= sqrt q + sqrt d + sqrt(2 ln 1e6) */
        pnorm = sqrt((double)q) + sqrt((double)d) + sqrt(2 * log(1e6));
        bias_ref = pnorm * bias_proj; /* ||(Pi_j - Pi0) P^T|| <= ||Pi_j - Pi0|| ||P|| */
        agg_input in2 = {W, A2, t2, k, d, q, 2 * sqrt(f2_of(P, q * d))};
        wfc_params p = {.alpha = 0.5, .tau = 0.5, .rho_search = 0.2, .rho_count = 0.1, .rho_mean = 0.7,
                        .delta1 = 1e-5, .xi_min = 1e-6};
        float *basis = malloc(k * d * sizeof *basis);
        wfc_result res;
        CHECK(agg_reference(&in2, &p, rng, rng, pool, ws, basis, &res) == DPS_OK, "reference");
        CHECK(!res.failed, "reference released");
        double sn = dps_subspace_sin(basis, V0, k, d, NULL);
        double E = bias_ref + res.s_mu * (sqrt((double)q) + sqrt((double)d) + sqrt(2 * log(1e6)));
        double bound = E < sk ? E / (sk - E) : 1.0;
        NOTE("reference: t=%zu r=%.3g W=%.1f L=%.1f s_mu=%.2e: sin to centre %.3e (bound %.3e)", t2, res.radius,
             res.W, res.L, res.s_mu, sn, bound);
        CHECK(sn <= bound, "reference accuracy %g > bound %g", sn, bound);
        CHECK(bound < 0.5, "the bound says something: %g", bound);
        in2.xi_max = sqrt(2.0 * k);
        CHECK(agg_projection(&in2, &p, rng, pool, ws, basis, &res) == DPS_OK, "projection");
        CHECK(!res.failed, "projection released");
        sn = dps_subspace_sin(basis, V0, k, d, NULL);
        E = bias_proj + res.s_mu * (2 * sqrt((double)d) + sqrt(2 * log(1e6)));
        bound = E < 1 ? E / (1 - E) : 1.0;
        NOTE("projection: r=%.3g W=%.1f s_mu=%.2e: sin to centre %.3e (bound %.3e)", res.radius, res.W, res.s_mu,
             sn, bound);
        CHECK(sn <= bound, "projection accuracy %g > bound %g", sn, bound);
        CHECK(bound < 0.5, "the bound says something: %g", bound);
        free(W); free(A2); free(basis);
    }

    /* 5. Projection refuses d above its limit without touching memory. */
    agg_input big = in;
    big.d = DPS_PROJECTION_MAX_D + 1;
    float basis[1];
    wfc_result res;
    wfc_params p = {.alpha = 0.5, .tau = 0.5, .rho_search = 0.2, .rho_count = 0.1, .rho_mean = 0.7,
                    .delta1 = 1e-5, .xi_min = 1e-6};
    CHECK(agg_projection(&big, &p, rng, pool, ws, basis, &res) == DPS_ELIMIT, "projection limit");
    agg_ws_free(&ws);

    free(V); free(V0); free(P); free(A); free(G); free(G1); free(D2); free(Y);
    pool_free(&pool);
    dps_rng_destroy(&rng);
    return check_summary();
}
