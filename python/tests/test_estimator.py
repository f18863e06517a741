"""SubspaceEstimator (dpsubspace/estimator.py): the library's mechanisms in
process.  Seeded runs must equal dps-estimate's bit for bit (its path in
$DPS_ESTIMATE; those tests skip without it); the rest checks the accounting,
the add/remove restatement, torch in/out and the refusals of bad input."""
import math
import os
import subprocess

import numpy as np
import pytest

import dpsubspace as dp

N, D, K = 3000, 60, 4


@pytest.fixture(scope="module")
def planted():
    """N rows near a planted K-dim subspace: signal sd 3 on K directions,
    noise sd 0.3 on every coordinate (fixed seed)."""
    rng = np.random.default_rng(1)
    B = np.linalg.qr(rng.standard_normal((D, K)))[0].T
    X = (rng.standard_normal((N, K)) @ B * 3 + rng.standard_normal((N, D)) * 0.3).astype(np.float32)
    return X, B


def _sin(A, B):
    """Sine of the largest principal angle between the row spans of A and B."""
    s = np.linalg.svd(A @ B.T, compute_uv=False)
    return math.sqrt(max(0.0, 1 - min(s) ** 2))


CASES = [
    ("gaussian", {}, ["--method", "gaussian"]),
    ("power", {}, ["--method", "power"]),
    ("gaussian", {"groups": [20, 40], "group_components": [2, 3]},
     ["--method", "gaussian", "--param-groups", "20,40", "--group-k", "2,3"]),
    ("analyze-gauss", {}, ["--method", "analyze-gauss"]),
    ("topk", {}, ["--method", "topk"]),
    ("reference", {}, ["--method", "estimator", "--aggregator", "reference", "--close-partial"]),
    ("iterative", {"eps": 2.0}, ["--method", "iterative", "--eps", "2"]),
    ("cov-laplace", {"eps": 2.0}, ["--method", "cov-laplace", "--eps", "2"]),
    ("cov-gaussian", {"eps": 2.0, "delta": 1e-6}, ["--method", "cov-gaussian", "--eps", "2", "--delta", "1e-6"]),
    ("projection", {"t": 60, "m": 25}, ["--method", "estimator", "--aggregator", "projection", "--t", "60", "--m",
                                        "25"]),  # two whole epochs
]


@pytest.mark.parametrize("mechanism,kwargs,flags", CASES, ids=[f"{c[0]}{'-' + str(i) if c[1] else ''}"
                                                               for i, c in enumerate(CASES)])
def test_seeded_release_equals_dps_estimate_bit_for_bit(planted, tmp_path, mechanism, kwargs, flags):
    exe = os.environ.get("DPS_ESTIMATE")
    if not exe:
        pytest.skip("DPS_ESTIMATE not set (the build's dps-estimate)")
    X, _ = planted
    np.save(tmp_path / "X.npy", X)
    k = sum(kwargs["group_components"]) if "group_components" in kwargs else K
    rho = [] if "eps" in kwargs else ["--rho", "1"]
    kwargs = dict(kwargs) if "eps" in kwargs else dict(kwargs, rho=1.0)
    subprocess.run([exe, str(tmp_path / "X.npy"), "--k", str(K), "--seed", "7", "--quiet", "--json",
                    str(tmp_path / "o.json"), "--out", str(tmp_path / "V.npy")] + rho + flags, check=True)
    est = dp.SubspaceEstimator(K, mechanism=mechanism, seed=7, **kwargs).fit(X)
    V = np.load(tmp_path / "V.npy")
    assert V.shape == (k, D)
    assert np.array_equal(est.components_, V)


def test_exact_case_equals_dps_estimate(tmp_path):
    """Singhal-Steinke's estimator on rows exactly in a 2-dim subspace (integer
    combinations of two integer vectors: exact in float), 150 of 200 rows."""
    exe = os.environ.get("DPS_ESTIMATE")
    if not exe:
        pytest.skip("DPS_ESTIMATE not set")
    rng = np.random.default_rng(3)
    B = rng.integers(-3, 4, (2, 12))
    X = np.vstack([rng.integers(-5, 6, (150, 2)) @ B, rng.integers(-9, 10, (50, 12))]).astype(np.float32)
    np.save(tmp_path / "X.npy", X)
    subprocess.run([exe, str(tmp_path / "X.npy"), "--method", "exact", "--k", "2", "--eps", "1", "--delta", "1e-6",
                    "--seed", "7", "--quiet", "--json", str(tmp_path / "o.json"), "--out", str(tmp_path / "V.npy")],
                   check=True)
    est = dp.SubspaceEstimator(2, mechanism="exact", eps=1.0, delta=1e-6, seed=7).fit(X)
    assert np.array_equal(est.components_, np.load(tmp_path / "V.npy"))
    rho, delta = est.spent_
    assert rho == pytest.approx(0.5) and 1e-6 <= delta <= 1.01e-6  # eps^2/2, delta + the sampling's delta / 100


