"""The ctypes mirror of the C structs (dpsubspace/native.py) against the
compiler's layout, printed by tests/python/layout_probe.c (its path in
$DPS_LAYOUT_PROBE; skipped without it, e.g. on an installed package)."""
import ctypes
import os
import subprocess

import pytest

import dpsubspace
from dpsubspace import native


def _probe():
    path = os.environ.get("DPS_LAYOUT_PROBE")
    if not path:
        pytest.skip("DPS_LAYOUT_PROBE not set (the build's tests/layout_probe)")
    out = subprocess.run([path], check=True, capture_output=True, text=True).stdout
    return dict((line.split()[0] + ("" if len(line.split()) == 2 else " sizeof"), int(line.split()[-1]))
                for line in out.splitlines())


@pytest.mark.parametrize("name", ["Zcdp", "Budget", "Plan", "SnapshotInfo", "Stats", "IterativeParams",
                                  "ExactStats"])
def test_struct_layout_matches_the_compiler(name):
    layout = _probe()
    cls = getattr(native, name)
    assert ctypes.sizeof(cls) == layout[f"{name} sizeof"]
    fields = [f for f, _ in cls._fields_]
    c_fields = [key.split(".", 1)[1] for key in layout if key.startswith(name + ".")]
    assert fields == c_fields  # same fields, same order
    for f in fields:
        assert getattr(cls, f).offset == layout[f"{name}.{f}"], f


def test_the_configuration_is_set_by_parameter_name():
    """The package mirrors no field of dps_config: it sets and reads the
    library's handle by the parameter's name, and the defaults it reads are
    dps_config_init's."""
    c = native.ConfigHandle(40, 3)
    assert c["m"] == 6 and c["q"] == 30 and c["t"] == 125 and c["delta_target"] == 1e-5  # 2k, 10k, the defaults
    c["power_blocks"], c["cap_rho"], c["seed"] = 4, 2.5, 2**64 - 1
    assert (c["power_blocks"], c["cap_rho"], c["seed"]) == (4, 2.5, 2**64 - 1)
    with pytest.raises(KeyError, match="no configuration parameter 'powerblocks'"):
        c["powerblocks"] = 4
    with pytest.raises(ValueError, match="workers = -1"):
        c["workers"] = -1
    with pytest.raises(ValueError, match="workers = 4294967296"):
        c["workers"] = 2**32  # an int field
    with pytest.raises(ValueError, match="t = 2.5"):
        c["t"] = 2.5  # not truncated to 2


def test_library_version_is_the_package_version():
    assert native.lib().dps_version().decode() == dpsubspace.__version__


def test_missing_library_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setenv("DPSUBSPACE_LIB", "/nonexistent/libdpsubspace.so")
    with pytest.raises(OSError, match="libdpsubspace not found"):
        native.lib()
