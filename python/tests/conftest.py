"""conftest.py - the package's pytest tests run on the package importable as
`dpsubspace` (the build's copy through PYTHONPATH, or an installed one), and
end with the project's "N passed, N failed" line that tools/count-checks adds up."""


def pytest_terminal_summary(terminalreporter):
    stats = terminalreporter.stats
    passed = len(stats.get("passed", []))
    failed = len(stats.get("failed", [])) + len(stats.get("error", []))
    terminalreporter.write_line(f"{passed} passed, {failed} failed")
