#!/bin/sh
# The ABI check (docs/packaging.md, "Versions and the ABI"): compare the public libraries of a build with the
# ABI dumps checked in under abi/ (libabigail's abidw and abidiff, from Debian's abigail-tools), which describe the
# last release. A change that breaks a program built against that release (an exported function removed or its
# signature changed, a public struct's layout or an enum's values changed) fails unless the library's SONAME
# changed too; additions pass, and are listed, and so do members added at the end of a versioned table
# (abi/suppressions: bw_store_ops, bw_strategy).
# Usage: abi_check.sh BUILD_DIR            check
#        abi_check.sh BUILD_DIR --update   rewrite the dumps from BUILD_DIR (at a release)
# BUILD_DIR: a build with debug information and without link-time optimisation (make abi configures build-abi).
# The libraries checked: the core and the components with a public API of their own (curl, metrics-http); a store
# component's only export is its private descriptor, tied to its own release of the core (src/base/component.h).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: abi_check.sh BUILD_DIR [--update]}
mode=${2:-check}
command -v abidw >/dev/null 2>&1 && command -v abidiff >/dev/null 2>&1 ||
    { echo "abi: abidw and abidiff are missing: install abigail-tools (sh scripts/deps.sh --all does)" >&2; exit 1; }
headers="$top/include/breakwater"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
status=0
# breaking REPORT: abidiff's report shows more than additions: a function or variable removed or changed (a
# changed signature, or a change in a type it reaches: a public struct's layout, an enum's values). abidiff
# itself marks only removals as incompatible (exit bit 8) and every other change as one to review (bit 4).
breaking() {
    sed -n 's/^Functions changes summary: \([0-9]*\) Removed[^,]*, \([0-9]*\) Changed.*/\1 \2/p
             s/^Variables changes summary: \([0-9]*\) Removed[^,]*, \([0-9]*\) Changed.*/\1 \2/p
             s/^Function symbols changes summary: \([0-9]*\) Removed.*/\1/p
             s/^Variable symbols changes summary: \([0-9]*\) Removed.*/\1/p' "$1" | tr ' ' '\n' | grep -qv '^0$'
}
for lib in libbreakwater libbreakwater-curl libbreakwater-metrics-http; do
    so="$build/$lib.so"
    dump="$top/abi/$lib.abi"
    if [ ! -e "$so" ]; then
        # A build without the component (its dependency absent) has nothing to check for it.
        [ "$lib" = libbreakwater ] && { echo "abi: $so is missing" >&2; exit 1; }
        echo "abi: $lib: not in this build"
        continue
    fi
    abidw --headers-dir "$headers" --drop-private-types --no-corpus-path --no-show-locs --type-id-style hash \
        --out-file "$tmp/$lib.abi" "$so"
    # abidiff compares the functions whose declaration the dump ties to their symbol: a library linked with LTO
    # has its DWARF detached from its symbols, and abidiff then compares nothing (build the libraries without it).
    # libabigail 2.2 leaves a few functions untied even so (listed: their signatures are pinned by
    # tests/abi_prototypes.c instead, their presence by tests/symbols/); fewer than 90 % tied fails.
    total=0 untied=""
    for f in $(nm -D --defined-only "$so" | awk '$2 == "T" && $3 !~ /^_/ {print $3}'); do
        total=$((total + 1))
        grep -q "elf-symbol-id='$f'" "$tmp/$lib.abi" || untied="$untied $f"
    done
    n_untied=$(echo $untied | wc -w)
    if [ $((n_untied * 10)) -gt "$total" ]; then
        echo "abi: $so: $n_untied of $total exported functions have no declaration in the dump (built with LTO?" \
            "use a build without it):$untied" >&2
        exit 1
    fi
    [ -z "$untied" ] || echo "abi: $lib: $n_untied of $total functions untied by abidw (their signatures: tests/abi_prototypes.c):$untied"
    if [ "$mode" = --update ]; then
        mkdir -p "$top/abi"
        cp "$tmp/$lib.abi" "$dump"
        echo "abi: wrote $dump"
        continue
    fi
    [ -e "$dump" ] || { echo "abi: $dump is missing (abi_check.sh BUILD_DIR --update writes it)" >&2; exit 1; }
    rc=0
    abidiff --no-show-locs --suppressions "$top/abi/suppressions" "$dump" "$tmp/$lib.abi" >"$tmp/report" 2>&1 || rc=$?
    old_soname=$(sed -n "s/.*soname='\([^']*\)'.*/\1/p" "$dump" | head -n 1)
    new_soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
    if [ $((rc & 3)) != 0 ]; then
        cat "$tmp/report" >&2
        echo "abi: $lib: abidiff failed (exit $rc)" >&2
        status=1
    elif [ $((rc & 12)) != 0 ] && [ "$old_soname" = "$new_soname" ] && breaking "$tmp/report"; then
        cat "$tmp/report" >&2
        echo "abi: $lib: an INCOMPATIBLE change against the last release with the same SONAME ($new_soname):" \
            "keep the old ABI, or bump the major version (and the SONAME) and rewrite the dumps" >&2
        status=1
    elif [ $((rc & 12)) != 0 ] && [ "$old_soname" != "$new_soname" ]; then
        echo "abi: $lib: changes under a new SONAME ($old_soname -> $new_soname): allowed; rewrite the dumps"
    elif [ $((rc & 4)) != 0 ]; then
        echo "abi: $lib: compatible changes (additions) since the last release:"
        sed 's/^/    /' "$tmp/report"
    else
        echo "abi: $lib: the same ABI as the last release ($new_soname)"
    fi
done
exit $status
