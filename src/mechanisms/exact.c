/* exact.c - the exact-case subspace estimator (DESIGN 3.4; Singhal-Steinke
   2021, sec. 2, Algorithm 1 "DPESE"), with sampled candidates.

   NOTATION.  X = n rows; for a subspace s, |X n s| counts the rows in s (in
   exact arithmetic; zero rows are in every subspace).  The paper's score
       u(X, s) = |X n s| - max_{t strictly inside s} |X n t|.
   We use the gap score of a k-dim subspace s
       h(X, s) = u(X, s) - (n - |X n s|) = 2 |X n s| - n - max_{t < s} |X n t|,
   and H(X) = max(0, sup_s h(X, s)) (the NULL candidate has h = 0).

   THE MECHANISM.  Find s* = the k-dim subspace with h(X, s*) > 0 (there is at
   most one, see (b)), if any; xi ~ TLap(2, eps, delta) on [-B, B],
   B = (2/eps) ln(1 + (e^eps - 1)/(2 delta)); release s* if H(X) + xi > B,
   else NULL.  This is Algorithm 1's GAP-MAX with its truncated Laplace noise,
   where the paper's competitor score u(X, s2) is replaced by the bound
   n - |X n s| >= u(X, s) for every other s (proved in (b)), and where every
   outcome whose gap is 0 - which Algorithm 1 resolves by an arg max of noise
   over infinitely many zero-gap subspaces, not well defined and, over the
   finite data-dependent list of spans of k-subsets, not private (a span that
   contains the changed row exists under one neighbour only) - is reported as
   NULL.

   WHY IT IS (eps, delta)-DP (replace one row, x -> x').
   (a) Each h(., s) has sensitivity 2.  Membership is exact, so t < s and
       x in t imply x in s.  If x not in s: no |X n t|, t <= s, decreases,
       the max over t < s rises by at most [x' in s], and |X n s| rises by
       [x' in s]: u moves in [0, 1].  If x in s, x' not in s: u moves in
       [-1, 0].  If both in s: |X n s| is unchanged and the max moves by at
       most 1.  So |u - u'| <= 1, |(n - |X n s|) change| <= 1, |h - h'| <= 2,
       and H = max(0, sup_s h) has sensitivity 2.
   (b) At most one s has h > 0.  For k-dim s != s', t = s n s' is strictly
       inside s', and a row in s and s' is in t (exact arithmetic), so
       u(s') <= |X n s'| - |X n t| = |X n (s' \ s)| <= n - |X n s|.  If
       h(s) > 0 then u(s) > n - |X n s| >= u(s'), and if also h(s') > 0 then
       u(s') > u(s) by the same argument: a contradiction.
   (c) Stability: if H(X) > 2 then h(X', s*(X)) > 0 by (a), so
       s*(X') = s*(X) by (b).
   (d) TLap: the mass of [B - 2, B] is exactly delta (that is how B is
       chosen), and adding TLap(2, eps, delta) to a sensitivity-2 value is
       (eps, delta)-DP (Geng, Ding, Guo, Kumar 2020).
   Neighbours X, X': if s*(X) = s*(X') (or neither exists) the output is the
   same function of N = H + xi, (eps, delta)-DP by (d).  Otherwise H(X) <= 2
   and H(X') <= 2 by (c), so each releases its s* with probability
   P[xi > B - 2] = delta at most, and for any set E of outputs,
   P[M(X) in E] <= [NULL in E] + delta <= e^eps P[M(X') in E] + delta
   (P[M(X') = NULL] >= 1 - delta and e^eps (1 - delta) + delta >= 1).
   So the mechanism is (eps, delta)-DP.

   SAMPLED CANDIDATES (the paper's sec. 2.3 sketch, made precise).  s* is
   found by R independent draws: a draw takes rows one at a time, each
   uniformly among the rows NOT in the span of those taken so far, until k
   are taken.  If s* exists, a draw with span t_j < s* picks a row of s*
   outside t_j with probability >= u(s*) / (u(s*) + n - |X n s*|) > 1/2,
   because at least u(s*) rows of s* lie outside t_j and h(s*) > 0 means
   u(s*) > n - |X n s*|.  So one draw spans s* with probability > 2^-k and
   all R miss with probability beta <= (1 - 2^-k)^R, for EVERY input.  Every
   candidate's h is computed exactly over all n rows, and only a candidate
   with h > 0 can be s*, so with the same xi the sampled mechanism M_R equals
   the exact one M except with probability <= beta:
       P[M_R(X) in E] <= P[M(X) in E] + beta <= e^eps P[M(X') in E] + delta + beta
                      <= e^eps P[M_R(X') in E] + delta + (1 + e^eps) beta.
   The candidate list depends on the data, but it is never released: only
   s*(X) or NULL is, and the argument compares with the exact M.
   Guarantee: (eps, delta + (1 + e^eps) beta)-DP, reported as delta_total.

   ACCURACY (paper Lemma 2.4-2.5, with our score).  If all but l rows lie in
   a k-dim s* and every (k-1)-dim subspace holds at most l rows, then
   h(s*) >= (n - 2l) - l, so s* is released surely (when found) once
   n - 3l > 2B, about 3l + (4/eps) ln(1/delta).

   EXACT ARITHMETIC.  A float32 x is M 2^e with an integer mantissa |M| < 2^24;
   scaling a row by a power of two does not change which subspaces hold it, so
   row i is the integer vector M_c 2^{s_c} (s_c >= 0).  Ranks are computed
   modulo several primes p > 2^60: a nonzero integer minor of size <= k + 1
   is below (k+1)^{(k+1)/2} 2^{bits (k+1)} (Hadamard), and with enough primes
   that their product exceeds it, it is nonzero modulo one of them, so
   rank_Q = max_p rank_p, and x is outside span_Q(S) iff for some prime
   rank_p(S) = |S| and x is outside span_p(S).  The largest number of rows of
   s* in a hyperplane of s* is found by enumerating the hyperplanes spanned by
   k-1 of its rows (a maximal hyperplane can always be grown to one so
   spanned), in the coordinates of k pivot columns J of s* (the projection to
   J is one-to-one on s*): x is in the hyperplane iff <nu, x_J> = 0, nu the
   cofactor vector - again a (k x k) integer determinant tested modulo the
   primes.  Time: R k n (k d) + C(m, k-1) m k per prime. */
