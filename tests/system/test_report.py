#!/usr/bin/env python3
"""test_report - dps-report (python/dpsubspace/report.py, run through its launcher BUILD/dps-report): a
hand-written dps-watch --json stream of 4 snapshots (one refused, one weak, angles to the truth) drawn
offline and live -- the PNG's size, the series embedded in its "dpsubspace-data" text chunk, a picture
that is not blank --; the bad inputs (no snapshot: exit 3, a garbage line: a warning and the rest drawn,
--out in a missing directory: exit 2); a run dps-watch joined late (the epochs not seen embedded, shaded
on an axis from epoch 0, named in the footer); the texts inside the PNG and clear of the panels at the
default size and small ones (the figure's boxes measured); no noise level for a refused or failed epoch;
and end to end, a real collector's snapshots through dps-watch --json --truth into dps-report.

usage: test_report.py BUILD_DIR [TEST_NAME...]   (prints "N passed, N failed" last)
"""
import json
import os
import struct
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403  (the shared harness: Collector, check, note, ...)

REPORT = os.path.join(BUILD, "dps-report")
WATCH = os.path.join(BUILD, "src", "cli", "dps-watch")
DATA_KEY = "dpsubspace-data"

# Four snapshots as dps-watch --json prints them: epoch 0 released (angle to the truth only), epoch 1
# released, epoch 2 refused at the cap (nothing spent, no basis), epoch 3 a weak release.
_COMMON = dict(reason="", seeded=True, d=60, k=2, aggregator="wfc", buckets_used=4, radius=0.12,
               delta_epoch=0.0, delta_total=0.0, delta_target=1e-6, budget_unit="eps", saved=None)
SNAPSHOTS = [
    dict(_COMMON, seq=1, epoch=0, status="released", time_unix_ms=1700000000000, rows_used=240, noise_level=0.2,
         weak=False, rho_epoch=0.5, eps_epoch=5.76, rho_total=0.5, eps_total=5.76, budget_left=14.24,
         prev_epoch=None, angles_to_prev_deg=None, sin_to_prev=None, angles_to_truth_deg=[1.5, 3.1],
         sin_to_truth=0.054),
    dict(_COMMON, seq=2, epoch=1, status="released", time_unix_ms=1700000060000, rows_used=240, noise_level=0.25,
         weak=False, rho_epoch=0.5, eps_epoch=5.76, rho_total=1.0, eps_total=8.43, budget_left=11.57,
         prev_epoch=0, angles_to_prev_deg=[1.1, 2.9], sin_to_prev=0.0506, angles_to_truth_deg=[1.2, 2.6],
         sin_to_truth=0.0454),
    dict(_COMMON, seq=3, epoch=2, status="refused", reason="would pass the privacy budget cap",
         time_unix_ms=1700000120000, rows_used=0, noise_level=None, weak=False, rho_epoch=0.0, eps_epoch=0.0,
         rho_total=1.0, eps_total=8.43, budget_left=11.57, prev_epoch=None, angles_to_prev_deg=None,
         sin_to_prev=None, angles_to_truth_deg=None, sin_to_truth=None),
    dict(_COMMON, seq=4, epoch=3, status="released", time_unix_ms=1700000180000, rows_used=240, noise_level=0.81,
         weak=True, rho_epoch=0.5, eps_epoch=5.76, rho_total=1.5, eps_total=10.69, budget_left=9.31,
         prev_epoch=1, angles_to_prev_deg=[20.0, 41.0], sin_to_prev=0.656, angles_to_truth_deg=[22.0, 44.0],
         sin_to_truth=0.695),
]


# As dps-watch --json writes the lines of epochs that released nothing: noise_level 0 ("not computed"),
# the collector's reasons.
REFUSED_REASON = "releasing this epoch would pass the privacy budget cap: nothing was spent"
FAILED_REASON = "the noisy count of friends was too low (WFC said FAIL): the buckets disagree; budget spent"


