/* noise_level.c - the snapshot's noise_level (noise_level.h): spiked random
   matrix theory applied to what each mechanism releases.  Every input is
   released or public, so every value here is post-processing: no privacy is
   spent and no argument is needed beyond that. */
#include "noise_level.h"

#include <math.h>

/* RECTANGULAR (reference, histogram).  The released Z = S + N is q x d, N
   iid N(0, sigma^2), S of rank k: S = A^T V-like, its squared singular values
   theta^2 average ||P V^T||_F^2 / k = q (P ~ N(0, I_d) public, V the k x d
   basis the buckets agree on).  The snapshot is Z's top-k right singular
   subspace, i.e. the top eigenvectors of Z^T Z = sum of q rows z_i z_i^T: a
   spiked covariance of q samples in dimension d, spike l = theta^2 / (q
   sigma^2) = 1/sigma^2, aspect g = d/q.  Baik-Ben Arous-Peche / Paul (2007):
   the spike is detectable iff l > sqrt(g), i.e.
       mu = sigma (d/q)^(1/4) < 1,
   and then the squared cosine of the released direction with the true one is
   (1 - g/l^2) / (1 + g/l) = (1 - mu^4) / (1 + nu), nu = sigma^2 d / q.
   Beyond the threshold the top directions are those of the noise (random
   level).  The level: mu when mu >= 1 (how far past the threshold), else the
   predicted sine sqrt(1 - (1 - mu^4)/(1 + nu)), which tends to 1 as mu -> 1,
   so the level is continuous: the noise margin s_mu (d/q)^(1/4) made
   into an angle below the threshold: near it
   the 1/(1 + nu) factor dominates when d >> q. */
double noise_level_rect(double sigma, size_t q, size_t d)
{
    if (!(sigma > 0) || q == 0 || d == 0)
        return 0;
    double g = (double)d / (double)q;
    double mu = sigma * pow(g, 0.25);
    if (mu >= 1)
        return mu;
    double cos2 = (1 - mu * mu * mu * mu) / (1 + sigma * sigma * g);
    return sqrt(1 - cos2);
}

/* SYMMETRIC (projection).  The released (S + N) with S = sum (w_j/W) Pi_j,
   eigenvalues theta <= 1 (1 where the buckets agree), N symmetric with iid
   off-diagonal N(0, sigma_off^2): a spiked Wigner matrix.  A spike theta
   separates from the bulk (edge 2 sigma_off sqrt(d)) iff
   theta > sigma_off sqrt(d), and then cos^2 = 1 - (sigma_off sqrt(d)/theta)^2
   (Benaych-Georges-Nadakuditi 2011).  With theta = 1 the level
   mu = sigma_off sqrt(d) is the predicted sine below 1 and the distance past
   the threshold above. */
double noise_level_sym(double sigma_off, size_t d)
{
    if (!(sigma_off > 0) || d == 0)
        return 0;
    return sigma_off * sqrt((double)d);
}

/* The share of its energy that a direction of C below the detection level
   keeps anyway, when m of the k released directions cleared it: the other
   k - m are the noise's, and the noise is rotation invariant, so they are a
   uniformly random (k - m)-dimensional subspace of the d - m dimensions
   orthogonal to the m: in expectation each such direction keeps
   (k - m) / (d - m) of its energy.  About 0 when d >> k (a wide group);
   10/16 of a 16-column group of rank 10 (measured, the CNN's small groups:
   tools/experiments/README.md, "Noise level per group"); 1 when k = d. */
static double s_random_kept(size_t m, size_t k, size_t d)
{
    return d > m ? (double)(k - m) / (double)(d - m) : 1.0;
}

