"""Ask a dps-collector's status endpoint (operator information, not private)."""
import zmq

from . import wire
from .keys import apply_client_security


def query_status(endpoint, timeout_ms=2000, server_public_key=None, public_key=None, secret_key=None,
                 plaintext=False, producer_id="", run=0):
    """A dict of the collector's status (dps-status --json's names: rho_total ..., refusals {name: count},
    counters {name: count}; producer_batches etc. for producer_id and its run, a producer's RowBatch.stream --
    0: an operator's question; max_batch_rows; refused, not empty when the collector refused the question:
    "key_revoked", nothing else set), or TimeoutError."""
    ctx = zmq.Context()
    s = ctx.socket(zmq.REQ)
    try:
        apply_client_security(s, endpoint, server_public_key, public_key, secret_key, plaintext)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(endpoint)
        s.send(wire.StatusRequest(version=wire.WIRE_VERSION, producer_id=producer_id,
                                  run=run).SerializeToString())
        if not s.poll(timeout_ms):
            raise TimeoutError(f"no status answer from {endpoint} in {timeout_ms} ms")
        m = wire.StatusReply.FromString(s.recv())
        lists = ("refusals", "counters")
        out = {f.name: getattr(m, f.name) for f in m.DESCRIPTOR.fields if f.name not in lists}
        for name in lists:
            out[name] = {c.name: c.value for c in getattr(m, name)}
        return out
    finally:
        s.close()
        ctx.term()
