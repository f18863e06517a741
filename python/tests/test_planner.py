"""dpsubspace.torch.plan: the noise-to-clip ratio and sigma it states against
the accountant computed here, each group's threshold against the Gaussian
mechanism's noise edge derived here from rho (a wrong noise scale or a wrong
edge fails), both branches of the recommendation, the log line of
make_private, and bad input."""
import logging
import math

import pytest

torch = pytest.importorskip("torch")
import dpsubspace as dp  # noqa: E402
from dpsubspace import torch as dpt  # noqa: E402
from dpsubspace.torch import planner  # noqa: E402

nn = torch.nn


def two_layers():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(20, 8), nn.Tanh(), nn.Linear(8, 3))  # groups by layer: 168 and 27


def test_noise_to_clip_is_plain_dpsgd_sigma_times_sqrt_p_over_batch():
    m = two_layers()
    p = sum(t.numel() for t in m.parameters())
    out = dpt.plan(m, 1000, 100, 5, 1.0, 1e-5)
    sigma = dp.noise_multiplier(1.0, 1e-5, 100 / 1000, 50)
    assert out.params == p == 195 and out.steps == 50
    assert out.sigma == pytest.approx(sigma, rel=1e-12)
    assert out.noise_to_clip == pytest.approx(sigma * math.sqrt(195) / 100, rel=1e-12)
    # the basis's releases take a share: the steps' sigma is larger than plain DP-SGD's
    assert out.sigma_with_basis > out.sigma


def test_threshold_is_the_dense_gaussian_edge_over_the_rows():
    """A dense group of width d_g released with noise sd s = 1/sqrt(rho) per
    entry has the Wigner edge 2 s sqrt(d_g); a direction holding a share e
    of each of the N = basis_rate n rows' energy has eigenvalue N e and
    shows above T = edge / 2: needed = s sqrt(d_g) / N.  A noise sd of
    sqrt(2/rho) (or an edge of s d_g) would miss this by a factor of
    sqrt 2 (or more)."""
    m = two_layers()
    out = dpt.plan(m, 5000, 250, 4, 2.0, 1e-5, share=0.2, basis_rate=0.4, mechanism="gaussian")
    s = 1 / math.sqrt(out.rho_release)
    rows = 0.4 * 5000
    assert [g.width for g in out.groups] == [168, 27]
    for g in out.groups:
        assert g.needed == pytest.approx(s * math.sqrt(g.width) / rows, rel=1e-9)
        e = planner.TOP_DIRECTION
        assert g.kept == (pytest.approx(1 - (g.needed / e) ** 2) if e > g.needed else 0.0)
    assert out.kept == pytest.approx(sum(g.width * g.kept for g in out.groups) / out.params)


def test_kron_threshold_is_the_wider_side_edge_at_sqrt2_the_noise():
    """A kron release draws s = sqrt(2 / rho) for every entry (moment_groups.c)
    and a group's edge is its wider side's, 2 s sqrt(max(r, c)); each side
    of r x c needs s sqrt(r) / N and s sqrt(c) / N, and a product keeps
    what both sides keep.  The biases (no shape) are dense at the same s."""
    m = two_layers()
    out = dpt.plan(m, 50000, 500, 4, 3.0, 1e-5, share=0.2, mechanism="kron")
    s = math.sqrt(2 / out.rho_release)
    rows = 0.5 * 50000
    assert out.mechanism == "kron" and [g.width for g in out.groups] == [160, 8, 24, 3]
    def kept(e, needed):
        return 1 - (needed / e) ** 2 if e > needed else 0.0

    for g, side in zip(out.groups, [20, 8, 8, 3]):  # 8x20 by its wider side, bias 8 dense, 3x8, bias 3
        assert g.needed == pytest.approx(s * math.sqrt(side) / rows, rel=1e-9)
    (r0, c0), (r2, c2) = (8, 20), (3, 8)
    assert out.groups[0].needed_sides == pytest.approx((s * math.sqrt(r0) / rows, s * math.sqrt(c0) / rows))
    assert out.groups[2].needed_sides == pytest.approx((s * math.sqrt(r2) / rows, s * math.sqrt(c2) / rows))
    for g in (out.groups[0], out.groups[2]):
        assert g.kept == pytest.approx(kept(planner.TOP_DIRECTION_OUT, g.needed_sides[0]) *
                                       kept(planner.TOP_DIRECTION_IN, g.needed_sides[1]))
    for g in (out.groups[1], out.groups[3]):
        assert g.needed_sides is None and g.kept == pytest.approx(kept(planner.TOP_DIRECTION, g.needed))
    assert [g.method.startswith("kron") for g in out.groups] == [True, False, True, False]


