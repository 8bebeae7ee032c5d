#!/bin/sh
# integration_prometheus: a real Prometheus scrapes a breaker through bw_metrics_serve.
#
# metrics_exporter (tests/integration/metrics_exporter.c) serves one breaker, "checkout", on 127.0.0.1 and
# runs its scenario phase by phase when told to on a FIFO: closed (20 successes), open (failures until it
# trips, then 7 rejections), recover (the 1 s wait, 2 probes: CLOSED). A Prometheus of our own, on
# loopback with its own config and data in a temporary directory, scrapes it every second. After each
# phase the test waits (bounded) until Prometheus has stored the phase, and at the end compares every
# series the breaker's own counters say (the exporter writes them, as "SELECTOR VALUE" lines) with what
# Prometheus' HTTP API returns, plus the history: the state was open during the open phase, the target was
# up with no scrape error. Prometheus 2.42 asks for OpenMetrics first, so that is the format it must have
# parsed, and the test checks that it did: the metadata Prometheus keeps per target is what its parser read,
# and only the OpenMetrics parser reads "# UNIT" lines and names a counter family without "_total", so
# breakwater_call_duration_seconds has unit "seconds" and breakwater_calls is a counter there only when the
# server's negotiation gave OpenMetrics (the Prometheus text would give no unit, and breakwater_calls_total).
# Usage: prometheus_scrape.sh METRICS_EXPORTER_BINARY
# Fails (never skips) when prometheus or curl is missing.
set -eu
exporter=$1

need=""
command -v prometheus >/dev/null 2>&1 || need="$need prometheus"
command -v curl >/dev/null 2>&1 || need="$need curl"
if [ -n "$need" ]; then
    echo "integration_prometheus: missing:$need — install it (apt-get install$need, or run 'sh scripts/deps.sh --all' as root)" >&2
    exit 1
fi

tmp=$(mktemp -d)
exp_pid=""
prom_pid=""
cleanup() {
    exec 3>&- 2>/dev/null || true
    if [ -n "$prom_pid" ]; then
        kill "$prom_pid" 2>/dev/null || true
        wait "$prom_pid" 2>/dev/null || true
    fi
    if [ -n "$exp_pid" ]; then
        kill "$exp_pid" 2>/dev/null || true
        wait "$exp_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

now() { date +%s; }

fail() {
    echo "integration_prometheus: FAIL: $*" >&2
    echo "---- exporter output" >&2
    cat "$tmp/exporter.log" >&2 2>/dev/null || true
    echo "---- prometheus log (last 30 lines)" >&2
    tail -n 30 "$tmp/prometheus.log" >&2 2>/dev/null || true
    exit 1
}

# ---- the exporter ----
mkfifo "$tmp/ctl"
"$exporter" "$tmp" <"$tmp/ctl" >"$tmp/exporter.log" 2>&1 &
exp_pid=$!
exec 3>"$tmp/ctl"
deadline=$(($(now) + 10))
while [ ! -s "$tmp/port" ]; do
    kill -0 "$exp_pid" 2>/dev/null || fail "the exporter exited before it listened"
    [ "$(now)" -lt "$deadline" ] || fail "the exporter did not listen within 10 s"
    sleep 0.1
done
eport=$(cat "$tmp/port")
echo "exporter: bw_metrics_serve on 127.0.0.1:$eport"

# ---- Prometheus ----
cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: breakwater
    static_configs:
      - targets: ['127.0.0.1:$eport']
EOF
pport=""
for attempt in 1 2 3; do
    pport=$("$exporter" --free-port)
    prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
        --web.listen-address="127.0.0.1:$pport" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
    prom_pid=$!
    deadline=$(($(now) + 20))
    ready=0
    while [ "$(now)" -lt "$deadline" ]; do
        if ! kill -0 "$prom_pid" 2>/dev/null; then
            wait "$prom_pid" 2>/dev/null || true
            prom_pid=""
            break
        fi
        if curl -sf "http://127.0.0.1:$pport/-/ready" >/dev/null 2>&1; then
            ready=1
            break
        fi
        sleep 0.2
    done
    [ "$ready" = 1 ] && break
    echo "prometheus did not start on 127.0.0.1:$pport (attempt $attempt)" >&2
    if [ -n "$prom_pid" ]; then
        kill "$prom_pid" 2>/dev/null || true
        wait "$prom_pid" 2>/dev/null || true
        prom_pid=""
    fi
done
[ -n "$prom_pid" ] || fail "prometheus did not start"
echo "prometheus: $(prometheus --version 2>&1 | head -n 1) on 127.0.0.1:$pport, scraping every 1s"

# q QUERY: the value of an instant query with one result ("" when none).
q() {
    curl -sfG "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1" 2>/dev/null |
        sed -n 's/.*"value":\[[^],]*,"\([^"]*\)"\].*/\1/p'
}

# wait_value QUERY VALUE SECONDS: poll until Prometheus answers VALUE.
wait_value() {
    deadline=$(($(now) + $3))
    while :; do
        got=$(q "$1")
        [ "$got" = "$2" ] && return 0
        [ "$(now)" -lt "$deadline" ] || fail "after $3 s Prometheus says $1 = '${got}', want $2"
        sleep 0.2
    done
}

# phase NAME: run it in the exporter and wait for its counters.
phase() {
    echo "$1" >&3
    deadline=$(($(now) + 15))
    while [ ! -s "$tmp/$1.counters" ]; do
        kill -0 "$exp_pid" 2>/dev/null || fail "the exporter exited during phase $1"
        [ "$(now)" -lt "$deadline" ] || fail "phase $1 did not finish within 15 s"
        sleep 0.1
    done
}

# expect_phase NAME: every series of the phase's counters file, as Prometheus has it (polled: the next scrape).
expect_phase() {
    while read -r series want; do
        wait_value "$series" "$want" 10
    done <"$tmp/$1.counters"
}

# value PHASE SELECTOR: what the breaker counted
value() { awk -v s="$2" '$1 == s { print $2 }' "$tmp/$1.counters"; }

sel='{name="checkout"'

# show SELECTOR PHASE: "what Prometheus has (what the breaker counted)"
show() { echo "$(q "$1") (breaker: $(value "$2" "$1"))"; }

phase closed
expect_phase closed
echo "phase closed:  all $(wc -l <"$tmp/closed.counters") series match; calls_total success $(show "breakwater_calls_total$sel,kind=\"success\"}" closed)"

