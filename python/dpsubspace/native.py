"""native.py - the ctypes binding of libdpsubspace (the numerical core) that
the in-process estimator (estimator.py) calls: the library loaded once, its
structs built from the layout it states, each function's argument and result
types declared.

Where the library comes from, first found wins:
  1. $DPSUBSPACE_LIB, a path to libdpsubspace.so;
  2. the copy the build puts beside this package (_native/libdpsubspace.so,
     shipped by `pip install ./python` after a build);
  3. the system's loader (libdpsubspace.so.0.4, major.minor of this package, after `cmake --install`).
The package mirrors no struct: the configuration is a library handle set by
parameter name (ConfigHandle), and the structs the functions take and return
are built at load from the library's own statement of their layout
(dps_struct_field, checked in tests/stream/test_struct_layout.c).  The
library's version must equal the package's (checked at load).
"""
import ctypes
import functools
import os
from typing import Any, Optional, Tuple

c_size = ctypes.c_size_t
c_u64 = ctypes.c_uint64
c_dbl = ctypes.c_double
c_int = ctypes.c_int
c_float_p = ctypes.POINTER(ctypes.c_float)
c_dbl_p = ctypes.POINTER(ctypes.c_double)

DPS_MAX_GROUPS = 256
# dps_err codes used here by name (include/dpsubspace.h)
DPS_OK, DPS_EINVAL, DPS_ENOMEM, DPS_EDIM, DPS_EEMPTY, DPS_EFULL = 0, 1, 2, 3, 4, 5
DPS_ELIMIT, DPS_EBUDGET = 8, 9
# dps_charge_kind: what a charge is, for the eps of a total (include/dpsubspace.h)
DPS_CHARGE_ZCDP, DPS_CHARGE_GAUSSIAN = 0, 1
STATUS_NAMES = {0: "released", 1: "failed", 2: "refused"}
# dps_release_decision: the end of a release's decision (include/dpsubspace.h)
DPS_RELEASE_RUN = 0


# The package's names for the library's public structs.  Their layout is
# the library's (dps_struct_field): built at load, mirrored nowhere here.
_STRUCTS = {"Zcdp": "dps_zcdp", "Budget": "dps_budget", "Plan": "dps_plan", "SnapshotInfo": "dps_snapshot_info",
            "Stats": "dps_estimator_stats", "IterativeParams": "dps_iterative_params",
            "ExactStats": "dps_exact_stats"}
_FIELD_TYPES = {"f64": c_dbl, "u64": c_u64, "size": c_size, "int": c_int, "str": ctypes.c_char_p,
                "size*": ctypes.POINTER(c_size)}
_structs: dict = {}  # C name -> ctypes.Structure, filled at load


