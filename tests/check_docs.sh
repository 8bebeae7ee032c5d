#!/bin/sh
# Compile every self-contained C and C++ example in the given Markdown files:
# each ```c block that starts with #include is a C11 translation unit, each
# ```cpp block that does a C++17 one (CXX, -Wpedantic); one with main() is also
# linked against the library. Usage: check_docs.sh CC CXX INCLUDE_DIR LIB FILE...
set -eu
cc=$1 cxx=$2 inc=$3 lib=$4
shift 4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
for md in "$@"; do
    awk -v dir="$tmp" -v base="$(basename "$md" .md)" '
        /^```(c|cpp)$/ {
            inblock = 1; n++; first = 1
            file = sprintf("%s/%s_%d.%s", dir, base, n, substr($0, 4))
            next
        }
        /^```/ && inblock { inblock = 0; close(file); next }
        inblock {
            if (first && $0 !~ /^#include/) { inblock = 0; next }   # a fragment, not a unit
            first = 0; print > file
        }' "$md"
done
for src in "$tmp"/*.c "$tmp"/*.cpp; do
    [ -e "$src" ] || continue
    name=$(basename "$src")
    extra=""
    grep -q 'breakwater/curl.h' "$src" && extra="-lcurl" # the libcurl integration's examples use libcurl too
    case $src in
    *.cpp) compile="$cxx -std=c++17 -Wall -Wextra -Wpedantic -Werror" ;;
    *) compile="$cc -std=c11 -Wall -Wextra -Werror" ;;
    esac
    if grep -q 'int main' "$src"; then
        cmd="$compile -I$inc $src $lib $extra -lpthread -o $tmp/$name.bin"
    else
        cmd="$compile -I$inc -c $src -o $tmp/$name.o"
    fi
    if $cmd 2>"$tmp/$name.err"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL $name:" >&2
        cat "$tmp/$name.err" >&2
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
