#!/bin/sh
# The static_asserts of breakwater.hpp: compile static_asserts.cpp with the
# compiler at each standard, once as it is (it must compile), then once per
# case (`#ifdef BW_FAIL_...` followed by `// expect: MESSAGE`), which must fail
# with MESSAGE in its first error, i.e. by the static_assert rather than deep
# inside the header. Usage: static_asserts.sh CXX INCLUDE_DIR SOURCE STD...
set -eu
cxx=$1 inc=$2 src=$3
shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
fail() {
    failed=$((failed + 1))
    echo "FAIL $*" >&2
}
# "CASE MESSAGE" lines.
awk '/^#ifdef BW_FAIL_/ { c = $2; next }
     c != "" && /^\/\/ expect: / { sub(/^\/\/ expect: /, ""); print c, $0; c = ""; next }
     { c = "" }' "$src" >"$tmp/cases"
[ -s "$tmp/cases" ] || { echo "static_asserts.sh: no cases in $src" >&2; exit 1; }
for std in "$@"; do
    compile="$cxx -std=c++$std -Wall -Wextra -Wpedantic -Werror -I$inc -fsyntax-only $src"
    if $compile 2>"$tmp/out"; then
        passed=$((passed + 1))
    else
        fail "c++$std: the fitting calls do not compile:"
        cat "$tmp/out" >&2
    fi
    while read -r name message; do
        if $compile -D"$name" 2>"$tmp/out"; then
            fail "c++$std $name: compiled; expected: $message"
            continue
        fi
        first=$(grep -m1 ': error: ' "$tmp/out" || true)
        case $first in
        *"$message"*) passed=$((passed + 1)) ;;
        *)
            fail "c++$std $name: the first error is not \"$message\":"
            head -20 "$tmp/out" >&2
            ;;
        esac
    done <"$tmp/cases"
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