/* GAUSSIAN COVARIANCE.  C + E, E Wigner with entry sd s: the bulk of E's
   spectrum ends at 2 s sqrt(d) = ||E||_2 (semicircle edge), and the largest
   eigenvalue of pure noise exceeds it by s d^(-1/6) TW_1 (Tracy-Widom,
   P[TW_1 > 4] < 0.01), so a noisy eigenvalue w_i counts as signal only above
   edge + 4 s d^(-1/6).  An eigenvalue lambda of C above the spike threshold
   T = s sqrt(d) shows as w = lambda + T^2/lambda, hence
       lambda = (w + sqrt(w^2 - edge^2)) / 2,
   and its eigenvector keeps cos^2 = 1 - T^2/lambda^2.  A direction that does
   not clear the detection level holds lambda <= T, and keeps only what a
   random direction would (s_random_kept).  What the k - m that did not
   clear hold together is also bounded by the trace: tr C = tr(C + E) -
   tr E, tr E ~ N(0, s^2 d) (the diagonal's noise), so
   R = tr(C + E) - sum_cleared lambda + 2 T bounds it with probability
   0.977, and each is taken to hold min(T, R / (k - m)) (gauss_noise_weak;
   T alone without the trace).  T alone overstates them when k is large
   and the spectrum decays: a kron side using 30 directions read its group
   at predicted kept 0.20 where it kept 0.63 (tools/experiments/README.md,
   "Kronecker level").
   The level is the energy-weighted sine,
       sqrt(sum_i lambda_i sin_i^2 / sum_i lambda_i),
   sin_i^2 = T^2/lambda_i^2, or 1 less the random share: one minus it is
   the predicted share of the top-k's energy in C that the released basis
   keeps (what the captured energy on held-out rows measures, up to
   sampling).  When no direction clears the detection level:
   max(1, edge / w_1) (>= 1: random level).
   Why energy-weighted and not ||E|| / lambda_1 or the share of directions
   over the edge: those ignore, respectively, the weaker k - 1 directions
   and how much energy each holds; the captured energy is a sum over
   directions weighted by their eigenvalues, and this is its prediction. */
/* The detection level above (the Wigner edge plus the Tracy-Widom margin). */
static double s_detect(size_t d, double s) { return 2 * s * sqrt((double)d) + 4 * s * pow((double)d, -1.0 / 6); }

size_t gauss_noise_cleared(const double *w, size_t k, size_t d, double s)
{
    double detect = s_detect(d, s);
    size_t m = 0;
    for (size_t i = 0; i < k; i++)
        m += w[i] > detect;
    return m;
}

void gauss_noise_dir(double w, size_t m, size_t k, size_t d, double s, double *lambda, double *keep)
{
    double T = s * sqrt((double)d), edge = 2 * T;
    if (w > s_detect(d, s)) {
        *lambda = 0.5 * (w + sqrt(w * w - edge * edge));
        *keep = 1 - T * T / (*lambda * *lambda);
    } else {
        *lambda = T;
        *keep = s_random_kept(m, k, d);
    }
}

double gauss_noise_weak(const double *w, size_t k, size_t d, double s, size_t m, double tr)
{
    double T = s * sqrt((double)d), cleared = 0;
    if (isnan(tr) || k <= m)
        return T;
    for (size_t i = 0; i < m; i++) {
        double lambda, keep;
        gauss_noise_dir(w[i], m, k, d, s, &lambda, &keep);
        cleared += lambda;
    }
    return fmin(T, fmax(0.0, tr - cleared + 2 * T) / (double)(k - m));
}

int gauss_noise_parts(const double *w, size_t k, size_t d, double s, double tr, double *lost, double *total)
{
    size_t m = gauss_noise_cleared(w, k, d, s);
    double weak = gauss_noise_weak(w, k, d, s, m, tr);
    for (size_t i = 0; i < k; i++) {
        double lambda, keep;
        gauss_noise_dir(w[i], m, k, d, s, &lambda, &keep);
        if (i >= m)
            lambda = weak;
        *lost += lambda * (1 - keep); /* lambda sin^2: T^2 / lambda when it cleared */
        *total += lambda;
    }
    return m > 0;
}