def test_gaussian_finds_the_planted_subspace(planted):
    # Davis-Kahan: sin <= 2 ||E|| / gap.  The noise E (sd 1/sqrt(rho) = 1) has
    # ||E|| ~ 2 sqrt(D) = 15.5; the unit rows put about 0.87 / K = 0.22 of
    # their energy on each planted direction, so the K-th eigengap is about
    # N * 0.22 = 650: sin <= 0.05 expected; 0.2 leaves a 4x margin.
    X, B = planted
    est = dp.SubspaceEstimator(K, rho=1.0, mechanism="gaussian", seed=3).fit(X)
    V = est.components_
    assert np.allclose(V @ V.T, np.eye(K), atol=1e-5)
    assert _sin(V, B) < 0.2
    rel = est.releases_[-1]
    assert rel.status == "released" and rel.rows_used == N and not rel.weak


def test_budget_adds_up_over_calls_and_the_cap_refuses(planted):
    X, _ = planted
    est = dp.SubspaceEstimator(K, rho=0.5, mechanism="gaussian", cap_rho=1.2, seed=1)
    est.fit(X[:1000]).fit(X[1000:2000])
    assert est.spent_ == (1.0, 0.0)
    est.fit(X[2000:])  # 1.5 > 1.2: refused, nothing spent
    assert est.releases_[-1].status == "refused" and est.releases_[-1].basis is None
    assert est.spent_ == (1.0, 0.0)
    assert [r.epoch for r in est.releases_] == [0, 1, 2]
    # eps at delta of rho = 1 zCDP: rho + 2 sqrt(rho ln(1/delta)) = 7.79 is the classical bound; the
    # library's statement for Gaussian releases (the exact Gaussian profile) is tighter but above rho
    eps = est.eps_at(1e-5)
    assert 1.0 < eps < 1 + 2 * math.sqrt(math.log(1e5))
    # the former name of the cap (0.1) caps the same; both at once is refused
    old = dp.SubspaceEstimator(K, rho=0.5, mechanism="gaussian", budget_rho=0.7, seed=1)
    old.fit(X[:1000]).fit(X[1000:2000])
    assert [r.status for r in old.releases_] == ["released", "refused"] and old.spent_ == (0.5, 0.0)
    with pytest.raises(ValueError, match="not both"):
        dp.SubspaceEstimator(K, rho=0.5, cap_rho=1, budget_rho=1)


