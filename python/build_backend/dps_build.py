"""dps_build.py - the PEP 517 build backend of the dpsubspace Python package,
standard library only (pip installs it with nothing from an index).

A wheel holds the package's sources (dpsubspace/*.py, py.typed, the
subpackage dpsubspace/torch/) from this tree and what the project's build
makes (the protocol classes protoc generates, the core library the
estimator loads), taken from
$DPSUBSPACE_BUILD_DIR/python/dpsubspace, default ../build/python/dpsubspace.
It carries a native library, so it is tagged for this platform
(py3-none-<platform>).  An sdist holds the sources only.
"""
import base64
import hashlib
import io
import os
import sysconfig
import tarfile
import tomllib
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
PKG = "dpsubspace"
GENERATED = ["dpsubspace_pb2.py", os.path.join("_native", "libdpsubspace.so")]


def _project():
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _built_dir():
    build = os.environ.get("DPSUBSPACE_BUILD_DIR") or os.path.join(os.path.dirname(HERE), "build")
    out = os.path.join(build, "python", PKG)
    missing = [g for g in GENERATED if not os.path.exists(os.path.join(out, g))]
    if missing:
        raise RuntimeError(f"the project is not built: {', '.join(missing)} missing in {out}. Build it first "
                           "(tools/check, tools/build, or cmake -S . -B build && cmake --build build), or set "
                           "DPSUBSPACE_BUILD_DIR to the build directory")
    return out


def _metadata(p):
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p['description']}", f"Requires-Python: {p['requires-python']}"]
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    for extra, deps in p.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f"Requires-Dist: {d}; extra == \"{extra}\"" for d in deps]
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return "\n".join(lines + ["Description-Content-Type: text/markdown", "", readme])


def _dist_info(p):
    return f"{p['name']}-{p['version']}.dist-info"


def _tag():
    return "py3-none-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _sources():
    """The package's source files, relative to it: dpsubspace/*.py, py.typed,
    and the *.py of its subpackages (directories with an __init__.py: the
    PyTorch layer, dpsubspace/torch/), '/'-separated as in an archive."""
    src = os.path.join(HERE, PKG)
    out = [n for n in sorted(os.listdir(src)) if n.endswith(".py") or n == "py.typed"]
    for sub in sorted(os.listdir(src)):
        if os.path.isfile(os.path.join(src, sub, "__init__.py")):
            out += [f"{sub}/{n}" for n in sorted(os.listdir(os.path.join(src, sub))) if n.endswith(".py")]
    return out


def _wheel_files(p):
    """(path in the wheel, bytes) of every file but RECORD."""
    files = [(f"{PKG}/{rel}", os.path.join(HERE, PKG, rel)) for rel in _sources()]
    built = _built_dir()
    files += [(f"{PKG}/{g}", os.path.join(built, g)) for g in GENERATED]
    out = []
    for arc, path in files:
        with open(path, "rb") as f:
            out.append((arc, f.read()))
    di = _dist_info(p)
    out.append((f"{di}/METADATA", _metadata(p).encode()))
    out.append((f"{di}/WHEEL", f"Wheel-Version: 1.0\nGenerator: dps_build\nRoot-Is-Purelib: false\n"
                               f"Tag: {_tag()}\n".encode()))
    out.append((f"{di}/top_level.txt", f"{PKG}\n".encode()))
    scripts = p.get("scripts", {})  # [project.scripts]: pip makes each a command
    if scripts:
        text = "[console_scripts]\n" + "".join(f"{name} = {target}\n" for name, target in scripts.items())
        out.append((f"{di}/entry_points.txt", text.encode()))
    return out


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    p = _project()
    di = os.path.join(metadata_directory, _dist_info(p))
    os.makedirs(di, exist_ok=True)
    with open(os.path.join(di, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata(p))
    return _dist_info(p)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p = _project()
    name = f"{p['name']}-{p['version']}-{_tag()}.whl"
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in _wheel_files(p):
            info = zipfile.ZipInfo(arc, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if arc.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{arc},sha256={digest},{len(data)}")
        record.append(f"{_dist_info(p)}/RECORD,,")
        z.writestr(f"{_dist_info(p)}/RECORD", "\n".join(record) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = f"{p['name']}-{p['version']}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ["pyproject.toml", "README.md", "build_backend/dps_build.py"] + \
                [f"{PKG}/{rel}" for rel in _sources()]:
            t.add(os.path.join(HERE, rel), arcname=f"{base}/{rel}")
        pkg_info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata(p).encode()
        pkg_info.size = len(data)
        t.addfile(pkg_info, io.BytesIO(data))
    return name
