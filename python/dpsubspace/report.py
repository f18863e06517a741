"""dps-report - draw a PNG of a dps-collector's snapshots from the lines of `dps-watch --json`.

    dps-watch --json [--truth basis.npy] ... | dps-report --out privacy.png
    dps-report --in watch.jsonl --out privacy.png

Reads one JSON object per line (a snapshot) and redraws the PNG after each one
that arrives; lines already waiting in the input are read first, so a burst
(or a finished file) is drawn once, at its end.  The PNG is written to a
temporary file in the same directory and renamed over --out, so a viewer never
sees half of it.  Panel 1: the privacy spent (eps_total at delta_target) and
the budget cap; panel 2: the sine of the largest principal angle to the
previous snapshot (and to the truth), refused, failed and weak epochs marked.
The plotted series are embedded in the PNG as the tEXt chunk "dpsubspace-data"
(DATA_KEY).  Needs matplotlib (Debian's python3-matplotlib), imported only to
draw, so --help and --version work without it.
"""
import argparse
import json
import math
import os
import select
import sys
import tempfile
import time

from . import __version__

PROG = "dps-report"
DATA_KEY = "dpsubspace-data"  # the PNG text chunk holding the plotted series
EXIT_OK, EXIT_USAGE, EXIT_INPUT = 0, 2, 3
MAX_PIXELS = 10000  # per side, for --size

# The fields read from each line (dps-watch --json writes them all; absent ones count as null).
FIELDS = ("seq", "epoch", "status", "reason", "seeded", "time_unix_ms", "d", "k", "aggregator", "rows_used",
          "noise_level", "weak", "rho_total", "eps_total", "delta_target", "budget_left", "budget_unit",
          "sin_to_prev", "sin_to_truth")

HELP_EPILOG = """\
what it draws:
  panel 1  privacy spent over the epochs: eps_total at delta_target (line with
           markers); with an eps budget cap a dashed line at the cap
           (eps_total + budget_left of the latest snapshot); with a rho cap
           rho_total on the right axis and the cap in the panel's title
  panel 2  the sine of the largest principal angle (0 = same subspace, 1 =
           orthogonal) between each released basis and the previous one
           (sin_to_prev) and, with dps-watch --truth, the true subspace
           (sin_to_truth); refused and failed epochs are marked at the
           bottom, weak releases (noise_level >= 0.75) are ringed
  title    the aggregator, d, k, and SEEDED (not secure) for a seeded collector
  The plotted series are embedded in the PNG as the text chunk
  "dpsubspace-data": a JSON object {"epoch", "eps_total", "rho_total",
  "sin_to_prev", "sin_to_truth", "status"}, lists with null where a value is
  absent.

fields read from each line (dps-watch --json):
  epoch (required), seq, status (released, failed, refused), reason, seeded,
  time_unix_ms, d, k, aggregator, rows_used, noise_level, weak, rho_total,
  eps_total (null if infinite), delta_target, budget_left, budget_unit (rho,
  eps or null), sin_to_prev, sin_to_truth.  A line that is not a JSON object
  with an epoch is skipped with a warning naming its line number.

The PNG is redrawn after each snapshot that arrives (a burst of lines already
waiting, or a finished file, is drawn once at its end), written to a temporary
file beside FILE and renamed over it, so a viewer never sees half of it.

examples:
  dps-watch --connect EP [security] --truth basis.npy --json | dps-report --out privacy.png
  dps-watch --connect EP [security] --json > watch.jsonl
  dps-report --in watch.jsonl --out privacy.png --size 1600x1000

exit status:
  0  the input's snapshots drawn ("dps-report: N snapshots drawn to FILE")
  2  usage: a bad flag, no --out, --out's directory missing or unwritable,
     or FILE could not be written
  3  no snapshot in the input, or the input unreadable
"""


class UsageError(Exception):
    """A mistake in the command line or in --out (exit 2)."""


