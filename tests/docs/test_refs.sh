#!/bin/sh
# test_refs - the documents point at things that exist: every path and every
# identifier a document names in `backticks` is in the repository, and no
# document sends the reader outside it (a clone has nothing at ../); and the
# code's comments state reasons, not the history of a change: no file under
# src/, include/, python/ or proto/ names an issue (git and the issues keep that).
# Documents: README.md, every docs/*.md, producers/README.md and the
# tools' READMEs (experiments, bench); their links
# (check_links.py) lead to files and headings that exist.
# usage: test_refs.sh SOURCE_DIR
src=$1
pass=0; fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $1" >&2; }
cd "$src" || { echo "0 passed, 1 failed"; exit 1; }
docs="README.md $(ls docs/*.md) producers/README.md tools/experiments/README.md tools/bench/README.md"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for doc in $docs; do
  if [ -f "$doc" ]; then ok; else ko "$doc is missing"; continue; fi
  if [ "${doc%/*}" = "$doc" ] && grep -n '\.\./[A-Za-z]' "$doc" >"$tmp/out"; then
    ko "$doc points outside the repository: $(head -3 "$tmp/out" | tr '\n' ' ')"; else ok; fi
  # `...` spans, one per line, then the tokens inside them
  grep -o '`[^`]*`' "$doc" | tr -d '`' | tr ' (),;' '\n\n\n\n\n' | sed 's/[.:]*$//' | sort -u >"$tmp/tokens"
  : >"$tmp/missing"
  for p in $(grep -E '^(src|include|tests|tools|producers|python|proto|docs|cmake)/' "$tmp/tokens"); do
    case $p in *'*'*) ls $p >/dev/null 2>&1 || echo "$p" >>"$tmp/missing" ;;
                  *) [ -e "$p" ] || echo "$p" >>"$tmp/missing" ;; esac
  done
  if [ ! -s "$tmp/missing" ]; then ok; else ko "$doc names paths that do not exist: $(tr '\n' ' ' <"$tmp/missing")"; fi
  : >"$tmp/missing"
  # identifiers with an underscore (functions, fields, constants); not library names (libdpsubspace_net)
  for id in $(grep -E '^[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9]$' "$tmp/tokens" | grep -v '^lib'); do
    grep -rqw -- "$id" src include python tools tests producers proto CMakeLists.txt || echo "$id" >>"$tmp/missing"
  done
  if [ ! -s "$tmp/missing" ]; then ok; else ko "$doc names identifiers found nowhere in the code: $(tr '\n' ' ' <"$tmp/missing")"; fi
done
if /usr/bin/python3 "$src/tests/docs/check_links.py" "$src" README.md docs/*.md producers/README.md \
    tools/experiments/README.md tools/bench/README.md >"$tmp/out" 2>&1; then ok; else
  ko "links that lead nowhere: $(head -5 "$tmp/out" | tr '\n' ' ')"; fi
if grep -rnI -E '(issue|issues) #?[0-9]' src include python proto >"$tmp/out"; then
  ko "comments name issues: $(head -3 "$tmp/out" | tr '\n' ' ')"; else ok; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
