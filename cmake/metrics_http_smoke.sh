#!/bin/sh
# Smoke test of examples/metrics_http (ctest: example_metrics_http): runs it on a free
# port for a few seconds, fetches /metrics once with curl, checks the exposition and that
# the example then exits cleanly.
#   metrics_http_smoke.sh <metrics_http executable> <curl>
set -u
exe=$1
curl=$2
rm -f port.txt
"$exe" --port 0 --serve-for 5 --port-file port.txt &
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
expect() {
  printf '%s\n' "$out" | grep -q "$1" || { echo "missing: $1"; exit 1; }
}
expect '^# TYPE controller_runtime_reconcile_total counter$'
expect '^controller_runtime_reconcile_total{controller="Job.demo.example.com",result="success"} 3$'
expect '^controller_runtime_reconcile_total{controller="Job.demo.example.com",result="error"} 1$'
expect '^workqueue_retries_total{name="Job.demo.example.com"} 1$'
expect '^beehive_objects{kind="Job.demo.example.com"} 3$'
expect '^beehive_commit_seconds_bucket{le="+Inf"} '
echo "metrics_http smoke test passed"
