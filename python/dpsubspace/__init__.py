"""dpsubspace: private subspaces in process, and Python clients of a dps-collector.

    SubspaceEstimator -- the library's mechanisms in process (ctypes over
                  libdpsubspace): fit / partial_fit, components_, spent_,
                  eps_at(delta), rho_add_remove() for DP-SGD accounting

    Producer   -- stream rows (numpy arrays or PyTorch tensors) to a collector
    ShardedProducer -- the same to a collector sharded over MPI ranks
                  (dps-collector --sharded): each row split by coordinate;
                  RanksNotReadyError (a TimeoutError) names the ranks that did
                  not shake hands before its first batch
    UnconfirmedBatchesError -- raised by Producer.close() when the collector
                  did not confirm taking every batch (gone, overloaded, refused)
    CollectorGoneError -- an UnconfirmedBatchesError: the collector went
                  silent for collector_timeout_ms while the producer waited
    Subscriber -- receive its private subspace snapshots, project vectors
    load_keypair, load_public_key -- CURVE keys made by dps-keygen
    Accountant -- one Renyi-DP ledger for DP-SGD steps (Poisson-subsampled
                  Gaussian) and rho-zCDP releases, get_epsilon(delta)
                  (accountant.py states its adjacency caveat)

Needs Debian's python3-numpy (python3-zmq and python3-protobuf for the
collector's clients).  The message classes are made by protoc from
proto/dpsubspace.proto at build time (the C code by protoc-c from the same
file); the estimator loads the core library built beside them (native.py).
"""
__version__ = "0.4.0"  # must equal libdpsubspace's dps_version() (native.py checks)

from .accountant import Accountant, noise_multiplier, rho_for_eps
from .estimator import Release, SubspaceEstimator

# The collector's clients need python3-zmq and python3-protobuf: imported on
# first use, so that the in-process parts work without them.
_LAZY = {"Producer": "producer", "ShardedProducer": "producer", "shard_slice": "producer",
         "shard_endpoint": "producer", "UnconfirmedBatchesError": "producer", "RanksNotReadyError": "producer",
         "CollectorGoneError": "producer",
         "Subscriber": "subscriber",
         "Snapshot": "subscriber", "load_keypair": "keys", "load_public_key": "keys", "endpoint_is_local": "keys",
         "WIRE_VERSION": "wire"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'dpsubspace' has no attribute {name!r}")


__all__ = ["SubspaceEstimator", "Release", "Accountant", "noise_multiplier", "rho_for_eps", "Producer",
           "ShardedProducer", "shard_slice", "shard_endpoint", "UnconfirmedBatchesError", "CollectorGoneError",
           "Subscriber", "Snapshot", "load_keypair", "load_public_key",
           "endpoint_is_local", "WIRE_VERSION", "__version__"]