def as_watched(first_epoch, extra_failed_at=None):
    """SNAPSHOTS as dps-watch prints a run it joined at first_epoch (epochs and seqs shifted, the refused
    line's noise_level 0 and its reason the collector's), then a failed epoch at extra_failed_at."""
    snaps = []
    for s in SNAPSHOTS:
        s = dict(s, epoch=s["epoch"] + first_epoch, seq=s["seq"] + first_epoch)
        if s["status"] == "refused":
            s.update(noise_level=0.0, reason=REFUSED_REASON)
        snaps.append(s)
    if extra_failed_at is not None:
        last = snaps[-1]
        snaps.append(dict(last, seq=last["seq"] + extra_failed_at - last["epoch"], epoch=extra_failed_at,
                          status="failed", reason=FAILED_REASON, time_unix_ms=last["time_unix_ms"] + 60000,
                          rows_used=123456789, noise_level=0.0, weak=False, eps_total=last["eps_total"] + 2.27,
                          budget_left=last["budget_left"] - 2.27, prev_epoch=None, angles_to_prev_deg=None,
                          sin_to_prev=None, angles_to_truth_deg=None, sin_to_truth=None))
    return snaps


def expected_not_seen(epochs):
    """The epochs from 0 to the largest of `epochs` that are not among them, as [first, last] ranges."""
    seen, ranges = set(epochs), []
    for e in range(0, max(seen) + 1):
        if e in seen:
            continue
        if ranges and ranges[-1][1] == e - 1:
            ranges[-1][1] = e
        else:
            ranges.append([e, e])
    return ranges


def expected_series(snaps):
    """What dps-report must embed: the series of the snapshots given, None where absent, and the epochs
    not seen."""
    want = {key: [s.get(key) for s in snaps] for key in ("epoch", "eps_total", "rho_total", "sin_to_prev",
                                                         "sin_to_truth", "status")}
    want["not_seen"] = expected_not_seen(want["epoch"])
    return want


def jsonl(snaps):
    return "".join(json.dumps(s) + "\n" for s in snaps)