def __getattr__(name: str) -> Any:
    """native.Zcdp, native.SnapshotInfo, ...: the struct as the loaded library lays it out."""
    if name in _STRUCTS:
        lib()
        return _structs[_STRUCTS[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _build_struct(handle: ctypes.CDLL, name: str) -> Any:
    """The ctypes structure of the library's struct `name`, from its layout;
    OSError if ctypes would not lay it out as the library says."""
    if name in _structs:
        return _structs[name]
    fields, i = [], 0
    f, t, n, off = ctypes.c_char_p(), ctypes.c_char_p(), c_size(), c_size()
    while handle.dps_struct_field(name.encode(), i, ctypes.byref(f), ctypes.byref(t), ctypes.byref(n),
                                  ctypes.byref(off)) == DPS_OK:
        kind = t.value.decode()
        base = _FIELD_TYPES[kind] if kind in _FIELD_TYPES else _build_struct(handle, kind)
        fields.append((f.value.decode(), base * n.value if n.value > 1 else base, off.value))
        i += 1
    cls = type(name, (ctypes.Structure,), {"_fields_": [(fname, ftype) for fname, ftype, _ in fields],
                                            "__doc__": f"{name} (include/dpsubspace.h), laid out by the library"})
    wrong = [fname for fname, _, o in fields if getattr(cls, fname).offset != o]
    if not fields or wrong or ctypes.sizeof(cls) != handle.dps_struct_size(name.encode()):
        raise OSError(f"the library's layout of {name} is not one ctypes can reproduce (fields {wrong})")
    _structs[name] = cls
    return cls


# name: (result type, argument types); a struct by its C name, "name*" for a pointer to one
_SIGNATURES = {
    "dps_version": (ctypes.c_char_p, []),
    "dps_strerror": (ctypes.c_char_p, [c_int]),
    "dps_blas_set_threads": (None, [c_int]),
    "dps_aggregator_from_name": (c_int, [ctypes.c_char_p, ctypes.POINTER(c_int)]),
    "dps_aggregator_name": (ctypes.c_char_p, [c_int]),
    "dps_config_new": (c_int, [ctypes.POINTER(ctypes.c_void_p), c_size, c_size]),
    "dps_config_destroy": (None, [ctypes.POINTER(ctypes.c_void_p)]),
    "dps_param_from_name": (c_int, [ctypes.c_char_p, ctypes.POINTER(c_int)]),
    "dps_param_is_real": (c_int, [c_int]),
    "dps_config_set_int": (c_int, [ctypes.c_void_p, c_int, c_u64]),
    "dps_config_set_real": (c_int, [ctypes.c_void_p, c_int, c_dbl]),
    "dps_config_get_int": (c_int, [ctypes.c_void_p, c_int, ctypes.POINTER(c_u64)]),
    "dps_config_get_real": (c_int, [ctypes.c_void_p, c_int, ctypes.POINTER(c_dbl)]),
    "dps_config_set_group": (c_int, [ctypes.c_void_p, c_size, c_size, c_size, c_size]),
    "dps_config_check": (c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p)]),
    "dps_config_epoch_cost": ("dps_zcdp", [ctypes.c_void_p]),
    "dps_config_uses_buckets": (c_int, [ctypes.c_void_p]),
    "dps_config_plan": (c_int, [ctypes.c_void_p, "dps_plan*"]),
    "dps_estimator_new": (c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]),
    "dps_estimator_destroy": (None, [ctypes.POINTER(ctypes.c_void_p)]),
    "dps_estimator_push": (c_int, [ctypes.c_void_p, c_float_p, c_size, c_size, ctypes.POINTER(c_size)]),
    "dps_estimator_epoch_full": (c_int, [ctypes.c_void_p]),
    "dps_estimator_end_block": (c_int, [ctypes.c_void_p]),
    "dps_estimator_power_blocks": (c_u64, [ctypes.c_void_p]),
    "dps_power_block_start": (c_u64, [c_u64, c_u64, c_u64]),
    "dps_snapshot_power_steps": (c_u64, [ctypes.c_void_p]),
    "dps_estimator_close_epoch": (c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]),
    "dps_estimator_get_stats": (None, [ctypes.c_void_p, "dps_estimator_stats*"]),
    "dps_estimator_spent": ("dps_zcdp", [ctypes.c_void_p]),
    "dps_snapshot_get_info": (None, [ctypes.c_void_p, "dps_snapshot_info*"]),
    "dps_snapshot_basis": (c_float_p, [ctypes.c_void_p]),
    "dps_snapshot_weak": (c_int, ["dps_snapshot_info*"]),
    "dps_snapshot_group_noise_level": (c_dbl, [ctypes.c_void_p, c_size]),
    "dps_snapshot_group_weak": (c_int, [ctypes.c_void_p, c_size]),
    "dps_snapshot_destroy": (None, [ctypes.POINTER(ctypes.c_void_p)]),
    "dps_rng_new_secure": (c_int, [ctypes.POINTER(ctypes.c_void_p)]),
    "dps_rng_new_labelled": (c_int, [ctypes.POINTER(ctypes.c_void_p), c_u64, ctypes.c_char_p, c_u64]),
    "dps_rng_destroy": (None, [ctypes.POINTER(ctypes.c_void_p)]),
    "dps_rng_is_seeded": (c_int, [ctypes.c_void_p]),
    "dps_rng_uniform": (c_dbl, [ctypes.c_void_p]),
    "dps_rng_below": (c_u64, [ctypes.c_void_p, c_u64]),
    "dps_rng_gaussian_fill_f": (None, [ctypes.c_void_p, c_dbl, c_float_p, c_size]),
    "dps_topk_basis": (c_int, [c_float_p, c_size, c_size, c_size, c_float_p, c_dbl_p]),
    "dps_analyze_gauss": (c_int, [c_float_p, c_size, c_size, c_size, c_dbl, c_dbl, ctypes.c_void_p, c_float_p,
                                  ctypes.POINTER(c_int)]),
    "dps_zcdp_eps_total": (c_dbl, ["dps_zcdp", c_dbl]),
    "dps_zcdp_eps_total_kind": (c_dbl, ["dps_zcdp", c_int, c_dbl]),
    "dps_gaussian_eps_at": (c_dbl, [c_dbl, c_dbl]),
    "dps_gaussian_delta_at": (c_dbl, [c_dbl, c_dbl]),
    "dps_aggregator_charge_kind": (c_int, [c_int]),
    "dps_aggregator_takes_groups": (c_int, [c_int]),
    "dps_estimator_eps": (c_dbl, [ctypes.c_void_p, c_dbl]),
    "dps_accountant_new": (c_int, [ctypes.POINTER(ctypes.c_void_p), "dps_budget*", "dps_zcdp*"]),
    "dps_accountant_destroy": (None, [ctypes.POINTER(ctypes.c_void_p)]),
    "dps_accountant_fits_kind": (c_int, [ctypes.c_void_p, "dps_zcdp", c_int]),
    "dps_accountant_charge_kind": (c_int, [ctypes.c_void_p, "dps_zcdp", c_int]),
    "dps_accountant_spent": ("dps_zcdp", [ctypes.c_void_p]),
    "dps_release_decide": (c_int, [ctypes.c_void_p, "dps_zcdp", c_int, ctypes.c_char_p, ctypes.c_void_p,
                                   "dps_snapshot_info*"]),
    "dps_release_outcome": (None, ["dps_snapshot_info*", c_int, c_int, ctypes.c_char_p, ctypes.c_char_p,
                                   ctypes.c_char_p, c_size]),
    "dps_accountant_eps": (c_dbl, [ctypes.c_void_p, c_dbl]),
    "dps_zcdp_from_dp": ("dps_zcdp", [c_dbl, c_dbl]),
    "dps_zcdp_from_pure": ("dps_zcdp", [c_dbl]),
    "dps_cov_accumulate": (c_int, [c_float_p, c_size, c_size, c_dbl_p, ctypes.POINTER(c_u64)]),
    "dps_cov_iterative": (c_int, [c_dbl_p, c_size, c_size, "dps_iterative_params*", ctypes.c_void_p,
                                  c_float_p, c_dbl_p, c_dbl_p, ctypes.c_void_p]),
    "dps_cov_laplace": (c_int, [c_dbl_p, c_size, c_size, c_dbl, ctypes.c_void_p, c_dbl_p]),
    "dps_cov_gaussian": (c_int, [c_dbl_p, c_size, c_size, c_dbl, c_dbl, ctypes.c_void_p, c_dbl_p]),
    "dps_cov_topk": (c_int, [c_dbl_p, c_size, c_size, c_float_p, c_dbl_p]),
    "dps_exact_plan": (c_int, [c_size, c_dbl, c_dbl, c_size, "dps_exact_stats*"]),
    "dps_exact_subspace": (c_int, [c_float_p, c_size, c_size, c_size, c_dbl, c_dbl, c_size, ctypes.c_void_p,
                                   c_float_p, ctypes.POINTER(c_int), "dps_exact_stats*"]),
}