class WriteError(Exception):
    """The PNG could not be written (exit 2)."""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """--help as the project's programs print it: "Usage: ..." (help2man makes it the SYNOPSIS)."""

    def add_usage(self, usage, actions, groups, prefix=None):
        super().add_usage(usage, actions, groups, "Usage: " if prefix is None else prefix)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: "dps-report: ..." and exit 2."""

    def error(self, message):
        raise UsageError(f"{message} (see {PROG} --help)")


# ------------------------------------------------------------------ arguments
def parse_size(text):
    """ "WxH" -> (W, H) in pixels."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHT in pixels (like 1200x800)")
    if not (200 <= w <= MAX_PIXELS and 200 <= h <= MAX_PIXELS):
        raise argparse.ArgumentTypeError(f"{text}: each side must be 200 to {MAX_PIXELS} pixels")
    return w, h


def make_parser():
    """The command line."""
    p = _Parser(prog=PROG, formatter_class=_Formatter,
                usage=f"{PROG} --out FILE [--in FILE] [--size WxH] [--verbose]",
                description="Draw a PNG of a dps-collector's snapshots (the privacy spent, the principal\n"
                            "angles between successive snapshots and to the truth) from the lines of\n"
                            "dps-watch --json, redrawn as each snapshot arrives.",
                epilog=HELP_EPILOG)
    p.add_argument("--out", metavar="FILE", required=True, help="the PNG to write")
    p.add_argument("--in", dest="input", metavar="FILE", default="-",
                   help="read the JSON lines from FILE (default: standard input, drawn live)")
    p.add_argument("--size", metavar="WxH", type=parse_size, default=(1200, 800),
                   help="the PNG's size in pixels (default 1200x800)")
    p.add_argument("--verbose", action="store_true", help="one line on stderr per redraw")
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    return p


def check_out(path):
    """Refuse (UsageError) an --out whose directory is missing or unwritable, or that is a directory."""
    if not path:
        raise UsageError(f"--out FILE is required (see {PROG} --help)")
    if os.path.isdir(path):
        raise UsageError(f"--out {path}: is a directory; give the PNG's file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"--out {path}: the directory {folder} does not exist")
    try:  # the real test: the temporary file of each redraw is made there
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".dps-report-", suffix=".png")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UsageError(f"--out {path}: cannot write in {folder}: {e.strerror}")


# ------------------------------------------------------------------ reading
def open_input(name):
    """The input's file descriptor (stdin for "-"); OSError if unreadable."""
    if name == "-":
        return sys.stdin.fileno()
    return os.open(name, os.O_RDONLY)


def _more_waiting(fd):
    """True if a read of fd would not block (more input already there, or its end)."""
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return False


def read_lines(fd):
    """Yield (line number, text, more) as each line arrives; more: another line (or the end) is already
    waiting, so the caller may hold its redraw.  Reads the raw descriptor, so a line is handed on as soon
    as it is complete (no read-ahead waiting for a full buffer)."""
    buf, number = b"", 0
    while True:
        while b"\n" not in buf:
            chunk = os.read(fd, 65536)
            if not chunk:
                if buf:
                    yield number + 1, buf.decode("utf-8", "replace"), False
                return
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        number += 1
        yield number, line.decode("utf-8", "replace"), b"\n" in buf or _more_waiting(fd)


def _finite(v):
    """A finite number, else None (null, NaN, an infinite eps, a string)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return v


def parse_snapshot(text):
    """One line -> a snapshot dict of FIELDS (missing ones None), or a reason string why it is skipped."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        return f"not JSON ({e})"
    if not isinstance(obj, dict):
        return "not a JSON object"
    epoch = obj.get("epoch")
    if isinstance(epoch, bool) or not isinstance(epoch, int):
        return 'no "epoch"' if epoch is None else f'"epoch" is not a whole number ({epoch!r})'
    snap = {f: obj.get(f) for f in FIELDS}
    for f in ("rho_total", "eps_total", "delta_target", "budget_left", "noise_level", "sin_to_prev",
              "sin_to_truth"):
        snap[f] = _finite(snap[f])
    snap["seeded"] = bool(snap["seeded"])
    snap["weak"] = bool(snap["weak"])
    return snap


