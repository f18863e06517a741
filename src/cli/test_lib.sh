# test_lib.sh - the shell tests' shared harness (sourced by test_cli.sh and
# test_net_cli.sh): result counting, running a command, reading the JSON the
# programs write, numeric comparisons.  The last line a test prints is
# "N passed, N failed".

pass=0
fail=0

# ok NAME / bad NAME [DETAIL]: count and print one result.
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() {
    fail=$((fail + 1))
    echo "FAIL $1"
    if [ -n "$2" ]; then echo "     $2"; fi
}

# check NAME COMMAND...: passes when COMMAND succeeds.
check() {
    _name=$1
    shift
    if "$@"; then ok "$_name"; else bad "$_name"; fi
}

# verdict NAME: passes when the previous command (or && list) succeeded.
verdict() { if [ $? -eq 0 ]; then ok "$1"; else bad "$1"; fi; }

# run COMMAND...: run it (under "timeout $RUN_TIMEOUT" when that is set) with
# stdout in out.txt, stderr in err.txt; sets rc.
run() {
    if [ -n "${RUN_TIMEOUT:-}" ]; then timeout "$RUN_TIMEOUT" "$@" > out.txt 2> err.txt; else "$@" > out.txt 2> err.txt; fi
    rc=$?
}

# jget FILE KEY: the first value of "KEY": in a JSON file written by
# dps-estimate (one member per line), quotes and trailing comma removed.
jget() { sed -n "s/^ *\"$2\": \(.*\)\$/\1/p" "$1" | sed 's/,$//; s/^"//; s/"$//' | head -n 1; }
# jall FILE KEY: every value of "KEY":, one per line.
jall() { sed -n "s/^ *\"$2\": \(.*\)\$/\1/p" "$1" | sed 's/,$//; s/^"//; s/"$//'; }
# jsub FILE OBJECT KEY: the value of KEY inside the top-level member OBJECT
# ("mean", "privacy"; "epochs" gives every epoch's value, one per line).
jsub() {
    sed -n "/^  \"$2\": [{[]/,/^  []}]/p" "$1" > jsub.txt
    jall jsub.txt "$3"
}

# lt A B: A is a number and A < B.
lt() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a !~ /^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$/) exit 1
        exit !(a + 0 < b + 0) }'
}

# near A B: A and B are numbers within 1e-9 of each other.
near() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a !~ /^-?[0-9]/ || b !~ /^-?[0-9]/) exit 1
        d = a - b; if (d < 0) d = -d; exit !(d < 1e-9) }'
}

# size FILE: its size in bytes.
size() { wc -c < "$1" | tr -d ' '; }

# expect_error NAME CODE PATTERN COMMAND...: COMMAND exits with CODE and says
# exactly one line on stderr, starting with its program name and matching
# PATTERN (a grep -E regex).
expect_error() {
    _name=$1 _code=$2 _pat=$3
    shift 3
    _prog=$(basename "$1")
    run "$@"
    _lines=$(wc -l < err.txt | tr -d ' ')
    if [ "$rc" -ne "$_code" ]; then
        bad "$_name" "exit $rc, expected $_code; stderr: $(cat err.txt)"
    elif [ "$_lines" -ne 1 ]; then
        bad "$_name" "stderr has $_lines lines, expected 1: $(cat err.txt)"
    elif ! grep -q "^$_prog: " err.txt; then
        bad "$_name" "message does not start with '$_prog: ': $(cat err.txt)"
    elif ! grep -Eq -- "$_pat" err.txt; then
        bad "$_name" "message does not match /$_pat/: $(cat err.txt)"
    else
        ok "$_name"
    fi
}

