"""native.py - the ctypes binding of libdpsubspace (the numerical core) that
the in-process estimator (estimator.py) calls: the library loaded once, its
structs mirrored, each function's argument and result types declared.

Where the library comes from, first found wins:
  1. $DPSUBSPACE_LIB, a path to libdpsubspace.so;
  2. the copy the build puts beside this package (_native/libdpsubspace.so,
     shipped by `pip install ./python` after a build);
  3. the system's loader (libdpsubspace.so.0.4, major.minor of this package, after `cmake --install`).
The configuration is a library handle set by parameter name (ConfigHandle),
no struct here.  The structs below must match include/dpsubspace.h field
for field: the
library's version must equal the one this package was built with (checked at
load), and python/tests/test_native.py compares every offset with the
compiler's (tests/python/layout_probe.c prints them).
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


class Zcdp(ctypes.Structure):
    """dps_zcdp: an approximate zCDP cost (rho, delta)."""
    _fields_ = [("rho", c_dbl), ("delta", c_dbl)]


class Budget(ctypes.Structure):
    """dps_budget: a cap on rho or on eps at delta_target (both 0: none)."""
    _fields_ = [("rho_cap", c_dbl), ("eps_cap", c_dbl), ("delta_target", c_dbl)]


class Plan(ctypes.Structure):
    """dps_plan: what an epoch of a configuration will do, from public facts only."""
    _fields_ = [("rows", c_u64), ("memory", c_size), ("cost", Zcdp), ("groups", c_size),
                ("method", ctypes.c_char_p * DPS_MAX_GROUPS), ("floor", c_dbl * DPS_MAX_GROUPS)]


class SnapshotInfo(ctypes.Structure):
    """dps_snapshot_info: everything about a snapshot but its basis."""
    _fields_ = [("epoch", c_u64), ("d", c_size), ("k", c_size), ("status", c_int), ("aggregator", c_int),
                ("rows_used", c_u64), ("buckets_used", c_size), ("radius", c_dbl), ("radius_unrelated", c_dbl),
                ("w_hat", c_dbl), ("epoch_cost", Zcdp), ("total", Zcdp), ("eps_total", c_dbl),
                ("delta_target", c_dbl), ("seeded", c_int), ("public_seed", c_u64), ("reason", ctypes.c_char_p),
                ("seq", c_u64), ("time_unix_ms", c_u64), ("budget_left", c_dbl), ("budget_unit", ctypes.c_char_p),
                ("groups", c_size), ("group_d", ctypes.POINTER(c_size)), ("group_k", ctypes.POINTER(c_size)),
                ("noise_level", c_dbl)]


class Stats(ctypes.Structure):
    """dps_estimator_stats: the estimator's counters."""
    _fields_ = [("epoch", c_u64), ("rows_accepted", c_u64), ("rows_nan", c_u64), ("rows_inf", c_u64),
                ("rows_zero", c_u64), ("rows_discarded", c_u64), ("batches_dim", c_u64), ("batches_empty", c_u64),
                ("buckets_completed", c_u64), ("rows_in_epoch", c_u64), ("buckets_done_epoch", c_size),
                ("epochs_closed", c_u64), ("epochs_internal_error", c_u64)]


class IterativeParams(ctypes.Structure):
    """dps_iterative_params: Amin et al.'s iterative eigenvector sampling."""
    _fields_ = [("k", c_size), ("eps", c_dbl), ("eps_values", c_dbl), ("split", c_int)]


class ExactStats(ctypes.Structure):
    """dps_exact_stats: the exact-case estimator's public bookkeeping (and private counters)."""
    _fields_ = [("candidates", c_size), ("bound", c_dbl), ("delta_sampling", c_dbl), ("delta_total", c_dbl),
                ("cost", Zcdp), ("primes", c_size), ("score", c_dbl), ("members", c_size), ("scored", c_size)]


