#!/bin/sh
# Smoke test of examples/metrics_http (ctest: example_metrics_http): runs it with
# --serve-once on a free port, fetches /metrics once with curl and checks the exposition.
#   metrics_http_smoke.sh <metrics_http executable> <curl>
set -u
exe=$1
curl=$2
rm -f port.txt
"$exe" --port 0 --serve-once --port-file port.txt &
pid=$!
tries=0
while [ ! -s port.txt ]; do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "metrics_http exited before listening"
    wait "$pid"
    exit 1
  fi
  tries=$((tries + 1))
  if [ "$tries" -gt 300 ]; then
    echo "metrics_http did not listen within 30 s"
    kill "$pid"
    exit 1
  fi
  sleep 0.1
done
port=$(cat port.txt)
if ! out=$("$curl" -sS --max-time 10 "http://127.0.0.1:$port/metrics"); then
  kill "$pid"
  exit 1
fi
wait "$pid" || { echo "metrics_http failed"; exit 1; }
printf '%s\n' "$out"
printf '%s\n' "$out" | grep -q '^# TYPE beehive_reconcile_total counter$' || exit 1
printf '%s\n' "$out" |
  grep -q '^beehive_reconcile_total{kind="Job.demo.example.com",result="success"} 3$' || exit 1
printf '%s\n' "$out" | grep -q '^beehive_workqueue_retries_total{kind="Job.demo.example.com"} 1$' ||
  exit 1
printf '%s\n' "$out" | grep -q '^beehive_store_write_duration_seconds_bucket{le="+Inf"} ' || exit 1
echo "metrics_http smoke test passed"
