#!/bin/sh
# Check that the layers of src/ only point down (docs/architecture.md):
# every #include "X/..." of a file in src/F/ must name a folder F may use, a
# store backend (src/store/NAME/) may use only base/, store/backend.h,
# store/netpool.h and store/netupdate.h (the pool and the update loop of
# network backends) besides its own folder,
# share/ uses the store layer only through store/front.h, and no private
# header includes itself back through others (no import circles).
# Public headers (breakwater/*.h) may be included anywhere.
# Usage: check_layers.sh [SRC_DIR]   (default: the src/ next to this script)
set -eu
src=${1:-$(dirname "$0")/../src}
cd "$src"

# folder: the folders it may include besides itself.
allowed() {
    case $1 in
    base) echo "" ;;
    machine) echo "base" ;;
    time) echo "base" ;;
    store) echo "base" ;;
    share) echo "base machine time store" ;;
    core) echo "base machine time share" ;;
    registry) echo "base core" ;;
    resilience) echo "base core time" ;;
    observe) echo "base" ;;
    http) echo "base" ;;
    cli) echo "" ;; # the breakwater command: public headers only (breakwater/*.h), like a user's program
    *) echo "?" ;;
    esac
}

bad=0
for f in $(find . -name '*.[ch]' | sed 's|^\./||' | sort); do
    layer=${f%%/*}
    rest=${f#*/}
    backend=""
    case $layer/$rest in store/*/*) backend=${rest%%/*} ;; esac
    ok=$(allowed "$layer")
    if [ "$ok" = "?" ]; then
        echo "layers: $f: folder '$layer' is not in the layer table (scripts/check_layers.sh, docs/architecture.md)" >&2
        bad=1
        continue
    fi
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        dir=${inc%%/*}
        [ "$dir" = "$inc" ] && { echo "layers: $f includes \"$inc\": name private headers from src/ (\"folder/file.h\")" >&2; bad=1; continue; }
        [ "$dir" = breakwater ] && continue
        if [ -n "$backend" ]; then
            # A backend: base/, store/backend.h, store/netpool.h, store/netupdate.h and its own folder, nothing else.
            case $inc in
            base/* | store/backend.h | store/netpool.h | store/netupdate.h | store/$backend/*) continue ;;
            esac
            echo "layers: $f includes \"$inc\": a store backend uses only base/, store/backend.h, store/netpool.h and store/netupdate.h" >&2
            bad=1
            continue
        fi
        case $layer:$inc in
        store:store/*/*) echo "layers: $f includes \"$inc\": the store front end names no backend (the scheme table lists them)" >&2; bad=1; continue ;;
        share:store/front.h) continue ;;
        share:store/*) echo "layers: $f includes \"$inc\": share/ uses the store layer through store/front.h only" >&2; bad=1; continue ;;
        esac
        [ "$dir" = "$layer" ] && continue
        case " $ok " in
        *" $dir "*) continue ;;
        esac
        echo "layers: $f includes \"$inc\": $layer/ may include only itself${ok:+, $ok} and breakwater/" >&2
        bad=1
    done
done

# Import circles among private headers: a depth-first search of the include graph.
find . -name '*.h' | sed 's|^\./||' | sort | while read -r h; do
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$h" | while read -r inc; do
        [ -f "$inc" ] && echo "$h $inc"
    done
done | awk '
    { edge[$1] = edge[$1] " " $2; node[$1] = 1; node[$2] = 1 }
    function visit(n,    i, k, m, parts) {
        if (state[n] == 2) return 0
        if (state[n] == 1) { print "layers: import circle through " n > "/dev/stderr"; return 1 }
        state[n] = 1
        k = split(edge[n], parts, " ")
        for (i = 1; i <= k; i++) if (visit(parts[i])) return 1
        state[n] = 2
        return 0
    }
    END { for (n in node) if (visit(n)) exit 1 }' || bad=1

if [ $bad = 0 ]; then
    echo "layers: every include points down; no import circle"
fi
exit $bad