@functools.lru_cache(maxsize=None)  # facts of the loaded library: asked once
def aggregators() -> Tuple[str, ...]:
    """The library's epoch mechanisms, in its table's order (dps_aggregator_name of 0, 1, ... up to "unknown")."""
    names, a = [], 0
    while (name := lib().dps_aggregator_name(a).decode()) != "unknown":
        names.append(name)
        a += 1
    return tuple(names)


@functools.lru_cache(maxsize=None)
def group_aggregators() -> Tuple[str, ...]:
    """The epoch mechanisms on sums of the rows, which take parameter groups (dps_aggregator_takes_groups)."""
    return tuple(n for a, n in enumerate(aggregators()) if lib().dps_aggregator_takes_groups(a))


class ConfigHandle:
    """A library configuration (dps_config_new), set and read by parameter
    name (dps_param_name: the struct field's, "cap_rho", "spent_rho"): the
    package mirrors no field of it.  Freed with the object."""

    def __init__(self, d: int, k: int):
        self.ptr = ctypes.c_void_p()
        check(lib().dps_config_new(ctypes.byref(self.ptr), d, k), "the configuration")

    def _param(self, name: str) -> Tuple[int, bool]:
        p = c_int()
        if lib().dps_param_from_name(name.encode(), ctypes.byref(p)) != DPS_OK:
            raise KeyError(f"the library has no configuration parameter {name!r}")
        return p.value, bool(lib().dps_param_is_real(p.value))

    def __setitem__(self, name: str, value: Any) -> None:
        p, real = self._param(name)
        whole = not real and float(value).is_integer() and value >= 0  # no silent truncation or wrap-around
        rc = (lib().dps_config_set_real(self.ptr, p, float(value)) if real
              else lib().dps_config_set_int(self.ptr, p, int(value)) if whole else DPS_EINVAL)
        if rc != DPS_OK:
            raise ValueError(f"{name} = {value!r}: not a value this setting can hold")

    def __getitem__(self, name: str) -> Any:
        p, real = self._param(name)
        out = c_dbl() if real else c_u64()
        check((lib().dps_config_get_real if real else lib().dps_config_get_int)(self.ptr, p, ctypes.byref(out)), name)
        return out.value

    def set_group(self, g: int, width: int, rank: int, rows: int = 0) -> None:
        check(lib().dps_config_set_group(self.ptr, g, width, rank, rows), f"parameter group {g}")

    def __del__(self) -> None:
        if getattr(self, "ptr", None) and _lib is not None:
            _lib.dps_config_destroy(ctypes.byref(self.ptr))