#include "internal.h"
#include "linalg.h"

#include <math.h>
#include <string.h>

typedef unsigned __int128 u128;

/* ---------------------------------------------------------- truncated Laplace */
double dps_tlap_bound(double eps, double delta)
{
    return (2.0 / eps) * log1p(expm1(eps) / (2.0 * delta));
}

double dps_tlap_sample(dps_rng *rng, double eps, double delta)
{
    /* |xi| has density prop. to exp(-lambda x) on [0, B], lambda = eps/2:
       inverse CDF; the sign is an independent fair coin. */
    double lam = eps / 2.0, B = dps_tlap_bound(eps, delta);
    double u = dps_rng_uniform(rng);
    double a = -log1p(-u * (-expm1(-lam * B))) / lam;
    if (a > B)
        a = B;
    return (dps_rng_u64(rng) & 1) ? a : -a;
}

/* ------------------------------------------------------------ modular tools */
static uint64_t s_mulmod(uint64_t a, uint64_t b, uint64_t p) { return (uint64_t)(((u128)a * b) % p); }

static uint64_t s_powmod(uint64_t a, uint64_t e, uint64_t p)
{
    uint64_t r = 1;
    a %= p;
    while (e) {
        if (e & 1)
            r = s_mulmod(r, a, p);
        a = s_mulmod(a, a, p);
        e >>= 1;
    }
    return r;
}

