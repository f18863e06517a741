/* wfc.c - weighted FriendlyCore (WFC) average with a private radius search.

   THE MECHANISM (DESIGN 3.2), for items y_1..y_t in R^D, radius r:
     1. c_i = #{j : ||y_i - y_j|| <= r}, counting i itself.
     2. w_i = clamp((c_i - (t+1)/2) / (alpha (t-1)), 0, 1);  W = sum_i w_i.
     3. W^ = W + N(0, s_W^2),  s_W = (1/alpha + 1) / sqrt(2 rho_W).
     4. L = W^ - s_W sqrt(2 ln(1/delta1));  if L < 1 release FAIL.
     5. mu = sum_i w_i y_i / W;  release mu + N(0, s_mu^2 I_D),
        s_mu = ((2/alpha + 4) r / L) / sqrt(2 rho_mu).

   WHY IT IS PRIVATE.  Neighbouring inputs D, D' replace item k.
   The friend test is on D2, whose entries are upper bounds of the exact
   squared distances, each a function of its two items alone (the caller's
   duty: aggregate.c, "certified distance bounds"), compared with r^2 less a
   margin for its own rounding: so a friend is within r exactly, as (a) needs,
   and a replaced item changes only its own row of D2, as (b) needs.
   (a) Positively weighted items are close.  w_i > 0 iff c_i > (t+1)/2.  Of the
       c_i friends of such an item of D (itself included) at most one is not
       among the t-1 items D and D' share (k, when i != k; i itself when
       i = k), so it has more than (t-1)/2 friends among the shared items; the
       same holds for an item with w'_j > 0 in D'.  Two subsets of the t-1
       shared items, each of size > (t-1)/2, intersect: the two items share a
       friend f, so ||y_i - y_j|| <= 2r.  Hence
       all positively weighted items of D and D' lie within 2r of each other and
       of mu' (a convex combination of those of D').
   (b) Weight sensitivity.  For i != k, c_i moves by at most 1, so
       |w_i - w'_i| <= 1/(alpha (t-1)) and sum_{i != k} |w_i - w'_i| <= 1/alpha;
       |w_k - w'_k| <= 1.  So |W - W'| <= 1/alpha + 1 and step 3 is
       rho_W-zCDP (Gaussian mechanism, BS16 Prop. 1.6).
   (c) Mean sensitivity.  Since sum_i w'_i (y'_i - mu') = 0,
         mu - mu' = (1/W) [ sum_{i!=k} (w_i - w'_i)(y_i - mu')
                            + w_k (y_k - mu') - w'_k (y'_k - mu') ],
       and every term with a non-zero weight has ||y - mu'|| <= 2r by (a), so
         ||mu - mu'|| <= (2r/alpha + 4r) / W(D),  and symmetrically / W(D').
   (d) The noise scale uses L, not W.  Fix a neighbouring pair and let
       lambda = max(W(D), W(D')).  On the event B = {L <= lambda} (a half-line of
       values of W^, the same set under D and D') the sensitivity in (c) is at
       most (2/alpha + 4) r / L, so step 5 is rho_mu-zCDP given W^.  P[B^c] <=
       P[N(0, s_W^2) > s_W sqrt(2 ln(1/delta1))] <= delta1 under both inputs
       (Gaussian tail exp(-x^2/2)).  Conditioning both W^ distributions on the
       same half-line does not increase their Renyi divergence (ln Phi is
       concave, so the truncation term of D_alpha is <= 0 for alpha > 1), so by
       the chain rule the release conditioned on B is (rho_W + rho_mu)-zCDP:
       the release is delta1-approximate (rho_W + rho_mu)-zCDP.  FAIL is a
       function of W^ alone.  If W = 0 while L >= 1 (only on B^c) mu is 0.

   RADIUS SEARCH (radius unknown).  Grid r_j = xi_min 2^j, j = 0..J, with
   r_J >= xi_max data-independent (all items are friends at xi_max).  W(r) is
   non-decreasing in r with sensitivity 1/alpha + 1 (by (b)).  Binary search for
   the smallest grid radius whose noisy W reaches tau t, with
   S = ceil(log2(J + 1)) Gaussian queries of sd (1/alpha + 1) sqrt(S / (2 rho_s)):
   each is rho_s/S-zCDP, S of them rho_s-zCDP by adaptive composition; all S are
   charged even when the search stops early.  Then WFC at that radius with
   fresh noise.  Total: delta1-approximate (rho_s + rho_W + rho_mu)-zCDP. */
