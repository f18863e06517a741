#!/bin/sh
# test_install - install the build into a temporary prefix, then build a
# consumer with find_package(dpsubspace) (shared and static targets) and with
# pkg-config, and run them.  usage: test_install.sh BUILD_DIR SOURCE_DIR
build=$1; src=$2
pass=0; fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $1" >&2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1; then ok; else ko "cmake --install"; cat "$tmp/install.log" >&2; fi
for f in include/dpsubspace.h include/dpsubspace_export.h include/dpsubspace_net.h lib/pkgconfig/dpsubspace.pc \
         lib/cmake/dpsubspace/dpsubspaceConfig.cmake bin/dps-collector; do
  if [ -e "$tmp/prefix/$f" ]; then ok; else ko "installed $f"; fi
done
if cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >"$tmp/c.log" 2>&1 &&
   cmake --build "$tmp/consumer" >>"$tmp/c.log" 2>&1; then ok; else ko "find_package consumer builds"; tail -20 "$tmp/c.log" >&2; fi
for v in shared static; do
  if LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/consumer/consumer_$v" >/dev/null 2>&1; then ok; else ko "consumer_$v runs"; fi
done
if PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" cc -o "$tmp/pc" "$src/tests/install/consumer/main.c" \
     $(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs dpsubspace) -ldpsubspace_net >"$tmp/pc.log" 2>&1 &&
   LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/pc" >/dev/null; then ok; else ko "pkg-config consumer"; cat "$tmp/pc.log" >&2; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
