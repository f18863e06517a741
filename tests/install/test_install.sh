#!/bin/sh
# test_install - install the build into a temporary prefix, then build a
# consumer with find_package(dpsubspace) (shared and static targets) and with
# a Makefile that asks pkg-config alone (dpsubspace_net.pc), and run them;
# the .pc files' --cflags hold only the include directory.
# usage: test_install.sh BUILD_DIR SOURCE_DIR
build=$1; src=$2
pass=0; fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $1" >&2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1; then ok; else ko "cmake --install"; cat "$tmp/install.log" >&2; fi
for f in include/dpsubspace.h include/dpsubspace_export.h include/dpsubspace_net.h lib/pkgconfig/dpsubspace.pc \
         lib/pkgconfig/dpsubspace_net.pc \
         lib/cmake/dpsubspace/dpsubspaceConfig.cmake bin/dps-collector; do
  if [ -e "$tmp/prefix/$f" ]; then ok; else ko "installed $f"; fi
done
if cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >"$tmp/c.log" 2>&1 &&
   cmake --build "$tmp/consumer" >>"$tmp/c.log" 2>&1; then ok; else ko "find_package consumer builds"; tail -20 "$tmp/c.log" >&2; fi
for v in shared static; do
  if LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/consumer/consumer_$v" >/dev/null 2>&1; then ok; else ko "consumer_$v runs"; fi
done
# a man page for every program, made from its --help (when help2man made them: build/man)
if [ -d "$build/man" ]; then
  for p in dps-collector dps-estimate dps-produce dps-watch dps-status dps-keygen dps-gen dps-report; do
    f="$tmp/prefix/share/man/man1/$p.1"
    up=$(echo "$p" | tr a-z A-Z)
    if [ -f "$f" ] && grep -q "^\.TH $up \"1\"" "$f" && grep -q '^\.SH NAME' "$f" && grep -q -- '\\-\\-help' "$f" &&
       { ! command -v man >/dev/null || MANWIDTH=80 man -l "$f" 2>/dev/null | grep -q "^NAME"; }
    then ok; else ko "man page $p.1"; fi
  done
fi
# the systemd unit: installed, names the installed program, verifies (its man page found through
# MANPATH), and systemd-analyze's offline security rating stays "OK" or better (exposure < 3)
unit="$tmp/prefix/lib/systemd/system/dps-collector.service"
if [ -f "$unit" ] && grep -q "^ExecStart=$tmp/prefix/bin/dps-collector " "$unit"; then ok; else ko "the unit names $tmp/prefix/bin/dps-collector"; fi
if command -v systemd-analyze >/dev/null; then
  if MANPATH="$tmp/prefix/share/man" systemd-analyze verify "$unit" >"$tmp/sd.log" 2>&1; then ok; else ko "systemd-analyze verify"; cat "$tmp/sd.log" >&2; fi
  exposure=$(systemd-analyze security --offline=true "$unit" 2>/dev/null | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
  if [ -n "$exposure" ] && awk -v e="$exposure" 'BEGIN { exit !(e < 3) }'; then ok; else ko "systemd-analyze security: exposure '$exposure'"; fi
else
  ko "systemd-analyze is missing (tools/setup installs systemd)"
fi
if [ -f "$tmp/prefix/share/doc/dpsubspace/dps-collector.conf.example" ]; then ok; else ko "the configuration example"; fi
# the Python package where Debian's python3 searches for this prefix: lib/python3.X/dist-packages
# (on sys.path for /usr/local), not lib/python3/dist-packages (only for /usr)
pyv=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ -f "$tmp/prefix/lib/python$pyv/dist-packages/dpsubspace/__init__.py" ] &&
   /usr/bin/python3 -c "import sys; sys.exit('/usr/local/lib/python$pyv/dist-packages' not in sys.path)" &&
   PYTHONPATH="$tmp/prefix/lib/python$pyv/dist-packages" /usr/bin/python3 -c 'import dpsubspace' 2>"$tmp/py.log"