#include "wfc.h"
#include "internal.h"

#include <math.h>

void wfc_friend_counts(const double *D2, size_t t, double r, size_t *counts)
{
    /* Below r^2 strictly, whatever the roundings of r * r (relative <= 2^-53)
       and of this product: D2 <= r2 then implies exact distance < r. */
    double r2 = r * r * (1.0 - 0x1p-50);
    for (size_t i = 0; i < t; i++) {
        size_t c = 0;
        for (size_t j = 0; j < t; j++)
            c += (i == j) || (D2[i * t + j] <= r2);
        counts[i] = c;
    }
}

double wfc_weights(const size_t *counts, size_t t, double alpha, double *w)
{
    double half = 0.5 * (double)(t + 1), span = alpha * (double)(t - 1), W = 0;
    for (size_t i = 0; i < t; i++) {
        double v = ((double)counts[i] - half) / span;
        v = v < 0 ? 0 : (v > 1 ? 1 : v);
        w[i] = v;
        W += v;
    }
    return W;
}

double wfc_weight_sensitivity(double alpha) { return 1.0 / alpha + 1.0; }

size_t wfc_grid_size(double xi_min, double xi_max)
{
    size_t n = 1;
    double r = xi_min;
    while (r < xi_max && n < 4096) {
        r *= 2;
        n++;
    }
    return n;
}

static size_t s_ceil_log2(size_t n)
{
    size_t s = 0;
    while (((size_t)1 << s) < n)
        s++;
    return s;
}

int wfc_run(const double *D2, size_t t, const wfc_params *p, dps_rng *rng, double *w, wfc_result *res)
{
    if (t < 2 || !(p->alpha > 0 && p->alpha <= 1) || !(p->rho_count > 0) || !(p->rho_mean > 0) ||
        !(p->delta1 > 0 && p->delta1 < 1) || !(p->xi_min > 0) || !(p->xi_max > 0) || p->rho_search < 0)
        return DPS_EINVAL;
    size_t *counts = malloc(t * sizeof *counts);
    if (!counts)
        return DPS_ENOMEM;
    double sens = wfc_weight_sensitivity(p->alpha);
    size_t grid = wfc_grid_size(p->xi_min, p->xi_max);
    size_t S = s_ceil_log2(grid);
    size_t lo = 0, hi = grid - 1;
    if (S > 0) {
        if (!(p->rho_search > 0)) {
            free(counts);
            return DPS_EINVAL;
        }
        double sd = sens * sqrt((double)S / (2.0 * p->rho_search));
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            wfc_friend_counts(D2, t, p->xi_min * ldexp(1.0, (int)mid), counts);
            double noisy = wfc_weights(counts, t, p->alpha, w) + dps_rng_gaussian(rng, sd);
            if (noisy >= p->tau * (double)t)
                hi = mid;
            else
                lo = mid + 1;
        }
    }
    double r = p->xi_min * ldexp(1.0, (int)lo);
    wfc_friend_counts(D2, t, r, counts);
    double W = wfc_weights(counts, t, p->alpha, w);
    free(counts);

    res->radius = r;
    res->grid_points = grid;
    res->queries = S;
    res->W = W;
    res->s_W = sens / sqrt(2.0 * p->rho_count);
    res->W_hat = W + dps_rng_gaussian(rng, res->s_W);
    res->L = res->W_hat - res->s_W * sqrt(2.0 * log(1.0 / p->delta1));
    res->failed = !(res->L >= 1.0);
    if (res->failed) {
        res->s_mu = 0;
        res->sensitivity = 0;
        return DPS_OK;
    }
    res->sensitivity = (2.0 / p->alpha + 4.0) * r / res->L;
    res->s_mu = res->sensitivity / sqrt(2.0 * p->rho_mean);
    return DPS_OK;
}