# name: (result type, argument types)
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
    "dps_config_epoch_cost": (Zcdp, [ctypes.c_void_p]),
    "dps_config_uses_buckets": (c_int, [ctypes.c_void_p]),
    "dps_config_plan": (c_int, [ctypes.c_void_p, ctypes.POINTER(Plan)]),
    "dps_estimator_new": (c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]),
    "dps_estimator_destroy": (None, [ctypes.POINTER(ctypes.c_void_p)]),
    "dps_estimator_push": (c_int, [ctypes.c_void_p, c_float_p, c_size, c_size, ctypes.POINTER(c_size)]),
    "dps_estimator_epoch_full": (c_int, [ctypes.c_void_p]),
    "dps_estimator_end_block": (c_int, [ctypes.c_void_p]),
    "dps_estimator_power_blocks": (c_u64, [ctypes.c_void_p]),
    "dps_power_block_start": (c_u64, [c_u64, c_u64, c_u64]),
    "dps_snapshot_power_steps": (c_u64, [ctypes.c_void_p]),
    "dps_estimator_close_epoch": (c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]),
    "dps_estimator_get_stats": (None, [ctypes.c_void_p, ctypes.POINTER(Stats)]),
    "dps_estimator_spent": (Zcdp, [ctypes.c_void_p]),
    "dps_snapshot_get_info": (None, [ctypes.c_void_p, ctypes.POINTER(SnapshotInfo)]),
    "dps_snapshot_basis": (c_float_p, [ctypes.c_void_p]),
    "dps_snapshot_weak": (c_int, [ctypes.POINTER(SnapshotInfo)]),
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
    "dps_zcdp_eps_total": (c_dbl, [Zcdp, c_dbl]),
    "dps_zcdp_eps_total_kind": (c_dbl, [Zcdp, c_int, c_dbl]),
    "dps_gaussian_eps_at": (c_dbl, [c_dbl, c_dbl]),
    "dps_gaussian_delta_at": (c_dbl, [c_dbl, c_dbl]),
    "dps_aggregator_charge_kind": (c_int, [c_int]),
    "dps_aggregator_takes_groups": (c_int, [c_int]),
    "dps_estimator_eps": (c_dbl, [ctypes.c_void_p, c_dbl]),
    "dps_accountant_new": (c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(Budget), ctypes.POINTER(Zcdp)]),
    "dps_accountant_destroy": (None, [ctypes.POINTER(ctypes.c_void_p)]),
    "dps_accountant_fits_kind": (c_int, [ctypes.c_void_p, Zcdp, c_int]),
    "dps_accountant_charge_kind": (c_int, [ctypes.c_void_p, Zcdp, c_int]),
    "dps_accountant_spent": (Zcdp, [ctypes.c_void_p]),
    "dps_release_decide": (c_int, [ctypes.c_void_p, Zcdp, c_int, ctypes.c_char_p, ctypes.c_void_p,
                                   ctypes.POINTER(SnapshotInfo)]),
    "dps_release_outcome": (None, [ctypes.POINTER(SnapshotInfo), c_int, c_int, ctypes.c_char_p, ctypes.c_char_p,
                                   ctypes.c_char_p, c_size]),
    "dps_accountant_eps": (c_dbl, [ctypes.c_void_p, c_dbl]),
    "dps_zcdp_from_dp": (Zcdp, [c_dbl, c_dbl]),
    "dps_zcdp_from_pure": (Zcdp, [c_dbl]),
    "dps_cov_accumulate": (c_int, [c_float_p, c_size, c_size, c_dbl_p, ctypes.POINTER(c_u64)]),
    "dps_cov_iterative": (c_int, [c_dbl_p, c_size, c_size, ctypes.POINTER(IterativeParams), ctypes.c_void_p,
                                  c_float_p, c_dbl_p, c_dbl_p, ctypes.c_void_p]),
    "dps_cov_laplace": (c_int, [c_dbl_p, c_size, c_size, c_dbl, ctypes.c_void_p, c_dbl_p]),
    "dps_cov_gaussian": (c_int, [c_dbl_p, c_size, c_size, c_dbl, c_dbl, ctypes.c_void_p, c_dbl_p]),
    "dps_cov_topk": (c_int, [c_dbl_p, c_size, c_size, c_float_p, c_dbl_p]),
    "dps_exact_plan": (c_int, [c_size, c_dbl, c_dbl, c_size, ctypes.POINTER(ExactStats)]),
    "dps_exact_subspace": (c_int, [c_float_p, c_size, c_size, c_size, c_dbl, c_dbl, c_size, ctypes.c_void_p,
                                   c_float_p, ctypes.POINTER(c_int), ctypes.POINTER(ExactStats)]),
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
    for name, (res, args) in _SIGNATURES.items():
        fn = getattr(handle, name)
        fn.restype, fn.argtypes = res, args
    from . import __version__
    have = handle.dps_version().decode()
    if have != __version__:
        raise OSError(f"libdpsubspace {have} at {path} does not match the dpsubspace package {__version__}: "
                      "the structs would not line up; use the library built with this package")
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
