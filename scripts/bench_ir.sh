#!/bin/sh
# make bench-ir: what each hot path costs a call, counted by valgrind's
# callgrind, which counts instructions (and simulates caches) rather than
# timing them, so that the noise of a virtual machine cannot move a figure.
#
# For each path of bench/ir_bench.c: run its measured loop under callgrind
# (collection on around the loop only), subtract the empty loop, divide by the
# iterations, and print
#   BENCH <path>_ir <n> instr
#   BENCH <path>_locks <n> per_call      locked read-modify-writes (lock-prefixed, or xchg with memory)
#   BENCH <path>_rdtsc <n> per_call      rdtsc / rdtscp
#   BENCH <path>_div <n> per_call        integer and floating-point divisions
# and, for the paths that scale over many breakers or keys, with a fixed cache
# geometry (--D1=32768,8,64 --LL=33554432,16,64),
#   BENCH <path>_l1_misses <n> per_call  L1 data misses (reads and writes)
# The binary is linked statically (libc included), so that every executed
# instruction has an address in it; the kinds of instruction come from its
# disassembly (objdump). The cpp_* paths run bench/ir_bench_cpp.cpp's binary
# instead (the C++ API, breakwater.hpp, next to the same paths in C compiled in
# the same C++ file), with its own empty loop subtracted.
# Usage: bench_ir.sh [BUILD_DIR] [PATH...]
set -eu
cd "$(dirname "$0")/.."
build=${1:-build-ir}
[ $# -gt 0 ] && shift
paths=${*:-"closed_success closed_success_nocounters closed_success_noclock closed_failure time_window_failure open_reject half_open_probe keyed_hot pipeline5 stored_shm round_robin_100k keyed_random_100k registry_random_1m cpp_c_closed_success cpp_c_closed_success_why cpp_closed_success cpp_closed_call cpp_closed_call_fallback cpp_c_open_reject cpp_open_reject cpp_open_reject_bool cpp_open_reject_fallback"}

command -v valgrind >/dev/null 2>&1 || { echo "bench-ir: valgrind is missing (apt-get install valgrind)" >&2; exit 1; }
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DBW_BUILD_TESTS=OFF -DBW_BUILD_EXAMPLES=OFF -DBW_WITH_SQLITE=OFF -DBW_WITH_MHD=OFF -DBW_WITH_REDIS=OFF -DBW_WITH_POSTGRES=OFF -DBW_WITH_CURL=OFF >/dev/null
cmake --build "$build" -j"$(nproc 2>/dev/null || echo 2)" --target ir_bench ir_bench_cpp >/dev/null
bin=$build/ir_bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Addresses of the instructions of binary $1 counted by kind: "addr kind" lines, into $2.
kinds() {
objdump -d --no-show-raw-insn "$1" | awk '
    /^ *[0-9a-f]+:\t/ {
        addr = $1; sub(":", "", addr)
        line = $0; sub(/^ *[0-9a-f]+:\t/, "", line)
        if (line ~ /^lock /) print addr, "locks"
        else if (line ~ /^xchg / && line ~ /\(/) print addr, "locks"   # xchg with memory is locked
        else if (line ~ /^rdtscp?( |$)/) print addr, "rdtsc"
        else if (line ~ /^v?(i?div|div[sp][sd])/) print addr, "div"
    }' >"$2"
}
kinds "$build/ir_bench" "$tmp/kinds"
kinds "$build/ir_bench_cpp" "$tmp/kinds_cpp"

# Run path $1 for $2 iterations with extra callgrind options $3 (binary $4, its kinds $5; ir_bench by default);
# print "Ir locks rdtsc div D1miss".
measure() {
    bin=${4:-$build/ir_bench}
    kindfile=${5:-$tmp/kinds}
    out=$tmp/cg.$1.$2.$(basename "$bin")
    # shellcheck disable=SC2086
    valgrind --tool=callgrind --collect-atstart=no --dump-instr=yes --dump-line=no --compress-pos=no \
        --compress-strings=no $3 --callgrind-out-file="$out" "$bin" "$1" "$2" >/dev/null 2>&1 ||
        { echo "bench-ir: $1 failed under callgrind" >&2; exit 1; }
    awk -v kinds="$kindfile" '
        BEGIN { while ((getline l < kinds) > 0) { split(l, f, " "); kind[f[1]] = f[2] } }
        /^events:/ { for (i = 2; i <= NF; i++) col[$i] = i - 1 }
        /^calls=/ { skip = 1; next }          # the next line is a call'"'"'s inclusive cost
        /^0x/ {
            if (skip) { skip = 0; next }
            a = substr($1, 3); sub(/^0+/, "", a)
            ir = $(1 + col["Ir"])
            if (a in kind) n[kind[a]] += ir
            next
        }
        /^summary:/ { for (i = 2; i <= NF; i++) sum[i - 1] = $i }
        END {
            d1 = ("D1mr" in col) ? sum[col["D1mr"]] + sum[col["D1mw"]] : 0
            printf "%d %d %d %d %d\n", sum[col["Ir"]], n["locks"], n["rdtsc"], n["div"], d1
        }' "$out"
}

cache="--cache-sim=yes --I1=32768,8,64 --D1=32768,8,64 --LL=33554432,16,64"
iters=20000
set -- $(measure empty $iters "")
e_ir=$1
set -- $(measure empty $iters "$cache")
e_d1=$5
set -- $(measure empty $iters "" "$build/ir_bench_cpp" "$tmp/kinds_cpp")
e_ir_cpp=$1
echo "# breakwater bench-ir: callgrind, $iters iterations a path, the empty loop subtracted; static -O3 LTO build ($build/ir_bench, $build/ir_bench_cpp)"
for p in $paths; do
    case $p in
    round_robin_100k | keyed_random_100k | registry_random_1m) opts=$cache ;;
    *) opts="" ;;
    esac
    case $p in
    cpp_*) set -- $(measure "$p" $iters "$opts" "$build/ir_bench_cpp" "$tmp/kinds_cpp"); eir=$e_ir_cpp ;;
    *) set -- $(measure "$p" $iters "$opts"); eir=$e_ir ;;
    esac
    awk -v p="$p" -v ir="$1" -v lk="$2" -v ts="$3" -v dv="$4" -v d1="$5" -v eir="$eir" -v ed1="$e_d1" \
        -v n="$iters" -v cache="$opts" 'BEGIN {
            printf "BENCH %s_ir %.0f instr\n", p, (ir - eir) / n
            printf "BENCH %s_locks %.2f per_call\n", p, lk / n
            printf "BENCH %s_rdtsc %.2f per_call\n", p, ts / n
            printf "BENCH %s_div %.2f per_call\n", p, dv / n
            if (cache != "") printf "BENCH %s_l1_misses %.2f per_call\n", p, (d1 - ed1) / n
        }'
done
