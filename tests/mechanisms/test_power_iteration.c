/* test_power_iteration - the noisy power iteration's sum Y = sum x (x^T X)
   (src/mechanisms/power_iteration.c, THE SUM IN DOUBLE): every entry is the
   exact sum up to double rounding, and rounding adds at most
   power_rounding_bound's R(n) + R(n + 1) to the move that the epoch
   mechanism's sensitivity bounds -- under replacing one row (the library's
   adjacency) and under inserting one, which shifts every later row to
   another flush (the adjacency of DP-SGD's accounting,
   SubspaceEstimator.rho_add_remove).  Flushes formed in float fail the
   second (their products round differently once a flush's rows change). */
#include "check.h"
#include "dpsubspace.h"
#include "power_iteration.h"
#include "rounding_rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* X_0 from a fixed public seed: random (warm 0) or spanning e_0 .. e_{k-1}
   (warm 1: kind-1 rows, near e_0, then have inner products near 1). */
static void s_start(power_iteration *p, int warm)
{
    size_t d = p->d, k = p->k;
    float *w = calloc(k * d, sizeof *w);
    for (size_t j = 0; j < k; j++)
        w[j * d + j] = 1.0f;
    dps_rng *pub = NULL;
    dps_rng_new_seeded(&pub, 21);
    CHECK(power_start(p, warm ? w : NULL, pub) == DPS_OK, "start d %zu", d);
    dps_rng_destroy(&pub);
    free(w);
}

static void s_sum(power_iteration *p, int warm, const float *R, size_t n)
{
    s_start(p, warm);
    for (size_t r = 0; r < n; r++)
        power_add(p, R + r * p->d);
    power_flush(p);
}

/* 1. Every entry against a double reference in row order.  The computed
   entry and the reference are each within gamma_{n+d} A_aj of the exact
   sum, A_aj = sum_r |x_ra| sum_c |x_rc X_cj| (an inner product of d terms,
   then a sum of n: gamma_n + gamma_d + gamma_n gamma_d <= gamma_{n+d},
   Higham Lemma 3.3): accept 2 gamma_{n+d} A_aj.  A lost or doubled flush,
   or a tile left out, is off by about A_aj.  d inside one tile (5, 130),
   exactly two tiles (2048) and three, the last partial (2100); n below, at
   and above a flush. */
static void s_test_entries(void)
{
    const size_t ds[] = {5, 130, 2048, 2100}, ns[] = {1, 31, 32, 33, 101}, k = 2, b = 4;
    dps_rng *g = NULL;
    dps_rng_new_seeded(&g, 22);
    for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (int kind = 0; kind < 3; kind++) {
                size_t d = ds[di], n = ns[ni];
                float *R = malloc(n * d * sizeof *R);
                double *ref = calloc(b * d, sizeof *ref), *A = calloc(b * d, sizeof *A);
                rounding_fill_rows(g, kind, n, d, R);
                power_iteration p;
                CHECK(power_init(&p, d, k, b) == DPS_OK, "init d %zu", d);
                s_sum(&p, kind == 1, R, n);
                for (size_t r = 0; r < n; r++) {
                    const float *x = R + r * d;
                    for (size_t j = 0; j < b; j++) {
                        double ip = 0, aip = 0;
                        for (size_t c = 0; c < d; c++) {
                            ip += (double)x[c] * p.X[j * d + c];
                            aip += fabs((double)x[c] * p.X[j * d + c]);
                        }
                        for (size_t a = 0; a < d; a++) {
                            ref[j * d + a] += x[a] * ip;
                            A[j * d + a] += fabs((double)x[a]) * aip;
                        }
                    }
                }
                double worst = 0; /* largest error / tolerance */
                for (size_t i = 0; i < b * d; i++)
                    worst = fmax(worst, fabs(p.Yd[i] - ref[i]) / (2.0 * rounding_gamma(n + d) * A[i] + 1e-300));
                CHECK(worst <= 1.0, "d %zu n %zu kind %d: error %.3g x the entrywise bound", d, n, kind, worst);
                power_free(&p);
                free(R);
                free(ref);
                free(A);
            }
    dps_rng_destroy(&g);
}

/* 2. The sensitivity's rounding: the computed move between neighbours
   against the exact one, y (y^T X) - x (x^T X) (replace) or y (y^T X)
   (insert), formed here in double (its own rounding within R(2)).  Accept
   ||(Y(D') - Y(D)) - move||_F <= R(n) + R(n + 1) + R(2).  Positions: the
   first row, inside, at the end of and just after a flush, the last row;
   d = 1500 is two tiles. */
