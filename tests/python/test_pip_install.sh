#!/bin/sh
# test_pip_install.sh SOURCE_DIR BUILD_DIR - `pip install ./python` works offline
# after a build: the wheel (python/build_backend, nothing from an index) goes
# to a scratch --target, and Debian's python3, run from elsewhere, imports it
# and releases a basis through the library it carries; without a build the
# install stops with a sentence saying to build first.
set -u
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

if DPSUBSPACE_BUILD_DIR=$build /usr/bin/python3 -m pip install -q --no-deps --no-cache-dir --target "$tmp/site" \
     "$src/python" >"$tmp/pip.log" 2>&1; then ok; else bad "pip install"; cat "$tmp/pip.log"; fi
[ -f "$tmp/site/dpsubspace/_native/libdpsubspace.so" ] && ok || bad "the wheel lacks the library"
[ -f "$tmp/site/dpsubspace/dpsubspace_pb2.py" ] && ok || bad "the wheel lacks the message classes"
[ -f "$tmp/site/dpsubspace/py.typed" ] && ok || bad "the wheel lacks py.typed"
# [project.scripts]: pip made the dps-report command, and it runs the installed copy
v=$(cd / && env -u PYTHONPATH PYTHONPATH="$tmp/site" "$tmp/site/bin/dps-report" --version 2>&1)
want=$(sed -n 's/^__version__ = "\([0-9.]*\)".*/\1/p' "$src/python/dpsubspace/__init__.py")
[ "$v" = "dps-report $want" ] && ok || bad "the dps-report command from the wheel: $v (want $want)"
out=$(cd / && env -u PYTHONPATH PYTHONPATH="$tmp/site" /usr/bin/python3 -c '
import numpy as np, dpsubspace
assert dpsubspace.__file__.startswith("'"$tmp"'/site/"), dpsubspace.__file__
X = np.random.default_rng(0).standard_normal((400, 12)).astype(np.float32)
e = dpsubspace.SubspaceEstimator(2, rho=1.0).fit(X)
V = e.components_
assert V.shape == (2, 12) and np.allclose(V @ V.T, np.eye(2), atol=1e-5)
from dpsubspace import wire
b = wire.RowBatch(dim=3)
print("ok", e.spent_[0])
' 2>&1)
[ "$out" = "ok 1.0" ] && ok || bad "import and fit from the installed copy: $out"

# Without a build: a clear sentence, not a traceback of missing files.
if DPSUBSPACE_BUILD_DIR=$tmp/nowhere /usr/bin/python3 -m pip install -q --no-deps --no-cache-dir --target "$tmp/site2" \
     "$src/python" >"$tmp/pip2.log" 2>&1; then
  bad "pip install without a build succeeded"
else
  grep -q "the project is not built" "$tmp/pip2.log" && ok || { bad "no clear error without a build"; cat "$tmp/pip2.log"; }
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
