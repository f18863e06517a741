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
The epoch axis shows the run from its epoch 0: the epochs no line gave
(dps-watch joined late, or missed some) are shaded and named, as each eps_total
drawn includes them.  Fonts and margins are measured in pixels and scaled to
--size, the title and the footer wrapped to the width, so every text fits.
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
  epochs   from 0, the run's first (unless the epochs before the first line
           would take over three quarters of the axis: then from a few
           before it); the epochs no line gave (dps-watch joined late, or
           missed some) are shaded grey and named in the footer: the
           eps_total of the next line seen includes them
  title    the aggregator, d, k, and SEEDED (not secure) for a seeded collector
  footer   the latest snapshot: epoch, seq, status and reason, rows, noise
           level (of a release only), time; the epochs not seen
  The plotted series are embedded in the PNG as the text chunk
  "dpsubspace-data": a JSON object {"epoch", "eps_total", "rho_total",
  "sin_to_prev", "sin_to_truth", "status"} of lists (one entry a line, null
  where a value is absent) and "not_seen", the epochs from 0 to the latest
  that no line gave, as [first, last] ranges.

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


def not_seen(snaps):
    """The epochs from 0 (a run's first) to the latest drawn that no snapshot gave, as [first, last]
    ranges in order: those before the first line when dps-watch joined late (or ran with --from-epoch),
    gaps where it missed some.  Every epoch publishes a snapshot (released, refused or failed), so an
    epoch missing here was not seen, not skipped by the collector."""
    seen = sorted({s["epoch"] for s in snaps})
    ranges, want = [], min(0, seen[0])
    for e in seen:
        if e > want:
            ranges.append([want, e - 1])
        want = e + 1
    return ranges


def series(snaps):
    """The plotted data, embedded in the PNG under DATA_KEY: one entry per snapshot, None where absent,
    and "not_seen" (not_seen())."""
    data = {key: [s[key] for s in snaps] for key in ("epoch", "eps_total", "rho_total", "sin_to_prev",
                                                     "sin_to_truth", "status")}
    data["not_seen"] = not_seen(snaps)
    return data


# ------------------------------------------------------------------ texts
def _fmt(v):
    """A number for a title: 3 significant digits, whole numbers from 1000 on (no 1e+03)."""
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def epochs_text(ranges, most=3):
    """[[0, 4], [7, 7]] -> "epochs 0–4 and 7" ([[3, 3]] -> "epoch 3"); past `most` ranges the rest counted."""
    parts = [f"{a}" if a == b else f"{a}–{b}" for a, b in ranges[:most]]
    if len(ranges) > most:
        parts.append(f"{sum(b - a + 1 for a, b in ranges[most:])} more")
    one = len(ranges) == 1 and ranges[0][0] == ranges[0][1]
    return ("epoch " if one else "epochs ") + (parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " +
                                               parts[-1])


def title_text(last):
    """The figure's title: aggregator, d, k (of the latest snapshot); no-break spaces in "d = 60" (wrap())."""
    return (f"dps-collector snapshots: aggregator {last['aggregator'] or '?'}, "
            f"d\u00a0=\u00a0{last['d'] if last['d'] is not None else '?'}, "
            f"k\u00a0=\u00a0{last['k'] if last['k'] is not None else '?'}")


def footer_text(last, count, gaps=()):
    """The text under the panels: the latest snapshot, then the epochs not seen (`gaps`, not_seen()).
    A noise level only for a release that has one: a refused or failed epoch released nothing, and
    dps-watch writes 0 for "not computed"."""
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
    if last["status"] == "released" and last["noise_level"] is not None and last["noise_level"] > 0:
        what += f", noise level {last['noise_level']:.2f}"
    text = f"{what}{when}; {count} snapshot{'s' if count != 1 else ''} drawn"
    if gaps:
        text += f"; {epochs_text(gaps)} not seen by dps-watch (the ε totals drawn include them)"
    return text


