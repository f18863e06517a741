"""The binding (dpsubspace/native.py) mirrors nothing of the library: its
structs are built from the library's statement of their layout, and its
configuration is the library's handle."""
import ctypes

import pytest

import dpsubspace
from dpsubspace import native


def _listed():
    L, names, i = native.lib(), [], 0
    L.dps_struct_name.restype, L.dps_struct_name.argtypes = ctypes.c_char_p, [ctypes.c_size_t]
    while (name := L.dps_struct_name(i)) is not None:
        names.append(name.decode())
        i += 1
    return names


def test_every_struct_the_library_lists_is_built_as_it_lays_it_out():
    """The package has a name for each struct the library lists, and each
    built structure has the library's fields, offsets and size."""
    L = native.lib()
    assert sorted(native._STRUCTS.values()) == sorted(_listed())
    for py_name, c_name in native._STRUCTS.items():
        cls = getattr(native, py_name)
        assert ctypes.sizeof(cls) == L.dps_struct_size(c_name.encode())
        f, t, n, off = ctypes.c_char_p(), ctypes.c_char_p(), ctypes.c_size_t(), ctypes.c_size_t()
        i = 0
        while L.dps_struct_field(c_name.encode(), i, ctypes.byref(f), ctypes.byref(t), ctypes.byref(n),
                                 ctypes.byref(off)) == native.DPS_OK:
            name = cls._fields_[i][0]
            assert name == f.value.decode() and getattr(cls, name).offset == off.value, (c_name, name)
            i += 1
        assert i == len(cls._fields_), c_name
    with pytest.raises(AttributeError):
        native.NoSuchStruct


def test_structs_pass_by_value_and_by_pointer():
    """A struct returned by value (dps_zcdp_from_pure: rho = eps^2 / 2) and
    one filled through a pointer (dps_config_plan) read back as the library
    wrote them."""
    L = native.lib()
    z = L.dps_zcdp_from_pure(2.0)
    assert isinstance(z, native.Zcdp) and (z.rho, z.delta) == (2.0, 0.0)
    c = native.ConfigHandle(40, 3)
    plan = native.Plan()
    assert L.dps_config_plan(c.ptr, ctypes.byref(plan)) == native.DPS_OK
    assert plan.rows == c["t"] * c["m"] and plan.groups == 1 and plan.method[0]
    assert plan.cost.rho == pytest.approx(L.dps_config_epoch_cost(c.ptr).rho)


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