def series(snaps):
    """The plotted data, embedded in the PNG under DATA_KEY: one entry per snapshot, None where absent."""
    return {key: [s[key] for s in snaps] for key in ("epoch", "eps_total", "rho_total", "sin_to_prev",
                                                    "sin_to_truth", "status")}


# ------------------------------------------------------------------ drawing
def _fmt(v):
    """A number for a title: 3 significant digits, whole numbers from 1000 on (no 1e+03)."""
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def title_text(last):
    """The figure's title: aggregator, d, k (of the latest snapshot)."""
    return (f"dps-collector snapshots: aggregator {last['aggregator'] or '?'}, "
            f"d = {last['d'] if last['d'] is not None else '?'}, k = {last['k'] if last['k'] is not None else '?'}")


def footer_text(last, count):
    """One line under the panels: the latest snapshot."""
    when = ""
    if isinstance(last["time_unix_ms"], int) and 0 < last["time_unix_ms"] < 253402300800000:  # before year 10000
        when = time.strftime(", %Y-%m-%d %H:%M:%S UTC", time.gmtime(last["time_unix_ms"] / 1000))
    what = f"latest: epoch {last['epoch']}"
    if last["seq"] is not None:
        what += f" (seq {last['seq']})"
    what += f" {last['status'] or '?'}"
    if last["reason"]:
        what += f" ({last['reason']})"
    if last["rows_used"] is not None:
        what += f", {last['rows_used']} rows"
    if last["noise_level"] is not None:
        what += f", noise level {last['noise_level']:.2f}"
    return f"{what}{when}; {count} snapshot{'s' if count != 1 else ''} drawn"


def draw_privacy(ax, snaps):
    """Panel 1: eps_total over the epochs, the eps cap as a dashed line or rho_total and the rho cap."""
    last = snaps[-1]
    delta = last["delta_target"]
    have = [s for s in snaps if s["eps_total"] is not None]  # (null: an infinite eps)
    eps = [s["eps_total"] for s in have]
    ax.plot([s["epoch"] for s in have], eps, "o-", color="tab:blue", label="ε spent (total)", zorder=3)
    ax.set_ylabel(f"ε total (δ = {delta:.0e})" if delta is not None else "ε total")
    title, axes = "privacy spent", [ax]
    top = max(eps, default=0.0)
    unit, left = last["budget_unit"], last["budget_left"]
    if unit == "eps" and left is not None and last["eps_total"] is not None:
        cap = last["eps_total"] + left
        ax.axhline(cap, color="tab:red", linestyle="--", linewidth=1.5, label=f"cap (ε = {_fmt(cap)})")
        top = max(top, cap)
        title += f": ε {_fmt(last['eps_total'])} of the cap {_fmt(cap)} ({_fmt(left)} left)"
    elif unit == "rho":
        twin = ax.twinx()
        axes.append(twin)
        have = [s for s in snaps if s["rho_total"] is not None]
        rho = [s["rho_total"] for s in have]
        twin.plot([s["epoch"] for s in have], rho, "s:", color="tab:green", markersize=4,
                  label="ρ spent (zCDP, right axis)", zorder=2)
        twin.set_ylabel("ρ total (zCDP)", color="tab:green")
        twin.tick_params(axis="y", colors="tab:green")
        twin.set_ylim(bottom=0, top=max(rho, default=0.0) * 1.1 or 1.0)
        if left is not None and last["rho_total"] is not None:
            title += (f": budget cap ρ = {_fmt(last['rho_total'] + left)} (zCDP), "
                      f"{_fmt(last['rho_total'])} spent, {_fmt(left)} left")
    elif unit in (None, "none"):
        title += " (no budget cap)"
    ax.set_ylim(bottom=0, top=top * 1.1 or 1.0)
    ax.set_title(title, loc="left", fontsize=11)
    ax.grid(True, alpha=0.3)
    return _merged_handles(*axes)


