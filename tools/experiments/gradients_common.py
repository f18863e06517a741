"""gradients_common.py - what gradients.py and gradients_make.py share: paths,
the models' sizes, limits, the user-facing error, the progress log."""
import sys

DATA_DIR = "/usr/share/datasets/fashion-mnist"   # Debian's dataset-fashion-mnist
import os  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "out", "gradients")  # git-ignored
MODELS = {"logreg": 7850, "mlp": 101770, "cnn": 46730}
ORTHO_TOL = 1e-3      # max |V V^T - I| accepted as "orthonormal up to float32"
GRAM_MAX_D = 12000    # d x d float64 Gram (1.1 GB at this d) and its eigh
CHUNK_BYTES = 64 << 20


class Fail(Exception):
    """A one-line error for the user (bad input); main() prints it and exits 2."""


_quiet = False


def set_quiet(quiet):
    """No progress lines (the self-check)."""
    global _quiet
    _quiet = quiet


def log(msg):
    if not _quiet:
        print(msg, file=sys.stderr, flush=True)


def human(nbytes):
    for unit in ("B", "KB", "MB", "GB"):
        if nbytes < 1024 or unit == "GB":
            return f"{nbytes:.1f} {unit}" if unit != "B" else f"{nbytes} B"
        nbytes /= 1024.0
