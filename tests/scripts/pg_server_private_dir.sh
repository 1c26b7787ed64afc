#!/usr/bin/env bash
# The test server script (scripts/pg-test-server.sh) in a build tree that only its owner
# may enter, as a checkout under /root (mode 0700) is: it starts, serves, survives a
# crash and stops, with the conninfo CMake reads at configure time. Run as root, this is
# the case where the server's own user cannot reach the tree; run as anyone else, the
# tree is the caller's own.
#
# usage: pg_server_private_dir.sh SCRIPT
set -euo pipefail

script="$1"
top="$(mktemp -d)"
chmod 700 "$top"
dir="$top/checkout/build/pg-test-server"
# A port of its own: the suite's server may be running beside it.
export BEEHIVE_PG_PORT=55433
trap 'bash "$script" stop "$dir" >/dev/null 2>&1 || true; rm -rf "$top"' EXIT

fail() {
  echo "pg_server_private_dir: $*" >&2
  exit 1
}

mkdir -p "$top/checkout/build"  # what CMake has made when it asks for the conninfo
configured="$(bash "$script" conninfo "$dir")"
started="$(bash "$script" start "$dir")"
[ "$configured" = "$started" ] ||
  fail "the conninfo asked at configure time ($configured) is not the one started ($started)"
[ "$(psql "$started" -XAtc 'SELECT 1')" = 1 ] || fail "the server does not answer"
bash "$script" crash "$dir"
bash "$script" restart "$dir"
[ "$(psql "$started" -XAtc 'SELECT 2')" = 2 ] || fail "the server does not answer after a restart"
bash "$script" stop "$dir"
if psql "$started" -XAtc 'SELECT 3' >/dev/null 2>&1; then fail "the server still runs after stop"; fi
echo "ok"
