"""Protocol message classes built from the descriptor set made by protoc-c.

The file dpsubspace.desc sits next to this module in a build or install tree;
DPS_PROTO_DESC overrides its location.
"""
import os

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

WIRE_VERSION = 1


def _desc_path():
    env = os.environ.get("DPS_PROTO_DESC")
    if env:
        return env
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dpsubspace.desc")
    if os.path.exists(here):
        return here
    raise FileNotFoundError(
        "dpsubspace.desc not found next to the dpsubspace package: use the copy in the build tree "
        "(PYTHONPATH=build/python) or set DPS_PROTO_DESC")


def _load():
    with open(_desc_path(), "rb") as f:
        fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    factory = message_factory.MessageFactory(descriptor_pool.DescriptorPool())
    for fd in fds.file:
        factory.pool.Add(fd)
    return {name: factory.GetPrototype(factory.pool.FindMessageTypeByName(name))
            for name in ("dps.wire.RowBatch", "dps.wire.Snapshot", "dps.wire.StatusRequest", "dps.wire.StatusReply")}


_classes = _load()
RowBatch = _classes["dps.wire.RowBatch"]
Snapshot = _classes["dps.wire.Snapshot"]
StatusRequest = _classes["dps.wire.StatusRequest"]
StatusReply = _classes["dps.wire.StatusReply"]
