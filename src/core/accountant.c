/* accountant.c - approximate zCDP bookkeeping (DESIGN 2).

   Composition: for delta_i-approximate rho_i-zCDP mechanisms run in sequence
   (adaptively), the whole is (sum delta_i)-approximate (sum rho_i)-zCDP
   (Bun-Steinke 2016, Lemma 8.3 / Prop. 1.6).  (eps, delta)-DP mechanisms enter
   as delta-approximate eps^2/2-zCDP (pure eps-DP implies eps^2/2-zCDP, BS16
   Prop. 1.4).  Shown to people: eps at a total delta, with the conversion
   getting what the mechanisms' own deltas leave:
       eps_total = eps_conv(rho, delta_total - delta_mech),
   eps_conv from the tight bound of Canonne-Kamath-Steinke 2020 (Prop. 12):
       delta(eps) = min_{a>1} exp((a-1)(a rho - eps) + a ln(1 - 1/a)) / (a - 1).
   eps_conv(rho, delta) inverts it directly: at each order a the bound holds
   with delta for eps(a) = a rho + (a ln(1 - 1/a) - ln(a - 1) - ln delta) / (a - 1)
   (solve the exponent for eps), and delta(eps) <= delta iff some a has
   eps(a) <= eps, so eps_conv = max(0, min_{a>1} eps(a)).  Whatever the
   minimiser finds is eps(a) at a concrete order, hence a valid (at worst
   slightly loose) bound.  One minimisation instead of a bisection over eps
   with one in each step: 0.62 -> 0.016 ms a call, the same eps to 1e-10
   relative (never larger); it runs for every snapshot, and at d = 100 an
   epoch is a few ms (400 epochs of dps-estimate: 1.33 -> 1.11 s).

   Gaussian totals.  A Gaussian mechanism whose l2 sensitivity over its
   noise's sd is mu is mu-GDP (Dong-Roth-Su 2022), and rho-zCDP for
   rho = mu^2 / 2; an adaptive composition of Gaussian mechanisms of mu_i,
   each mu_i bounding the sensitivity given the earlier outputs, is
   sqrt(sum mu_i^2)-GDP (DRS Cor. 3.3), so a total of rho charged by
   Gaussian mechanisms alone is the Gaussian mechanism of mu = sqrt(2 rho),
   under the adjacency its sensitivities were taken over.  Its exact profile
   (Balle-Wang 2018, Thm. 8; DRS Cor. 2.13):
       delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),
   below the CKS conversion of the same rho (rho 1, delta 1e-5: eps 6.57
   instead of 7.08).  The accountant states it when every charge was
   declared DPS_CHARGE_GAUSSIAN (the kind travels with each charge; what a
   resumed accountant starts from has a kind too); one other charge makes
   the total a mix, stated by the CKS conversion, valid for any mix.
   Computed in log space: log Phi(-x) from erfc, or for x >= 30 (erfc near
   underflow) from its asymptotic series; e^eps Phi(-eps/mu - mu/2) never
   overflows, whatever eps and mu. */
#include "dpsubspace.h"
#include "internal.h"

#include <math.h>
#include <string.h>

dps_zcdp dps_zcdp_from_dp(double eps, double delta)
{
    dps_zcdp c = {0.5 * eps * eps, delta};
    return c;
}

dps_zcdp dps_zcdp_from_pure(double eps) { return dps_zcdp_from_dp(eps, 0.0); }

/* log of the CKS expression at order a > 1. */
static double s_log_delta(double rho, double eps, double a)
{
    return (a - 1.0) * (a * rho - eps) + a * log1p(-1.0 / a) - log(a - 1.0);
}

/* The minimum over the Renyi order of f(x), x = log10(a - 1) in [-8, 10]
   (a - 1 in [1e-8, 1e10]): a coarse grid, then golden-section refinement
   around the best grid point.  The objectives here are smooth and unimodal in
   practice; the grid guards against a poor bracket.  Each value is f at a
   concrete order, so a bound read off it holds whatever the refinement
   reaches. */
typedef double (*order_fn)(const double *args, double x);

