/* test_accountant - zCDP composition, the CKS conversion, the exact Gaussian
   profile, charges' kinds, and the cap. */
#include "check.h"
#include "dpsubspace.h"

#include <math.h>
#include <string.h>

/* Reference values of the CKS conversion were computed by hand with an
   independent brute force (numpy: a = 1 + 10^x on a grid of 2e6 points,
   x in [-6, 6], then the minimum; eps by bisection on it), from the formula
       delta(eps) = min_{a>1} exp((a-1)(a rho - eps) + a ln(1-1/a)) / (a-1).  */
static const struct { double rho, eps, delta; } s_delta_ref[] = {
    {0.5, 3.0, 5.1432e-03},
    {1.0, 5.0, 2.6120e-03},
    {0.1, 1.0, 8.9332e-03},
    {2.0, 10.0, 4.8726e-05},
};
/* eps at delta (inverse of the above), same brute force. */
static const struct { double rho, delta, eps; } s_eps_ref[] = {
    {0.5, 1e-5, 4.7284},
    {1.0, 1e-6, 7.7662},
    {0.01, 1e-5, 0.5457},
};

/* The Gaussian mechanism's delta at eps by brute force, independent of the
   library's formula: the hockey-stick divergence of P = N(mu, 1) from
   Q = N(0, 1), E_P[(1 - e^(eps - L))_+] with L(x) = log p/q = mu x - mu^2/2,
   by composite Simpson over z = x - mu from where L = eps (z0 = eps/mu -
   mu/2; below it the integrand is 0) to 40 past it (or past 0), where
   phi(z) is below 1e-300 of the mass.  n intervals. */
static double s_hockey(double mu, double eps, int n)
{
    double z0 = eps / mu - 0.5 * mu;
    double lo = z0 > -40 ? z0 : -40, hi = (lo > 0 ? lo : 0) + 40, h = (hi - lo) / n, sum = 0;
    for (int i = 0; i <= n; i++) {
        double z = lo + h * i;
        double f = exp(-0.5 * z * z) / sqrt(2 * M_PI) * -expm1(eps - mu * z - 0.5 * mu * mu);
        sum += f * (i == 0 || i == n ? 1 : i % 2 ? 4 : 2);
    }
    return sum * h / 3;
}

