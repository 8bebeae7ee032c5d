#!/bin/sh
# Install what the build and tests need, from Debian's packages, when it is
# missing. Installs only when run as root; otherwise it says what is missing.
set -eu
need=""
command -v cmake >/dev/null 2>&1 || need="$need cmake"
command -v cc >/dev/null 2>&1 || need="$need gcc libc6-dev"
# The C++ API's tests and benchmarks (a build with tests or benchmarks enables C++).
command -v c++ >/dev/null 2>&1 || need="$need g++"
command -v make >/dev/null 2>&1 || need="$need make"
command -v nm >/dev/null 2>&1 || need="$need binutils"
# Optional components: the sqlite: store builds when SQLite's headers are here.
[ -e /usr/include/sqlite3.h ] || need="$need libsqlite3-dev"
# The /metrics server (bw_metrics_serve) builds when pkg-config finds libmicrohttpd.
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
[ -e /usr/include/microhttpd.h ] || need="$need libmicrohttpd-dev"
# The redis: store builds when hiredis's headers are here.
[ -e /usr/include/hiredis/hiredis.h ] || need="$need libhiredis-dev"
# The libcurl integration (curl.h) builds when libcurl's headers are here.
[ -n "$(find /usr/include -maxdepth 3 -path '*/curl/curl.h' 2>/dev/null | head -n 1)" ] || need="$need libcurl4-openssl-dev"
# The postgresql: store builds when libpq's headers are here.
[ -e /usr/include/postgresql/libpq-fe.h ] || need="$need libpq-dev"
if [ "${1:-}" = "--all" ]; then
    command -v clang-format >/dev/null 2>&1 || need="$need clang-format"
    # The C++ API's tests are compiled by clang++ too (tests/CMakeLists.txt; they fail without it).
    command -v clang++ >/dev/null 2>&1 || need="$need clang"
    # The exposition's tests: promtool lints the text, a real Prometheus scrapes it, curl asks it what it stored.
    { command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; } || need="$need prometheus"
    command -v curl >/dev/null 2>&1 || need="$need curl"
    # The breakwater command's tests (tests/cli/) read its JSON lines with python3's json module.
    command -v python3 >/dev/null 2>&1 || need="$need python3"
    # The redis: store's tests run on a redis-server of their own (tests/support/with_redis.sh).
    { command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; } || need="$need redis-server"
    # The postgresql: store's tests run on a server of their own (tests/support/with_postgres.sh: initdb,
    # pg_ctl, postgres and psql from /usr/lib/postgresql/VERSION/bin, and pg_stat_statements, which Debian's
    # postgresql ships).
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need="$need postgresql"
    # The ABI check (scripts/abi_check.sh) compares the libraries with abi/ through libabigail.
    { command -v abidw >/dev/null 2>&1 && command -v abidiff >/dev/null 2>&1; } || need="$need abigail-tools"
fi
# The Debian packages (scripts/package_check.sh): debhelper, dpkg-dev and lintian; git lists the files to package.
if [ "${1:-}" = "--all" ] || [ "${1:-}" = "--package" ]; then
    { command -v dh >/dev/null 2>&1 && command -v dpkg-buildpackage >/dev/null 2>&1; } || need="$need debhelper dpkg-dev"
    # dpkg-buildpackage checks the build dependencies, build-essential among them.
    dpkg -s build-essential >/dev/null 2>&1 || need="$need build-essential"
    command -v lintian >/dev/null 2>&1 || need="$need lintian"
    command -v git >/dev/null 2>&1 || need="$need git"
fi
# make bench-ir counts instructions under valgrind (its callgrind.h comes with it).
if [ "${1:-}" = "--bench-ir" ]; then
    { command -v valgrind >/dev/null 2>&1 && [ -e /usr/include/valgrind/callgrind.h ]; } || need="$need valgrind"
fi
[ -z "$need" ] && exit 0
if [ "$(id -u)" = 0 ]; then
    echo "deps: installing$need"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $need
else
    echo "deps: missing$need (run as root, or install them: apt-get install$need)" >&2
    exit 1
fi