/* Deterministic Miller-Rabin for 64-bit n (these bases suffice below 2^64). */
static int s_is_prime(uint64_t n)
{
    static const uint64_t bases[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
    if (n < 2)
        return 0;
    for (size_t i = 0; i < 12; i++)
        if (n % bases[i] == 0)
            return n == bases[i];
    uint64_t dd = n - 1;
    int r = 0;
    while (!(dd & 1)) {
        dd >>= 1;
        r++;
    }
    for (size_t i = 0; i < 12; i++) {
        uint64_t x = s_powmod(bases[i], dd, n);
        if (x == 1 || x == n - 1)
            continue;
        int comp = 1;
        for (int j = 1; j < r && comp; j++) {
            x = s_mulmod(x, x, n);
            comp = x != n - 1;
        }
        if (comp)
            return 0;
    }
    return 1;
}

static uint64_t s_inv(uint64_t a, uint64_t p) { return s_powmod(a, p - 2, p); }

#define MAXP 64 /* primes: enough for 24 + 300 bits at k + 1 = 9 */

/* ---------------------------------------------------------------- the data */
typedef struct {
    size_t n, d, k, np;
    int32_t *man;     /* n x d signed mantissas                     */
    uint16_t *sh;     /* n x d shifts: entry = man << sh (exactly)  */
    unsigned char *zero; /* row is zero (or had NaN/Inf)              */
    uint64_t p[MAXP];
    uint64_t *pow2;   /* np x (maxsh + 1): 2^s mod p                 */
    size_t maxsh;
    uint64_t *tmp;    /* d scratch                                   */
} ex_data;

static uint64_t s_entry_mod(const ex_data *D, size_t i, size_t c, size_t pi)
{
    uint64_t p = D->p[pi];
    int32_t m = D->man[i * D->d + c];
    if (m == 0)
        return 0;
    uint64_t a = m < 0 ? p - (uint64_t)(-(int64_t)m) % p : (uint64_t)m % p;
    return s_mulmod(a, D->pow2[pi * (D->maxsh + 1) + D->sh[i * D->d + c]], p);
}

/* Exact integer form of every row; the bit length decides the primes. */
static int s_data_init(ex_data *D, const float *X, size_t n, size_t d, size_t k)
{
    memset(D, 0, sizeof *D);
    D->n = n;
    D->d = d;
    D->k = k;
    D->man = malloc(n * d * sizeof *D->man);
    D->sh = malloc(n * d * sizeof *D->sh);
    D->zero = calloc(n, 1);
    D->tmp = malloc(d * sizeof *D->tmp);
    if (!D->man || !D->sh || !D->zero || !D->tmp)
        return DPS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const float *x = X + i * d;
        int emin = INT32_MAX, fin = 1, nz = 0;
        for (size_t c = 0; c < d && fin; c++) {
            fin = isfinite(x[c]);
            if (fin && x[c] != 0) {
                int e;
                frexpf(x[c], &e);
                emin = DPS_MIN(emin, e);
                nz = 1;
            }
        }
        if (!fin || !nz) {
            D->zero[i] = 1;
            memset(D->man + i * d, 0, d * sizeof *D->man);
            memset(D->sh + i * d, 0, d * sizeof *D->sh);
            continue;
        }
        for (size_t c = 0; c < d; c++) {
            int e = 0;
            float f = frexpf(x[c], &e);
            /* x = f 2^e, |f| in [1/2, 1): M = f 2^24 is an integer for float32 */
            D->man[i * d + c] = (int32_t)ldexpf(f, 24);
            D->sh[i * d + c] = x[c] == 0 ? 0 : (uint16_t)(e - emin);
            if (x[c] != 0)
                D->maxsh = DPS_MAX(D->maxsh, (size_t)(e - emin));
        }
    }
    /* bound on |minor| of size k+1: (k+1)^{(k+1)/2} 2^{bits (k+1)} */
    double bits = 24.0 + (double)D->maxsh;
    double lb = 0.5 * (double)(k + 1) * log2((double)(k + 1)) + bits * (double)(k + 1) + 2.0;
    D->np = (size_t)ceil(lb / 60.0);
    if (D->np > MAXP)
        return DPS_ELIMIT; /* cannot happen for float32 rows and k <= 8 */
    uint64_t cand = ((uint64_t)1 << 61) - 1;
    for (size_t i = 0; i < D->np; cand -= 2)
        if (s_is_prime(cand))
            D->p[i++] = cand;
    D->pow2 = malloc(D->np * (D->maxsh + 1) * sizeof *D->pow2);
    if (!D->pow2)
        return DPS_ENOMEM;
    for (size_t pi = 0; pi < D->np; pi++) {
        uint64_t v = 1;
        for (size_t s = 0; s <= D->maxsh; s++) {
            D->pow2[pi * (D->maxsh + 1) + s] = v;
            v = s_mulmod(v, 2, D->p[pi]);
        }
    }
    return DPS_OK;
}

static void s_data_free(ex_data *D)
{
    free(D->man); free(D->sh); free(D->zero); free(D->pow2); free(D->tmp);
}

/* ------------------------------------------------ spans modulo each prime */
typedef struct {
    size_t count;       /* vectors added (independent over Q)              */
    size_t r[MAXP];     /* rank mod p                                       */
    size_t *piv;        /* np x k pivot columns                             */
    uint64_t *rows;     /* np x k x d: reduced echelon rows, pivot entry 1  */
} ex_span;

