#!/usr/bin/env python3
"""test_ledger_faults - the state directory under damage and a full disk, with the real dps-collector:
a damaged last ledger line stops the restart (it is not cut as a crash tear); a write that fails at
any point (the ledger's commit, outcome or refused line, a snapshot) stops the collector by itself
with exit code 3, publishes nothing it did not store, writes nothing after the failure, and leaves
a ledger a restart accepts with totals that cover every stored snapshot; a state directory of
another --d is refused.

A full disk is made with RLIMIT_FSIZE (SIGXFSZ ignored) in the collector's process: a write that
would take a file past the limit fails with EFBIG after the bytes below it, as a full file system
fails with ENOSPC, at a byte the test chooses.  The collector's log goes through a pipe, which the
limit does not touch.

usage: test_ledger_faults.py BUILD_DIR [TEST_NAME...]   (prints "N passed, N failed" last)
"""
import os
import resource
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403  (the shared harness: Collector, check, note, ...)

MAGIC = b"dps-ledger-v"


def ledger_bytes(c):
    with open(os.path.join(c.state, "ledger"), "rb") as f:
        return f.read()


def no_merged_line(c, label):
    """Every line is one entry: one magic at its start (a line appended onto a partial one has two)."""
    lines = ledger_bytes(c).split(b"\n")
    merged = [i + 1 for i, ln in enumerate(lines) if ln.count(MAGIC) > 1 or (ln and not ln.startswith(MAGIC))]
    check(not merged, f"{label}: no merged or foreign line in the ledger (lines {merged})")


def run_refused(args, timeout=10):
    """Run a collector that should refuse to start: (exit code, what its log says of the state
    directory); (None, the same) if it was still running after timeout s (then stopped)."""
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        code = p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.terminate()
        p.wait()
        code = None
    said = [ln for ln in p.stderr.read().splitlines() if re.search(r"dps-collector: |torn|resumed|spent so far", ln)]
    return code, "\n".join(said)


