#!/bin/sh
# cli_demo.sh — the breakwater command's main job, narrated by its own output:
# a flaky dependency called by several processes at once, each a separate
# `breakwater run` sharing one circuit in a SQLite file (the default store,
# here under a temporary XDG_STATE_HOME). Watch it trip, reject in a few
# milliseconds without running anything, probe with exactly its probe budget,
# and close.
#
# Usage: sh examples/cli_demo.sh path/to/breakwater      (make demo builds and runs it)
set -eu
BW=${1:-build/breakwater}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/breakwater-demo.XXXXXX")
trap 'rm -rf "$DIR"; [ -n "${SHM:-}" ] && rm -f "/dev/shm/$SHM"' EXIT
trap 'exit 1' INT TERM
export XDG_STATE_HOME="$DIR" # the default store: sqlite:$XDG_STATE_HOME/breakwater/circuits.db
unset BREAKWATER_STORE BREAKWATER_CONFIG
if ! "$BW" --version | grep -q sqlite; then # a build without SQLite: a shm: segment of the demo's own
    SHM="breakwater-demo-$$"
    export BREAKWATER_STORE="shm:$SHM"
fi
# payments: open at a failure rate of 50 % over the last 8 runs (from 4 on), for 2 s; then 2 probes decide.
export BREAKWATER_CONFIG="$DIR/payments.conf"
cat >"$BREAKWATER_CONFIG" <<'EOF'
failure_rate=0.5 window=count:8 min_calls=4
wait=2s permitted_probes=2 max_concurrent_probes=2
EOF

# The dependency: a command that fails while $DIR/down exists.
cat >"$DIR/charge" <<EOF
#!/bin/sh
sleep 0.2
if [ -e "$DIR/down" ]; then echo "charge: connection refused" >&2; exit 1; fi
echo "charge: ok"
EOF
chmod +x "$DIR/charge"

if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then BOLD=$(printf '\033[1m') PLAIN=$(printf '\033[0m'); else BOLD= PLAIN=; fi
say() { printf '\n%s== %s%s\n' "$BOLD" "$*" "$PLAIN"; }
# Worker i: one guarded call; the tool's own stderr, minus the admission lines, prefixed with the worker.
worker() {
    "$BW" -v run payments -- "$DIR/charge" 2>&1 | grep -v "admitted the call" | sed "s/^/  worker $1: /" || true
}
# Several workers at once, each its own process.
crowd() {
    i=1
    while [ "$i" -le "$1" ]; do
        worker "$i" &
        i=$((i + 1))
    done
    wait
}

echo "breakwater demo: $("$BW" --version | head -n 1); circuit 'payments' in ${BREAKWATER_STORE:-sqlite:$DIR/breakwater/circuits.db}"
say "1. The dependency is healthy: 4 processes call it at once, twice"
crowd 4
crowd 4
"$BW" status payments --table

say "2. It goes down: the failures trip the circuit, shared by every process"
touch "$DIR/down"
crowd 4
crowd 4
"$BW" status payments --table

say "3. While it is open, calls are rejected at once: nothing runs (exit 75)"
"$BW" run payments -- "$DIR/charge" 2>&1 | sed 's/^/  /'
t0=$(date +%s%N)
"$BW" run payments -- "$DIR/charge" 2>/dev/null || echo "  exit status $?"
t1=$(date +%s%N)
echo "  that rejection took $(((t1 - t0) / 1000000)) ms, with no call to the dependency"
crowd 3

say "4. The dependency recovers; after the 2 s wait, 6 processes arrive: exactly 2 run as probes"
rm -f "$DIR/down"
sleep 2.2
crowd 6
"$BW" status payments --table

say "5. Closed again: calls flow"
crowd 2
"$BW" status payments --json
echo
echo "(the same from cron, CI or any shell: breakwater run NAME -- CMD; see docs/cli.md)"