def _merged_handles(*axes):
    """Legend handles and labels of several axes (an axis and its twin) in one list."""
    handles, labels = [], []
    for a in axes:
        h, lab = a.get_legend_handles_labels()
        handles += h
        labels += lab
    return handles, labels


def draw_angles(ax, snaps):
    """Panel 2: sin of the largest principal angle to the previous snapshot and to the truth; refused and
    failed epochs as crosses below 0, weak releases ringed."""
    ax.axhline(0, color="0.6", linewidth=0.8)
    ax.set_ylim(-0.12, 1.04)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_ylabel("sin of the largest\nprincipal angle")
    ax.set_title("subspace change (0 = the same subspace, 1 = an orthogonal direction)", loc="left", fontsize=11)
    ax.grid(True, alpha=0.3)
    # each line joins the released snapshots that have the value (over refused and failed epochs)
    keys = [("sin_to_prev", "to the previous snapshot", "tab:blue", "o-", 5, 4)]
    if any(s["sin_to_truth"] is not None for s in snaps):
        keys.append(("sin_to_truth", "to the truth (--truth)", "tab:orange", "D-", 7, 3))
    weak_x, weak_y = [], []
    for key, label, color, style, size, z in keys:
        have = [s for s in snaps if s[key] is not None]
        ax.plot([s["epoch"] for s in have], [s[key] for s in have], style, color=color, label=label,
                markersize=size, zorder=z)
        for s in snaps:
            if s["weak"] and s[key] is not None:
                weak_x.append(s["epoch"])
                weak_y.append(s[key])
    for s in snaps:  # a weak release with no angle yet (the first one) is ringed on the 0 line
        if s["weak"] and all(s[k[0]] is None for k in keys):
            weak_x.append(s["epoch"])
            weak_y.append(0.0)
    if weak_x:
        ax.plot(weak_x, weak_y, "o", markersize=13, markerfacecolor="none", markeredgecolor="tab:red",
                markeredgewidth=1.8, label="weak release\n(noise level ≥ 0.75)", zorder=4)
    for status, marker, color, label in (("refused", "x", "tab:red", "refused (budget cap)"),
                                         ("failed", "X", "black", "failed")):
        ex = [s["epoch"] for s in snaps if s["status"] == status]
        if ex:
            ax.plot(ex, [-0.06] * len(ex), marker, color=color, markersize=9, markeredgewidth=2,
                    linestyle="none", label=label, zorder=4)
    if all(s[k[0]] is None for s in snaps for k in keys):
        ax.text(0.5, 0.5, "no angles yet: they need two released snapshots (or dps-watch --truth)",
                transform=ax.transAxes, ha="center", va="center", color="0.4")
    return ax.get_legend_handles_labels()