static void s_test_neighbours(void)
{
    size_t d = 1500, n = 200, k = 10, b = 20;
    const size_t js[] = {0, 15, 31, 32, 199};
    dps_rng *g = NULL;
    dps_rng_new_seeded(&g, 23);
    float *X = malloc((n + 1) * d * sizeof *X), *Y = malloc((n + 1) * d * sizeof *Y), *y = malloc(d * sizeof *y);
    double *first = malloc(b * d * sizeof *first);
    power_iteration p;
    CHECK(power_init(&p, d, k, b) == DPS_OK, "init");
    double bound = power_rounding_bound(n, d, b) + power_rounding_bound(n + 1, d, b) + power_rounding_bound(2, d, b);
    double worst = 0;
    for (int kind = 0; kind < 3; kind++)
        for (size_t ji = 0; ji < sizeof js / sizeof js[0]; ji++)
            for (int insert = 0; insert <= 1; insert++) {
                size_t j = js[ji];
                rounding_neighbours(g, kind, n, d, j, insert, X, y, Y);
                s_sum(&p, kind == 1, X, n);
                memcpy(first, p.Yd, b * d * sizeof *first);
                s_sum(&p, kind == 1, Y, n + (size_t)insert);
                const float *x = X + j * d;
                double ex = 0;
                for (size_t c = 0; c < b; c++) {
                    const float *Xc = p.X + c * d;
                    double iy = 0, ix = 0;
                    for (size_t a = 0; a < d; a++) {
                        iy += (double)y[a] * Xc[a];
                        ix += (double)x[a] * Xc[a];
                    }
                    for (size_t a = 0; a < d; a++) {
                        double move = y[a] * iy - (insert ? 0.0 : x[a] * ix);
                        double e = (p.Yd[c * d + a] - first[c * d + a]) - move;
                        ex += e * e;
                    }
                }
                rounding_check_move(sqrt(ex), bound, &worst, kind, j, insert);
            }
    NOTE("rounding's share of the sensitivity: measured at most %.3g, bound %.3g (n %zu, d %zu, b %zu)", worst, bound,
         n, d, b);
    power_free(&p);
    free(X);
    free(Y);
    free(y);
    free(first);
    dps_rng_destroy(&g);
}

/* 3. The flushes on a worker (power_use_pool): the same sums in the same
   order as on the calling thread, so the same Yd bit for bit -- with 1 and
   2 workers, for 3 full blocks and a partial one, then a noisy step (the
   same X after it) and a second step's rows (the buffers swapped an odd
   number of times), and after a restart (power_start waits for the flush
   under way). */
static void s_test_on_workers(void)
{
    size_t d = 2100, n = 101, k = 2, b = 4;
    dps_rng *g = NULL;
    dps_rng_new_seeded(&g, 23);
    float *R = malloc(n * d * sizeof *R);
    rounding_fill_rows(g, 0, n, d, R);
    for (int workers = 1; workers <= 2; workers++) {
        dps_pool *pool = pool_new(workers);
        power_iteration here, there;
        CHECK(power_init(&here, d, k, b) == DPS_OK && power_init(&there, d, k, b) == DPS_OK, "init");
        CHECK(power_use_pool(&there, pool) == DPS_OK && there.lane[0].full && there.lane[1].full, "on the workers");
        int same = 1;
        for (int round = 0; round < 2; round++) {
            s_sum(&here, 0, R, n);
            s_sum(&there, 0, R, n);
            same &= memcmp(here.Yd, there.Yd, b * d * sizeof *here.Yd) == 0;
            dps_rng *n1 = NULL, *n2 = NULL;
            dps_rng_new_seeded(&n1, 24);
            dps_rng_new_seeded(&n2, 24);
            CHECK(power_step(&here, 1.0, n1) == DPS_OK && power_step(&there, 1.0, n2) == DPS_OK, "step");
            same &= memcmp(here.X, there.X, b * d * sizeof *here.X) == 0;
            for (size_t r = 0; r < 45; r++) { /* a second step's rows, one block and a partial one */
                power_add(&here, R + r * d);
                power_add(&there, R + r * d);
            }
            power_flush(&here);
            power_flush(&there);
            same &= memcmp(here.Yd, there.Yd, b * d * sizeof *here.Yd) == 0;
            dps_rng_destroy(&n1);
            dps_rng_destroy(&n2);
        }
        CHECK(same, "%d worker(s): the same sums and steps as on the calling thread", workers);
        power_free(&here);
        power_free(&there);
        pool_free(&pool);
    }
    free(R);
    dps_rng_destroy(&g);
}

int main(void)
{
    s_test_entries();
    s_test_neighbours();
    s_test_on_workers();
    return check_summary();
}
