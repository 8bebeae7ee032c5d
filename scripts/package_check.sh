#!/bin/sh
# make package: build breakwater's Debian packages from the tracked files (dpkg-buildpackage -us -uc, as a
# clean clone would), install them into a temporary root (dpkg -x: no chroot, nothing installed on the machine),
# build and run a consumer against that root with pkg-config and with CMake (shared and static), and run
# lintian on the result: its findings are printed, and an error fails.
# Usage: package_check.sh [DIR]
#   DIR (default build-package/ in the checkout) receives the packages built (.deb, .changes, .buildinfo, .dsc,
#   the source tarball), replacing those of an earlier run, as soon as they are built: they stay there whatever the
#   checks after say. BW_PACKAGE_KEEP=1 also keeps the temporary directory (the build log, the extracted root, the
#   consumers). Needs debhelper, dpkg-dev, lintian: sh scripts/deps.sh --package installs them.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$top/build-package}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/bw-package.XXXXXX")
[ -n "${BW_PACKAGE_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT INT TERM
ver=$(sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' "$top/debian/changelog")
src="$work/breakwater-$ver"
mkdir -p "$src"
# The tracked files only (a build tree or a stray file in the checkout must not reach the package).
(cd "$top" && git ls-files -z | tar --null -T - -cf -) | tar xf - -C "$src"

echo "package: dpkg-buildpackage -us -uc (breakwater $ver)"
jobs=$(nproc 2>/dev/null || echo 2)
if ! (cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=$jobs" dpkg-buildpackage -us -uc >"$work/build.log" 2>&1); then
    tail -n 60 "$work/build.log" >&2
    echo "package: dpkg-buildpackage failed" >&2
    exit 1
fi
# The packages, kept: the previous run's go first, so DIR holds one build's.
rm -f "$out"/*.deb "$out"/*.ddeb "$out"/*.changes "$out"/*.buildinfo "$out"/*.dsc "$out"/*.tar.*
for f in "$work"/*.deb "$work"/*.ddeb "$work"/*.changes "$work"/*.buildinfo "$work"/*.dsc "$work"/*.tar.*; do
    if [ -e "$f" ]; then cp "$f" "$out/"; fi
done
echo "package: the packages are in $out"
expected="libbreakwater0 libbreakwater-sqlite0 libbreakwater-redis0 libbreakwater-postgres0 libbreakwater-curl0
libbreakwater-metrics-http0 libbreakwater-dev breakwater"
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
root="$work/root"
for p in $expected; do
    deb="$work/${p}_${ver}_$arch.deb"
    [ -e "$deb" ] || { echo "package: $p was not built ($deb)" >&2; exit 1; }
    dpkg -x "$deb" "$root"
    echo "package: $(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
done
libdir="$root/usr/lib/$multiarch"
# Each library in its package, nothing else: the core depends on libc only, a component on the core of its
# release and its dependency.
for p in libbreakwater0 libbreakwater-sqlite0 libbreakwater-redis0 libbreakwater-postgres0 libbreakwater-curl0 \
    libbreakwater-metrics-http0; do
    dpkg-deb -c "$work/${p}_${ver}_$arch.deb" >"$work/contents"
    grep -q '\.so\.0\.' "$work/contents" || { echo "package: $p has no library" >&2; exit 1; }
    [ $p = libbreakwater0 ] && continue
    dpkg-deb -f "$work/${p}_${ver}_$arch.deb" Depends | grep -q "libbreakwater0 (= $ver)" ||
        { echo "package: $p does not depend on its release of the core" >&2; exit 1; }
done
for lib in $(readelf -d "$libdir/libbreakwater.so.0" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
    case $lib in
    libc.so.* | ld-linux*.so.*) ;;
    *) echo "package: libbreakwater.so.0 needs more than libc: $lib" >&2; exit 1 ;;
    esac
done
# The command links the packaged core (its stores load from their packages), with no SQLite of its own.
cmd_needs=$(readelf -d "$root/usr/bin/breakwater" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
case $cmd_needs in
*libbreakwater.so.0*) ;;
*) echo "package: the breakwater command does not link libbreakwater.so.0: $cmd_needs" >&2; exit 1 ;;
esac
if grep -q "SQLite format 3" "$root/usr/bin/breakwater"; then
    echo "package: the breakwater command has SQLite linked in" >&2
    exit 1
fi

# The consumer, against the temporary root only: its .pc files name /usr (as installed), which pkg-config reads
# under the root (PKG_CONFIG_SYSROOT_DIR; the system directories are kept in the flags: under the root they are
# not the system's).
cons="$work/consumer"
mkdir -p "$cons/data"
grep -q "^prefix=/usr$" "$libdir/pkgconfig/breakwater.pc" ||
    { echo "package: breakwater.pc does not name /usr: $(grep ^prefix= "$libdir/pkgconfig/breakwater.pc")" >&2; exit 1; }
export PKG_CONFIG_PATH="$libdir/pkgconfig"
export PKG_CONFIG_LIBDIR="$libdir/pkgconfig" # not the machine's own .pc files
export PKG_CONFIG_SYSROOT_DIR="$root" PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
core_flags=$(pkg-config --cflags --libs breakwater)
case $core_flags in
*hiredis* | *sqlite* | *pq* | *curl* | *microhttpd*) echo "package: breakwater.pc pulls a component's flags: $core_flags" >&2; exit 1 ;;
esac
run() { # run NAME: the consumer NAME, which must load breakwater from the temporary root (or have it linked in)
    res=$(LD_LIBRARY_PATH="$libdir" "$cons/$1" "$cons/data") || { echo "$res" >&2; echo "package: $1 failed" >&2; exit 1; }
    echo "$res" | sed "s|^|package: $1: |"
    case $2 in
    shared) echo "$res" | grep -q "^core: $libdir/libbreakwater.so.0$" || { echo "package: $1 did not load the packaged core" >&2; exit 1; } ;;
    static) echo "$res" | grep -q "^core: $cons/$1$" || { echo "package: $1 is not linked statically" >&2; exit 1; } ;;
    esac
}
cc -std=c11 -Wall -Wextra -Werror "$top/tests/packaging/consumer.c" $(pkg-config --cflags --libs breakwater) -o "$cons/pc_core"
run pc_core shared # sqlite: through the component's library, loaded by the core
cc -std=c11 -Wall -Wextra -Werror -DCONSUMER_CURL "$top/tests/packaging/consumer.c" \
    $(pkg-config --cflags --libs breakwater-curl) -o "$cons/pc_curl"
run pc_curl shared
cmake -S "$top/tests/packaging" -B "$cons/cmake" -DCMAKE_PREFIX_PATH="$root/usr" >"$work/cmake.log" 2>&1 &&
    cmake --build "$cons/cmake" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log" >&2; exit 1; }
cp "$cons/cmake/consumer_cmake" "$cons/cmake/consumer_cmake_static" "$cons/"
run consumer_cmake shared
run consumer_cmake_static static

# The command, from its package.
LD_LIBRARY_PATH="$libdir" "$root/usr/bin/breakwater" --version >"$work/version"
sed 's/^/package: breakwater --version: /' "$work/version"
grep -q "stores: memory shm sqlite redis postgresql" "$work/version" ||
    { echo "package: the packaged command does not have every store" >&2; exit 1; }
[ -s "$root/usr/share/man/man1/breakwater.1.gz" ] || { echo "package: no manual page" >&2; exit 1; }
[ -s "$root/usr/share/bash-completion/completions/breakwater" ] || { echo "package: no bash completion" >&2; exit 1; }

echo "package: lintian"
rc=0
lintian --fail-on error --display-info "$work/breakwater_${ver}_$arch.changes" >"$work/lintian.log" 2>&1 || rc=$?
sed 's/^/package: lintian: /' "$work/lintian.log"
if [ $rc != 0 ]; then
    echo "package: lintian found errors (exit $rc)" >&2
    exit 1
fi
echo "package: all packages built, installed in a temporary root, consumed and checked; they are in $out"