static int s_span_new(ex_span *S, const ex_data *D)
{
    memset(S, 0, sizeof *S);
    S->piv = calloc(D->np * D->k, sizeof *S->piv);
    S->rows = malloc(D->np * D->k * D->d * sizeof *S->rows);
    return S->piv && S->rows ? DPS_OK : DPS_ENOMEM;
}

static void s_span_free(ex_span *S)
{
    free(S->piv); free(S->rows);
}

/* Reduce row i modulo prime pi against S's rows (into D->tmp); 1 if nonzero. */
static int s_reduce(const ex_data *D, const ex_span *S, size_t i, size_t pi)
{
    size_t d = D->d, k = D->k;
    uint64_t p = D->p[pi], *x = D->tmp;
    for (size_t c = 0; c < d; c++)
        x[c] = s_entry_mod(D, i, c, pi);
    for (size_t j = 0; j < S->r[pi]; j++) {
        const uint64_t *row = S->rows + (pi * k + j) * d;
        uint64_t f = x[S->piv[pi * k + j]];
        if (!f)
            continue;
        for (size_t c = 0; c < d; c++)
            if (row[c])
                x[c] = (x[c] + p - s_mulmod(f, row[c], p)) % p;
    }
    for (size_t c = 0; c < d; c++)
        if (x[c])
            return 1;
    return 0;
}

/* Exact: 1 if row i is in span_Q(S). */
static int s_in_span(const ex_data *D, const ex_span *S, size_t i)
{
    if (D->zero[i])
        return 1;
    if (S->count == 0)
        return 0;
    for (size_t pi = 0; pi < D->np; pi++)
        if (S->r[pi] == S->count && s_reduce(D, S, i, pi))
            return 0;
    return 1;
}

/* Add row i (not in span_Q(S)) to S. */
static void s_span_add(const ex_data *D, ex_span *S, size_t i)
{
    size_t d = D->d, k = D->k;
    for (size_t pi = 0; pi < D->np; pi++) {
        if (!s_reduce(D, S, i, pi))
            continue;
        uint64_t p = D->p[pi], *x = D->tmp;
        size_t pc = 0;
        while (!x[pc])
            pc++;
        uint64_t inv = s_inv(x[pc], p);
        for (size_t c = 0; c < d; c++)
            x[c] = s_mulmod(x[c], inv, p);
        /* eliminate the new pivot from the earlier rows */
        for (size_t j = 0; j < S->r[pi]; j++) {
            uint64_t *row = S->rows + (pi * k + j) * d, f = row[pc];
            if (f)
                for (size_t c = 0; c < d; c++)
                    row[c] = (row[c] + p - s_mulmod(f, x[c], p)) % p;
        }
        memcpy(S->rows + (pi * k + S->r[pi]) * d, x, d * sizeof *x);
        S->piv[pi * k + S->r[pi]] = pc;
        S->r[pi]++;
    }
    S->count++;
}

/* ------------------------------------------ the hyperplane count inside s* */
/* Determinant of an r x r matrix mod p (destroys A). */
static uint64_t s_det_mod(uint64_t *A, size_t r, uint64_t p)
{
    uint64_t det = 1;
    for (size_t c = 0; c < r; c++) {
        size_t piv = c;
        while (piv < r && !A[piv * r + c])
            piv++;
        if (piv == r)
            return 0;
        if (piv != c) {
            for (size_t j = 0; j < r; j++) {
                uint64_t t = A[c * r + j];
                A[c * r + j] = A[piv * r + j];
                A[piv * r + j] = t;
            }
            det = p - det;
        }
        det = s_mulmod(det, A[c * r + c], p);
        uint64_t inv = s_inv(A[c * r + c], p);
        for (size_t i = c + 1; i < r; i++) {
            uint64_t f = s_mulmod(A[i * r + c], inv, p);
            if (f)
                for (size_t j = c; j < r; j++)
                    A[i * r + j] = (A[i * r + j] + p - s_mulmod(f, A[c * r + j], p)) % p;
        }
    }
    return det % p;
}

/* *best = max over hyperplanes H of s (k-dim, members mem[0..m-1], pivot
   columns J) of the number of members in H, exactly. */
