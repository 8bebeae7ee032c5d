#!/bin/sh
# Check (default) or apply (--fix) the checked-in .clang-format to every C and C++ file.
set -eu
cd "$(dirname "$0")/.."
files=$(git ls-files '*.c' '*.h' '*.cpp' '*.hpp' 2>/dev/null || find include src tests examples bench -name '*.[ch]' -o -name '*.[ch]pp')
if [ "${1:-}" = "--fix" ]; then
    clang-format -i $files
    exit 0
fi
if ! command -v clang-format >/dev/null 2>&1; then
    echo "format: clang-format not found" >&2
    exit 1
fi
bad=0
for f in $files; do
    if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
        echo "format: $f is not formatted (run: make format)" >&2
        bad=1
    fi
done
[ $bad = 0 ] && echo "format: all files formatted"
exit $bad