def png_chunks(path):
    """The PNG's chunks as (type, data), checking the signature and each CRC."""
    with open(path, "rb") as f:
        blob = f.read()
    if blob[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    chunks, at = [], 8
    while at < len(blob):
        n, kind = struct.unpack(">I4s", blob[at:at + 8])
        data = blob[at + 8:at + 8 + n]
        (crc,) = struct.unpack(">I", blob[at + 8 + n:at + 12 + n])
        if zlib.crc32(kind + data) != crc:
            raise ValueError(f"{path}: bad CRC in chunk {kind}")
        chunks.append((kind.decode("ascii"), data))
        at += 12 + n
    return chunks


def png_info(path):
    """(width, height, {tEXt key: text}) of a PNG, read from its IHDR and tEXt chunks."""
    chunks = png_chunks(path)
    width, height = struct.unpack(">II", chunks[0][1][:8]) if chunks[0][0] == "IHDR" else (None, None)
    texts = {}
    for kind, data in chunks:
        if kind == "tEXt":
            key, _, text = data.partition(b"\0")
            texts[key.decode("latin-1")] = text.decode("latin-1")
    return width, height, texts


def embedded(path):
    """The series dps-report embedded in the PNG, or None."""
    try:
        text = png_info(path)[2].get(DATA_KEY)
    except (OSError, ValueError, struct.error):
        return None
    return json.loads(text) if text is not None else None


def distinct_colours(path):
    """How many distinct colours the PNG's middle (inside the panels) has."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.image as mpimg
    img = mpimg.imread(path)
    h, w = img.shape[:2]
    middle = (img[h // 8:7 * h // 8, w // 10:7 * w // 10, :3] * 255).astype(np.uint8)
    return len(np.unique(middle.reshape(-1, 3), axis=0))


def report(args, stdin_text=None, timeout=60):
    """dps-report ARGS with stdin_text on its standard input; the finished process."""
    return subprocess.run([REPORT] + args, input=stdin_text if stdin_text is not None else "", capture_output=True,
                          text=True, timeout=timeout)


def scratch(name):
    d = os.path.join(TMP, name)
    os.makedirs(d, exist_ok=True)
    return d


# --------------------------------------------------------------------- tests
def test_offline():
    """A finished file (--in): the PNG at the default size, its embedded series equal to the input's, a
    picture (not blank), the closing line, no temporary file left."""
    d = scratch("offline")
    src, out = os.path.join(d, "watch.jsonl"), os.path.join(d, "privacy.png")
    with open(src, "w") as f:
        f.write(jsonl(SNAPSHOTS))
    p = report(["--in", src, "--out", out])
    check(p.returncode == 0, f"--in: exit 0 ({p.returncode}: {p.stderr.strip()})")
    check(p.stderr == f"dps-report: 4 snapshots drawn to {out}\n", f"--in: only the closing line ({p.stderr!r})")
    check(p.stdout == "", "nothing on stdout")
    check(os.path.isfile(out), "the PNG exists")
    if not os.path.isfile(out):
        return
    w, h, texts = png_info(out)
    check((w, h) == (1200, 800), f"default size 1200x800 ({w}x{h})")
    check(DATA_KEY in texts, f"a {DATA_KEY} tEXt chunk ({sorted(texts)})")
    got = embedded(out)
    check(got == expected_series(SNAPSHOTS), f"the embedded series equal the input's: {got}")
    n = distinct_colours(out)
    check(n >= 8, f"the panels are drawn ({n} distinct colours)")
    check(sorted(os.listdir(d)) == ["privacy.png", "watch.jsonl"], f"no temporary file left: {os.listdir(d)}")
    note(f"offline: {w}x{h}, {n} colours, {len(texts[DATA_KEY])} bytes of data")


def test_size_and_stdin():
    """--size WxH gives exactly that many pixels; standard input is read when --in is absent; a bad
    --size is a usage error."""
    out = os.path.join(scratch("size"), "p.png")
    p = report(["--out", out, "--size", "640x480", "--verbose"], jsonl(SNAPSHOTS))
    check(p.returncode == 0, f"--size 640x480: exit 0 ({p.stderr.strip()})")
    if p.returncode == 0:
        w, h, _ = png_info(out)
        check((w, h) == (640, 480), f"--size 640x480 ({w}x{h})")
        check(embedded(out) == expected_series(SNAPSHOTS), "stdin: the same series")
    lines = p.stderr.splitlines()
    check(len(lines) >= 2 and all(ln.startswith("dps-report: drew ") for ln in lines[:-1]),
          f"--verbose: a line per redraw on stderr ({lines})")
    p = report(["--out", out, "--size", "64x"], jsonl(SNAPSHOTS))
    check(p.returncode == 2 and p.stderr.startswith("dps-report: ") and p.stderr.count("\n") == 1,
          f"--size 64x: exit 2, one line ({p.returncode}: {p.stderr!r})")


def test_bad_inputs():
    """No snapshot: exit 3; a garbage line or one without an epoch: a warning naming the line, the rest
    drawn; --out missing, a directory, or in a missing directory: exit 2 with one line; an unreadable
    --in: exit 3."""
    d = scratch("bad")
    out = os.path.join(d, "p.png")
    for what, text in (("empty input", ""), ("only garbage", "not json\n{\"seq\": 1}\n")):
        p = report(["--out", out], text)
        check(p.returncode == 3 and "dps-report: no snapshot in the input" in p.stderr,
              f"{what}: exit 3, no snapshot ({p.returncode}: {p.stderr.strip()})")
    check(not os.path.exists(out), "no PNG without a snapshot")
    lines = jsonl(SNAPSHOTS).splitlines(keepends=True)
    no_epoch = json.dumps({"seq": 9, "status": "released"}) + "\n"
    mixed = lines[0] + "}garbage{\n" + lines[1] + no_epoch + "".join(lines[2:])
    p = report(["--out", out], mixed)
    err = p.stderr.splitlines()
    check(p.returncode == 0, f"a garbage line: exit 0 ({p.returncode}: {p.stderr.strip()})")
    check(len(err) == 3 and err[0].startswith("dps-report: line 2: ") and err[1].startswith("dps-report: line 4: ")
          and "epoch" in err[1] and err[2] == f"dps-report: 4 snapshots drawn to {out}",
          f"a warning naming each bad line, then the closing line: {err}")
    check(embedded(out) == expected_series(SNAPSHOTS), "the rest drawn")
    for what, args in (("--out in a missing directory", ["--out", os.path.join(d, "nowhere", "p.png")]),
                       ("no --out", []), ("--out a directory", ["--out", d]),
                       ("an unknown flag", ["--out", out, "--colour"])):
        p = report(args, jsonl(SNAPSHOTS))
        check(p.returncode == 2 and p.stderr.startswith("dps-report: ") and p.stderr.count("\n") == 1,
              f"{what}: exit 2, one line ({p.returncode}: {p.stderr!r})")
    p = report(["--in", os.path.join(d, "missing.jsonl"), "--out", out])
    check(p.returncode == 3 and p.stderr.startswith("dps-report: cannot read"), f"--in missing: exit 3 ({p.stderr!r})")
    p = report(["--version"])
    check(p.returncode == 0 and re.fullmatch(r"dps-report \d+\.\d+\.\d+\n", p.stdout), f"--version ({p.stdout!r})")
    p = report(["--help"])
    check(p.returncode == 0 and all(w in p.stdout for w in ("sin_to_prev", "eps_total", "exit status", "dps-watch")),
          "--help names the fields, the exit status, the pipeline")


def test_live():
    """Lines written one at a time to dps-report's standard input: the PNG is redrawn after each
    snapshot (its embedded series grow one by one) and never seen half written."""
    d = scratch("live")
    out = os.path.join(d, "live.png")
    proc = subprocess.Popen([REPORT, "--out", out], stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ok = True
    for i, s in enumerate(SNAPSHOTS):
        proc.stdin.write(json.dumps(s) + "\n")
        proc.stdin.flush()
        want = expected_series(SNAPSHOTS[:i + 1])
        # each read below is of a whole PNG (a torn one would fail its CRCs and read as None)
        ok &= wait_for(lambda: embedded(out) == want, timeout=30)
    check(ok, "redrawn after each line, before the input ends")
    proc.stdin.close()
    err = proc.stderr.read()
    rc = proc.wait(30)
    check(rc == 0 and err == f"dps-report: 4 snapshots drawn to {out}\n", f"live: exit 0, the closing line ({err!r})")
    check(os.listdir(d) == ["live.png"], f"no temporary file left: {os.listdir(d)}")


# ------------------------------------------------------- the figure, measured
def figure_of(snaps, size):
    """The figure dps-report draws of these lines at --size `size`, drawn once (so that every text and
    legend is placed): the module the launcher runs (BUILD/python), the lines parsed as it parses them."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from dpsubspace import report as rep
    fig = rep.render([rep.parse_snapshot(json.dumps(s)) for s in snaps], size)
    if not isinstance(fig.canvas, FigureCanvasAgg):  # as savefig draws it
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig


def find_text(fig, prefix):
    """The figure's text artist that begins with prefix (None if none)."""
    from matplotlib.text import Text
    return next((t for t in fig.findobj(Text) if t.get_visible() and t.get_text().startswith(prefix)), None)


def footer_of(fig):
    """The footer ("latest: ..."), its line breaks (wrapped at spaces) made spaces again; "" if none."""
    t = find_text(fig, "latest:")
    return t.get_text().replace("\n", " ") if t is not None else ""


def panels(fig):
    """The two panels, top first: lists of the axes at each panel's place (a right axis shares the first's)."""
    places = {}
    for a in fig.axes:
        places.setdefault(tuple(a.get_position().bounds), []).append(a)
    return sorted(places.values(), key=lambda axes: -axes[0].get_position().y0)


def full_height_spans(ax):
    """The patches of a panel that cover its whole height, as (x0, x1) in epochs."""
    fig_renderer = ax.figure.canvas.get_renderer()
    box, inv, spans = ax.bbox, ax.transData.inverted(), []
    for p in ax.patches:
        b = p.get_window_extent(fig_renderer)
        if b.y0 <= box.y0 + 0.5 and b.y1 >= box.y1 - 0.5:
            spans.append((inv.transform((b.x0, 0))[0], inv.transform((b.x1, 0))[0]))
    return spans


def epochs_named(ranges):
    """The ranges as the footer must name each: "0–4", "9"."""
    return [f"{a}" if a == b else f"{a}–{b}" for a, b in ranges]


def named_not_seen(footer):
    """The ranges the footer says dps-watch did not see ("epochs 0–4 and 9 not seen by dps-watch" ->
    ["0–4", "9"]), or None."""
    m = re.search(r"epochs? ([0-9–]+(?:(?:, | and )[0-9–]+)*) not seen by dps-watch", footer)
    return re.split(r", | and ", m.group(1)) if m else None


def test_joined_late():
    """dps-watch joined the run at epoch 5 (and missed epoch 9): the embedded "not_seen" is epochs 0-4 and
    9; the epoch axis of both panels starts at 0, each unseen range shaded over the panel's height and no
    seen epoch shaded; the privacy panel's legend names the shading (the eps totals after it include
    it); the footer names the ranges.  A long run joined at epoch 5000: the seen epochs keep half the
    axis, the band of 0-4999 at its left edge, the footer naming 0-4999."""
    d = scratch("late")
    out = os.path.join(d, "late.png")
    snaps = as_watched(5, extra_failed_at=10)  # epochs 5-8 and 10
    p = report(["--out", out], jsonl(snaps))
    check(p.returncode == 0, f"joined late: exit 0 ({p.returncode}: {p.stderr.strip()[-300:]})")
    want = expected_not_seen([s["epoch"] for s in snaps])
    got = embedded(out) or {}
    check(got == expected_series(snaps), f"joined late: the embedded series, not_seen {want}: {got}")
    fig = figure_of(snaps, (1200, 800))
    seen = sorted({s["epoch"] for s in snaps})
    for (ax, *_), name in zip(panels(fig), ("privacy", "angles")):
        lo, hi = ax.get_xlim()
        check(lo <= -0.5 + 1e-9 and hi >= seen[-1], f"{name} panel: the epoch axis from 0 to {seen[-1]} ({lo}, {hi})")
        spans = full_height_spans(ax)
        for a, b in want:
            check(any(abs(x0 - (a - 0.5)) < 1e-6 and abs(x1 - (b + 0.5)) < 1e-6 for x0, x1 in spans),
                  f"{name} panel: epochs {a}-{b} shaded ({spans})")
        check(not any(x0 < e < x1 for x0, x1 in spans for e in seen), f"{name} panel: no seen epoch shaded ({spans})")
    legend = panels(fig)[0][0].get_legend()
    labels = [t.get_text() for t in legend.get_texts()] if legend else []
    check(any("not seen" in lab and "ε" in lab for lab in labels),
          f"the privacy panel's legend names the epochs not seen and their ε ({labels})")
    check(named_not_seen(footer_of(fig)) == epochs_named(want),
          f"the footer names epochs {epochs_named(want)} not seen: {footer_of(fig)!r}")

    long_run = as_watched(5000)
    want = expected_not_seen([s["epoch"] for s in long_run])
    p = report(["--out", out], jsonl(long_run))
    got = embedded(out) or {}
    check(p.returncode == 0 and got.get("not_seen") == want, f"joined at 5000: not_seen {want} ({got.get('not_seen')})")
    fig = figure_of(long_run, (1200, 800))
    first, last = long_run[0]["epoch"], long_run[-1]["epoch"]
    for (ax, *_), name in zip(panels(fig), ("privacy", "angles")):
        lo, hi = ax.get_xlim()
        check((last - first + 1) / (hi - lo) >= 0.5, f"{name} panel, joined at 5000: the seen epochs keep half "
              f"the axis ({lo}, {hi})")
        spans = full_height_spans(ax)
        check(any(x0 <= lo < x1 and abs(x1 - (first - 0.5)) < 1e-6 for x0, x1 in spans),
              f"{name} panel, joined at 5000: the unseen epochs shaded from the axis' left edge ({lo}: {spans})")
    check(named_not_seen(footer_of(fig)) == epochs_named(want),
          f"joined at 5000: the footer names {epochs_named(want)} not seen: {footer_of(fig)!r}")


def test_texts_fit():
    """The longest footer dps-watch's lines make (a failed epoch's reason, epochs not seen), at the default
    size and small ones, with an eps cap and (at some sizes) a rho cap (a right axis): the program draws a
    PNG of that size; in the figure the footer, the title and the SEEDED badge lie inside it, and none of
    them overlaps a panel (its title, tick labels, axis labels and legend), each other, or the other
    panel; each panel lies inside the figure too."""
    from matplotlib.transforms import Bbox
    d = scratch("fit")
    out = os.path.join(d, "fit.png")
    eps_cap = as_watched(5, extra_failed_at=10)
    rho_cap = [dict(s, budget_unit="rho", budget_left=3.0 - s["rho_total"]) for s in eps_cap]
    cases = [(eps_cap, "eps", size) for size in ((1200, 800), (1000, 650), (800, 600), (640, 480), (400, 300),
                                                 (300, 200), (200, 200), (1200, 300), (300, 900))]
    cases += [(rho_cap, "rho", size) for size in ((1200, 800), (640, 480), (300, 200))]
    for snaps, cap, size in cases:
        tag = "%dx%d, %s cap" % (size + (cap,))
        p = report(["--out", out, "--size", "%dx%d" % size], jsonl(snaps))
        check(p.returncode == 0 and png_info(out)[:2] == size,
              f"{tag}: exit 0, the PNG's size ({p.returncode}: {p.stderr.strip()[-200:]})")
        try:
            fig = figure_of(snaps, size)
        except Exception as e:  # a layout that cannot be made at this size
            check(False, f"{tag}: the figure is drawn ({type(e).__name__}: {e})")
            continue
        renderer = fig.canvas.get_renderer()
        whole = Bbox([[-0.5, -0.5], [size[0] + 0.5, size[1] + 0.5]])
        boxes = {}
        for name, prefix in (("footer", "latest:"), ("title", "dps-collector snapshots"), ("badge", "SEEDED")):
            t = find_text(fig, prefix)
            check(t is not None, f"{tag}: the {name} is drawn")
            if t is not None:
                patch = t.get_bbox_patch()
                boxes[name] = patch.get_window_extent(renderer) if patch is not None else t.get_window_extent(renderer)
        for i, axes in enumerate(panels(fig)):
            boxes[f"panel {i + 1}"] = Bbox.union([a.get_tightbbox(renderer) for a in axes])
        for name, b in boxes.items():
            check(whole.x0 <= b.x0 and b.x1 <= whole.x1 and whole.y0 <= b.y0 and b.y1 <= whole.y1,
                  f"{tag}: the {name} inside the figure ({b.bounds})")
        names = sorted(boxes)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                cut = Bbox.intersection(boxes[a], boxes[b])
                check(cut is None or cut.width < 0.5 or cut.height < 0.5,
                      f"{tag}: the {a} and the {b} do not overlap ({boxes[a].bounds}, {boxes[b].bounds})")
        if size == (1200, 800):
            footer = footer_of(fig)
            check(FAILED_REASON in footer, f"{tag}: the footer whole, the reason in it ({footer!r})")


def test_no_noise_level_without_release():
    """A refused or a failed epoch released no basis, and dps-watch writes its noise_level 0 ("not
    computed"): the footer of such a latest line names its status and no noise level; a release's noise
    level is there (two decimals)."""
    snaps = as_watched(0, extra_failed_at=4)  # 0 and 1 released, 2 refused, 3 a weak release, 4 failed
    for upto in range(len(snaps)):
        last = snaps[upto]
        footer = footer_of(figure_of(snaps[:upto + 1], (1200, 800)))
        check(f"epoch {last['epoch']} (seq {last['seq']}) {last['status']}" in footer,
              f"latest {last['status']}: the footer names it ({footer!r})")
        if last["status"] == "released":
            want = f"noise level {last['noise_level']:.2f}"
            check(want in footer, f"latest released: {want!r} in the footer ({footer!r})")
        else:
            check("noise level" not in footer, f"latest {last['status']}: no noise level in the footer ({footer!r})")


def test_end_to_end():
    """A real collector (d = 40, k = 2, 3 epochs), dps-watch --json --truth piped into dps-report: 3
    released snapshots drawn, the angle to the truth small, to the previous one from the second on."""
    if not os.path.exists(WATCH):
        note(f"skipped: no {WATCH} (DPS_BUILD_TOOLS off)")
        return
    d = scratch("e2e")
    c = Collector("report", d=40, k=2, t=60).start()
    rng = np.random.default_rng(5)
    rows, basis = synth(c.t * c.m * 3, c.d, c.k, 10.0 * c.d, rng)
    truth = os.path.join(d, "basis.npy")
    np.save(truth, np.ascontiguousarray(basis, dtype=np.float32))
    out = os.path.join(d, "privacy.png")
    watch = subprocess.Popen([WATCH, "--insecure-plaintext", "--connect", c.publish, "--count", "3", "--timeout", "30",
                              "--json", "--truth", truth], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    rep = subprocess.Popen([REPORT, "--out", out], stdin=watch.stdout, stderr=subprocess.PIPE, text=True)
    watch.stdout.close()  # dps-report holds the pipe's reading end now
    # epoch 0 first: dps-watch gets it live or, subscribing later, as the latest on joining; once it is
    # drawn dps-watch is surely subscribed, and epochs 1 and 2 follow (each drawn as it arrives)
    epoch = c.t * c.m
    send_rows(c, rows[:epoch])
    check(wait_for(lambda: (embedded(out) or {}).get("epoch") == [0], timeout=30), "epoch 0 drawn live")
    send_rows(c, rows[epoch:])
    try:
        rc_watch, rc_rep = watch.wait(60), rep.wait(60)
    except subprocess.TimeoutExpired:
        watch.kill()
        rep.kill()
        rc_watch, rc_rep = watch.wait(), rep.wait()
    err = rep.stderr.read()
    werr = watch.stderr.read().decode(errors="replace")
    c.stop()
    check(rc_watch == 0, f"dps-watch --count 3: exit 0 ({rc_watch}: {werr.strip()[-300:]})")
    check(rc_rep == 0 and err == f"dps-report: 3 snapshots drawn to {out}\n",
          f"dps-report: exit 0, 3 snapshots ({rc_rep}: {err.strip()[-500:]})")
    got = embedded(out) if os.path.exists(out) else None
    check(got is not None, "the PNG has its series")
    if not got:
        return
    check(got["epoch"] == [0, 1, 2] and got["status"] == ["released"] * 3, f"epochs 0-2 released: {got}")
    truth_ok = all(v is not None and 0 <= v < 0.5 for v in got["sin_to_truth"])
    check(truth_ok, f"the angles to the truth are small: {got['sin_to_truth']}")
    prev = got["sin_to_prev"]
    check(prev[0] is None and all(v is not None and 0 <= v <= 1 for v in prev[1:]),
          f"angles to the previous snapshot from the second on: {prev}")
    eps = got["eps_total"]
    check(all(e is not None for e in eps) and eps == sorted(eps) and eps[0] > 0, f"eps spent grows: {eps}")
    note(f"end to end: sin to truth {got['sin_to_truth']}, eps {eps}")


if __name__ == "__main__":
    sys.exit(run([
        test_offline,
        test_size_and_stdin,
        test_bad_inputs,
        test_live,
        test_joined_late,
        test_texts_fit,
        test_no_noise_level_without_release,
        test_end_to_end,
    ]))
