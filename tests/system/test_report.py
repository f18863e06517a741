#!/usr/bin/env python3
"""test_report - dps-report (python/dpsubspace/report.py, run through its launcher BUILD/dps-report): a
hand-written dps-watch --json stream of 4 snapshots (one refused, one weak, angles to the truth) drawn
offline and live -- the PNG's size, the series embedded in its "dpsubspace-data" text chunk, a picture
that is not blank --; the bad inputs (no snapshot: exit 3, a garbage line: a warning and the rest drawn,
--out in a missing directory: exit 2); and end to end, a real collector's snapshots through
dps-watch --json --truth into dps-report.

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


def expected_series(snaps):
    """What dps-report must embed: the series of the snapshots given, None where absent."""
    return {key: [s.get(key) for s in snaps] for key in ("epoch", "eps_total", "rho_total", "sin_to_prev",
                                                         "sin_to_truth", "status")}


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
        test_end_to_end,
    ]))