def test_eps_is_the_librarys_exact_for_gaussian_releases(planted):
    """eps_at and the eps cap are the library's (not a copy of its formula): gaussian and power releases
    are Gaussian mechanisms, whose total of rho 1 is the Gaussian of mu = sqrt 2 (eps 6.57 at 1e-5, where
    the CKS conversion of rho 1 gives 7.08), so four releases of rho 0.25 fit an eps cap of 6.6; the
    covariance mechanism (pure eps-DP) and the central ones are stated by the CKS conversion: three fit."""
    X, _ = planted
    L = dp.native.lib()
    exact, cks = L.dps_gaussian_eps_at(math.sqrt(2), 1e-5), L.dps_zcdp_eps_total(dp.native.Zcdp(1, 0), 1e-5)
    assert round(exact, 2) == 6.57 and round(cks, 2) == 7.08
    for mech in ("gaussian", "power"):
        est = dp.SubspaceEstimator(K, rho=0.25, mechanism=mech, cap_eps=6.6, seed=1)
        for _ in range(5):
            est.fit(X[:500])
        assert [r.status for r in est.releases_] == ["released"] * 4 + ["refused"], mech
        assert est.spent_ == (1.0, 0.0) and est.eps_at(1e-5) == pytest.approx(exact, rel=1e-12)
        # add/remove: the same releases cost rho_add_remove(), Gaussian too
        ar = est.rho_add_remove()
        assert est.eps_at(1e-5, adjacency="add-remove") == pytest.approx(
            L.dps_gaussian_eps_at(math.sqrt(2 * ar), 1e-5), rel=1e-12)
    cov = dp.SubspaceEstimator(2, rho=0.25, mechanism="covariance", cap_eps=6.6, seed=1)
    for _ in range(4):
        cov.fit(X[:200, :10])
    assert [r.status for r in cov.releases_] == ["released"] * 3 + ["refused"]
    assert cov.eps_at(1e-5) == pytest.approx(L.dps_zcdp_eps_total(dp.native.Zcdp(0.75, 0), 1e-5), rel=1e-12)
    # a central mechanism's cap: the library's accountant; cov-laplace at eps 1 is rho 0.5 a release, and
    # rho 1 of pure eps-DP is 7.08 by CKS (past 6.6; a Gaussian rule would have let it through at 6.57)
    lap = dp.SubspaceEstimator(2, mechanism="cov-laplace", eps=1.0, cap_eps=6.6, seed=1)
    lap.fit(X[:200, :10]).fit(X[:200, :10])
    assert [r.status for r in lap.releases_] == ["released", "refused"] and lap.spent_ == (0.5, 0.0)
    # the library's end of a release (dps_release_decide / _outcome) says why
    assert lap.releases_[0].reason == "" and lap.releases_[1].reason.endswith(
        "would pass the privacy budget cap: nothing was spent")
    assert lap.eps_at(1e-5) == pytest.approx(L.dps_zcdp_eps_total(dp.native.Zcdp(0.5, 0), 1e-5), rel=1e-12)
    assert dp.SubspaceEstimator(2, mechanism="cov-laplace", eps=1.0).eps_at(1e-5) == 0.0  # nothing spent


