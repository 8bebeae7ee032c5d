#!/bin/sh
# Check that no source file grows past the size limit (docs/architecture.md,
# "Checking the rules"): every src/**/*.c, src/**/*.h and include/**/*.h(pp)
# has at most LIMIT lines, except the files listed below, each capped at its
# size when it was listed, so that none of them may grow either. A listed file
# that is back within the limit, or gone, must leave the list (its cap would
# let it grow again). Split a file that reaches its limit by what belongs
# together (src/core/breaker*.c is the model), rather than raising a cap.
# Usage: check_sizes.sh [ROOT]   (default: the repository this script is in)
set -eu
root=${1:-$(dirname "$0")/..}
cd "$root"

LIMIT=1000

# The files above LIMIT, each with its own cap (lines): only ever lower a cap,
# or drop a line. src/core/breaker.c is the engine's hot paths, kept in one
# translation unit so that they stay inlined (src/core/engine.h).
caps='
include/breakwater/breakwater.hpp 3092
src/store/redis/redis.c 1514
src/store/postgres/postgres.c 1325
src/observe/metrics.c 1192
src/store/sqlite/sqlite.c 1131
src/core/breaker.c 1021
src/cli/admin.c 1056
'
cap_of() {
    echo "$caps" | awk -v f="$1" '$1 == f { print $2 }'
}

bad=0
for f in $(find src include \( -name '*.c' -o -name '*.h' -o -name '*.hpp' \) | sort); do
    n=$(wc -l <"$f")
    cap=$(cap_of "$f")
    if [ -z "$cap" ]; then
        if [ "$n" -gt $LIMIT ]; then
            echo "sizes: $f has $n lines, above the limit of $LIMIT: split it by what belongs together (docs/architecture.md)" >&2
            bad=1
        fi
    elif [ "$n" -gt "$cap" ]; then
        echo "sizes: $f has $n lines, above its own cap of $cap (scripts/check_sizes.sh): it may not grow; split it" >&2
        bad=1
    elif [ "$n" -le $LIMIT ]; then
        echo "sizes: $f has $n lines, within the limit of $LIMIT now: drop it from the list in scripts/check_sizes.sh" >&2
        bad=1
    fi
done
for f in $(echo "$caps" | awk 'NF { print $1 }'); do
    if [ ! -f "$f" ]; then
        echo "sizes: $f is listed in scripts/check_sizes.sh but does not exist: drop it from the list" >&2
        bad=1
    fi
done

if [ $bad = 0 ]; then
    echo "sizes: every source file is within $LIMIT lines, or within its own cap"
fi
exit $bad