static double s_min_over_order(order_fn f, const double *args)
{
    const int grid = 400;
    const double lo = -8.0, hi = 10.0;
    double best = INFINITY;
    int best_i = 0;
    for (int i = 0; i <= grid; i++) {
        double v = f(args, lo + (hi - lo) * i / grid);
        if (v < best) {
            best = v;
            best_i = i;
        }
    }
    double step = (hi - lo) / grid;
    double a = lo + (best_i - 1) * step, b = lo + (best_i + 1) * step;
    const double g = 0.6180339887498949;
    double c = b - g * (b - a), d = a + g * (b - a);
    double fc = f(args, c), fd = f(args, d);
    for (int it = 0; it < 100; it++) {
        if (fc < fd) {
            b = d; d = c; fd = fc;
            c = b - g * (b - a);
            fc = f(args, c);
        } else {
            a = c; c = d; fc = fd;
            d = a + g * (b - a);
            fd = f(args, d);
        }
    }
    return DPS_MIN(best, DPS_MIN(fc, fd));
}

/* args: rho, eps */
static double s_log_delta_x(const double *args, double x) { return s_log_delta(args[0], args[1], 1.0 + pow(10.0, x)); }

double dps_zcdp_delta_at(double rho, double eps)
{
    if (rho <= 0.0)
        return 0.0;
    if (eps < 0.0)
        eps = 0.0;
    const double args[2] = {rho, eps};
    double delta = exp(s_min_over_order(s_log_delta_x, args));
    return delta > 1.0 ? 1.0 : delta;
}

/* eps(a) of the comment at the top, in x = log10(a - 1); args: rho, ln delta. */
static double s_eps_at_order(const double *args, double x)
{
    double rho = args[0], am1 = pow(10.0, x), a = 1.0 + am1;
    return a * rho + (a * log1p(-1.0 / a) - log(am1) - args[1]) / am1;
}

double dps_zcdp_eps_at(double rho, double delta_conv)
{
    if (rho <= 0.0)
        return 0.0;
    if (!(delta_conv > 0.0))
        return INFINITY;
    if (delta_conv >= 1.0)
        return 0.0;
    const double args[2] = {rho, log(delta_conv)};
    double v = s_min_over_order(s_eps_at_order, args);
    return v > 0.0 ? v : 0.0;
}

double dps_zcdp_eps_total(dps_zcdp spent, double delta_total)
{
    if (spent.delta >= delta_total)
        return INFINITY;
    return dps_zcdp_eps_at(spent.rho, delta_total - spent.delta);
}

/* ------------------------------------------------------- Gaussian totals */
/* log P(Z > x), Z ~ N(0, 1), to a few ulps of the log's argument for every
   x: erfc up to x = 30 (its value 5e-199 there, far from underflow), above
   it the asymptotic series P(Z > x) = phi(x) / x (1 - 1/x^2 + 3/x^4 - ...),
   whose first omitted term, 10395 / x^12, is below 2e-14 for x >= 30. */
static double s_log_tail(double x)
{
    if (x < 30.0)
        return log(0.5 * erfc(x / sqrt(2.0)));
    double r = 1.0 / (x * x);
    double series = r * (-1.0 + r * (3.0 + r * (-15.0 + r * (105.0 + r * -945.0))));
    return -0.5 * x * x - 0.5 * log(2.0 * M_PI) - log(x) + log1p(series);
}

double dps_gaussian_delta_at(double mu, double eps)
{
    if (isnan(mu) || mu < 0.0 || isnan(eps))
        return NAN;
    if (mu == 0.0)
        return 0.0;
    if (isinf(mu))
        return 1.0;
    if (isinf(eps) && eps > 0)
        return 0.0;
    if (eps < 0.0)
        eps = 0.0;
    /* delta = t1 - t2, t1 = P(Z > u), t2 = e^eps P(Z > u + mu), u = eps/mu -
       mu/2; t2 <= t1 (the profile is >= 0), so delta = t1 (1 - t2/t1) with
       t2/t1 from the logs: nothing overflows, and -expm1 keeps the small
       differences of a small mu. */
    double u = eps / mu - 0.5 * mu;
    double l1 = s_log_tail(u);
    if (l1 == -INFINITY) /* eps/mu past any double's tail: t1 underflows to 0 */
        return 0.0;
    double l2 = eps + s_log_tail(u + mu);
    if (!(l2 < l1)) /* rounding, where t2 is t1 to the last digits */
        return 0.0;
    double delta = exp(l1) * -expm1(l2 - l1);
    return delta < 1.0 ? delta : 1.0;
}

