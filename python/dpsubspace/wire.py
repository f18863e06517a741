"""The protocol's message classes, made by protoc from proto/dpsubspace.proto
at build time (dpsubspace_pb2.py beside this module in a build tree or an
installed package; the C side's code comes from the same file through
protoc-c: one schema)."""
try:
    from . import dpsubspace_pb2 as _pb
except ImportError as e:  # a source checkout that was not built
    raise ImportError("dpsubspace_pb2 (the message classes protoc makes at build time) is missing: use the package "
                      "in the build tree (PYTHONPATH=build/python) or pip install ./python after a build") from e

WIRE_VERSION = 1

RowBatch = _pb.RowBatch
Snapshot = _pb.Snapshot
StatusRequest = _pb.StatusRequest
StatusReply = _pb.StatusReply

# The schema's names of a snapshot's status and aggregator, lower case ("released", "kron"): the wire's enums
# are the one list of both on this side.
STATUS_NAMES = {v.number: v.name.lower() for v in _pb.SnapshotStatus.DESCRIPTOR.values}
AGGREGATOR_NAMES = {v.number: v.name.lower() for v in _pb.Aggregator.DESCRIPTOR.values}