then ok; else ko "the Python package in lib/python$pyv/dist-packages, importable"; cat "$tmp/py.log" >&2; fi
# dps-report installed in bin finds the package under the prefix (a JSON line in, a PNG out)
printf '%s\n' '{"seq": 1, "epoch": 0, "status": "released", "d": 4, "k": 1, "aggregator": "gaussian", "eps_total": 3.0, "delta_target": 1e-5, "sin_to_prev": null}' |
  "$tmp/prefix/bin/dps-report" --out "$tmp/r.png" 2>"$tmp/r.log" && [ -s "$tmp/r.png" ] && grep -q "1 snapshot" "$tmp/r.log"
if [ $? -eq 0 ]; then ok; else ko "the installed dps-report draws a PNG"; cat "$tmp/r.log" >&2; fi
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
mkdir "$tmp/mk" && cp "$src/tests/install/consumer/main.c" "$src/tests/install/consumer/Makefile" "$tmp/mk/"
if make -C "$tmp/mk" consumer_pc >"$tmp/pc.log" 2>&1 && LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/mk/consumer_pc" >/dev/null
then ok; else ko "Makefile consumer with pkg-config --cflags --libs dpsubspace_net"; cat "$tmp/pc.log" >&2; fi
# linked from the archives: no dpsubspace shared library needed at run time (ldd names none)
if make -C "$tmp/mk" consumer_pc_static >"$tmp/pcs.log" 2>&1 && "$tmp/mk/consumer_pc_static" >/dev/null &&
   ! ldd "$tmp/mk/consumer_pc_static" | grep -q libdpsubspace
then ok; else ko "Makefile consumer with pkg-config --libs dpsubspace_net-static, no shared dpsubspace"; cat "$tmp/pcs.log" >&2; fi
# docs/library.md's example, as a user copies it: wrapped in a main over some rows, built against the
# installed headers and archives (pkg-config), and run: it must compile and release
{ printf '#include <stdio.h>\n#include <stdlib.h>\n#include <dpsubspace.h>\nint main(void)\n{\n'
  printf '    size_t d = 50, k = 3, n = 3000;\n    float *rows = malloc(n * d * sizeof *rows);\n'
  printf '    for (size_t i = 0; i < n * d; i++)\n        rows[i] = (float)((i * 2654435761u) %% 1000) / 1000.0f - 0.5f;\n'
  sed -n '/^```c$/,/^```$/p' "$src/docs/library.md" | sed '1d;$d' | grep -v '^#include <dpsubspace.h>'
  printf '    free(rows);\n    puts("example ran");\n    return 0;\n}\n'; } >"$tmp/libex.c"
if cc -Wall -Werror -Wno-unused-variable -o "$tmp/libex" "$tmp/libex.c" $(pkg-config --cflags --libs dpsubspace-static) \
     >"$tmp/libex.log" 2>&1 && "$tmp/libex" 2>>"$tmp/libex.log" | grep -q "example ran"
then ok; else ko "docs/library.md's example builds and runs"; cat "$tmp/libex.log" >&2; fi
# the headers need only their own directory: no -I (or -isystem) of the libraries used inside
for pc in dpsubspace dpsubspace_net; do
  cf=$(pkg-config --cflags "$pc")
  inc=$(cd "$tmp/prefix/include" && pwd)
  set -- $cf
  if [ $# -eq 1 ] && [ "$(cd "${1#-I}" 2>/dev/null && pwd)" = "$inc" ]; then ok; else ko "pkg-config --cflags $pc is '$cf'"; fi
done
case " $(pkg-config --libs dpsubspace_net) " in
  *" -ldpsubspace_net "*"-ldpsubspace "*) ok ;;
  *) ko "pkg-config --libs dpsubspace_net lacks the libraries: $(pkg-config --libs dpsubspace_net)" ;;
esac
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
