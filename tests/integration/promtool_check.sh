#!/bin/sh
# metrics_promtool: the exposition checked by Prometheus' own tools.
# test_metrics --dump writes the deterministic scenario's texts (tests/unit/test_metrics.c): each Prometheus
# text must pass `promtool check metrics` (its parser and its linter) with nothing to say, and each
# OpenMetrics text must load with `promtool tsdb create-blocks-from openmetrics` (Prometheus' OpenMetrics
# parser; backfilling needs a timestamp on every sample, so one is appended first).
# Usage: promtool_check.sh TEST_METRICS_BINARY
# Fails (never skips) when promtool is missing.
set -eu
bin=$1
if ! command -v promtool >/dev/null 2>&1; then
    echo "metrics_promtool: promtool not found: install Debian's 'prometheus' package (apt-get install prometheus," >&2
    echo "or run 'sh scripts/deps.sh --all' as root)" >&2
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
"$bin" --dump "$tmp"
echo "promtool: $(promtool --version 2>&1 | head -n 1)"
bad=0
n=0
for f in "$tmp"/*.prom; do
    n=$((n + 1))
    if out=$(promtool check metrics <"$f" 2>&1) && [ -z "$out" ]; then
        echo "ok   promtool check metrics < $(basename "$f") ($(grep -vc '^#' "$f") samples)"
    else
        echo "FAIL promtool check metrics < $(basename "$f"):" >&2
        echo "$out" >&2
        bad=1
    fi
done
for f in "$tmp"/*.om; do
    n=$((n + 1))
    sed '/^#/!s/$/ 1700000000/' "$f" >"$f.ts"
    if out=$(promtool tsdb create-blocks-from openmetrics --quiet "$f.ts" "$tmp/blocks-$(basename "$f")" 2>&1); then
        echo "ok   promtool tsdb create-blocks-from openmetrics $(basename "$f") ($(grep -vc '^#' "$f") samples)"
    else
        echo "FAIL promtool tsdb create-blocks-from openmetrics $(basename "$f"):" >&2
        echo "$out" >&2
        bad=1
    fi
done
[ "$n" -ge 5 ] || { echo "metrics_promtool: expected 5 files from --dump, found $n" >&2; exit 1; }
exit $bad