def set_epoch_axis(ax, snaps):
    """Whole-number epochs on the x axis, with a margin of half an epoch."""
    from matplotlib.ticker import MaxNLocator
    xs = [s["epoch"] for s in snaps]
    ax.set_xlim(min(xs) - 0.5, max(xs) + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    ax.set_xlabel("epoch")


def render(snaps, size):
    """The figure of the snapshots (a matplotlib Figure, pixel size exactly `size` at dpi 100).  The
    margins are set in pixels, so the legends (right of the panels) fit at any --size."""
    from matplotlib.figure import Figure
    w, h = size
    fig = Figure(figsize=(w / 100, h / 100), dpi=100)
    last = snaps[-1]
    left, legend_x = 100 / w, 1 - 250 / w  # the legends take 250 px, the right axis' labels 80 more
    fig.subplots_adjust(left=left, right=legend_x - 80 / w, top=1 - 95 / h, bottom=90 / h, hspace=0.35)
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    fig.suptitle(title_text(last), x=left, y=1 - 15 / h, ha="left", va="top", fontsize=14, fontweight="bold")
    if any(s["seeded"] for s in snaps):
        fig.text(1 - 10 / w, 1 - 18 / h, "SEEDED (not secure)", ha="right", va="top", color="white", fontsize=12,
                 fontweight="bold", bbox=dict(boxstyle="round", facecolor="tab:red", edgecolor="none"))
    for ax, handles in ((ax1, draw_privacy(ax1, snaps)), (ax2, draw_angles(ax2, snaps))):
        top = ax.get_position().y1
        ax.legend(*handles, loc="upper left", bbox_to_anchor=(legend_x, top), bbox_transform=fig.transFigure,
                  borderaxespad=0, fontsize=9, frameon=False)
    set_epoch_axis(ax2, snaps)
    ax1.tick_params(labelbottom=True)
    fig.text(left, 12 / h, footer_text(last, len(snaps)), fontsize=9, color="0.3")
    return fig


def write_png(fig, path, snaps):
    """Save the figure beside `path` under a temporary name, then rename it over `path`."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".dps-report-", suffix=".png")
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png", dpi=100,
                        metadata={DATA_KEY: json.dumps(series(snaps), separators=(",", ":"), allow_nan=False)})
        os.chmod(tmp, 0o666 & ~_umask())  # as a plain open() would have made it (mkstemp: 0600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask():
    """The process's umask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def redraw(snaps, path, size, verbose):
    """Draw the snapshots to path; a progress line with --verbose."""
    import matplotlib
    matplotlib.use("Agg")
    try:
        write_png(render(snaps, size), path, snaps)
    except OSError as e:  # disk full, the directory removed meanwhile
        raise WriteError(f"cannot write {path}: {e.strerror or e}")
    if verbose:
        last = snaps[-1]
        print(f"{PROG}: drew {len(snaps)} snapshots (latest epoch {last['epoch']}, {last['status']}) to {path}",
              file=sys.stderr, flush=True)


# ------------------------------------------------------------------ main
MAX_WARNINGS = 5  # skipped lines named one by one; the rest counted


def run(args):
    """Read the input, redraw as snapshots arrive; the exit code."""
    try:
        fd = open_input(args.input)
    except OSError as e:
        print(f"{PROG}: cannot read {args.input}: {e.strerror}", file=sys.stderr)
        return EXIT_INPUT
    if fd == sys.stdin.fileno() and os.isatty(fd):
        print(f"{PROG}: reading dps-watch --json lines from standard input (Ctrl-D ends)", file=sys.stderr)
    snaps, pending, skipped = [], False, 0
    try:
        for number, text, more in read_lines(fd):
            if not text.strip():
                continue
            snap = parse_snapshot(text)
            if isinstance(snap, str):
                skipped += 1
                if skipped <= MAX_WARNINGS:
                    print(f"{PROG}: line {number}: {snap}; skipped", file=sys.stderr, flush=True)
                continue
            snaps.append(snap)
            pending = True
            if not more:
                redraw(snaps, args.out, args.size, args.verbose)
                pending = False
    except KeyboardInterrupt:
        pass  # Ctrl-C in a live run: draw what came, then the closing line
    except OSError as e:  # reading (writing raises WriteError)
        print(f"{PROG}: cannot read {args.input}: {e.strerror}", file=sys.stderr)
        return EXIT_INPUT
    if skipped > MAX_WARNINGS:
        print(f"{PROG}: {skipped} lines skipped in all (the first {MAX_WARNINGS} shown): is this dps-watch --json "
              "output?", file=sys.stderr)
    if not snaps:
        print(f"{PROG}: no snapshot in the input", file=sys.stderr)
        return EXIT_INPUT
    if pending:
        redraw(snaps, args.out, args.size, args.verbose)
    print(f"{PROG}: {len(snaps)} snapshot{'' if len(snaps) == 1 else 's'} drawn to {args.out}", file=sys.stderr)
    return EXIT_OK


def main(argv=None):
    """dps-report's command line; returns the exit code (0, 2 usage, 3 no snapshot or unreadable input)."""
    try:
        args = make_parser().parse_args(argv)
        check_out(args.out)
        try:
            import matplotlib  # noqa: F401  (drawn with it: say so now, not at the first snapshot)
        except ImportError:
            raise UsageError("needs matplotlib (Debian: apt-get install python3-matplotlib; tools/setup installs it)")
        return run(args)
    except (UsageError, WriteError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