def test_rho_add_remove_states_the_bound(planted):
    X, _ = planted
    one = dp.SubspaceEstimator(K, rho=0.8, mechanism="gaussian", seed=1).fit(X)
    assert one.rho_add_remove() == pytest.approx(0.4)  # one step: sensitivity 1 under add/remove
    two = dp.SubspaceEstimator(K, rho=0.8, mechanism="gaussian", seed=1).fit(X[:1500]).fit(X[1500:])
    assert two.rho_add_remove() == pytest.approx(1.6)  # a row shifts the later call: replace-one each
    power = dp.SubspaceEstimator(K, rho=0.8, mechanism="power", t=100, m=10, power_blocks=4, seed=1)
    power.partial_fit(X[:1000])  # one epoch of 1000 rows in 4 blocks
    assert [r.power_blocks_run for r in power.releases_] == [4]
    assert power.rho_add_remove() == pytest.approx(4 * 0.8)
    # each release alone (its own sample): one step rho/2, T blocks of a full epoch T rho (its last row
    # goes to the next epoch when a row is added before it)
    assert [r.rho_add_remove for r in two.releases_] == [pytest.approx(0.4)] * 2
    assert power.releases_[0].rho_add_remove == pytest.approx(4 * 0.8)
    # kron: an added row moves both sides of a shaped group by at most sqrt(2 sum_g ||x_g||^4) <= sqrt 2
    # against noise sqrt(2/rho) on every entry: one step, rho/2 as for gaussian
    d = X.shape[1]
    kron = dp.SubspaceEstimator(K, rho=0.8, mechanism="kron", groups=[d], group_shapes=[(2, d // 2)], seed=1)
    assert d % 2 == 0 and kron.fit(X).rho_add_remove() == pytest.approx(0.4)
    with pytest.raises(ValueError, match="no add/remove statement"):
        dp.SubspaceEstimator(K, rho=1, mechanism="reference", seed=1).fit(X).rho_add_remove()


def test_epochs_of_t_m_rows_release_as_they_fill(planted):
    X, _ = planted
    est = dp.SubspaceEstimator(K, rho=1, mechanism="gaussian", t=100, m=10, seed=2)
    est.partial_fit(X[:2500])
    assert [r.rows_used for r in est.releases_] == [1000, 1000]
    assert est.rows_in_epoch() == 500
    rel = est.release()
    assert rel.rows_used == 500 and est.rows_in_epoch() == 0
    with pytest.raises(ValueError, match="nothing to release"):
        est.release()


def test_torch_in_torch_out(planted):
    torch = pytest.importorskip("torch")
    X, _ = planted
    est = dp.SubspaceEstimator(K, rho=1, mechanism="gaussian", seed=5).fit(torch.from_numpy(X))
    V = est.components_
    assert isinstance(V, torch.Tensor) and V.shape == (K, D) and V.dtype == torch.float32
    ref = dp.SubspaceEstimator(K, rho=1, mechanism="gaussian", seed=5).fit(X).components_
    assert isinstance(ref, np.ndarray) and np.array_equal(V.numpy(), ref)


def test_bad_input_is_refused_clearly(planted):
    X, _ = planted
    with pytest.raises(ValueError, match="mechanism must be one of"):
        dp.SubspaceEstimator(K, mechanism="nope")
    with pytest.raises(ValueError, match="rho must be positive"):
        dp.SubspaceEstimator(K, rho=-1)
    with pytest.raises(ValueError, match="needs eps"):
        dp.SubspaceEstimator(K, mechanism="iterative")
    with pytest.raises(ValueError, match="give eps, not rho"):
        dp.SubspaceEstimator(K, mechanism="cov-laplace", eps=1, rho=1)
    with pytest.raises(ValueError, match="takes rho, not eps"):
        dp.SubspaceEstimator(K, mechanism="gaussian", eps=1)
    with pytest.raises(ValueError, match="n_components"):
        dp.SubspaceEstimator(0)
    with pytest.raises(ValueError, match="both t and m"):
        dp.SubspaceEstimator(K, t=10)
    est = dp.SubspaceEstimator(K, mechanism="gaussian", seed=1)
    with pytest.raises(ValueError, match="2-d"):
        est.fit(X[0])
    with pytest.raises(ValueError, match="no rows"):
        est.fit(X[:0])
    est.fit(X[:100])
    with pytest.raises(ValueError, match="d is 60"):
        est.fit(X[:, :10])
    with pytest.raises(ValueError, match="below d|impossible settings"):
        dp.SubspaceEstimator(D, mechanism="gaussian").fit(X)
    with pytest.raises(ValueError, match="groups add up"):
        dp.SubspaceEstimator(K, groups=[10, 10]).fit(X)
    with pytest.raises(TypeError, match="call fit"):
        dp.SubspaceEstimator(K, mechanism="analyze-gauss").partial_fit(X)
    with pytest.raises(AttributeError, match="no basis released yet"):
        dp.SubspaceEstimator(K).components_
    with pytest.raises(ValueError, match="delta must be in"):
        est.eps_at(0)


def test_fit_runs_the_power_blocks_it_reports():
    # one release of exactly the rows: cold, T = 3 blocks cut by index (as dps-estimate --method power cuts a
    # file), then warm, one; power_blocks gives T.  Each step's count comes from the library's snapshot.
    X = np.random.default_rng(3).standard_normal((600, 40)).astype(np.float32)
    est = dp.SubspaceEstimator(2, rho=0.5, mechanism="power", seed=1)
    est.fit(X)
    est.fit(X)
    assert [r.power_blocks_run for r in est.releases_] == [3, 1]
    assert est.releases_[0].rho_add_remove == pytest.approx(3 * 0.5)  # T rho: fit cut its own rows (T <= 4)
    four = dp.SubspaceEstimator(2, rho=0.5, mechanism="power", power_blocks=4, seed=1).fit(X)
    assert four.releases_[0].power_blocks_run == 4
    dense = dp.SubspaceEstimator(2, rho=0.5, mechanism="gaussian", seed=1).fit(X)
    assert dense.releases_[0].power_blocks_run == 0 and dense.power_blocks_next() == 0
    with pytest.raises(ValueError, match="no power group"):
        dense.end_block()


def test_rho_add_remove_of_index_blocks_bounds_every_insertion():
    # fit() cuts its n rows at floor(i n / T); adding a row at position p moves the boundaries too.  For
    # every n < 60, T <= 8 and p, the chain rule's cost of the T steps -- a step whose input gains a rows
    # and loses b costs at most (a^2 + b^2) rho / 2 (the sums' Frobenius norms add for PSD terms) -- is
    # within the Release's statement; the pattern that lets one block lose two rows (s_i = 1, s_(i+1) = 0)
    # depends on n mod T only and is absent for T <= 4 (all residues), present for T = 5.
    from collections import Counter
    from dpsubspace.estimator import _rho_add_remove

    def start(n, T, i):
        return i * n // T

    for T in range(2, 9):
        for n in range(T, 60):
            rows = list(range(n))
            for p in range(n + 1):
                added = rows[:p] + ["x"] + rows[p:]
                cost = 0.0
                for i in range(T):
                    a = Counter(rows[start(n, T, i):start(n, T, i + 1)])
                    b = Counter(added[start(n + 1, T, i):start(n + 1, T, i + 1)])
                    gained, lost = sum((b - a).values()), sum((a - b).values())
                    cost += (gained ** 2 + lost ** 2) / 2
                assert cost <= _rho_add_remove(1.0, T, "fit") + 1e-12, (T, n, p, cost)

    def shift(n, T, i):
        return (i * (n + 1)) // T - (i * n) // T

    def two_out(T):
        return any(shift(r, T, i) == 1 and shift(r, T, i + 1) == 0 for r in range(T) for i in range(1, T - 1))

    assert not any(two_out(T) for T in range(2, 5)) and two_out(5)
    assert _rho_add_remove(1.0, 1, "fit") == 0.5 and _rho_add_remove(1.0, 3, "caller") is None


def test_release_states_each_groups_level(planted):
    # Group 2's columns are zero: its basis is the noise's (level >= 1, WEAK); group 1 holds the planted
    # rows' part on its 20 columns (eigenvalues about N / 15 = 200 against T = sqrt 20: level about 0.03).
    # The release is not WEAK: group 2 can hold at most 3 T_2 = 19 of the energy (a dead small group).
    X = planted[0].copy()
    X[:, 20:] = 0
    rel = dp.SubspaceEstimator(K, rho=1.0, mechanism="gaussian", groups=[20, 40], group_components=[2, 3],
                               seed=3).fit(X).releases_[-1]
    assert rel.group_weak == (False, True) and not rel.weak
    assert rel.group_noise_level[0] < 0.1 and rel.group_noise_level[1] >= 1
    one = dp.SubspaceEstimator(K, rho=1.0, mechanism="gaussian", seed=3).fit(planted[0]).releases_[-1]
    assert one.group_noise_level == (one.noise_level,) and one.group_weak == (one.weak,)


def test_kron_releases_the_planted_products():
    # Rows whose first 60 columns are G = a b^T (a in R^6 near u, b in R^10 near v, 0.05 noise per
    # coordinate) and 5 more columns of small noise: at rho 1e4 the kron group's top direction is u (x) v
    # (|cos| near 1), its rows orthonormal and zero outside its columns; the charge is (rho, 0), the noise
    # sqrt(2/rho) (the library's test checks it), and bad shapes are refused before any row.
    rng = np.random.default_rng(5)
    u, v = rng.standard_normal(6), rng.standard_normal(10)
    u, v = u / np.linalg.norm(u), v / np.linalg.norm(v)
    n = 400
    a = rng.standard_normal((n, 1)) * u + 0.05 * rng.standard_normal((n, 6))
    b = rng.standard_normal((n, 1)) * v + 0.05 * rng.standard_normal((n, 10))
    X = np.concatenate([np.einsum("ni,nj->nij", a, b).reshape(n, 60), 0.01 * rng.standard_normal((n, 5))], axis=1)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    est = dp.SubspaceEstimator(2, rho=1e4, mechanism="kron", groups=[60, 5], group_shapes=[(6, 10), None],
                               group_components=[2, 1], seed=4).fit(X)
    rel = est.releases_[-1]
    V = est.components_
    assert V.shape == (3, 65) and rel.rho_epoch == 1e4
    assert abs(float(V[0, :60] @ np.kron(u, v))) > 0.99
    assert np.allclose(V @ V.T, np.eye(3), atol=1e-5)
    assert not V[:2, 60:].any() and not V[2, :60].any()
    assert rel.group_noise_level[0] < 0.2 and not rel.group_weak[0]
    with pytest.raises(ValueError, match="shape"):
        dp.SubspaceEstimator(2, mechanism="kron", groups=[60, 5], group_shapes=[(7, 10), None])
    with pytest.raises(ValueError, match="group_shapes"):
        dp.SubspaceEstimator(2, mechanism="gaussian", groups=[60, 5], group_shapes=[(6, 10), None])
    with pytest.raises(ValueError, match="kron"):
        dp.SubspaceEstimator(2, mechanism="kron", groups=[60, 5])