static int s_max_hyperplane(const ex_data *D, const size_t *mem, size_t m, const size_t *J, size_t *best_out)
{
    size_t k = D->k, np = D->np;
    /* members' J-coordinates mod each prime: m x k per prime */
    uint64_t *Y = malloc(np * m * k * sizeof *Y), *nu = malloc(np * k * sizeof *nu);
    uint64_t *A = malloc((k + 1) * (k + 1) * sizeof *A);
    size_t *comb = malloc((k + 1) * sizeof *comb);
    size_t best = 0;
    int rc = DPS_OK;
    if (!Y || !nu || !A || !comb) {
        rc = DPS_ENOMEM;
        goto out;
    }
    for (size_t pi = 0; pi < np; pi++)
        for (size_t a = 0; a < m; a++)
            for (size_t b = 0; b < k; b++)
                Y[(pi * m + a) * k + b] = s_entry_mod(D, mem[a], J[b], pi);
    size_t r = k - 1;
    for (size_t i = 0; i < r; i++)
        comb[i] = i;
    for (;;) {
        /* normal nu_c = (-1)^c det(Y_comb without column c), per prime */
        int nonzero = 0;
        for (size_t pi = 0; pi < np; pi++) {
            uint64_t p = D->p[pi];
            for (size_t c = 0; c < k; c++) {
                for (size_t i = 0; i < r; i++)
                    for (size_t j = 0, jj = 0; j < k; j++)
                        if (j != c)
                            A[i * r + jj++] = Y[(pi * m + comb[i]) * k + j];
                uint64_t v = r ? s_det_mod(A, r, p) : 1;
                nu[pi * k + c] = (c & 1) && v ? p - v : v;
                nonzero |= nu[pi * k + c] != 0;
            }
        }
        if (nonzero) { /* the k-1 rows are independent: a hyperplane */
            size_t cnt = 0;
            for (size_t a = 0; a < m; a++) {
                int in = 1;
                for (size_t pi = 0; pi < np && in; pi++) {
                    uint64_t p = D->p[pi], s = 0;
                    for (size_t c = 0; c < k; c++)
                        s = (s + s_mulmod(nu[pi * k + c], Y[(pi * m + a) * k + c], p)) % p;
                    in = s == 0;
                }
                cnt += in;
            }
            best = DPS_MAX(best, cnt);
        }
        /* next (k-1)-subset of 0..m-1 */
        size_t i = r;
        while (i > 0 && comb[i - 1] == m - r + i - 1)
            i--;
        if (i == 0)
            break;
        comb[i - 1]++;
        for (size_t j = i; j < r; j++)
            comb[j] = comb[j - 1] + 1;
    }
out:
    free(Y); free(nu); free(A); free(comb);
    *best_out = best;
    return rc;
}

static double s_log_choose(size_t n, size_t r)
{
    return lgamma((double)n + 1) - lgamma((double)r + 1) - lgamma((double)(n - r) + 1);
}

/* ------------------------------------------------------------- the estimator */
int dps_exact_plan(size_t k, double eps, double delta, size_t candidates, dps_exact_stats *st)
{
    if (!st || k < 1 || !(eps > 0) || !isfinite(eps) || !(delta > 0 && delta <= 0.5))
        return DPS_EINVAL;
    memset(st, 0, sizeof *st);
    double miss = log1p(-ldexp(1.0, -(int)DPS_MIN(k, 60))); /* ln(1 - 2^-k) < 0 */
    if (candidates == 0)                                     /* (1 + e^eps) beta <= delta / 100 */
        candidates = (size_t)ceil((log(delta / 100.0) - log1p(exp(eps))) / miss);
    st->candidates = candidates;
    st->bound = dps_tlap_bound(eps, delta);
    st->delta_sampling = (1.0 + exp(eps)) * exp((double)candidates * miss);
    st->delta_total = delta + st->delta_sampling;
    st->cost = dps_zcdp_from_dp(eps, st->delta_total);
    return DPS_OK;
}

int dps_exact_check_limits(size_t n, size_t d, size_t k)
{
    if (k < 1 || k >= d)
        return DPS_EINVAL;
    if (k > DPS_EXACT_MAX_K || n > DPS_EXACT_MAX_ND / d ||
        s_log_choose(n, k - 1) + log((double)n) > log(DPS_EXACT_MAX_WORK))
        return DPS_ELIMIT;
    return DPS_OK;
}