double gauss_noise_level(const double *w, size_t k, size_t d, double s)
{
    if (!w || k == 0 || d == 0 || !(s > 0))
        return 0;
    double lost = 0, total = 0;
    if (!gauss_noise_parts(w, k, d, s, NAN, &lost, &total)) {
        double edge = 2 * s * sqrt((double)d);
        return w[0] > 0 && edge / w[0] > 1 ? edge / w[0] : 1.0;
    }
    return sqrt(lost / total);
}

/* NOISY POWER ITERATION.  The last step's Y = C X + G (d x b), G iid
   N(0, s^2), released as its top-k left singular vectors.  With X close to
   C's top-b space, C X has singular values theta_i (the eigenvalues of the
   block's C), and Y is a spiked rectangular matrix: its noise alone has top
   singular value edge = s (sqrt d + sqrt b); its square (a Wishart
   eigenvalue) exceeds edge^2 by s^2 (sqrt d + sqrt b) (1/sqrt d +
   1/sqrt b)^(1/3) TW_1 (Tracy-Widom, P[TW_1 > 4] < 0.01), i.e. the singular
   value by s (1/sqrt d + 1/sqrt b)^(1/3) TW_1 / 2, so sv_i counts as signal
   only above edge + 2 s (1/sqrt d + 1/sqrt b)^(1/3).  A spike shows as sv^2 = theta^2 + s^2 (d + b) to first order
   (the s^4 d b / theta^2 term dropped), hence theta^2 = sv^2 - s^2 (d + b),
   and its left singular vector keeps cos^2 = 1 - s^2 d / theta^2 (the noise
   column's part orthogonal to the signal over the signal).  The same
   energy-weighted sine as the Gaussian covariance's, with T = s sqrt(d):
   lost += theta sin^2 = T^2 / theta, total += theta; a direction below the
   detection level holds theta <= T, taken as T, and keeps the random share
   (s_random_kept).  A cold start (X far
   from C's top space) makes theta smaller than C's eigenvalue: the level
   then reports the basis as noisier, which it is. */
int power_noise_parts(const double *sv, size_t k, size_t d, size_t b, double s, double *lost, double *total)
{
    double sd = sqrt((double)d), sb = sqrt((double)b), T = s * sd, edge = s * (sd + sb);
    double detect = edge + 2 * s * pow(1 / sd + 1 / sb, 1.0 / 3), noise2 = s * s * ((double)d + (double)b);
    size_t m = 0;
    for (size_t i = 0; i < k; i++)
        m += sv[i] > detect && sv[i] * sv[i] - noise2 > T * T;
    double random = s_random_kept(m, k, d);
    for (size_t i = 0; i < k; i++) {
        double theta2 = sv[i] * sv[i] - noise2;
        if (sv[i] > detect && theta2 > T * T) {
            double theta = sqrt(theta2);
            *lost += T * T / theta;
            *total += theta;
        } else {
            *lost += T * (1 - random);
            *total += T;
        }
    }
    return m > 0;
}

/* PURE-DP COVARIANCE.  The release is only the k sampled directions (no
   eigenvalues: eps_values = 0), and a basis alone says nothing of its own
   accuracy, so no data-dependent level can be computed without spending
   budget.  What public quantities do give is a floor: draw i samples u from
   exp((eps_i / 2) u^T C u) on the sphere, eps_i = eps / k.  For
   C = lambda v v^T that is a Bingham law of concentration kappa =
   eps_i lambda / 2, under which, for kappa >> d, u's part orthogonal to v is
   Gaussian with variance 1/(2 kappa) per coordinate in d - 1 dimensions:
   sin^2 = (d - 1) / (eps_i lambda).  Unit rows give lambda <= n, so no data
   does better than sin^2 = k (d - 1) / (eps n) for the first direction.
   Reported uncapped: >= 1 means random level whatever the data (the
   "eps lambda / 2 below d" rule of the covariance mode). */
double cov_noise_level_floor(uint64_t n, size_t d, size_t k, double eps)
{
    if (n == 0 || !(eps > 0) || d < 2 || k == 0)
        return 0;
    return sqrt((double)k * (double)(d - 1) / (eps * (double)n));
}
