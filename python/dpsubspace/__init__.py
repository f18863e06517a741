"""dpsubspace: Python clients of a dps-collector.

    Producer   -- stream rows (numpy arrays or PyTorch tensors) to a collector
    UnconfirmedBatchesError -- raised by Producer.close() when the collector
                  did not confirm taking every batch (gone, overloaded, refused)
    Subscriber -- receive its private subspace snapshots, project vectors
    load_keypair, load_public_key -- CURVE keys made by dps-keygen
    Accountant -- one Renyi-DP ledger for DP-SGD steps (Poisson-subsampled
                  Gaussian) and rho-zCDP releases, get_epsilon(delta)
                  (accountant.py states its adjacency caveat)

Needs Debian's python3-zmq, python3-protobuf and python3-numpy.  The message
classes come from dpsubspace.desc, the descriptor set protoc-c makes from
proto/dpsubspace.proto at build time (one schema for C and Python).
"""
from .accountant import Accountant
from .keys import load_keypair, load_public_key, endpoint_is_local
from .producer import Producer, UnconfirmedBatchesError
from .subscriber import Snapshot, Subscriber
from .wire import WIRE_VERSION

__all__ = ["Accountant", "Producer", "UnconfirmedBatchesError", "Subscriber", "Snapshot", "load_keypair", "load_public_key",
           "endpoint_is_local", "WIRE_VERSION"]