def test_default_considers_both_and_keeps_the_better():
    m = two_layers()
    both = dpt.plan(m, 50000, 500, 4, 3.0, 1e-5)
    kron = dpt.plan(m, 50000, 500, 4, 3.0, 1e-5, mechanism="kron")
    gauss = dpt.plan(m, 50000, 500, 4, 3.0, 1e-5, mechanism="gaussian")
    assert both.kept == max(kron.kept, gauss.kept)
    assert both.mechanism == ("kron" if kron.kept > gauss.kept else "gaussian")
    with pytest.raises(ValueError):
        dpt.plan(m, 100, 10, 1, 1.0, 1e-5, mechanism="histogram")


def test_rho_release_is_the_share_of_the_budget():
    """Each release's rho is what PrivateBasis.rho_for_share gives for the run."""
    m = two_layers()
    out = dpt.plan(m, 2000, 100, 3, 1.0, 1e-5, share=0.1, releases=4, mechanism="gaussian")
    every = math.ceil(60 / 4)
    b = dpt.PrivateBasis(n_components=10, every=every, share=0.1, groups=[168, 27], group_components=[10, 10])
    assert out.rho_release == pytest.approx(b.rho_for_share(1.0, 1e-5, 60, 195), rel=1e-9)
    assert out.releases == 4


def test_recommends_plain_dpsgd_where_it_is_not_noise_limited():
    m = two_layers()
    out = dpt.plan(m, 50000, 5000, 10, 8.0, 1e-5)
    assert out.noise_to_clip < planner.NOISE_LIMITED
    assert out.recommendation == "dpsgd" and "not limited by its noise" in out.reason
    assert "recommendation: dpsgd" in str(out)


def test_recommends_plain_dpsgd_where_the_basis_is_noise():
    m = two_layers()
    out = dpt.plan(m, 1000, 10, 5, 0.5, 1e-5)
    assert out.noise_to_clip >= planner.NOISE_LIMITED
    assert out.kept < planner.KEEP_ENOUGH and out.recommendation == "dpsgd"


def test_recommends_a_private_basis_where_both_hold():
    """Many rows for the basis (n = 10^7) and small noisy steps (batch 10):
    the steps are noise-limited and the basis's threshold far below the
    assumed share, so the rule says GEP."""
    m = two_layers()
    out = dpt.plan(m, 10 ** 7, 10, 0.001, 1.0, 1e-9, releases=1)
    assert out.noise_to_clip >= planner.NOISE_LIMITED and out.kept >= planner.KEEP_ENOUGH
    assert out.recommendation.startswith("gep")


def test_bad_input():
    m = two_layers()
    for args in [(0, 10, 1, 1.0, 1e-5), (100, 200, 1, 1.0, 1e-5), (100, 10, 0, 1.0, 1e-5),
                 (100, 10, 1, 0.0, 1e-5), (100, 10, 1, 1.0, 1.0)]:
        with pytest.raises(ValueError):
            dpt.plan(m, *args)
    with pytest.raises(ValueError):
        dpt.plan(m, 100, 10, 1, 1.0, 1e-5, releases=0)


def test_make_private_logs_the_noise_to_clip(caplog):
    m = two_layers()
    data = torch.utils.data.TensorDataset(torch.randn(64, 20), torch.randint(0, 3, (64,)))
    loader = torch.utils.data.DataLoader(data, batch_size=16)
    with caplog.at_level(logging.INFO, logger="dpsubspace.torch"):
        dpt.PrivacyEngine().make_private(module=m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1),
                                         data_loader=loader, noise_multiplier=2.0, max_grad_norm=1.0)
    want = 2.0 * math.sqrt(195) / 16
    line = [r.getMessage() for r in caplog.records if "noise-to-clip" in r.getMessage()]
    assert len(line) == 1 and f"{want:.3g}" in line[0] and "limited by its noise" in line[0]