_lib: Optional[ctypes.CDLL] = None


def _candidates():
    env = os.environ.get("DPSUBSPACE_LIB")
    if env:
        yield env
        return
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native", "libdpsubspace.so")
    if os.path.exists(here):
        yield here
    from . import __version__  # the installed library's soname carries major.minor while 0.x
    yield "libdpsubspace.so." + ".".join(__version__.split(".")[:2])


def lib() -> ctypes.CDLL:
    """The loaded library (loaded on first use).  OSError, with what was
    tried, when it cannot be found."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        try:
            handle = ctypes.CDLL(path)
            break
        except OSError as e:
            tried.append(f"{path}: {e}")
    else:
        raise OSError("libdpsubspace not found (the in-process estimator needs the C library): build it "
                      "(tools/check, or cmake) and use build/python, or pip install ./python after a build, or set "
                      "DPSUBSPACE_LIB to libdpsubspace.so; tried " + "; ".join(tried))
    from . import __version__
    handle.dps_version.restype = ctypes.c_char_p
    have = handle.dps_version().decode()
    if have != __version__:
        raise OSError(f"libdpsubspace {have} at {path} does not match the dpsubspace package {__version__}: "
                      "its functions may differ; use the library built with this package")
    handle.dps_struct_size.restype, handle.dps_struct_size.argtypes = c_size, [ctypes.c_char_p]
    handle.dps_struct_field.restype = c_int
    handle.dps_struct_field.argtypes = [ctypes.c_char_p, c_size] + [ctypes.c_void_p] * 4
    for cname in _STRUCTS.values():
        _build_struct(handle, cname)

    def resolve(t: Any) -> Any:
        if not isinstance(t, str):
            return t
        return ctypes.POINTER(_structs[t[:-1]]) if t.endswith("*") else _structs[t]

    for name, (res, args) in _SIGNATURES.items():
        fn = getattr(handle, name)
        fn.restype, fn.argtypes = resolve(res), [resolve(a) for a in args]
    _lib = handle
    return handle


def new_rng(seed: Optional[int], label: bytes, index: int = 0) -> ctypes.c_void_p:
    """A dps_rng: the system's secure generator when seed is None, else the
    stream labelled (label, index) of seed (reproducible: NOT private).
    The caller destroys it with dps_rng_destroy."""
    L, rng = lib(), ctypes.c_void_p()
    if seed is None:
        check(L.dps_rng_new_secure(ctypes.byref(rng)), "the secure generator")
    else:
        check(L.dps_rng_new_labelled(ctypes.byref(rng), int(seed), label, int(index)), "the seeded generator")
    return rng


def check(rc: int, what: str) -> None:
    """Raise for a library error code: MemoryError for DPS_ENOMEM, ValueError
    for bad input (EINVAL, EDIM, EEMPTY, ELIMIT), RuntimeError otherwise."""
    if rc == DPS_OK:
        return
    msg = f"{what}: {lib().dps_strerror(rc).decode()}"
    if rc == DPS_ENOMEM:
        raise MemoryError(msg)
    if rc in (DPS_EINVAL, DPS_EDIM, DPS_EEMPTY, DPS_ELIMIT):
        raise ValueError(msg)
    raise RuntimeError(msg)