def privacy_title(snaps):
    """Panel 1's title: the privacy spent and the cap, of the latest snapshot."""
    last = snaps[-1]
    unit, left = last["budget_unit"], last["budget_left"]
    title = "privacy spent"
    if unit == "eps" and left is not None and last["eps_total"] is not None:
        cap = last["eps_total"] + left
        title += f": ε {_fmt(last['eps_total'])} of the cap {_fmt(cap)} ({_fmt(left)} left)"
    elif unit == "rho":
        if left is not None and last["rho_total"] is not None:
            title += (f": budget cap ρ = {_fmt(last['rho_total'] + left)} (zCDP), "
                      f"{_fmt(last['rho_total'])} spent, {_fmt(left)} left")
    elif unit in (None, "none"):
        title += " (no budget cap)"
    return title


ANGLES_TITLE = "subspace change (0 = the same subspace, 1 = an orthogonal direction)"


# ------------------------------------------------------------------ drawing
# Sizes are in pixels at --size 1200x800 and below scaled by scale(); matplotlib's points are 100/72
# pixels here (dpi 100).
PX_PER_PT = 100 / 72


def scale(size):
    """How much fonts, margins and markers shrink: 1 from 1000x650 pixels up, else the smaller ratio,
    not below 0.5 (render() shrinks further, to MIN_ZOOM, where the texts leave the panels too little)."""
    w, h = size
    return max(0.5, min(1.0, w / 1000, h / 650))


def _line_width(renderer, text, prop):
    """The width in pixels of one line of text in font prop."""
    return renderer.get_text_width_height_descent(text, prop, ismath=False)[0]


def wrap(renderer, text, width, prop):
    """text broken at spaces into lines at most `width` pixels wide in font `prop` (a word wider than
    that broken between characters)."""
    lines = []
    for para in text.split("\n"):
        line = ""
        for word in para.split(" "):
            trial = f"{line} {word}" if line else word
            if not line or _line_width(renderer, trial, prop) <= width:
                line = trial
            else:
                lines.append(line)
                line = word
            while len(line) > 1 and _line_width(renderer, line, prop) > width:  # one over-long word
                cut = len(line) - 1
                while cut > 1 and _line_width(renderer, line[:cut], prop) > width:
                    cut -= 1
                lines.append(line[:cut])
                line = line[cut:]
        lines.append(line)
    return "\n".join(lines)


def _text_height(fig, renderer, text, **kw):
    """The height in pixels of `text` drawn with the font arguments kw."""
    t = fig.text(0, 0, text, **kw)
    height = t.get_window_extent(renderer).height
    t.remove()
    return height


def shade_not_seen(ax, gaps, label):
    """The epochs not seen as grey bands behind the data, the first one labelled for the legend."""
    for i, (a, b) in enumerate(gaps):
        ax.axvspan(a - 0.5, b + 0.5, facecolor="0.87", edgecolor="none", zorder=0, gid="not-seen",
                   label=label if i == 0 else "_nolegend_")


def draw_privacy(ax, snaps, zoom):
    """Panel 1: eps_total over the epochs, the eps cap as a dashed line or rho_total on a right axis, the
    epochs not seen shaded (zoom: scale()); the (legend handles, labels) and the right axis or None."""
    last = snaps[-1]
    delta = last["delta_target"]
    have = [s for s in snaps if s["eps_total"] is not None]  # (null: an infinite eps)
    eps = [s["eps_total"] for s in have]
    ax.plot([s["epoch"] for s in have], eps, "o-", color="tab:blue", label="ε spent (total)", zorder=3,
            markersize=6 * zoom, linewidth=1.5 * zoom)
    ax.set_ylabel(f"ε total (δ = {delta:.0e})" if delta is not None else "ε total", fontsize=10 * zoom,
                  labelpad=4 * zoom)
    axes, twin = [ax], None
    top = max(eps, default=0.0)
    unit, left = last["budget_unit"], last["budget_left"]
    if unit == "eps" and left is not None and last["eps_total"] is not None:
        cap = last["eps_total"] + left
        ax.axhline(cap, color="tab:red", linestyle="--", linewidth=1.5 * zoom, label=f"cap (ε = {_fmt(cap)})")
        top = max(top, cap)
    elif unit == "rho":
        twin = ax.twinx()
        axes.append(twin)
        have = [s for s in snaps if s["rho_total"] is not None]
        rho = [s["rho_total"] for s in have]
        twin.plot([s["epoch"] for s in have], rho, "s:", color="tab:green", markersize=4 * zoom,
                  linewidth=1.5 * zoom, label="ρ spent (zCDP, right axis)", zorder=2)
        twin.set_ylabel("ρ total (zCDP)", color="tab:green", fontsize=10 * zoom, labelpad=4 * zoom)
        twin.tick_params(axis="y", colors="tab:green", labelsize=10 * zoom, length=3.5 * zoom, pad=3.5 * zoom)
        twin.set_ylim(bottom=0, top=max(rho, default=0.0) * 1.1 or 1.0)
    gaps = not_seen(snaps)
    # eps_total is cumulative: the first point after unseen epochs includes what they spent
    shade_not_seen(ax, gaps, "not seen by dps-watch\n(counted in the next\nε total seen)")
    ax.set_ylim(bottom=0, top=top * 1.1 or 1.0)
    ax.grid(True, alpha=0.3)
    return _merged_handles(*axes), twin


