#!/bin/sh
# test_flags.sh - every program, benchmark and experiment driver parses its
# flags with the one parser (src/args/args.h): --version prints "NAME VERSION"
# and exits 0, --help exits 0, "--x=v" means what "--x v" means, and an
# unknown flag is a usage error (2); dps-collector's config file and its flags
# are one table (a key and its flag are the same option, the command line
# wins).
# Usage: test_flags.sh VERSION DIR_OF_PROGRAMS...  (each program found by name
# in one of the directories).
set -u
version=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# find NAME: the program's path in one of the directories given
find_prog() {
  for d in $dirs; do
    [ -x "$d/$1" ] && { echo "$d/$1"; return; }
  done
}
dirs="$*"

# run OUT PROG ARGS...: stdout and stderr into OUT, the exit code after them
run() {
  out=$1
  shift
  "$@" >"$out" 2>&1
  echo "exit $?" >>"$out"
}

# check NAME FLAG VALUE ARGS...: --version, --help, unknown flag, and
# "FLAG VALUE ARGS" against "FLAG=VALUE ARGS" (same output, same exit code,
# no "unknown" in it)
check() {
  name=$1 flag=$2 value=$3
  shift 3
  prog=$(find_prog "$name")
  if [ -z "$prog" ]; then
    bad "$name: not found in $dirs"
    return
  fi
  run "$tmp/v" "$prog" --version
  if [ "$(cat "$tmp/v")" = "$name $version
exit 0" ]; then ok; else bad "$name --version: $(cat "$tmp/v")"; fi
  run "$tmp/h" "$prog" --help
  if tail -n 1 "$tmp/h" | grep -qx "exit 0" && grep -q -- "--help" "$tmp/h"; then ok; else
    bad "$name --help: $(tail -n 3 "$tmp/h")"; fi
  run "$tmp/u" "$prog" --no-such-flag=1
  if tail -n 1 "$tmp/u" | grep -qx "exit 2" && grep -q -- "--no-such-flag" "$tmp/u"; then ok; else
    bad "$name --no-such-flag=1: $(cat "$tmp/u")"; fi
  run "$tmp/a" "$prog" "$flag" "$value" "$@"
  run "$tmp/b" "$prog" "$flag=$value" "$@"
  if cmp -s "$tmp/a" "$tmp/b" && ! grep -qi "unknown" "$tmp/b"; then ok; else
    bad "$name: '$flag $value' and '$flag=$value' differ:"
    cat "$tmp/a" "$tmp/b"
  fi
}

state="$tmp/state"
check dps-gen --n 0 --d 5 --k 1
check dps-estimate --rho -1 --k 1 /nonexistent.npy
check dps-keygen --dir "$tmp/no/such/dir" name
check dps-watch --timeout 0
check dps-status --timeout 0
check dps-produce --repeat 0 /nonexistent.npy
check dps-collector --d 100 --k 200 --state-dir "$state" --no-cap --insecure-plaintext
check bench-bucket --time 0
check bench-aggregate --workers 0 --d 5 --k 1
check bench-covariance --workers 0 --d 5 --k 1
check bench-ingest --collector "$tmp/no-such-collector"
check bench-latency --collector "$tmp/no-such-collector"
check dps-fig2 --d 5 --k 9
check dps-rgrad-exp --reps 0
check dps-cov-eval --reps 0 --in "$tmp/none.npy"
check dps-histvsref --d 5 --k 9

# dps-collector: a config key and its flag are one option.
collector=$(find_prog dps-collector)
conf="$tmp/c.conf"
printf '# the settings of the flags, as name = value lines\nd = 100\nk = 4\nstate-dir = %s\nno-cap = true\ninsecure-plaintext = yes\naggregator = fromfile\n' \
  "$state" >"$conf"
run "$tmp/c1" "$collector" --config="$conf"
run "$tmp/c2" "$collector" --config "$conf" --aggregator=fromflag
run "$tmp/c3" "$collector" --d 100 --k 4 --state-dir "$state" --no-cap --insecure-plaintext --aggregator fromfile
if grep -q "'fromfile'" "$tmp/c1" && tail -n 1 "$tmp/c1" | grep -qx "exit 2"; then ok; else
  bad "collector --config=FILE: the file's aggregator not read: $(cat "$tmp/c1")"; fi
if grep -q "'fromflag'" "$tmp/c2" && ! grep -q "fromfile" "$tmp/c2"; then ok; else
  bad "collector: the command line does not win over the config file: $(cat "$tmp/c2")"; fi
if cmp -s "$tmp/c1" "$tmp/c3"; then ok; else
  bad "collector: the config file and the same flags differ:"; cat "$tmp/c1" "$tmp/c3"; fi
# a bad value says the same as the flag's, with the file and line in front
printf 't = many\n' >"$conf"
run "$tmp/c4" "$collector" --config "$conf"
run "$tmp/c5" "$collector" --t many
want=$(sed -n 1p "$tmp/c5" | sed "s|^dps-collector: |dps-collector: $conf:1: |")
if [ "$(sed -n 1p "$tmp/c4")" = "$want" ] && tail -n 1 "$tmp/c4" | grep -qx "exit 2"; then ok; else
  bad "collector: config 't = many' and '--t many' say different things: $(cat "$tmp/c4") / $(cat "$tmp/c5")"; fi
# a config key that is no flag is refused, and so is --config inside a config
printf 'no-such-setting = 1\n' >"$conf"
run "$tmp/c6" "$collector" --config "$conf"
if grep -q "$conf:1: unknown setting 'no-such-setting'" "$tmp/c6" && tail -n 1 "$tmp/c6" | grep -qx "exit 2"; then ok; else
  bad "collector: unknown config key: $(cat "$tmp/c6")"; fi
# the two mistakes a first config file makes: a comment after a value, "name: value"
printf 'cap-rho = 10  # ten\n' >"$conf"
run "$tmp/c7" "$collector" --config "$conf"
if grep -q "$conf:1: .*(a comment must be on a line of its own)" "$tmp/c7"; then ok; else
  bad "collector: a comment after a value: $(cat "$tmp/c7")"; fi
printf 'd: 200\n' >"$conf"
run "$tmp/c8" "$collector" --config "$conf"
if grep -q "$conf:1: 'd: 200' is not a setting: write name = value" "$tmp/c8"; then ok; else
  bad "collector: 'name: value': $(cat "$tmp/c8")"; fi

# The estimator's settings are one table (src/args/est_flags.h): each flag's
# block of --help (its line and the wrapped lines under it) reads the same in
# every program that takes it; a program's own note comes after the shared
# text, so the block is compared only where no program adds one.
# help_block PROG FLAG: the lines of FLAG's entry in PROG --help
help_block() {
  "$1" --help 2>&1 | awk -v f="  --$2 " 'index($0, f) == 1 { on = 1; print; next }
    on && /^  --/ { exit } on && /^                    / { print; next } on { exit }'
}
estimate=$(find_prog dps-estimate)
mpi=$(find_prog dps-mpi-estimate)
for flag in t m window q aggregator power-blocks power-oversample dense-max-d hist-width param-groups group-k \
            cap-eps delta-target alpha tau public-seed seed; do
  help_block "$estimate" "$flag" >"$tmp/he"
  help_block "$collector" "$flag" >"$tmp/hc"
  if [ -s "$tmp/he" ] && cmp -s "$tmp/he" "$tmp/hc"; then ok; else
    bad "--$flag: dps-estimate's and dps-collector's help differ:"; cat "$tmp/he" "$tmp/hc"; fi
done
if [ -n "$mpi" ]; then
  for flag in rho power-blocks power-oversample public-seed seed; do
    # Open MPI's dlopened components leak by LeakSanitizer's count (tests/mpi/test_mpi.sh)
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" help_block "$mpi" "$flag" >"$tmp/hm"
    help_block "$collector" "$flag" >"$tmp/hc"
    if [ -s "$tmp/hm" ] && cmp -s "$tmp/hm" "$tmp/hc"; then ok; else
      bad "--$flag: dps-mpi-estimate's and dps-collector's help differ:"; cat "$tmp/hm" "$tmp/hc"; fi
  done
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
