#!/bin/sh
# Compile every self-contained C and C++ example in the given Markdown files:
# each ```c block that starts with #include is a C11 translation unit, each
# ```cpp block that does a C++17 one (CXX, -Wpedantic); one with main() is also
# linked against the libraries. Usage: check_docs.sh CC CXX INCLUDE_DIR LIB_DIR FILE...
# (LIB_DIR has libbreakwater.so and the components' libraries.)
set -eu
cc=$1 cxx=$2 inc=$3 libdir=$4
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
    # A component's example links the component's library (and its own use of libcurl, libcurl); in a build
    # without the component it is only compiled.
    link=1
    if grep -q 'breakwater/curl.h' "$src"; then
        extra="-lbreakwater-curl -lcurl"
        [ -e "$libdir/libbreakwater-curl.so" ] || link=0
    fi
    if grep -q 'bw_metrics_serve' "$src"; then
        extra="$extra -lbreakwater-metrics-http"
        [ -e "$libdir/libbreakwater-metrics-http.so" ] || link=0
    fi
    case $src in
    *.cpp) compile="$cxx -std=c++17 -Wall -Wextra -Wpedantic -Werror" ;;
    *) compile="$cc -std=c11 -Wall -Wextra -Werror" ;;
    esac
    if [ $link = 1 ] && grep -q 'int main' "$src"; then
        cmd="$compile -I$inc $src -L$libdir $extra -lbreakwater -lpthread -o $tmp/$name.bin"
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