def _merged_handles(*axes):
    """Legend handles and labels of several axes (an axis and its twin) in one list."""
    handles, labels = [], []
    for a in axes:
        h, lab = a.get_legend_handles_labels()
        handles += h
        labels += lab
    return handles, labels


def draw_angles(ax, snaps, zoom, renderer, width):
    """Panel 2: sin of the largest principal angle to the previous snapshot and to the truth; refused and
    failed epochs as crosses below 0, weak releases ringed, the epochs not seen shaded (zoom: scale();
    width: the panel's in pixels, for the note wrapped in it when there is no angle)."""
    ax.axhline(0, color="0.6", linewidth=0.8 * zoom)
    ax.set_ylim(-0.12, 1.04)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_ylabel("sin of the largest\nprincipal angle", fontsize=10 * zoom, labelpad=4 * zoom)
    ax.grid(True, alpha=0.3)
    # each line joins the released snapshots that have the value (over refused, failed and unseen epochs)
    keys = [("sin_to_prev", "to the previous snapshot", "tab:blue", "o-", 5, 4)]
    if any(s["sin_to_truth"] is not None for s in snaps):
        keys.append(("sin_to_truth", "to the truth (--truth)", "tab:orange", "D-", 7, 3))
    weak_x, weak_y = [], []
    for key, label, color, style, size, z in keys:
        have = [s for s in snaps if s[key] is not None]
        ax.plot([s["epoch"] for s in have], [s[key] for s in have], style, color=color, label=label,
                markersize=size * zoom, linewidth=1.5 * zoom, zorder=z)
        for s in snaps:
            if s["weak"] and s[key] is not None:
                weak_x.append(s["epoch"])
                weak_y.append(s[key])
    for s in snaps:  # a weak release with no angle yet (the first one) is ringed on the 0 line
        if s["weak"] and all(s[k[0]] is None for k in keys):
            weak_x.append(s["epoch"])
            weak_y.append(0.0)
    if weak_x:
        ax.plot(weak_x, weak_y, "o", markersize=13 * zoom, markerfacecolor="none", markeredgecolor="tab:red",
                markeredgewidth=1.8 * zoom, label="weak release\n(noise level ≥ 0.75)", zorder=4)
    for status, marker, color, label in (("refused", "x", "tab:red", "refused (budget cap)"),
                                         ("failed", "X", "black", "failed")):
        ex = [s["epoch"] for s in snaps if s["status"] == status]
        if ex:
            ax.plot(ex, [-0.06] * len(ex), marker, color=color, markersize=9 * zoom, markeredgewidth=2 * zoom,
                    linestyle="none", label=label, zorder=4)
    shade_not_seen(ax, not_seen(snaps), "not seen by dps-watch")
    if all(s[k[0]] is None for s in snaps for k in keys):
        from matplotlib.font_manager import FontProperties
        note = wrap(renderer, "no angles yet: they need two released snapshots (or dps-watch --truth)",
                    0.9 * width, FontProperties(size=10 * zoom))
        ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center", color="0.4", fontsize=10 * zoom)
    return ax.get_legend_handles_labels()