phase open
expect_phase open
echo "phase open:    all $(wc -l <"$tmp/open.counters") series match; state open $(show "breakwater_state$sel,state=\"open\"}" open)," \
    "rejected_total open $(show "breakwater_rejected_total$sel,state=\"open\"}" open)," \
    "calls_total failure $(show "breakwater_calls_total$sel,kind=\"failure\"}" open)"

phase recover
expect_phase recover
echo "phase recover: all $(wc -l <"$tmp/recover.counters") series match; state closed $(show "breakwater_state$sel,state=\"closed\"}" recover)," \
    "probe_rounds passed $(show "breakwater_probe_rounds_total$sel,result=\"passed\"}" recover)"

# ---- the final comparison, series by series ----
echo
printf '%-92s %8s %10s\n' "series" "breaker" "prometheus"
bad=0
while read -r s want; do
    got=$(q "$s")
    mark=""
    [ "$got" = "$want" ] || { mark="  <-- differs"; bad=1; }
    printf '%-92s %8s %10s%s\n' "$s" "$want" "$got" "$mark"
done <"$tmp/recover.counters"

# ---- the history Prometheus stored ----
check() { # LABEL QUERY WANT
    got=$(q "$2")
    mark=""
    [ "$got" = "$3" ] || { mark="  <-- want $3"; bad=1; }
    printf '%-92s %19s%s\n' "$1: $2" "$got" "$mark"
}
echo
check "open during the open phase" "max_over_time(breakwater_state$sel,state=\"open\"}[5m])" 1
check "closed again now" "breakwater_state$sel,state=\"closed\"}" 1
check "trips" "breakwater_transitions_total$sel,from=\"closed\",to=\"open\"}" 1
check "scrapes succeeded" "min_over_time(up{job=\"breakwater\"}[5m])" 1
check "histogram count = calls settled" "breakwater_call_duration_seconds_count$sel}" \
    "$(value recover "breakwater_call_duration_seconds_count$sel}")"
# meta METRIC: the target metadata Prometheus holds for METRIC (JSON).
meta() { curl -sfG "http://127.0.0.1:$pport/api/v1/targets/metadata" --data-urlencode "metric=$1" 2>/dev/null || true; }
m_hist=$(meta breakwater_call_duration_seconds)
m_calls=$(meta breakwater_calls)
m_calls_total=$(meta breakwater_calls_total)
case $m_hist in
*'"type":"histogram"'*'"unit":"seconds"'* | *'"unit":"seconds"'*'"type":"histogram"'*)
    case $m_calls in
    *'"type":"counter"'*) om=1 ;;
    *) om=0 ;;
    esac
    ;;
*) om=0 ;;
esac
case $m_calls_total in *'"type":"counter"'*) om=0 ;; esac
if [ "$om" = 1 ]; then
    echo "format: OpenMetrics (Prometheus' metadata: breakwater_call_duration_seconds unit \"seconds\"," \
        "breakwater_calls a counter)"
else
    echo "format: not OpenMetrics. Prometheus' metadata:"
    echo "  breakwater_call_duration_seconds: $m_hist"
    echo "  breakwater_calls: $m_calls"
    echo "  breakwater_calls_total: $m_calls_total"
    bad=1
fi
targets=$(curl -sf "http://127.0.0.1:$pport/api/v1/targets" || true)
case $targets in
*'"health":"up"'*'"lastError":""'* | *'"lastError":""'*'"health":"up"'*) echo "target: health up, lastError \"\"" ;;
*)
    echo "target: not healthy: $targets"
    bad=1
    ;;
esac

[ "$bad" = 0 ] || fail "Prometheus' numbers differ from the breaker's, or it did not parse OpenMetrics (above)"
echo
echo "integration_prometheus: Prometheus stored exactly what the breaker counted, in every phase"
