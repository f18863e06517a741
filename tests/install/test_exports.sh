#!/bin/sh
# test_exports - the shared libraries export the public API and nothing else:
# every dynamic symbol they define is a dps_ function declared in include/,
# and every function declared in include/ is defined by one of them.  An
# internal helper that leaks (pool_new, wire_rows_encode, the generated
# protobuf-c code) would collide with a user's own symbol of that name; a
# public function without DPS_EXPORT would be missing for users of the .so.
# usage: test_exports.sh NM LIBDPSUBSPACE.so LIBDPSUBSPACE_NET.so INCLUDE_DIR
nm=$1; core=$2; net=$3; inc=$4
pass=0; fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $1" >&2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# The functions the public headers declare: a declaration starts a line
# (DPS_EXPORT or its return type in column 0); typedefs are not functions.
grep -hE '^[A-Za-z].*\bdps_[a-z0-9_]+ *\(' "$inc"/*.h | grep -v '^typedef' |
  sed -E 's/^[^(]*\b(dps_[a-z0-9_]+) *\(.*/\1/' | sort -u >"$tmp/declared"
if [ "$(wc -l <"$tmp/declared")" -ge 100 ]; then ok; else ko "found $(wc -l <"$tmp/declared") declarations in $inc/*.h, want >= 100"; fi

: >"$tmp/all"
for lib in "$core" "$net"; do
  if "$nm" -D --defined-only "$lib" >"$tmp/nm" 2>"$tmp/nm.err"; then ok; else ko "$nm -D $lib"; cat "$tmp/nm.err" >&2; continue; fi
  awk 'NF >= 3 { print $NF }' "$tmp/nm" | sort -u >"$tmp/syms"
  cat "$tmp/syms" >>"$tmp/all"
  # not dps_: internals (la_*, pool_*, net_*, wire_*...); dps__: protobuf-c's generated code
  grep -vE '^dps_[a-z0-9]' "$tmp/syms" >"$tmp/bad"
  if [ ! -s "$tmp/bad" ]; then ok; else
    ko "$(basename "$lib") exports $(wc -l <"$tmp/bad") symbols outside the dps_ API: $(head -8 "$tmp/bad" | tr '\n' ' ')"; fi
  grep -E '^dps_[a-z0-9]' "$tmp/syms" | grep -vxF -f "$tmp/declared" >"$tmp/undeclared"
  if [ ! -s "$tmp/undeclared" ]; then ok; else
    ko "$(basename "$lib") exports dps_ symbols no public header declares: $(tr '\n' ' ' <"$tmp/undeclared")"; fi
done
sort -u "$tmp/all" | grep -vxF -f - "$tmp/declared" >"$tmp/missing"
if [ ! -s "$tmp/missing" ]; then ok; else
  ko "declared in $inc but exported by neither library (DPS_EXPORT missing?): $(tr '\n' ' ' <"$tmp/missing")"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