/* The smallest eps with s_hockey(mu, eps) <= delta, by bisection. */
static double s_hockey_eps(double mu, double delta)
{
    double lo = 0, hi = 1;
    while (s_hockey(mu, hi, 20000) > delta)
        hi *= 2;
    for (int i = 0; i < 50; i++) {
        double mid = 0.5 * (lo + hi);
        if (s_hockey(mu, mid, 20000) > delta)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

/* The exact Gaussian profile (dps_gaussian_delta_at, dps_gaussian_eps_at)
   against the brute force, where e^eps overflows too, and its edges. */
static void s_gaussian_profile(void)
{
    /* rho 1, 3, 0.1 at delta 1e-5 (mu = sqrt(2 rho)): the figures the
       programs state, to 2 decimals, both by the library and by bisection on
       the brute force; and below the CKS conversion of the same rho. */
    const struct { double rho, eps2; } fig[] = {{1.0, 6.57}, {3.0, 12.87}, {0.1, 1.76}};
    for (size_t i = 0; i < sizeof fig / sizeof *fig; i++) {
        double mu = sqrt(2 * fig[i].rho), e = dps_gaussian_eps_at(mu, 1e-5), b = s_hockey_eps(mu, 1e-5);
        NOTE("rho %g: exact Gaussian eps %.6f at delta 1e-5 (brute force %.6f), CKS %.4f", fig[i].rho, e, b,
             dps_zcdp_eps_at(fig[i].rho, 1e-5));
        CHECK(fabs(e - fig[i].eps2) < 0.005 && fabs(b - fig[i].eps2) < 0.005 && fabs(e - b) < 1e-6,
              "rho %g: %.6f (brute force %.6f), want %.2f", fig[i].rho, e, b, fig[i].eps2);
        CHECK(e < dps_zcdp_eps_at(fig[i].rho, 1e-5), "rho %g: below CKS", fig[i].rho);
    }
    CHECK(fabs(dps_zcdp_eps_at(1.0, 1e-5) - 7.08) < 0.005, "CKS at rho 1: 7.08 (%.4f)", dps_zcdp_eps_at(1.0, 1e-5));

    /* delta_at against the brute force, relative 1e-7, from mu 1e-3 to 200
       (eps to 2e4: e^eps far past a double) and delta to 1e-250 (the
       asymptotic tail of log Phi past 30 standard deviations). */
    const struct { double mu, eps; } pts[] = {{1e-3, 1e-4}, {0.1, 0.05}, {sqrt(2), 0}, {sqrt(2), 3},
                                                {sqrt(2), 6.573}, {1, 34.3}, {5, 20}, {40, 970}, {200, 21100}};
    for (size_t i = 0; i < sizeof pts / sizeof *pts; i++) {
        double v = dps_gaussian_delta_at(pts[i].mu, pts[i].eps), b = s_hockey(pts[i].mu, pts[i].eps, 400000);
        NOTE("delta(mu %g, eps %g) = %.10e (brute force %.10e)", pts[i].mu, pts[i].eps, v, b);
        CHECK(b > 0 && fabs(v / b - 1) < 1e-7, "delta_at(%g, %g) = %.10e, brute force %.10e", pts[i].mu, pts[i].eps,
              v, b);
    }

    /* eps_at reaches delta (brute force <= delta, to its quadrature's 1e-8)
       and is tight (1e-6 less does not), at several (mu, delta). */
    const struct { double mu, delta; } eds[] = {{1e-3, 1e-6}, {0.1, 1e-5},  {sqrt(2), 1e-5}, {1, 1e-10},
                                                {5, 1e-3},    {40, 1e-5},   {200, 1e-8},     {1, 1e-250}};
    for (size_t i = 0; i < sizeof eds / sizeof *eds; i++) {
        double mu = eds[i].mu, dl = eds[i].delta, e = dps_gaussian_eps_at(mu, dl);
        double at = s_hockey(mu, e, 400000), below = s_hockey(mu, e * (1 - 1e-6), 400000);
        NOTE("eps(mu %g, delta %g) = %.10g: brute force delta there %.6e, 1e-6 below %.6e", mu, dl, e, at, below);
        CHECK(isfinite(e) && e > 0 && at <= dl * (1 + 1e-8), "eps_at(%g, %g) = %g reaches it (%.8e)", mu, dl, e, at);
        CHECK(below > dl, "eps_at(%g, %g) = %g is tight (%.8e)", mu, dl, e, below);
    }

    /* Edges: mu 0 spends nothing; delta(0) = Phi(mu/2) - Phi(-mu/2) and a
       delta at or above it needs eps 0; no finite eps reaches delta 0; an
       infinite mu reaches no delta below 1; NaN and negative mu say NaN. */
    CHECK(dps_gaussian_eps_at(0, 1e-5) == 0 && dps_gaussian_delta_at(0, 0) == 0, "mu 0");
    CHECK(fabs(dps_gaussian_delta_at(1, 0) - erf(0.5 / sqrt(2))) < 1e-15 &&
          dps_gaussian_delta_at(1, -3) == dps_gaussian_delta_at(1, 0), "delta(0), and eps < 0 taken as 0");
    CHECK(dps_gaussian_eps_at(1, dps_gaussian_delta_at(1, 0)) == 0 && dps_gaussian_eps_at(1, 0.9) == 0 &&
              dps_gaussian_eps_at(1, 0.38) > 0, "delta >= delta(0): eps 0; below, not");
    CHECK(dps_gaussian_eps_at(1, 1) == 0 && dps_gaussian_eps_at(1, 2) == 0, "delta >= 1: eps 0");
    CHECK(isinf(dps_gaussian_eps_at(1, 0)) && isinf(dps_gaussian_eps_at(1, -1)) && isinf(dps_gaussian_eps_at(1, NAN)),
          "delta <= 0 or NaN: INFINITY");
    CHECK(isinf(dps_gaussian_eps_at(INFINITY, 1e-5)) && dps_gaussian_delta_at(INFINITY, 5) == 1, "mu infinite");
    CHECK(dps_gaussian_delta_at(1, INFINITY) == 0 && dps_gaussian_delta_at(1e-300, 1e300) == 0,
          "eps/mu past every tail");
    CHECK(isnan(dps_gaussian_eps_at(NAN, 1e-5)) && isnan(dps_gaussian_eps_at(-1, 1e-5)) &&
          isnan(dps_gaussian_delta_at(-1, 1)) && isnan(dps_gaussian_delta_at(1, NAN)), "NaN and negative mu: NaN");
    /* Monotone in mu, and decreasing in eps. */
    CHECK(dps_gaussian_eps_at(1.0, 1e-5) < dps_gaussian_eps_at(1.1, 1e-5), "more mu, more eps");
    CHECK(dps_gaussian_delta_at(2, 1) > dps_gaussian_delta_at(2, 1.5), "delta decreasing in eps");
}

/* A total's kind decides its eps: the exact Gaussian one while every charge
   is Gaussian, the CKS conversion once one is not; the eps cap reads the
   same rule. */
static void s_kinds(void)
{
    const double g1 = dps_gaussian_eps_at(sqrt(2.0), 1e-5), c1 = dps_zcdp_eps_at(1.0, 1e-5);
    dps_zcdp one = {1.0, 0};
    CHECK(dps_zcdp_eps_total_kind(one, DPS_CHARGE_GAUSSIAN, 1e-5) == g1, "eps_total_kind: Gaussian");
    CHECK(dps_zcdp_eps_total_kind(one, DPS_CHARGE_ZCDP, 1e-5) == c1, "eps_total_kind: CKS");
    CHECK(dps_zcdp_eps_total_kind((dps_zcdp){1.0, 1e-6}, DPS_CHARGE_GAUSSIAN, 1e-5) ==
              dps_zcdp_eps_total((dps_zcdp){1.0, 1e-6}, 1e-5),
          "a 'Gaussian' total with a delta is a mix: CKS");
    CHECK(dps_zcdp_eps_total_kind(one, (dps_charge_kind)7, 1e-5) == c1, "a kind out of range: CKS");

    /* Four Gaussian charges of 0.25: the total is the Gaussian of mu = sqrt 2. */
    dps_accountant *a = NULL;
    CHECK(dps_accountant_new(&a, NULL, NULL) == DPS_OK && dps_accountant_kind(a) == DPS_CHARGE_GAUSSIAN,
          "nothing spent: Gaussian (mu 0)");
    for (int i = 0; i < 4; i++)
        CHECK(dps_accountant_charge_kind(a, (dps_zcdp){0.25, 0}, DPS_CHARGE_GAUSSIAN) == DPS_OK, "gaussian %d", i);
    CHECK(dps_accountant_charge(a, (dps_zcdp){0, 0}) == DPS_OK, "a zero charge of any kind");
    double e = dps_accountant_eps(a, 1e-5);
    NOTE("four Gaussian charges of rho 0.25: eps %.4f at 1e-5 (CKS of rho 1: %.4f)", e, c1);
    CHECK(dps_accountant_kind(a) == DPS_CHARGE_GAUSSIAN && fabs(e - g1) < 1e-9 && fabs(e - 6.57) < 0.005,
          "gaussian-only: exact eps %.4f", e);
    CHECK(dps_accountant_charge_kind(a, (dps_zcdp){0.25, 1e-9}, DPS_CHARGE_GAUSSIAN) == DPS_EINVAL &&
              dps_accountant_charge_kind(a, (dps_zcdp){0.25, 0}, (dps_charge_kind)2) == DPS_EINVAL &&
              !dps_accountant_fits_kind(a, (dps_zcdp){0.25, 1e-9}, DPS_CHARGE_GAUSSIAN) &&
              dps_accountant_spent(a).rho == 1.0 && dps_accountant_kind(a) == DPS_CHARGE_GAUSSIAN,
          "a Gaussian charge with a delta, or a kind out of range: refused, nothing changes");
    /* One non-Gaussian charge (pure eps 0.1: rho 0.005) makes it a mix. */
    CHECK(dps_accountant_charge(a, dps_zcdp_from_pure(0.1)) == DPS_OK, "a pure-DP charge");
    e = dps_accountant_eps(a, 1e-5);
    NOTE("and one pure eps-DP charge of rho 0.005: eps %.4f (CKS of rho 1.005)", e);
    CHECK(dps_accountant_kind(a) == DPS_CHARGE_ZCDP && fabs(e - dps_zcdp_eps_at(1.005, 1e-5)) < 1e-9 && e > c1,
          "mixed: the CKS conversion (%.4f)", e);
    CHECK(dps_accountant_charge_kind(a, (dps_zcdp){0.25, 0}, DPS_CHARGE_GAUSSIAN) == DPS_OK &&
              dps_accountant_kind(a) == DPS_CHARGE_ZCDP,
          "a mix stays a mix");
    dps_accountant_destroy(&a);

    /* Resuming: spent_before of a kind; dps_accountant_new takes it as ZCDP. */
    CHECK(dps_accountant_new_resumed(&a, NULL, &one, DPS_CHARGE_GAUSSIAN) == DPS_OK &&
              fabs(dps_accountant_eps(a, 1e-5) - g1) < 1e-12,
          "resumed Gaussian rho 1: %.4f", dps_accountant_eps(a, 1e-5));
    dps_accountant_destroy(&a);
    CHECK(dps_accountant_new(&a, NULL, &one) == DPS_OK && dps_accountant_kind(a) == DPS_CHARGE_ZCDP &&
              fabs(dps_accountant_eps(a, 1e-5) - c1) < 1e-12,
          "resumed without a kind: CKS %.4f", dps_accountant_eps(a, 1e-5));
    dps_accountant_destroy(&a);
    CHECK(dps_accountant_new_resumed(&a, NULL, &(dps_zcdp){1, 1e-8}, DPS_CHARGE_GAUSSIAN) == DPS_EINVAL && !a &&
              dps_accountant_new_resumed(&a, NULL, &one, (dps_charge_kind)-1) == DPS_EINVAL && !a,
          "resumed: a Gaussian total with a delta, a kind out of range: refused");

    /* The eps cap 6.6 at 1e-5: Gaussian charges of 0.25 fit four (exact eps
       6.57), charges of another kind three (CKS: rho 1 is 7.08); after three
       Gaussian ones a fourth fits as Gaussian and not as another kind. */
    dps_budget cap = {0, 6.6, 1e-5};
    const dps_charge_kind kinds[2] = {DPS_CHARGE_GAUSSIAN, DPS_CHARGE_ZCDP};
    int fit[2];
    for (int k = 0; k < 2; k++) {
        CHECK(dps_accountant_new(&a, &cap, NULL) == DPS_OK, "eps cap");
        fit[k] = 0;
        while (fit[k] < 100 && dps_accountant_charge_kind(a, (dps_zcdp){0.25, 0}, kinds[k]) == DPS_OK)
            fit[k]++;
        NOTE("eps cap 6.6 at 1e-5: %d %s charges of rho 0.25 fit, eps %.4f, left %.4f", fit[k],
             k ? "non-Gaussian" : "Gaussian", dps_accountant_eps(a, 0), dps_accountant_left(a));
        CHECK(fabs(dps_accountant_left(a) - (6.6 - dps_accountant_eps(a, 0))) < 1e-12, "left by the same rule");
        dps_accountant_destroy(&a);
    }
    CHECK(fit[0] == 4 && fit[1] == 3, "the cap reads the kind's rule: %d Gaussian, %d other", fit[0], fit[1]);
    CHECK(dps_accountant_new(&a, &cap, NULL) == DPS_OK, "eps cap");
    for (int i = 0; i < 3; i++)
        dps_accountant_charge_kind(a, (dps_zcdp){0.25, 0}, DPS_CHARGE_GAUSSIAN);
    CHECK(dps_accountant_fits_kind(a, (dps_zcdp){0.25, 0}, DPS_CHARGE_GAUSSIAN) &&
              !dps_accountant_fits_kind(a, (dps_zcdp){0.25, 0}, DPS_CHARGE_ZCDP) &&
              !dps_accountant_fits(a, (dps_zcdp){0.25, 0}) &&
              dps_accountant_charge(a, (dps_zcdp){0.25, 0}) == DPS_EBUDGET && dps_accountant_spent(a).rho == 0.75,
          "after three Gaussian charges a fourth fits as Gaussian only");
    dps_accountant_destroy(&a);
}

/* fits and charge agree on what a cost is: a negative, NaN or infinite one
   is neither within the cap nor charged (dps_release_decide relies on it:
   the charge after a durable commit must not fail). */
static void s_invalid_costs(void)
{
    const dps_zcdp bad[] = {{-1e-3, 0}, {0.1, -1e-9}, {NAN, 0}, {0.1, NAN}, {INFINITY, 0}};
    dps_accountant *acc = NULL;
    CHECK(dps_accountant_new(&acc, NULL, NULL) == DPS_OK, "no cap");
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        for (int kind = 0; kind < 2; kind++)
            CHECK(!dps_charge_valid(bad[i], (dps_charge_kind)kind) &&
                      !dps_accountant_fits_kind(acc, bad[i], (dps_charge_kind)kind) &&
                      dps_accountant_charge_kind(acc, bad[i], (dps_charge_kind)kind) == DPS_EINVAL,
                  "cost (%g, %g) of kind %d: refused by valid, fits and charge", bad[i].rho, bad[i].delta, kind);
    CHECK(dps_accountant_spent(acc).rho == 0 && dps_accountant_spent(acc).delta == 0, "nothing charged");
    CHECK(dps_charge_valid((dps_zcdp){0.5, 1e-6}, DPS_CHARGE_ZCDP) &&
              !dps_charge_valid((dps_zcdp){0.5, 1e-6}, DPS_CHARGE_GAUSSIAN) &&
              dps_charge_valid((dps_zcdp){0, 0}, DPS_CHARGE_GAUSSIAN) &&
              !dps_charge_valid((dps_zcdp){0.5, 0}, (dps_charge_kind)7),
          "valid: a zCDP cost with a delta, a Gaussian without, not an unknown kind");
    dps_accountant_destroy(&acc);
}

int main(void)
{
    s_gaussian_profile();
    s_kinds();
    s_invalid_costs();
    for (size_t i = 0; i < sizeof s_delta_ref / sizeof *s_delta_ref; i++) {
        double v = dps_zcdp_delta_at(s_delta_ref[i].rho, s_delta_ref[i].eps);
        NOTE("delta(rho=%g, eps=%g) = %.5e (ref %.4e)", s_delta_ref[i].rho, s_delta_ref[i].eps, v, s_delta_ref[i].delta);
        CHECK(fabs(v / s_delta_ref[i].delta - 1) < 1e-3, "delta_at %zu: %g", i, v);
    }
    for (size_t i = 0; i < sizeof s_eps_ref / sizeof *s_eps_ref; i++) {
        double rho = s_eps_ref[i].rho, dl = s_eps_ref[i].delta;
        double v = dps_zcdp_eps_at(rho, dl);
        NOTE("eps(rho=%g, delta=%g) = %.5f (ref %.4f)", rho, dl, v, s_eps_ref[i].eps);
        CHECK(fabs(v - s_eps_ref[i].eps) < 2e-3, "eps_at %zu: %g", i, v);
        /* Never looser than the classical rho + 2 sqrt(rho ln(1/delta)). */
        CHECK(v <= rho + 2 * sqrt(rho * log(1 / dl)), "tighter than classical");
    }
    /* eps_at inverts delta_at (accountant.c: the minimum over orders of the
       exponent solved for eps): the eps returned reaches the delta asked,
       delta_at(rho, eps) <= delta (1 + 1e-6: both minimisations stop at a
       golden-section tolerance), and a slightly smaller eps does not,
       delta_at(rho, eps (1 - 1e-6) - 1e-9) > delta: a valid and tight
       inverse over rho 1e-6 .. 1e4 and delta 1e-12 .. 0.5. */
    {
        const double rhos[] = {1e-6, 1e-3, 0.1, 1, 10, 1e4}, dls[] = {1e-12, 1e-8, 1e-5, 1e-2, 0.5};
        for (size_t i = 0; i < sizeof rhos / sizeof *rhos; i++)
            for (size_t j = 0; j < sizeof dls / sizeof *dls; j++) {
                double e = dps_zcdp_eps_at(rhos[i], dls[j]);
                CHECK(dps_zcdp_delta_at(rhos[i], e) <= dls[j] * (1 + 1e-6), "eps_at(%g, %g) = %g reaches it",
                      rhos[i], dls[j], e);
                CHECK(e == 0 || dps_zcdp_delta_at(rhos[i], e * (1 - 1e-6) - 1e-9) > dls[j],
                      "eps_at(%g, %g) = %g is tight", rhos[i], dls[j], e);
            }
    }
    /* Monotone: more rho, more eps. */
    CHECK(dps_zcdp_eps_at(1.0, 1e-5) > dps_zcdp_eps_at(0.5, 1e-5), "monotone in rho");
    CHECK(dps_zcdp_eps_at(0, 1e-5) == 0, "rho 0");

    /* (eps, delta)-DP and pure DP enter as eps^2/2. */
    dps_zcdp c = dps_zcdp_from_dp(2.0, 1e-6);
    CHECK(c.rho == 2.0 && c.delta == 1e-6, "from_dp");
    CHECK(dps_zcdp_from_pure(0.5).rho == 0.125, "from_pure");

    /* eps_total: mechanisms' delta is subtracted from the total delta. */
    dps_zcdp spent = {0.5, 5e-6};
    double e1 = dps_zcdp_eps_total(spent, 1e-5);
    CHECK(fabs(e1 - dps_zcdp_eps_at(0.5, 5e-6)) < 1e-12, "eps_total subtracts");
    spent.delta = 1e-5;
    CHECK(isinf(dps_zcdp_eps_total(spent, 1e-5)), "eps_total infinite when delta used up");

    /* Composition and the rho cap: 4 charges of 0.25 fit in 1.0, the 5th does not. */
    dps_budget cap = {1.0, 0, 1e-5};
    dps_accountant *a = NULL;
    CHECK(dps_accountant_new(&a, &cap, NULL) == DPS_OK, "new");
    dps_zcdp q = {0.25, 1e-7};
    for (int i = 0; i < 4; i++)
        CHECK(dps_accountant_charge(a, q) == DPS_OK, "charge %d", i);
    CHECK(dps_accountant_fits(a, q) == 0, "fifth does not fit");
    CHECK(dps_accountant_charge(a, q) == DPS_EBUDGET, "fifth refused");
    dps_zcdp s = dps_accountant_spent(a);
    CHECK(fabs(s.rho - 1.0) < 1e-12 && fabs(s.delta - 4e-7) < 1e-18, "rhos and deltas add: %g %g", s.rho, s.delta);
    CHECK(dps_accountant_left(a) < 1e-12, "nothing left");
    dps_accountant_destroy(&a);
    CHECK(a == NULL, "destroy nulls");

    /* eps cap at a target delta, resuming from a ledger. */
    dps_budget ecap = {0, 3.0, 1e-5};
    dps_zcdp before = {0.05, 0};
    CHECK(dps_accountant_new(&a, &ecap, &before) == DPS_OK, "new eps cap");
    double e_before = dps_accountant_eps(a, 0);
    CHECK(fabs(e_before - dps_zcdp_eps_at(0.05, 1e-5)) < 1e-9, "resumed spend counted");
    int n_ok = 0;
    while (dps_accountant_charge(a, (dps_zcdp){0.05, 0}) == DPS_OK)
        n_ok++;
    double e_after = dps_accountant_eps(a, 0);
    CHECK(e_after <= 3.0, "never past the cap: %g", e_after);
    CHECK(dps_zcdp_eps_at(dps_accountant_spent(a).rho + 0.05, 1e-5) > 3.0, "the next would pass");
    CHECK(n_ok > 0, "some charges fit");
    NOTE("eps cap 3 at 1e-5 from rho 0.05: %d charges of 0.05, eps now %.4f", n_ok, e_after);
    dps_accountant_destroy(&a);

    /* Bad caps refused. */
    dps_budget bad = {1.0, 0, 0};
    CHECK(dps_accountant_new(&a, &bad, NULL) == DPS_EINVAL, "cap without delta");
    dps_accountant *none = NULL;
    CHECK(dps_accountant_new(&none, NULL, NULL) == DPS_OK, "no cap");
    CHECK(isinf(dps_accountant_left(none)), "no cap: infinite left");
    CHECK(dps_accountant_charge(none, (dps_zcdp){100, 0.1}) == DPS_OK, "no cap accepts");
    CHECK(dps_accountant_charge(none, (dps_zcdp){-1, 0}) == DPS_EINVAL, "negative refused");

    /* A cap set later (a collector reloading its configuration): spent stays,
       the new cap decides; a bad one changes nothing. */
    dps_budget later = {101.0, 0, 0.5}; /* above the 0.1 of delta spent */
    CHECK(dps_accountant_set_cap(none, &later) == DPS_OK, "set_cap");
    CHECK(dps_accountant_spent(none).rho == 100 && dps_accountant_left(none) == 1.0, "set_cap keeps spent: left %g",
          dps_accountant_left(none));
    CHECK(dps_accountant_fits(none, (dps_zcdp){1.0, 0}) && !dps_accountant_fits(none, (dps_zcdp){1.5, 0}),
          "set_cap: the new cap decides");
    dps_budget below = {50.0, 0, 1e-5};
    CHECK(dps_accountant_set_cap(none, &below) == DPS_OK, "a cap below what was spent is accepted");
    CHECK(dps_accountant_left(none) == 0 && !dps_accountant_fits(none, (dps_zcdp){1e-3, 0}),
          "below spent: nothing left, every charge refused");
    CHECK(dps_accountant_set_cap(none, &bad) == DPS_EINVAL && dps_accountant_left(none) == 0, "bad cap: unchanged");
    dps_budget nan_cap = {NAN, 0, 1e-5};
    CHECK(dps_accountant_set_cap(none, &nan_cap) == DPS_EINVAL, "NaN cap refused");
    CHECK(dps_accountant_set_cap(none, NULL) == DPS_OK && isinf(dps_accountant_left(none)), "NULL: no cap again");
    CHECK(strcmp(dps_budget_unit(&later), "rho") == 0 && strcmp(dps_budget_unit(&ecap), "eps") == 0 &&
          strcmp(dps_budget_unit(&(dps_budget){0, 0, 1e-5}), "none") == 0 && strcmp(dps_budget_unit(NULL), "none") == 0,
          "budget units");
    dps_accountant_destroy(&none);
    return check_summary();
}
