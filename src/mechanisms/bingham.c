/* bingham.c - exact sampling from the Bingham distribution on the sphere,
   density proportional to exp(-x^T A x) on S^{q-1} (A symmetric PSD), by the
   rejection scheme of Kent, Ganeiber and Mardia (2018), as DESIGN 3.6 states it.

   The envelope.  With the eigenvalues of A shifted so that the smallest is 0
   (exp(-x^T A x) changes by a constant factor on the sphere), let b >= 1 solve
   sum_j 1/(b + 2 a_j) = 1 and Omega = I + 2A/b.  The angular central Gaussian
   ACG(Omega), x = y/||y|| with y ~ N(0, Omega^{-1}), has density proportional
   to g(x) = (x^T Omega x)^(-q/2) on the sphere.  With s = x^T A x,
   x^T Omega x = 1 + 2s/b, and
       f(x)/g(x) = exp(-s) (1 + 2s/b)^(q/2)
   is largest at 1 + 2s/b = q/b (derivative -1 + (q/b)/(1 + 2s/b) = 0), where it
   is M = exp(-(q - b)/2) (q/b)^(q/2).  (b <= q: at b = q every term of the
   sum is <= 1/q.)  So accepting a proposal x with probability
       exp(-x^T A x) (x^T Omega x)^(+q/2) / M  <= 1
   returns x with density proportional to g(x) f(x)/g(x) = f(x): exact, for
   any A, with acceptance probability (integral of f)/(M * integral of g).
   The sign of the exponent matters: dividing by (x^T Omega x)^(q/2) instead
   (BINGHAM_WRONG, kept for the tests only) samples the density
   exp(-s)(1 + 2s/b)^(-q), which is not the target.

   Everything is done in the eigenbasis of A: y_j = z_j / sqrt(1 + 2 a_j / b)
   with z ~ N(0, I), so a proposal costs O(q) and the rotation back O(q^2). */
#include "cov_internal.h"
#include "internal.h"
#include "linalg.h"

#include <math.h>
#include <string.h>

#define BINGHAM_MAX_PROPOSALS 1000000000ull

double bingham_solve_b(const double *a, size_t q)
{
    double lo = 1.0, hi = (double)q;
    if (q <= 1)
        return 1.0;
    for (int it = 0; it < 200 && hi - lo > 1e-15 * hi; it++) {
        double mid = 0.5 * (lo + hi), s = 0;
        for (size_t j = 0; j < q; j++)
            s += 1.0 / (mid + 2.0 * a[j]);
        if (s > 1.0)
            lo = mid; /* the sum decreases in b: the root is above mid */
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

int bingham_draw_eig(const double *a, const double *U, size_t q, dps_rng *rng, int variant, double *x,
                     double *work, uint64_t *proposals)
{
    if (q == 1) { /* S^0 = {-1, +1}: the density is the same at both points */
        x[0] = (dps_rng_u64(rng) & 1) ? 1.0 : -1.0;
        if (proposals)
            *proposals = 1;
        return DPS_OK;
    }
    double b = bingham_solve_b(a, q);
    double qd = (double)q;
    double log_m = -(qd - b) / 2 + (qd / 2) * log(qd / b);
    double sign = variant == BINGHAM_WRONG ? -1.0 : 1.0;
    for (uint64_t np = 1; np <= BINGHAM_MAX_PROPOSALS; np++) {
        double nrm2 = 0;
        for (size_t j = 0; j < q; j++) {
            work[j] = dps_rng_gaussian(rng, 1.0) / sqrt(1.0 + 2.0 * a[j] / b);
            nrm2 += work[j] * work[j];
        }
        if (!(nrm2 > 0))
            continue; /* probability zero; keeps 0/0 out */
        double s = 0;
        for (size_t j = 0; j < q; j++)
            s += a[j] * work[j] * work[j];
        s /= nrm2;
        double log_ratio = -s + sign * (qd / 2) * log1p(2.0 * s / b) - log_m;
        if (!isfinite(log_ratio))
            return DPS_ENUMERIC;
        if (log(dps_rng_uniform(rng)) <= log_ratio) {
            double inv = 1.0 / sqrt(nrm2);
            if (!U) {
                for (size_t j = 0; j < q; j++)
                    x[j] = work[j] * inv;
            } else {
                memset(x, 0, q * sizeof *x);
                for (size_t j = 0; j < q; j++) {
                    double c = work[j] * inv;
                    const double *u = U + j * q;
                    for (size_t r = 0; r < q; r++)
                        x[r] += c * u[r];
                }
            }
            if (proposals)
                *proposals = np;
            return DPS_OK;
        }
    }
    return DPS_ENUMERIC;
}

int bingham_sample_variant(const double *A, size_t q, dps_rng *rng, double *x, uint64_t *proposals, int variant)
{
    if (!A || !rng || !x || q == 0)
        return DPS_EINVAL;
    if (q > DPS_COV_MAX_D)
        return DPS_ELIMIT;
    double scale = 1.0;
    for (size_t i = 0; i < q * q; i++) {
        if (!isfinite(A[i]))
            return DPS_EINVAL;
        scale = fmax(scale, fabs(A[i]));
    }
    for (size_t i = 0; i < q; i++)
        for (size_t j = i + 1; j < q; j++)
            if (fabs(A[i * q + j] - A[j * q + i]) > 1e-12 * scale)
                return DPS_EINVAL;
    double *Ac = malloc(q * q * sizeof *Ac), *w = malloc(q * sizeof *w), *Z = malloc(q * q * sizeof *Z);
    double *a = malloc(q * sizeof *a), *work = malloc(q * sizeof *work);
    int rc = (Ac && w && Z && a && work) ? DPS_OK : DPS_ENOMEM;
    if (!rc) {
        memcpy(Ac, A, q * q * sizeof *Ac);
        rc = la_syevr_top(Ac, q, q, w, Z); /* w descending */
    }
    if (!rc && w[q - 1] < -1e-9 * fmax(1.0, fabs(w[0])))
        rc = DPS_EINVAL; /* not positive semidefinite */
    if (!rc) {
        for (size_t j = 0; j < q; j++)
            a[j] = fmax(0.0, w[j] - w[q - 1]); /* shift: smallest eigenvalue 0 */
        rc = bingham_draw_eig(a, Z, q, rng, variant, x, work, proposals);
    }
    free(Ac); free(w); free(Z); free(a); free(work);
    return rc;
}

int dps_bingham_sample(const double *A, size_t q, dps_rng *rng, double *x, uint64_t *proposals)
{
    return bingham_sample_variant(A, q, rng, x, proposals, BINGHAM_CORRECT);
}
