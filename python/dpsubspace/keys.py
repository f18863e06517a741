"""CURVE key files made by dps-keygen: NAME.key (public) and NAME.key_secret."""
import re

_FIELD = re.compile(r'^\s*(public-key|secret-key)\s*=\s*"?([0-9A-Za-z.\-:+=^!/*?&<>()\[\]{}@%$#]{40})"?\s*$')


def _fields(path):
    out = {}
    with open(path, "r", encoding="ascii") as f:
        for line in f:
            if line.lstrip().startswith("#"):
                continue
            m = _FIELD.match(line)
            if m:
                out[m.group(1)] = m.group(2).encode("ascii")
    return out


def load_public_key(path):
    """The Z85 public key (bytes) of a .key or .key_secret file."""
    f = _fields(path)
    if "public-key" not in f:
        raise ValueError(f"{path}: no public-key line (make keys with dps-keygen)")
    return f["public-key"]


def load_keypair(path):
    """(public, secret) Z85 keys (bytes) of a .key_secret file."""
    f = _fields(path)
    if "public-key" not in f or "secret-key" not in f:
        raise ValueError(f"{path}: not a .key_secret file made by dps-keygen")
    return f["public-key"], f["secret-key"]


def endpoint_is_local(endpoint):
    """Loopback TCP or ipc:// -- the only places plaintext is allowed."""
    if endpoint.startswith(("ipc://", "inproc://")):
        return True
    if not endpoint.startswith("tcp://"):
        return False
    host = endpoint[6:]
    return host.startswith(("127.", "localhost:", "[::1]:"))


def apply_client_security(sock, endpoint, server_public_key, public_key, secret_key, plaintext):
    """CURVE client options on a zmq socket, or the plaintext check."""
    import zmq
    if plaintext:
        if not endpoint_is_local(endpoint):
            raise ValueError(f"plaintext refused for {endpoint}: rows are private data; "
                             "use CURVE keys, or a loopback/ipc endpoint")
        return
    if not (server_public_key and public_key and secret_key):
        raise ValueError("CURVE needs server_public_key, public_key and secret_key (or plaintext=True locally)")
    sock.setsockopt(zmq.CURVE_SERVERKEY, server_public_key)
    sock.setsockopt(zmq.CURVE_PUBLICKEY, public_key)
    sock.setsockopt(zmq.CURVE_SECRETKEY, secret_key)