class LimitedCollector(Collector):
    """A Collector whose files may not grow past limit bytes (RLIMIT_FSIZE), its log through a pipe."""

    def start_limited(self, limit):
        self.log = open(self.log_path, "a")

        def child():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), no signal
            hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))

        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self.env,
                                     preexec_fn=child)

        def copy():
            for line in self.proc.stdout:
                self.log.write(line.decode(errors="replace"))
                self.log.flush()

        self.copier = threading.Thread(target=copy, daemon=True)
        self.copier.start()
        self.wait_up()
        return self

    def wait_exit(self, timeout):
        """Its exit code once it stopped by itself, or None (then it is killed)."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
            self.proc.kill()
            self.proc.wait()
        self.copier.join(10)
        self.log.close()
        return code


def test_damaged_last_line():
    """Issue 31 item 4: a complete last line whose check fails was cut as a crash tear; when it was the
    commit of an epoch already released, the restart forgot its cost (rho 2 for 3 released epochs).
    Now a flipped digit in the last line, whether an outcome or the commit of a stored epoch, stops the
    restart with exit code 3, naming the line and what to do, and leaves the ledger as it was."""
    rng = np.random.default_rng(11)
    c = Collector("damaged", d=40, k=2, t=60).start()
    fill_epochs(c, 3, rng)
    check(wait_for(lambda: c.query()["epoch"] == 3 and len(c.snapshots()) == 3), "3 epochs released and stored")
    c.stop()
    path = os.path.join(c.state, "ledger")
    whole = ledger_bytes(c)
    lines = whole.splitlines(keepends=True)
    last_commit = max(i for i, ln in enumerate(lines) if b"kind=commit epoch=2 " in ln)
    # (a) the last line as a clean stop leaves it (an outcome); (b) the commit of epoch 2 as the last
    # line, its outcome line not written (the writer stopped between the store and the outcome line):
    # its snapshot is stored, so its cost was spent
    cases = [("outcome last", lines), ("stored epoch's commit last", lines[:last_commit + 1])]
    for label, kept in cases:
        body = b"".join(kept)
        last = kept[-1]
        at = last.index(b"rho_total=") + len(b"rho_total=")  # the first digit of the running total
        flipped = last[:at] + bytes([last[at] ^ 1]) + last[at + 1:]  # 3 -> 2, 1 -> 0, ...: still a digit
        with open(path, "wb") as f:
            f.write(body[:-len(last)] + flipped)
        code, err = run_refused(Collector("damaged", d=40, k=2, t=60, state=c.state).args)
        want = f"line {len(kept)} is damaged"
        check(code == 3 and want in err and "Restore the ledger from a backup" in err,
              f"{label}: the restart stops (exit {code}) naming {want!r}: {err.strip()[-600:]}")
        with open(path, "rb") as f:
            check(f.read() == body[:-len(last)] + flipped, f"{label}: the ledger is left as it was")
        with open(path, "wb") as f:  # the line as it was: the restart accepts it, with every epoch's cost
            f.write(body)
        c2 = Collector("damaged", d=40, k=2, t=60, state=c.state).start()
        st = c2.query()
        check(abs(st["rho_total"] - 3.0) < 1e-12 and st["epoch"] == 3,
              f"{label}: restored, the restart counts the 3 released epochs (rho {st['rho_total']})")
        c2.stop()
    with open(path, "wb") as f:
        f.write(whole)


def commit_len(led, epoch):
    """The bytes of the commit line of epoch as the collector writes it after the ledger's lines led
    (ledger.c's format: %.17g costs and totals, 13 digits of time, 16 hex of check)."""
    commits = [e for e in led if e["kind"] == "commit"]
    rho, delta = float(commits[-1]["rho_epoch"]), float(commits[-1]["delta_epoch"])
    tr = td = 0.0
    for e in commits:
        tr += float(e["rho_epoch"])
        td += float(e["delta_epoch"])
    tr, td = tr + rho, td + delta
    return len(f"dps-ledger-v2 kind=commit epoch={epoch} rho_epoch={rho:.17g} delta_epoch={delta:.17g} "
               f"rho_total={tr:.17g} delta_total={td:.17g} time_unix_ms={'1' * 13} check={'0' * 16}\n"), tr, td


def outcome_len(epoch, tr, td, status, seq):
    return len(f"dps-ledger-v2 kind=outcome epoch={epoch} rho_epoch=0 delta_epoch=0 rho_total={tr:.17g} "
               f"delta_total={td:.17g} time_unix_ms={'1' * 13} status={status} seq={seq} check={'0' * 16}\n")


def one_fault(label, template, limit, rng, extra=(), want_log=(), want_total=None, want_stored=None):
    """A collector on a copy of template (None: a new state directory) whose files may not grow past
    limit bytes is given one epoch of rows.  What must hold for any failing write: it stops by itself
    with exit code 3 and says why; it published nothing it did not store (here: nothing new); no
    line was written onto a partial one; a restart without the limit accepts the ledger, and its
    total covers every stored snapshot.  want_*: what this failure point leaves (the total spent,
    the epochs stored)."""
    state = os.path.join(TMP, "full-" + label.replace(" ", "-") + "-state")
    if template:
        shutil.copytree(template, state)
    c = LimitedCollector("full-" + label.replace(" ", "-"), d=40, k=2, t=60, state=state, extra=extra)
    before = {s.epoch for s in c.snapshots()}
    c.start_limited(limit)
    sub = c.subscriber()
    fill_until_killed(c, 1, rng)
    code = c.wait_exit(20)
    with open(c.log_path) as f:
        log = f.read()
    check(code == 3, f"{label}: the collector stopped by itself with exit code 3 (got {code})")
    for w in want_log:
        check(w in log, f"{label}: the log says {w!r}: {log[-600:]}")
    check(state + "/" in log and "make room in (or repair) the file system of" in log,
          f"{label}: the log names the state directory and what to do")
    got = []
    while True:
        s = sub.recv(300)
        if s is None:
            break
        got.append(s)
    sub.close()
    check(all(s.epoch in before for s in got), f"{label}: nothing was published but what was stored before "
          f"(the welcome message): {[s.epoch for s in got]}, {sorted(before)} stored before")
    no_merged_line(c, label)
    stored = c.snapshots()
    c2 = Collector("full-" + label.replace(" ", "-") + "-again", d=40, k=2, t=60, state=state, extra=extra)
    try:
        c2.start()
    except RuntimeError as e:
        check(False, f"{label}: the restart accepts the ledger: {e}")
        return
    st = c2.query()
    total, epochs = ledger_invariants(c2, label)
    check(abs(st["rho_total"] - total) < 1e-12, f"{label}: the restart's total is the ledger's")
    for s in stored + got:
        check(s.rho_total <= st["rho_total"] + 1e-12 and s.epoch < st["epoch"],
              f"{label}: the restart's total {st['rho_total']} covers stored epoch {s.epoch} ({s.rho_total})")
    if want_total is not None:
        check(abs(st["rho_total"] - want_total) < 1e-12, f"{label}: total rho {st['rho_total']}, {want_total} "
              f"expected")
    if want_stored is not None:
        check(sorted(s.epoch for s in stored) == want_stored, f"{label}: stored epochs "
              f"{sorted(s.epoch for s in stored)}, {want_stored} expected")
    c2.stop()
    no_merged_line(c2, label + " restarted")
    with open(os.path.join(state, "ledger"), "rb") as f:
        check(f.read().endswith(b"\n"), f"{label}: after the restart the ledger ends with a whole line")


def test_disk_full():
    """Issue 31 item 5: a failed outcome line was ignored and the next commit written onto it (a
    restart then refused the merged line); a failed snapshot store was published anyway.  Here the
    files may not grow past a chosen byte: in the commit line (at its first byte, in its middle, all
    but its newline), in the outcome line (the same three), in the snapshot, and in a refused line."""
    rng = np.random.default_rng(12)
    tpl = Collector("full-template", d=40, k=2, t=60)
    tpl.start()
    fill_epochs(tpl, 2, rng)
    check(wait_for(lambda: tpl.query()["epoch"] == 2 and len(tpl.snapshots()) == 2), "template: 2 epochs stored")
    tpl.stop()
    led = tpl.ledger()
    size = len(ledger_bytes(tpl))
    commit, tr, td = commit_len(led, 2)
    outcome = outcome_len(2, tr, td, [e for e in led if e["kind"] == "outcome"][-1]["status"], 3)
    snap_size = os.path.getsize(os.path.join(tpl.state, "snapshots", sorted(os.listdir(
        os.path.join(tpl.state, "snapshots")))[-1]))
    note(f"template ledger {size} bytes; next commit line {commit} bytes, outcome line {outcome}; "
         f"a snapshot {snap_size} bytes")
    stored2 = [0, 1]
    for label, x, line, kind in (("commit at 0", 0, 5, commit), ("commit at 40", 40, 5, commit),
                                 ("commit but its newline", commit - 1, 5, commit),
                                 ("outcome at 0", commit, 6, outcome), ("outcome at 50", commit + 50, 6, outcome),
                                 ("outcome but its newline", commit + outcome - 1, 6, outcome)):
        spent = 2.0 if line == 5 else 3.0
        within = x - (commit if line == 6 else 0)
        one_fault(label, tpl.state, size + x, rng,
                  want_log=[f"could not write the ledger: writing line {line} of ",
                            f"failed after {within} of its {kind} bytes"],
                  want_total=spent, want_stored=stored2 + ([2] if line == 6 else []))
    # the snapshot: a new state directory, whose first commit line fits and whose snapshot does not
    first = len(f"dps-ledger-v2 kind=commit epoch=0 rho_epoch={led[0]['rho_epoch']} "
                f"delta_epoch={led[0]['delta_epoch']} rho_total={led[0]['rho_total']} "
                f"delta_total={led[0]['delta_total']} time_unix_ms={'1' * 13} check={'0' * 16}\n")
    check(snap_size > first + 20, f"a snapshot ({snap_size} bytes) is larger than the first commit line ({first})")
    one_fault("snapshot", None, first + 20, rng, want_log=["the snapshot of epoch 0 could not be stored in",
                                                           "File too large"],
              want_total=1.0, want_stored=[])
    # a refused line: the cap refuses epoch 2 (rho 2 spent, 1 more would pass 2.5)
    one_fault("refused at 40", tpl.state, size + 40, rng, extra=["--cap-rho", "2.5"],
              want_log=["could not write the ledger: writing line 5 of", "failed after 40 of its"],
              want_total=2.0, want_stored=stored2)


def test_other_d():
    """Issue 31 item 7: a restart on the same state directory with another --d was accepted silently
    (its stored snapshots, of the other d, published as the welcome message).  Refused now with exit
    code 3, naming both values and what to do; also a state directory made before the d was recorded
    (its latest snapshot says); one with no record at all opens."""
    rng = np.random.default_rng(13)
    c = Collector("other-d", d=40, k=2, t=60).start()
    fill_epochs(c, 1, rng)
    check(wait_for(lambda: len(c.snapshots()) == 1), "one epoch stored")
    c.stop()

    args = Collector("other-d", d=50, k=2, t=60, state=c.state).args
    code, err = run_refused(args)
    check(code == 3 and "made by a collector of --d 40" in err and "given --d 50" in err and
          "Start with --d 40" in err and "another --state-dir for rows of d = 50" in err,
          f"another d refused (exit {code}): {err.strip()[-500:]}")
    shape = os.path.join(c.state, "shape")
    if os.path.exists(shape):
        os.unlink(shape)  # as a state directory of a collector that did not record it
    code, err = run_refused(args)
    check(code == 3 and "the d of its latest stored snapshot" in err,
          f"without the record, the latest snapshot's d (exit {code}): {err.strip()[-300:]}")
    c2 = Collector("other-d", d=40, k=2, t=60, state=c.state).start()  # the same d opens, and records it
    c2.stop()
    check(os.path.exists(shape) and open(shape).read() == "dps-state-v1 d=40\n", "the d recorded")
    empty = Collector("other-d-empty", d=40, k=2, t=60).start()  # nothing stored yet: no record to refuse
    empty.stop()
    if os.path.exists(os.path.join(empty.state, "shape")):
        os.unlink(os.path.join(empty.state, "shape"))
    again = Collector("other-d-empty", d=50, k=2, t=60, state=empty.state).start()
    check(again.query()["d"] == 50, "a state directory with no record opens with any d")
    again.stop()


if __name__ == "__main__":
    sys.exit(run([
        test_damaged_last_line,
        test_disk_full,
        test_other_d,
    ]))
