"""dpsubspace.torch: per-example gradients, the GEP / projection / DP-SGD
step's arithmetic and noise scales, what each step and basis release charges
the accountant, the noisy-gradient basis's noise floor, Poisson sampling.
Small models and fixed seeds; the bounds are stated where they are used."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import dpsubspace as dp  # noqa: E402
from dpsubspace import torch as dpt  # noqa: E402
from dpsubspace.noise import NoiseSource  # noqa: E402


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))


def _data(n=40):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g)


LOSS = torch.nn.functional.cross_entropy


def test_per_example_gradients_equal_autograd_one_by_one():
    model, (x, y) = _model(), _data(7)
    G = dpt.PerExampleGradients(model, LOSS, chunk=3)(x, y)
    assert G.shape == (7, 6 * 5 + 5 + 5 * 3 + 3)
    for i in range(7):
        model.zero_grad()
        LOSS(model(x[i:i + 1]), y[i:i + 1]).backward()
        ref = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        assert torch.allclose(G[i], ref, atol=1e-6)


def test_parameter_groups():
    model = _model()
    assert dpt.parameter_groups(model, "tensor") == [30, 5, 15, 3]
    assert dpt.parameter_groups(model, "layer") == [35, 18]
    with pytest.raises(ValueError):
        dpt.parameter_groups(model, "neuron")


def test_clip_rows():
    G = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
    dpt.clip_rows(G, 1.0)
    assert torch.allclose(G, torch.tensor([[0.6, 0.8], [0.3, 0.4]]))


def _opt(mode, basis=None, sigma=1e-9, **kw):
    model = _model()
    acct = dp.Accountant()
    opt = dpt.DPOptimizer(model, torch.optim.SGD(model.parameters(), lr=0.1), LOSS, noise_multiplier=sigma,
                          max_grad_norm=kw.pop("C", 1e6), sample_rate=0.5, dataset_size=40, mode=mode, basis=basis,
                          accountant=acct, seed=3, **kw)
    return model, opt, acct


def _flat_grad(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def test_steps_without_noise_or_clipping_give_the_sum_over_the_expected_batch():
    # sigma 1e-9 and clips of 1e6: no clipping, noise ~1e-3 at most: each mode's
    # gradient is then exact: plain and GEP the sum / (q n); projection V^T V of it
    x, y = _data(40)
    ref_model = _model()
    G = dpt.PerExampleGradients(ref_model, LOSS)(x, y).sum(0) / 20
    d = G.numel()
    V = torch.linalg.qr(torch.randn(d, 4, generator=torch.Generator().manual_seed(5)))[0].T.contiguous()
    for mode, expect in (("dpsgd", G), ("gep", G), ("projection", V.T @ (V @ G))):
        model, opt, _ = _opt(mode, dpt.FixedBasis(V) if mode != "dpsgd" else None, C=1e6,
                             embedding_clip=1e6, residual_clip=1e6)
        opt.backward(x, y)
        assert torch.allclose(_flat_grad(model), expect, atol=1e-3), mode


def test_gep_noise_scales_follow_the_share():
    # an empty batch releases pure noise: off span(V) each coordinate is
    # N(0, (sigma C_r / sqrt(1 - a))^2).  With V the first 4 coordinate axes,
    # the other 49 of one step, over 200 steps (9 800 draws): the sample sd is
    # within 4 sd of its estimate (relative sd 1/sqrt(2 * 9800) = 0.7%): 3%.
    x, y = _data(40)
    d = 53
    V = torch.eye(d)[:4].contiguous()
    model, opt, _ = _opt("gep", dpt.FixedBasis(V), sigma=2.0, C=1.0, embedding_clip=1.0, residual_clip=0.25,
                         embedding_share=0.2)
    draws, emb = [], []
    for _ in range(200):
        opt.backward(x[:0], y[:0])
        g = _flat_grad(model) * 20  # undo the division by q n
        draws.append(g[4:])
        emb.append(g[:4])
    sd = torch.cat(draws).std().item()
    assert abs(sd / (2.0 * 0.25 / math.sqrt(0.8)) - 1) < 0.03
    # in span(V): sigma C_e / sqrt(a) (800 draws: relative sd 2.5%: 10%)
    sd_e = torch.cat(emb).std().item()
    assert abs(sd_e / (2.0 * 1.0 / math.sqrt(0.2)) - 1) < 0.10
    # the default share: a / (1 - a) = sqrt(f / (1 - f)) C_e / C_r = 1 * 4 at f = 1/2: a = 0.8
    model, opt, _ = _opt("gep", dpt.FixedBasis(V), sigma=2.0, C=1.0, embedding_clip=1.0, residual_clip=0.25)
    opt.backward(x[:0], y[:0])
    assert opt.last["noise_sd"] == pytest.approx(2.0 * 0.25 / math.sqrt(0.2))
    assert opt.last["embedding_noise_sd"] == pytest.approx(2.0 * 1.0 / math.sqrt(0.8))


def test_every_step_and_release_is_charged():
    x, y = _data(40)
    basis = dpt.PrivateBasis(x, y, 2, rho=0.4, basis_rate=1.0, every=3, mechanism="gaussian", seed=1)
    model, opt, acct = _opt("gep", basis, sigma=1.5, C=1.0)
    for _ in range(7):
        opt.backward(x[:20], y[:20])
        opt.step()
    # releases at steps 0, 3, 6, each one gaussian step on its own sample (rate 1: no amplification): a
    # Gaussian of sigma 1/sqrt(0.4) and sensitivity 1, i.e. rho/2 = 0.2 each
    assert basis.releases == 3 and basis.amplified == 3
    ref = dp.Accountant()
    ref.add_steps(0.5, 1.5, 7)
    ref.add_zcdp(0.6)
    assert acct.steps == 7 and acct.get_epsilon(1e-5) == pytest.approx(ref.get_epsilon(1e-5))
    V = basis.V
    assert V.shape == (2, 53) and torch.allclose(V @ V.T, torch.eye(2), atol=1e-5)
    # on a Poisson sample at rate 0.25 the release is charged as a subsampled Gaussian (amplified) ...
    sub = dpt.PrivateBasis(x, y, 2, rho=0.4, basis_rate=0.25, every=3, mechanism="gaussian", seed=1)
    _, opt2, acct2 = _opt("gep", sub, sigma=1.5, C=1.0)
    opt2.backward(x[:20], y[:20])
    ref2 = dp.Accountant()
    ref2.add_steps(0.5, 1.5, 1)
    ref2.add_sampled_release(0.25, 1 / math.sqrt(0.4))
    assert acct2.get_epsilon(1e-5) == pytest.approx(ref2.get_epsilon(1e-5))
    # ... which costs less than the same release without amplification
    ref3 = dp.Accountant()
    ref3.add_steps(0.5, 1.5, 1)
    ref3.add_zcdp(0.2)
    assert acct2.get_epsilon(1e-5) < ref3.get_epsilon(1e-5)
    # amplify=False charges rho/2 as zCDP
    plain = dpt.PrivateBasis(x, y, 2, rho=0.4, basis_rate=0.25, every=3, mechanism="gaussian", seed=1, amplify=False)
    _, opt4, acct4 = _opt("gep", plain, sigma=1.5, C=1.0)
    opt4.backward(x[:20], y[:20])
    assert acct4.get_epsilon(1e-5) == pytest.approx(ref3.get_epsilon(1e-5))


def test_private_basis_streams_its_sample_in_chunks_as_one_release():
    # PrivateBasis feeds the estimator `chunk` examples at a time: the same mechanism (the same seeded
    # sample and noise) as one push of the whole sample; only the float sums' grouping may differ, far
    # below 1e-4 in the projection V^T V (the rows are unit-clipped and the noise sd 1/sqrt(0.4) ~ 1.6)
    x, y = _data(40)
    bases = []
    for chunk in (7, 4096):
        basis = dpt.PrivateBasis(x, y, 2, rho=0.4, basis_rate=1.0, every=3, mechanism="gaussian", seed=1,
                                 chunk=chunk)
        _, opt, _ = _opt("gep", basis, sigma=1.5, C=1.0)
        opt.backward(x[:20], y[:20])
        assert basis.releases == 1
        bases.append(basis.V.double().T @ basis.V.double())
    assert torch.allclose(bases[0], bases[1], atol=1e-4)


def test_noisy_gradient_basis_keeps_no_noise_and_finds_a_signal():
    b = dpt.NoisyGradientBasis(3, window=50, every=1)
    g = torch.Generator().manual_seed(2)
    for _ in range(50):  # pure noise, sd 1: its top singular value is about sqrt(50) + sqrt(2000) < the edge
        b.record(torch.randn(2000, generator=g), 1.0, 0.0, 0)
    assert b.update(None, 0) is None and b.kept == 0
    u = torch.zeros(2000)
    u[7] = 1.0
    b2 = dpt.NoisyGradientBasis(3, window=50, every=1)
    for _ in range(50):  # plus 60 u: singular value s = 60 sqrt(50) = 424 > 1.1 (7.1 + 44.7) = 57
        b2.record(torch.randn(2000, generator=g) + 60 * u, 1.0, 0.0, 0)
    V = b2.update(None, 0)
    # the spike's right singular vector is off u by sin^2 ~ d / s^2 = 2000 / 180000: cos ~ 0.994
    assert b2.kept == 1 and abs(float(V[0] @ u)) > 0.98


def test_poisson_sample():
    s = NoiseSource(seed=4)
    sizes = [len(s.poisson_sample(10000, 0.05)) for _ in range(20)]
    # each size is Binomial(10000, 0.05): mean 500, sd 21.8; the mean of 20 within 5 sd / sqrt(20) = 24
    assert abs(np.mean(sizes) - 500) < 24
    idx = s.poisson_sample(10000, 0.05)
    assert np.all(np.diff(idx) > 0) and idx.min() >= 0 and idx.max() < 10000
    assert np.array_equal(NoiseSource(seed=9).poisson_sample(1000, 0.1), NoiseSource(seed=9).poisson_sample(1000, 0.1))
    assert len(s.poisson_sample(100, 0.0)) == 0 and len(s.poisson_sample(100, 1.0)) == 100
    with pytest.raises(ValueError):
        s.poisson_sample(10, 1.5)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="mode must be"):
        _opt("sgd")
    with pytest.raises(ValueError, match="needs a basis"):
        _opt("gep")
    with pytest.raises(ValueError, match="embedding_share"):
        _opt("gep", dpt.FixedBasis(torch.eye(53)[:2]), embedding_share=1.5)


def test_private_basis_refuses_epochs_it_would_not_charge_and_hides_the_sample_size():
    # t and m make the estimator release every epoch of t*m rows that fills inside an update; PrivateBasis
    # charges one release per update: refused (the first version released 6 times and charged 2)
    x, y = _data(40)
    with pytest.raises(ValueError, match="t and m"):
        dpt.PrivateBasis(x, y, 2, rho=0.4, basis_rate=1.0, every=3, mechanism="power", t=2, m=5)
    basis = dpt.PrivateBasis(x, y, 2, rho=0.4, basis_rate=0.5, every=1, mechanism="gaussian", seed=1)
    _, opt, acct = _opt("gep", basis, sigma=1.5, C=1.0)
    for _ in range(3):
        opt.backward(x[:20], y[:20])
    # every release charged (3 sampled releases) and published without the Poisson sample's size
    assert basis.releases == 3 == acct.sampled_releases == len(basis.releases_)
    assert all(r.rows_used is None for r in basis.releases_)
    assert not hasattr(basis, "estimator")


class _FakeProducer:
    def __init__(self):
        self.sent = []

    def send(self, rows):
        self.sent.append(np.array(rows))

    def flush(self):
        pass


class _FakeSnapshot:
    def __init__(self, epoch, rows, aggregator, rho, d):
        self.epoch, self.rows_used, self.aggregator, self.rho_epoch = epoch, rows, aggregator, rho
        self.status, self.weak, self.noise_level = "released", False, 0.1
        self.basis = np.eye(d, dtype=np.float32)[:2]


class _FakeSubscriber:
    """Answers each epoch the producer sent with a snapshot of `aggregator`."""

    def __init__(self, producer, rows, aggregator, rho, d):
        self.p, self.rows, self.agg, self.rho, self.d, self.latest = producer, rows, aggregator, rho, d, None

    def update(self):
        if self.p.sent:
            self.latest = _FakeSnapshot(len(self.p.sent) - 1, self.rows, self.agg, self.rho, self.d)


def test_collector_basis_puts_its_sample_in_uniformly_random_slots():
    # The add/remove charge of rho_epoch holds because an added example takes ONE uniformly random free slot
    # of the epoch (the others keep theirs): in index order it would shift every later row, and every later
    # power block would see a replaced row.  40 examples (rate min(1, 0.9 * 100 / 40) = 1: all sampled) in
    # 100 slots, 50 epochs: each slot is used Binomial(50, 0.4) times (mean 20, sd 3.46); in index order
    # slots 40-99 would be used 0 times.  Bounds: the first 40 slots hold 40 % of the 2000 uses in
    # expectation, sd 0.49 %: within 3 points; and the last 60 slots are all used.
    x, y = _data(40)
    prod = _FakeProducer()
    model, opt, acct = _opt("dpsgd", None, sigma=1.5, C=1.0)
    d = opt.grads.d
    sub = _FakeSubscriber(prod, 100, "power", 0.5, d)
    basis = dpt.CollectorBasis(prod, sub, x, y, epoch_rows=100, every=1, basis_rho=0.5, timeout=5)
    opt.basis, opt.mode = basis, "gep"
    for _ in range(50):
        opt.backward(x[:20], y[:20])
    used = np.stack([np.abs(r).sum(1) > 0 for r in prod.sent])
    assert used.shape == (50, 100) and (used.sum(1) == 40).all()
    share_first = used[:, :40].sum() / used.sum()
    assert abs(share_first - 0.4) < 0.03 and used[:, 40:].any(axis=0).all()
    # the power aggregator is accepted, each epoch charged rho_epoch as zCDP
    ref = dp.Accountant()
    ref.add_steps(0.5, 1.5, 50)
    ref.add_zcdp(25.0)
    assert acct.get_epsilon(1e-5) == pytest.approx(ref.get_epsilon(1e-5))
    bad = _FakeSubscriber(prod, 100, "reference", 0.5, d)
    with pytest.raises(RuntimeError, match="gaussian or power"):
        dpt.CollectorBasis(prod, bad, x, y, epoch_rows=100, every=1, basis_rho=0.5, first_epoch=50).update(opt, 0)
    # every failure after our rows were sent is charged first: a wrong mechanism's release (rho), a foreign
    # epoch (our rows may span two: 2 rho), no snapshot in time (rho: it may come later)
    split = _FakeSubscriber(prod, 90, "power", 0.5, d)
    with pytest.raises(RuntimeError, match="two epochs"):
        dpt.CollectorBasis(prod, split, x, y, epoch_rows=100, every=1, basis_rho=0.5, first_epoch=51).update(opt, 0)

    class Silent:
        latest = None

        def update(self):
            pass

    with pytest.raises(TimeoutError, match="charged"):
        dpt.CollectorBasis(prod, Silent(), x, y, epoch_rows=100, every=1, basis_rho=0.5, timeout=0.05).update(opt, 0)
    ref.add_zcdp(0.5 + 2 * 0.5 + 0.5)
    assert acct.get_epsilon(1e-5) == pytest.approx(ref.get_epsilon(1e-5))


def test_eps_at_says_which_adjacency():
    X = np.random.default_rng(0).standard_normal((200, 30)).astype(np.float32)
    est = dp.SubspaceEstimator(2, rho=0.5, mechanism="gaussian", seed=1).fit(X)
    rep, ar = est.eps_at(1e-5), est.eps_at(1e-5, adjacency="add-remove")
    # one one-step release: rho 0.5 replacing a row, 0.25 adding or removing one (rho_add_remove)
    one = dp.SubspaceEstimator(2, rho=0.25, mechanism="gaussian", seed=1).fit(X)
    assert ar == pytest.approx(one.eps_at(1e-5)) and ar < rep
    with pytest.raises(ValueError, match="adjacency"):
        est.eps_at(1e-5, adjacency="replace")


def test_batch_norm_is_refused_with_the_reason():
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 3))
    with pytest.raises(ValueError, match="GroupNorm"):
        dpt.DPOptimizer(model, torch.optim.SGD(model.parameters(), lr=0.1), LOSS, noise_multiplier=1.0,
                        max_grad_norm=1.0, sample_rate=0.5, dataset_size=40)


def test_fixed_size_batches_warn_and_poisson_batches_do_not():
    # n 40, q 0.5: Poisson sizes have mean 20, variance 10; fixed sizes 0 < 10 / 10.  Poisson batches warn
    # with probability about 3.6e-4 per run (one test, on the first 10; seeded here: a fixed outcome)
    x, y = _data(40)
    _, opt, _ = _opt("dpsgd", sigma=1.0, C=1.0)
    with pytest.warns(dpt.FixedBatchWarning, match="variance"):
        for _ in range(dpt.SAMPLING_CHECK_STEPS):
            opt.backward(x[:20], y[:20])
    # batches drawn at another rate than the optimizer's: mean 36 against 20, beyond 6 sqrt(10 / 10) + 1 = 7
    _, opt, _ = _opt("dpsgd", sigma=1.0, C=1.0)
    with pytest.warns(dpt.FixedBatchWarning, match="mean size"):
        for idx in dpt.poisson_batches(40, 0.9, dpt.SAMPLING_CHECK_STEPS, opt.noise):
            opt.backward(x[idx], y[idx])
    import warnings as w
    _, opt, _ = _opt("dpsgd", sigma=1.0, C=1.0)
    with w.catch_warnings():
        w.simplefilter("error", dpt.FixedBatchWarning)
        for idx in dpt.poisson_batches(40, 0.5, 2 * dpt.SAMPLING_CHECK_STEPS, opt.noise):
            opt.backward(x[idx], y[idx])
    # the false-alarm rate of the one test on true Poisson sizes, by simulation: 20 000 runs of 10
    # Binomial(4 000, 0.512) sizes (the README snippet's), fewer than 0.3% warn (expected 0.036%: within
    # 0.3% with overwhelming probability; the window-by-window test fired in 18% of 1 000-step runs)
    g = np.random.default_rng(0)
    runs = g.binomial(4000, 0.512, size=(20000, dpt.SAMPLING_CHECK_STEPS))
    assert sum(bool(dpt.not_poisson(r, 4000, 0.512)) for r in runs) < 0.003 * len(runs)


def test_a_weak_basis_is_announced_and_can_be_skipped():
    # rho 1e-4 on 40 rows of d 53: the noise's edge 2 sqrt(53 / 1e-4) = 1456 is far above the 40 rows'
    # energy, so the release is WEAK (noise level >= the library's threshold)
    x, y = _data(40)
    for on_weak, kept in (("warn", True), ("skip", False)):
        basis = dpt.PrivateBasis(x, y, 2, rho=1e-4, basis_rate=1.0, every=1, mechanism="gaussian", seed=1,
                                 on_weak=on_weak)
        _, opt, _ = _opt("gep", basis, sigma=1.5, C=1.0)
        with pytest.warns(dpt.WeakBasisWarning, match="WEAK"):
            opt.backward(x[:20], y[:20])
        assert basis.weak_releases == 1 and (basis.V is not None) == kept
    with pytest.raises(ValueError, match="on_weak"):
        dpt.PrivateBasis(x, y, 2, rho=1.0, basis_rate=1.0, every=1, on_weak="ignore")


def test_private_basis_cold_power_steps_on_random_blocks_for_rho_over_2():
    # Cold, the power iteration takes T = 3 steps; PrivateBasis assigns each sampled example to a block at
    # random (an added example then changes one block) and charges rho/2 as zCDP; warm, one step, charged
    # as a subsampled Gaussian (amplified)
    x, y = _data(40)
    basis = dpt.PrivateBasis(x, y, 2, rho=0.4, basis_rate=0.5, every=1, mechanism="power", seed=1,
                             power_oversample=2)
    cuts = []
    real_end = basis._estimator.end_block
    basis._estimator.end_block = lambda: (cuts.append(basis._estimator.rows_in_epoch()), real_end())[1]
    _, opt, acct = _opt("gep", basis, sigma=1.5, C=1.0)
    opt.backward(x[:20], y[:20])
    assert [r.power_blocks_run for r in basis.releases_] == [3] and len(cuts) == 3
    assert basis.releases_[0].rho_add_remove == pytest.approx(0.2)
    ref = dp.Accountant()
    ref.add_steps(0.5, 1.5, 1)
    ref.add_zcdp(0.2)
    assert acct.get_epsilon(1e-5) == pytest.approx(ref.get_epsilon(1e-5))
    opt.backward(x[:20], y[:20])
    assert [r.power_blocks_run for r in basis.releases_] == [3, 1] and basis.amplified == 1 and len(cuts) == 4
    ref.add_steps(0.5, 1.5, 1)
    ref.add_sampled_release(0.5, 1 / math.sqrt(0.4))
    assert acct.get_epsilon(1e-5) == pytest.approx(ref.get_epsilon(1e-5))


def test_noise_source_blocks_and_slots_are_uniform():
    # below(3, n): 30 000 draws, each value 10 000 +- 81.6 (sd): within 5 sd.  slots(10, 3): each of the 10
    # slots is among the 3 with probability 0.3: 20 000 draws, 6 000 +- 64.8 each: within 5 sd; no repeats.
    s = NoiseSource(seed=5)
    counts = np.bincount(s.below(3, 30000), minlength=3)
    assert counts.shape == (3,) and np.all(np.abs(counts - 10000) < 5 * 81.6)
    hits = np.zeros(10)
    for _ in range(20000):
        pick = s.slots(10, 3)
        assert len(set(pick.tolist())) == 3 and pick.min() >= 0 and pick.max() < 10
        hits[pick] += 1
    assert np.all(np.abs(hits - 6000) < 5 * 64.8)
    with pytest.raises(ValueError):
        s.slots(3, 4)


@pytest.mark.parametrize("cut", [True, False])
def test_a_sampled_release_states_nothing_of_its_row_count(cut):
    # A release of one epoch that its rows do not fill (PrivateBasis's: t m above any sample) must not read
    # their count: the same rows with 0, 50 or 500 zero rows added (the basis bit for bit the same: zero rows
    # add nothing) give the same level, on a warm release mixing a dense group and a power group, its one
    # step ended by the caller (as PrivateBasis does) or by the release (an independent review found the
    # level reading the row count there: 0.21, 0.42, 0.80)
    g = np.random.default_rng(2)
    X = np.hstack([g.standard_normal((300, 3)) @ g.standard_normal((3, 10)),  # the dense group: rank 3, seen
                   0.1 * g.standard_normal((300, 60))]).astype(np.float32)  # the power group: noise only
    levels, bases = [], []
    for extra in (0, 50, 500):
        est = dp.SubspaceEstimator(3, rho=0.5, mechanism="gaussian", groups=[10, 60], dense_max_d=20, seed=3,
                                   power_oversample=2)
        est.fit(X)  # cold
        est.partial_fit(np.vstack([X, np.zeros((extra, 70), np.float32)]))
        if cut:
            est.end_block()
        est.release()
        levels.append(est.releases_[-1].noise_level)
        bases.append(est.releases_[-1].basis)
    assert all(np.array_equal(b, bases[0]) for b in bases)
    assert levels[0] == levels[1] == levels[2]


def test_parameter_shapes_and_kron_basis():
    model = _model()
    assert dpt.parameter_shapes(model) == [(5, 6), None, (3, 5), None]
    conv = torch.nn.Conv2d(2, 4, 3)
    assert dpt.parameter_shapes(conv) == [(4, 18), None]
    with pytest.raises(ValueError, match="parameter_shapes"):
        dpt.PrivateBasis(n_components=2, rho=1.0, every=1, mechanism="kron")
    b = dpt.PrivateBasis(n_components=2, rho=1.0, every=1, mechanism="kron",
                         groups=dpt.parameter_groups(model), group_shapes=dpt.parameter_shapes(model))
    assert b.mechanism == "kron"