def epoch_range(snaps):
    """The first and last epoch of the x axis.  From 0, the run's first, so that a picture of a run
    dps-watch joined late starts where the run did (the epochs before the first line shaded); unless
    those would take more than three quarters of the axis (a long run joined late): then from a third
    of the seen span before the first line, the shaded band at the axis' left edge (named, from 0, in
    the footer)."""
    xs = [s["epoch"] for s in snaps]
    first, last = min(xs), max(xs)
    span = last - first + 1
    if first <= 3 * span:
        return min(0, first), last
    return first - max(1, span // 3), last


def set_epoch_axis(ax, snaps, zoom):
    """Whole-number epochs on the x axis (epoch_range()), with a margin of half an epoch."""
    from matplotlib.ticker import MaxNLocator
    lo, hi = epoch_range(snaps)
    ax.set_xlim(lo - 0.5, hi + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    ax.set_xlabel("epoch", fontsize=10 * zoom, labelpad=4 * zoom)


MIN_PANEL = 0.2  # of the height, each panel at least: render() shrinks the texts for it...
MIN_ZOOM = 0.3  # ...down to this scale (the smallest --size with a long footer needs it)


def _frame(snaps, size, zoom):
    """A figure with its texts laid out at scale `zoom`: the title and SEEDED badge at the top, the footer
    at the bottom, each wrapped to its width and measured; returns (figure, renderer, layout), layout
    holding the pixel geometry of the panels (panel: each one's height)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.font_manager import FontProperties
    w, h = size
    fig = Figure(figsize=(w / 100, h / 100), dpi=100)
    renderer = FigureCanvasAgg(fig).get_renderer()
    last = snaps[-1]
    pad = 10 * zoom  # pixels at the figure's edges and between texts
    left = 100 * zoom  # the y axis' tick labels and label
    legends_right = w - left - (250 + 80) * zoom >= w / 2  # the legends take 250 px, a right axis' labels 80
    twin = last["budget_unit"] == "rho"
    right = w - (250 + 80) * zoom if legends_right else w - (60 if twin else 15) * zoom
    text_x = left if legends_right else pad  # the title and the footer: aligned with the panels if wide

    # top: the SEEDED badge at the right, the title beside it (below it when the width left is too small)
    title_top, title_width = pad, w - text_x - pad
    if any(s["seeded"] for s in snaps):
        badge = fig.text(1 - pad / w, 1 - 1.5 * pad / h, "SEEDED (not secure)", ha="right", va="top",
                         color="white", fontsize=12 * zoom, fontweight="bold", gid="seeded",
                         bbox=dict(boxstyle="round", facecolor="tab:red", edgecolor="none"))
        badge.update_bbox_position_size(renderer)
        box = badge.get_bbox_patch().get_window_extent(renderer)
        if title_width - box.width - pad >= 200 * zoom:
            title_width -= box.width + pad
        else:
            title_top = h - box.y0 + pad / 2
    title = fig.text(text_x / w, 1 - title_top / h,
                     wrap(renderer, title_text(last), title_width, FontProperties(size=14 * zoom, weight="bold")),
                     ha="left", va="top", fontsize=14 * zoom, fontweight="bold", gid="title")
    y = h - title.get_window_extent(renderer).y0 + 1.5 * pad  # pixels from the top taken so far

    # bottom: the footer
    footer = fig.text(text_x / w, pad / h, wrap(renderer, footer_text(last, len(snaps), not_seen(snaps)),
                                                w - text_x - pad, FontProperties(size=9 * zoom)),
                      ha="left", va="bottom", fontsize=9 * zoom, color="0.3", gid="footer")
    footer_top = footer.get_window_extent(renderer).height + pad  # pixels from the bottom

    # the panels' titles (wrapped to the width right of the y axis), the rows of x tick labels below each
    # panel and "epoch" below the second
    titles = [wrap(renderer, t, w - left - pad, FontProperties(size=11 * zoom))
              for t in (privacy_title(snaps), ANGLES_TITLE)]
    title_pad = 6 * zoom  # points, between a panel and its title
    above = [_text_height(fig, renderer, t, fontsize=11 * zoom) + title_pad * PX_PER_PT for t in titles]
    tick_labels = (10 + 3.5 + 3.5) * zoom * PX_PER_PT * 1.2  # font, tick, pad
    x_label = (10 * 1.2 + 4) * zoom * PX_PER_PT  # font, labelpad
    spare = h - y - footer_top - pad - above[0] - tick_labels - pad - above[1] - tick_labels - x_label
    panel = max(10.0, spare / 2)
    top1 = y + above[0]
    layout = dict(zoom=zoom, left=left, right=right, legends_right=legends_right, titles=titles,
                  title_pad=title_pad, panel=panel, tops=(top1, top1 + panel + tick_labels + pad + above[1]),
                  footer_top=footer_top)
    return fig, renderer, layout


def _place_legend(ax, handles, fig, renderer, layout, room):
    """The panel's legend, right of it or (narrow figures) inside it, in the first of a few sizes and column
    counts that lies within `room` (a Bbox in pixels); none if none does."""
    zoom, w = layout["zoom"], fig.bbox.width
    tries = ((9, 1), (7.5, 1), (7.5, 2), (6, 3)) if not layout["legends_right"] else ((9, 1), (7.5, 1), (6, 1))
    for size, ncol in tries:
        if layout["legends_right"]:
            legend = ax.legend(*handles, loc="upper left", bbox_to_anchor=(1 - 250 * zoom / w, ax.get_position().y1),
                               bbox_transform=fig.transFigure, borderaxespad=0, fontsize=size * zoom,
                               frameon=False)
        else:
            legend = ax.legend(*handles, loc="best", fontsize=size * zoom, ncol=ncol, framealpha=0.85,
                               borderpad=0.3, labelspacing=0.3, columnspacing=1.0)
        box = legend.get_window_extent(renderer)
        if room.x0 <= box.x0 and box.x1 <= room.x1 and room.y0 <= box.y0 and box.y1 <= room.y1:
            return
        legend.remove()


def render(snaps, size):
    """The figure of the snapshots (a matplotlib Figure with an Agg canvas, pixel size exactly `size` at
    dpi 100).  Each text is wrapped to the width it has and measured, and the panels get the height the
    texts leave, so every text lies inside the figure and none overlaps another at any --size; while that
    leaves the panels less than MIN_PANEL of the height each, the texts shrink (to MIN_ZOOM).  The legends
    go right of the panels while that leaves the panels half the width, else inside them."""
    from matplotlib.transforms import Bbox
    w, h = size
    zoom = scale(size)
    while True:
        fig, renderer, lay = _frame(snaps, size, zoom)
        if lay["panel"] >= MIN_PANEL * h or zoom <= MIN_ZOOM:
            break
        zoom = max(MIN_ZOOM, zoom * 0.8)
    left, right, panel = lay["left"], lay["right"], lay["panel"]
    axes = [fig.add_axes((left / w, 1 - (top + panel) / h, (right - left) / w, panel / h)) for top in lay["tops"]]
    ax1, ax2 = axes
    ax2.sharex(ax1)
    handles1, twin = draw_privacy(ax1, snaps, zoom)
    handles2 = draw_angles(ax2, snaps, zoom, renderer, right - left)
    for ax, text in zip(axes, lay["titles"]):
        ax.set_title(text, loc="left", fontsize=11 * zoom, pad=lay["title_pad"])
    for a in axes + ([twin] if twin is not None else []):
        a.tick_params(labelsize=10 * zoom, length=3.5 * zoom, width=0.8 * zoom, pad=3.5 * zoom)
    set_epoch_axis(ax2, snaps, zoom)
    ax1.tick_params(labelbottom=True)
    # the room of each legend: right of its panel down to the next panel's title (the footer), or the panel
    bottoms = (ax2.title.get_window_extent(renderer).y1, lay["footer_top"])
    for ax, handles, low in ((ax1, handles1, bottoms[0]), (ax2, handles2, bottoms[1])):
        box = ax.get_window_extent(renderer)
        room = Bbox([[right, low], [w, box.y1 + 1]]) if lay["legends_right"] else box
        _place_legend(ax, handles, fig, renderer, lay, room)
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