int dps_exact_subspace(const float *X, size_t n, size_t d, size_t k, double eps, double delta, size_t candidates,
                       dps_rng *rng, float *V, int *released, dps_exact_stats *st)
{
    if (released)
        *released = 0;
    if (!X || !rng || !V || !released || n < 1 || k < 1 || k >= d || !(eps > 0) || !isfinite(eps) ||
        !(delta > 0 && delta <= 0.5))
        return DPS_EINVAL;
    int rc = dps_exact_check_limits(n, d, k);
    if (rc)
        return rc;
    dps_exact_stats s;
    dps_exact_plan(k, eps, delta, candidates, &s);
    candidates = s.candidates;

    ex_data D;
    ex_span S;
    memset(&S, 0, sizeof S);
    size_t *outside = malloc(n * sizeof *outside), *mem = malloc(n * sizeof *mem);
    size_t *chosen = malloc(k * sizeof *chosen), *best_pts = malloc(k * sizeof *best_pts);
    /* member sets of the candidates scored so far (bitsets): a repeated set is
       the same subspace and is not scored twice */
    size_t words = (n + 63) / 64, n_seen = 0;
    uint64_t *seen = calloc(words * DPS_MIN(candidates, (size_t)4096), sizeof *seen);
    uint64_t *cur = calloc(words, sizeof *cur);
    rc = s_data_init(&D, X, n, d, k);
    if (!rc)
        rc = (outside && mem && chosen && best_pts && seen && cur) ? s_span_new(&S, &D) : DPS_ENOMEM;
    s.primes = D.np;
    long best_h = 0; /* H = max(0, h): the NULL candidate has 0 */
    for (size_t cand = 0; !rc && cand < candidates; cand++) {
        /* one draw: rows uniformly among those outside the current span */
        S.count = 0;
        memset(S.r, 0, sizeof S.r);
        size_t got = 0;
        for (; got < k; got++) {
            size_t no = 0;
            for (size_t i = 0; i < n; i++)
                if (!s_in_span(&D, &S, i))
                    outside[no++] = i;
            if (no == 0)
                break; /* the rows span fewer than k dimensions */
            chosen[got] = outside[dps_rng_below(rng, no)];
            s_span_add(&D, &S, chosen[got]);
        }
        if (got < k)
            continue;
        size_t m = 0;
        memset(cur, 0, words * sizeof *cur);
        for (size_t i = 0; i < n; i++)
            if (s_in_span(&D, &S, i)) {
                mem[m++] = i;
                cur[i / 64] |= (uint64_t)1 << (i % 64);
            }
        /* h = 2m - n - maxhyp <= 2m - n - (k-1): only a majority can score */
        if ((long)(2 * m) - (long)n - (long)(k - 1) <= 0)
            continue;
        int dup = 0; /* the same member set is the same subspace */
        for (size_t j = 0; j < n_seen && !dup; j++)
            dup = memcmp(seen + j * words, cur, words * sizeof *cur) == 0;
        if (dup)
            continue;
        if (n_seen < 4096) /* past that, repeats are scored again: same result */
            memcpy(seen + n_seen++ * words, cur, words * sizeof *cur);
        /* pivot columns of a prime with full rank: a nonzero k-minor over Z */
        size_t pi = 0;
        while (S.r[pi] != k)
            pi++;
        size_t maxh = 0;
        if ((rc = s_max_hyperplane(&D, mem, m, S.piv + pi * k, &maxh)) != DPS_OK)
            break;
        s.scored++;
        long h = (long)(2 * m) - (long)n - (long)maxh;
        if (h > best_h) {
            best_h = h;
            s.members = m;
            memcpy(best_pts, chosen, k * sizeof *chosen);
        }
    }
    if (!rc) {
        s.score = (double)best_h;
        double xi = dps_tlap_sample(rng, eps, delta);
        if (best_h > 0 && (double)best_h + xi > s.bound) {
            for (size_t a = 0; a < k; a++)
                memcpy(V + a * d, X + best_pts[a] * d, d * sizeof *V);
            rc = la_orthonormalize_rows(V, k, d);
            if (!rc)
                *released = 1;
        }
    }
    if (st)
        *st = s;
    s_span_free(&S);
    s_data_free(&D);
    free(outside); free(mem); free(chosen); free(best_pts); free(seen); free(cur);
    return rc;
}
