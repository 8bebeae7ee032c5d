#!/bin/sh
# Compile every self-contained C example in the given Markdown files: each
# ```c block that starts with #include is a translation unit; one with main() is
# also linked against the library. Usage: check_docs.sh CC INCLUDE_DIR LIB FILE...
set -eu
cc=$1 inc=$2 lib=$3
shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
for md in "$@"; do
    awk -v dir="$tmp" -v base="$(basename "$md" .md)" '
        /^```c$/ { inblock = 1; n++; file = sprintf("%s/%s_%d.c", dir, base, n); first = 1; next }
        /^```/ && inblock { inblock = 0; close(file); next }
        inblock {
            if (first && $0 !~ /^#include/) { inblock = 0; next }   # a fragment, not a unit
            first = 0; print > file
        }' "$md"
done
for src in "$tmp"/*.c; do
    [ -e "$src" ] || continue
    name=$(basename "$src" .c)
    extra=""
    grep -q 'breakwater/curl.h' "$src" && extra="-lcurl" # the libcurl integration's examples use libcurl too
    if grep -q 'int main' "$src"; then
        cmd="$cc -std=c11 -Wall -Wextra -Werror -I$inc $src $lib $extra -lpthread -o $tmp/$name"
    else
        cmd="$cc -std=c11 -Wall -Wextra -Werror -I$inc -c $src -o $tmp/$name.o"
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
