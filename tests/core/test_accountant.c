/* test_accountant - zCDP composition, the CKS conversion, and the cap. */
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

int main(void)
{
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
