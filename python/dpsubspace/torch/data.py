"""data.py - the batches a private step reads: Poisson samples of the
examples, the sampling the accountant's subsampled-Gaussian bound assumes.
Owns:

    poisson_batches     -- index arrays for DPOptimizer's own loops
    DPDataLoader        -- a torch DataLoader of Poisson batches of a
                           map-style dataset (PrivacyEngine's, as Opacus'):
                           PoissonBatchSampler for the indices, the loader's
                           collate_fn, workers and pinning kept
    DatasetExamples     -- a dataset as the examples a basis samples from
    FixedBatchWarning, not_poisson, SAMPLING_CHECK_STEPS -- batches whose
                           sizes do not vary as Poisson sampling's do

Every sample comes from a NoiseSource: the library's secure generator, or a
seeded stream (reproducible, NOT private).  Each example is in each batch
independently with probability q, so a batch's size is Binomial(n, q) and
may be 0: an empty batch is yielded like any other (tensors of the right
dtype with 0 rows) and its step still adds the noise and is charged --
skipping it would make "no update" reveal that the batch was empty.
"""
import math
from typing import Any, Callable, Iterator, List, Optional, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, Sampler
from torch.utils.data.dataloader import default_collate

from ..noise import NoiseSource

SAMPLING_CHECK_STEPS = 10


class FixedBatchWarning(UserWarning):
    """Batches whose sizes do not vary as Poisson sampling's do."""


def not_poisson(sizes: Sequence[int], n: int, q: float) -> List[str]:
    """Why SAMPLING_CHECK_STEPS batch sizes do not look like Poisson samples
    of n at rate q (DPOptimizer._check_sampling has the rule and its false-
    alarm rate); empty when they do."""
    s = np.asarray(sizes, dtype=float)
    v, mean = n * q * (1 - q), n * q
    why = []
    if v >= 4 and s.var(ddof=1) < v / 10:
        why.append(f"sizes of variance {s.var(ddof=1):.3g} where Poisson sampling gives {v:.3g}")
    if abs(s.mean() - mean) > 6 * math.sqrt(v / len(s)) + 1:
        why.append(f"a mean size of {s.mean():.1f} where the declared rate gives {mean:.1f}")
    return why


def poisson_batches(n: int, sample_rate: float, steps: int, noise: NoiseSource) -> Iterator[np.ndarray]:
    """`steps` Poisson samples of range(n), each index kept with probability
    sample_rate (secure randomness from `noise`): the sampling the accountant's
    subsampled-Gaussian bound assumes.  A sample may be empty."""
    for _ in range(steps):
        yield noise.poisson_sample(n, sample_rate)


class PoissonBatchSampler(Sampler):
    """`steps` batches of indices of range(n) per iteration (an epoch), each
    index in each batch independently with probability sample_rate, from
    `noise`.  Runs in the loader's main process (workers get the indices),
    so the generator never leaves it."""

    def __init__(self, n: int, sample_rate: float, steps: int, noise: NoiseSource) -> None:
        if not 0 < sample_rate <= 1 or steps < 1 or n < 1:
            raise ValueError("sample_rate must be in (0, 1], steps and n >= 1")
        self.n, self.sample_rate, self.steps, self.noise = n, sample_rate, steps, noise

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[List[int]]:
        for _ in range(self.steps):
            yield self.noise.poisson_sample(self.n, self.sample_rate).tolist()


def _empty_like(batch: Any) -> Any:
    """The collated structure with every tensor cut to 0 rows (dtype and
    trailing shape kept)."""
    if isinstance(batch, torch.Tensor):
        return batch[:0]
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a namedtuple
        return type(batch)(*(_empty_like(b) for b in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_empty_like(b) for b in batch)
    if isinstance(batch, dict):
        return {k: _empty_like(v) for k, v in batch.items()}
    return batch


class EmptyBatchCollate:
    """The loader's collate_fn, with an empty batch collated as the
    structure of dataset[0]'s batch of one cut to 0 rows (collate_fn sees
    no empty list: most cannot make one).  A class, not a closure, so that
    workers started by spawn can unpickle it."""

    def __init__(self, collate_fn: Callable[[List[Any]], Any], dataset: Dataset) -> None:
        self.collate_fn, self.dataset = collate_fn, dataset
        self._empty: Any = None

    def __call__(self, batch: List[Any]) -> Any:
        if len(batch):
            return self.collate_fn(batch)
        if self._empty is None:
            self._empty = _empty_like(self.collate_fn([self.dataset[0]]))
        return self._empty


class DPDataLoader(DataLoader):
    """A DataLoader of Poisson batches of `dataset` (map-style): each
    iteration yields `steps` batches, each example in each independently
    with probability sample_rate, from `noise` (default: a secure
    NoiseSource; seed= gives a seeded stream, NOT private).  The other
    keywords (collate_fn, num_workers, pin_memory, ...) are DataLoader's.
    from_data_loader(loader) makes Opacus' conversion: q = 1/len(loader),
    len(loader) batches an epoch, the loader's collate_fn and workers."""

    def __init__(self, dataset: Dataset, sample_rate: float, steps: Optional[int] = None, *,
                 noise: Optional[NoiseSource] = None, seed: Optional[int] = None,
                 collate_fn: Optional[Callable[[List[Any]], Any]] = None, **loader_kwargs: Any) -> None:
        if isinstance(dataset, IterableDataset):
            raise ValueError("Poisson sampling needs a map-style dataset (len() and dataset[i]); an "
                             "IterableDataset has neither")
        if noise is None:
            noise = NoiseSource(seed, "dpsubspace.torch sampling")
        self.sample_rate = sample_rate
        steps = steps if steps is not None else max(1, round(1 / sample_rate))
        sampler = PoissonBatchSampler(len(dataset), sample_rate, steps, noise)
        super().__init__(dataset, batch_sampler=sampler,
                         collate_fn=EmptyBatchCollate(collate_fn or default_collate, dataset), **loader_kwargs)

    @classmethod
    def from_data_loader(cls, loader: DataLoader, *, noise: Optional[NoiseSource] = None,
                         seed: Optional[int] = None) -> "DPDataLoader":
        kw = dict(num_workers=loader.num_workers, pin_memory=loader.pin_memory, timeout=loader.timeout,
                  worker_init_fn=loader.worker_init_fn, multiprocessing_context=loader.multiprocessing_context,
                  persistent_workers=loader.persistent_workers)
        if loader.num_workers > 0:  # DataLoader refuses a prefetch_factor without workers
            kw["prefetch_factor"] = loader.prefetch_factor
        collate = loader.collate_fn
        if isinstance(collate, EmptyBatchCollate):
            collate = collate.collate_fn
        return cls(loader.dataset, 1 / len(loader), len(loader), noise=noise, seed=seed, collate_fn=collate, **kw)


class DatasetExamples:
    """A map-style dataset as the examples a basis samples from:
    gradients(opt, idx) collates dataset[i] for i in idx with collate_fn and
    passes the batch, (input, ..., target), to opt.grads."""

    def __init__(self, dataset: Dataset, collate_fn: Optional[Callable[[List[Any]], Any]] = None) -> None:
        self.dataset, self.collate_fn = dataset, collate_fn or default_collate

    def __len__(self) -> int:
        return len(self.dataset)

    def gradients(self, opt: Any, idx: np.ndarray) -> torch.Tensor:
        batch = self.collate_fn([self.dataset[int(i)] for i in idx])
        if not isinstance(batch, (list, tuple)):
            raise TypeError(f"the basis's sample needs batches (input, ..., target); the collate_fn made a "
                            f"{type(batch).__name__}")
        return opt.grads(*batch)
