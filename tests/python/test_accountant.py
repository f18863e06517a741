#!/usr/bin/python3
"""test_accountant - dpsubspace.accountant against published values and exact identities.

Run by ctest (py_accountant): /usr/bin/python3 tests/python/test_accountant.py BUILD
(the package as the build tree has it, BUILD/python).
Prints "N passed, N failed"; exits 1 on a failure."""
import math
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(_here, "../../build")
sys.path.insert(0, os.path.join(_build, "python"))
sys.path.insert(0, os.path.dirname(_here))
from dpsubspace.accountant import Accountant, rdp_subsampled_gaussian  # noqa: E402
from pycheck import check, summary  # noqa: E402

# 1. Abadi et al. 2016 (sec. 3.1): q = 0.01, sigma = 4, T = 10 000 steps,
#    delta = 1e-5 gives eps ~ 1.26 with the moments accountant (integer
#    moments, the classical conversion): accept within 0.01.
acc = Accountant(range(2, 65))
acc.add_steps(0.01, 4.0, 10000)
eps, order = acc.get_privacy_spent(1e-5)
print(f"  Abadi et al. 2016: eps {eps:.4f} at order {order} (published 1.26)")
check(abs(eps - 1.26) < 0.01, f"Abadi et al.: eps {eps} vs 1.26")

# 2. Opacus' compute_dp_sgd_privacy documentation: 60 000 examples, batch 256,
#    sigma 1.12, 60 epochs (int(60 / q) = 14 062 steps), orders 10, 20, 100,
#    delta 1e-5: "(2.95, 1e-5)".  This computation gives 2.9415 at order 10;
#    the 0.0085 gap is not explained yet (steps or rounding on their side):
#    accept within 0.01.
q = 256 / 60000
acc = Accountant([10, 20, 100])
acc.add_steps(q, 1.12, int(60 / q))
eps, order = acc.get_privacy_spent(1e-5)
print(f"  Opacus documentation: eps {eps:.4f} at order {order} (published 2.95)")
check(abs(eps - 2.95) < 0.01 and order == 10, f"Opacus docs: eps {eps} at {order} vs 2.95 at 10")

# 3. Exact identities: q = 1 is the Gaussian mechanism, a / (2 sigma^2); at
#    order 2, A_2 = 1 + q^2 (exp(1 / sigma^2) - 1); q = 0 costs nothing; the
#    RDP grows with q.
for sigma in (0.5, 1.0, 3.0):
    for a in (2, 7, 40):
        r = rdp_subsampled_gaussian(1.0, sigma, a)
        check(abs(r - a / (2 * sigma * sigma)) < 1e-12, f"q = 1, sigma {sigma}, order {a}: {r}")
    for qq in (1e-4, 0.01, 0.3):
        want = math.log1p(qq * qq * math.expm1(1 / (sigma * sigma)))
        got = rdp_subsampled_gaussian(qq, sigma, 2)
        check(abs(got - want) <= 1e-12 * max(1.0, want), f"order 2, q {qq}, sigma {sigma}: {got} vs {want}")
    check(rdp_subsampled_gaussian(0.0, sigma, 5) == 0.0, "q = 0 costs nothing")
    prev = 0.0
    for qq in (1e-3, 1e-2, 0.1, 0.5, 0.9, 1.0):
        r = rdp_subsampled_gaussian(qq, sigma, 8)
        check(r >= prev, f"RDP grows with q (sigma {sigma}, q {qq})")
        prev = r

# 4. zCDP releases: rho at order a is a rho; alone, eps is within the integer
#    orders' rounding above the continuous optimum rho + 2 sqrt(rho log(1/delta)).
for rho in (0.01, 0.1, 1.0):
    acc = Accountant()
    acc.add_zcdp(rho)
    check(all(abs(v - a * rho) < 1e-12 for a, v in acc.rdp().items()), f"zCDP rho {rho}: a rho at every order")
    lo = rho + 2 * math.sqrt(rho * math.log(1e5))
    e = acc.get_epsilon(1e-5)
    check(lo - 1e-12 <= e <= lo * 1.02, f"zCDP rho {rho}: eps {e} vs continuous optimum {lo}")

# 5. Composition adds: two halves of a run equal the whole.
a1, a2 = Accountant(), Accountant()
a1.add_steps(0.02, 1.0, 500)
a1.add_steps(0.02, 1.0, 500)
a1.add_zcdp(0.5)
a2.add_steps(0.02, 1.0, 1000)
a2.add_zcdp(0.25)
a2.add_zcdp(0.25)
check(all(abs(a1.rdp()[a] - a2.rdp()[a]) < 1e-9 * max(1.0, a2.rdp()[a]) for a in a1.orders), "composition adds")
check(a1.steps == 1000 and abs(a1.rho - 0.5) < 1e-15, "steps and rho counted")

# 6. Bad input: a clear ValueError.
for call, what in ((lambda: rdp_subsampled_gaussian(1.5, 1.0, 2), "q > 1"),
                   (lambda: rdp_subsampled_gaussian(0.1, 0.0, 2), "sigma 0"),
                   (lambda: rdp_subsampled_gaussian(0.1, 1.0, 2.5), "fractional order"),
                   (lambda: Accountant().get_epsilon(0.0), "delta 0"),
                   (lambda: Accountant().add_zcdp(-1.0), "negative rho"),
                   (lambda: Accountant().add_steps(0.1, 1.0, -2), "negative steps"),
                   (lambda: Accountant([1, 2]), "order 1")):
    try:
        call()
        check(False, f"{what} refused")
    except ValueError:
        check(True, "")

# An empty ledger is (0, 0)-DP: nothing released depends on the data.  The
# conversion rdp + log(1/delta)/(a - 1) alone would state 11.51/255 = 0.045
# at delta 1e-5 (the largest order, 256); q = 0 steps cost nothing either.
for acc, what in ((Accountant(), "empty"), (Accountant(), "q = 0 steps")):
    if what != "empty":
        acc.add_steps(0.0, 1.0, 10)
    eps = acc.get_epsilon(1e-5)
    check(eps == 0.0, f"{what} ledger: eps {eps}, not 0")
acc = Accountant()
acc.add_zcdp(1e-12)
check(0 < acc.get_epsilon(1e-5) < 0.05, "a charge of rho 1e-12 states a positive eps (the conversion's)")

sys.exit(summary())