double dps_gaussian_eps_at(double mu, double delta)
{
    if (isnan(mu) || mu < 0.0)
        return NAN;
    if (mu == 0.0)
        return 0.0;
    if (!(delta > 0.0))
        return INFINITY;
    if (delta >= 1.0)
        return 0.0;
    if (isinf(mu))
        return INFINITY;
    if (dps_gaussian_delta_at(mu, 0.0) <= delta)
        return 0.0;
    /* delta(eps) <= P(Z > eps/mu - mu/2) <= exp(-(eps/mu - mu/2)^2 / 2) once
       eps/mu >= mu/2 (Chernoff), so eps = mu (mu/2 + sqrt(2 ln(1/delta)))
       reaches delta; doubled while the computed profile says otherwise. */
    double lo = 0.0, hi = mu * (0.5 * mu + sqrt(-2.0 * log(delta)));
    for (int i = 0; i < 64 && !(dps_gaussian_delta_at(mu, hi) <= delta); i++) {
        lo = hi;
        hi *= 2.0;
    }
    /* Bisection keeping delta(hi) <= delta: the eps returned reaches delta as
       computed, and is within 1e-13 relative of the smallest that does. */
    for (int i = 0; i < 200 && hi - lo > 1e-13 * hi; i++) {
        double mid = 0.5 * (lo + hi);
        if (dps_gaussian_delta_at(mu, mid) <= delta)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

/* A charge's kind, checked: 0 (ZCDP), 1 (GAUSSIAN), else -1. */
static int s_kind(dps_charge_kind kind)
{
    return kind == DPS_CHARGE_ZCDP ? 0 : kind == DPS_CHARGE_GAUSSIAN ? 1 : -1;
}

/* A total is Gaussian only with delta 0: a kind that says Gaussian beside a
   delta is a mix, and gets the rule valid for any mix. */
static double s_eps_total(dps_zcdp spent, int gaussian, double delta_total)
{
    if (gaussian && spent.delta == 0.0)
        return dps_gaussian_eps_at(sqrt(2.0 * spent.rho), delta_total);
    return dps_zcdp_eps_total(spent, delta_total);
}

double dps_zcdp_eps_total_kind(dps_zcdp spent, dps_charge_kind kind, double delta_total)
{
    return s_eps_total(spent, s_kind(kind) == 1, delta_total);
}

/* ------------------------------------------------------------ accountant */
/* gaussian: 1 while every charge with a non-zero cost, and what the
   accountant resumed from, was a Gaussian mechanism (a zero cost is no
   mechanism and keeps it); spent.delta is then 0. */
struct dps_accountant {
    dps_budget cap;
    dps_zcdp spent;
    int gaussian;
};

static int s_cap_valid(const dps_budget *cap)
{
    if (!(cap->rho_cap >= 0 && cap->eps_cap >= 0 && cap->delta_target >= 0 && cap->delta_target < 1))
        return 0; /* NaN fails too */
    return !((cap->rho_cap > 0 || cap->eps_cap > 0) && !(cap->delta_target > 0));
}

/* A cost that is no mechanism: nothing spent. */
static int s_zero(dps_zcdp c) { return c.rho == 0.0 && c.delta == 0.0; }

int dps_accountant_new_resumed(dps_accountant **out, const dps_budget *cap, const dps_zcdp *spent_before,
                               dps_charge_kind spent_kind)
{
    if (!out)
        return DPS_EINVAL;
    *out = NULL;
    int k = s_kind(spent_kind);
    if (k < 0 || (cap && !s_cap_valid(cap)))
        return DPS_EINVAL;
    if (spent_before && (spent_before->rho < 0 || spent_before->delta < 0))
        return DPS_EINVAL;
    if (spent_before && k == 1 && spent_before->delta != 0.0)
        return DPS_EINVAL;
    dps_accountant *a = calloc(1, sizeof *a);
    if (!a)
        return DPS_ENOMEM;
    if (cap)
        a->cap = *cap;
    if (spent_before)
        a->spent = *spent_before;
    a->gaussian = k == 1 || s_zero(a->spent);
    *out = a;
    return DPS_OK;
}

int dps_accountant_new(dps_accountant **out, const dps_budget *cap, const dps_zcdp *spent_before)
{
    return dps_accountant_new_resumed(out, cap, spent_before, DPS_CHARGE_ZCDP);
}

void dps_accountant_destroy(dps_accountant **acc)
{
    if (acc && *acc) {
        free(*acc);
        *acc = NULL;
    }
}

/* The eps cap reads the total's eps by the rule its kind allows: a
   Gaussian-only total fits more charges under the same eps cap.  An eps
   that is not a number does not fit. */
static int s_within(const dps_budget *cap, dps_zcdp total, int gaussian)
{
    const double slack = 1e-12; /* float summation of equal charges */
    if (cap->rho_cap > 0) {
        if (total.rho > cap->rho_cap * (1 + slack) || total.delta > cap->delta_target * (1 + slack))
            return 0;
    }
    if (cap->eps_cap > 0) {
        if (!(s_eps_total(total, gaussian, cap->delta_target) <= cap->eps_cap * (1 + slack)))
            return 0;
    }
    return 1;
}

/* The total after a cost of kind k (checked), and whether it stays Gaussian. */
static dps_zcdp s_after(const dps_accountant *acc, dps_zcdp cost, int k, int *gaussian)
{
    *gaussian = acc->gaussian && (k == 1 || s_zero(cost));
    return (dps_zcdp){acc->spent.rho + cost.rho, acc->spent.delta + cost.delta};
}

/* A cost the accountant can take: finite and non-negative, of a known kind,
   and a Gaussian one without a delta (fits and charge ask the same). */
static int s_cost_ok(dps_zcdp cost, int k)
{
    return k >= 0 && isfinite(cost.rho) && isfinite(cost.delta) && cost.rho >= 0 && cost.delta >= 0 &&
           !(k == 1 && cost.delta != 0.0);
}

int dps_charge_valid(dps_zcdp cost, dps_charge_kind kind)
{
    return s_cost_ok(cost, s_kind(kind));
}

int dps_accountant_fits_kind(const dps_accountant *acc, dps_zcdp cost, dps_charge_kind kind)
{
    int k = s_kind(kind), gaussian;
    if (!acc || !s_cost_ok(cost, k))
        return 0;
    dps_zcdp total = s_after(acc, cost, k, &gaussian);
    return s_within(&acc->cap, total, gaussian);
}

int dps_accountant_fits(const dps_accountant *acc, dps_zcdp cost)
{
    return dps_accountant_fits_kind(acc, cost, DPS_CHARGE_ZCDP);
}

int dps_accountant_charge_kind(dps_accountant *acc, dps_zcdp cost, dps_charge_kind kind)
{
    int k = s_kind(kind), gaussian;
    if (!acc || !s_cost_ok(cost, k))
        return DPS_EINVAL;
    dps_zcdp total = s_after(acc, cost, k, &gaussian);
    if (!s_within(&acc->cap, total, gaussian))
        return DPS_EBUDGET;
    acc->spent = total;
    acc->gaussian = gaussian;
    return DPS_OK;
}

int dps_accountant_charge(dps_accountant *acc, dps_zcdp cost)
{
    return dps_accountant_charge_kind(acc, cost, DPS_CHARGE_ZCDP);
}

int dps_accountant_set_cap(dps_accountant *acc, const dps_budget *cap)
{
    if (!acc || (cap && !s_cap_valid(cap)))
        return DPS_EINVAL;
    if (cap)
        acc->cap = *cap;
    else
        memset(&acc->cap, 0, sizeof acc->cap);
    return DPS_OK;
}

dps_zcdp dps_accountant_spent(const dps_accountant *acc) { return acc->spent; }

dps_charge_kind dps_accountant_kind(const dps_accountant *acc)
{
    return acc->gaussian ? DPS_CHARGE_GAUSSIAN : DPS_CHARGE_ZCDP;
}

double dps_accountant_eps(const dps_accountant *acc, double delta_total)
{
    double dt = delta_total > 0 ? delta_total : acc->cap.delta_target;
    if (!(dt > 0))
        return INFINITY;
    return s_eps_total(acc->spent, acc->gaussian, dt);
}

double dps_accountant_left(const dps_accountant *acc)
{
    if (acc->cap.rho_cap > 0)
        return DPS_MAX(0.0, acc->cap.rho_cap - acc->spent.rho);
    if (acc->cap.eps_cap > 0)
        return DPS_MAX(0.0, acc->cap.eps_cap - dps_accountant_eps(acc, 0));
    return INFINITY;
}

const char *dps_budget_unit(const dps_budget *cap)
{
    return !cap ? "none" : cap->rho_cap > 0 ? "rho" : cap->eps_cap > 0 ? "eps" : "none";
}
