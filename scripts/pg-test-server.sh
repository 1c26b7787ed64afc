#!/usr/bin/env bash
# A throwaway PostgreSQL server for the test suite (CTest's `postgres` fixture runs it).
#
#   pg-test-server.sh start DIR     init a fresh cluster under DIR, start it, create the
#                                   database beehive_test; prints the conninfo and writes
#                                   it to DIR/conninfo
#   pg-test-server.sh stop DIR      stop it (fast) and remove its data
#   pg-test-server.sh crash DIR     stop it as a crash would (immediate: no checkpoint,
#                                   every session cut), keeping its data
#   pg-test-server.sh restart DIR   start the cluster under DIR again (after a crash, it
#                                   recovers from its write-ahead log first)
#   pg-test-server.sh conninfo DIR  print the conninfo `start` will use (starts nothing;
#                                   CMake asks it at configure time)
#
# The server listens on a Unix socket only (listen_addresses=''), so the fixed port only
# names the socket (.s.PGSQL.PORT) and never clashes with another server's TCP port. The
# socket lives in the server's directory (socket/) unless that path is too long for
# sun_path (107 bytes): then in /tmp/beehive-pg-<hash of DIR>. Durability is off (fsync=off): the data is thrown
# away anyway; synchronous_commit stays on so that commits behave as in production.
#
# initdb refuses to run as root: as root, the server runs as the `postgres` system user
# (Debian's package creates it) and DIR is handed to it; when that user cannot reach DIR
# (a checkout under /root), the server's files go to /tmp/beehive-pg-<hash of DIR>
# instead, and DIR keeps only the conninfo. Authentication is trust for
# local connections, and the superuser role is `postgres` whoever runs the script.
#
# Environment: BEEHIVE_PG_PORT (default 55432), PG_BINDIR (the server binaries;
# default: pg_config --bindir, else the newest /usr/lib/postgresql/*/bin).
set -euo pipefail

readonly PORT="${BEEHIVE_PG_PORT:-55432}"
readonly DBNAME=beehive_test
readonly SUPERUSER=postgres

die() {
  echo "pg-test-server: $*" >&2
  exit 1
}

usage() {
  echo "usage: $0 start|stop|crash|restart|conninfo DIR" >&2
  exit 2
}

[ $# -eq 2 ] || usage
cmd="$1"
dir_arg="$2"
[ -n "$dir_arg" ] || usage

# The directory, absolute (it need not exist yet for `conninfo`).
case "$dir_arg" in
  /*) DIR="$dir_arg" ;;
  *) DIR="$PWD/$dir_arg" ;;
esac
DIR="${DIR%/}"

as_root=false
[ "$(id -u)" -eq 0 ] && as_root=true

# A directory of our own under /tmp, named after DIR.
TMPHOME="/tmp/beehive-pg-$(printf '%s' "$DIR" | sha256sum | cut -c1-16)"
readonly TMPHOME

# Where the server's files live: DIR, unless we are root and the postgres user cannot
# reach it (a checkout under /root, whose mode is 0700): then TMPHOME. Decided the same
# way before DIR exists (conninfo at configure time) and after: by the nearest existing
# directory on its path.
server_home() {
  if $as_root && id -u "$SUPERUSER" >/dev/null 2>&1; then
    local d="$DIR"
    while [ ! -e "$d" ]; do d="$(dirname "$d")"; done
    if ! runuser -u "$SUPERUSER" -- test -x "$d" 2>/dev/null; then
      echo "$TMPHOME"
      return
    fi
  fi
  echo "$DIR"
}
SERVER_HOME="$(server_home)"
readonly SERVER_HOME
readonly DATA="$SERVER_HOME/data"
readonly LOG="$SERVER_HOME/server.log"

# The socket directory: SERVER_HOME/socket when its socket path fits in sun_path.
socket_dir() {
  local candidate="$SERVER_HOME/socket"
  if [ $((${#candidate} + ${#PORT} + 10)) -lt 107 ]; then
    echo "$candidate"
  else
    echo "$TMPHOME"
  fi
}
SOCKDIR="$(socket_dir)"
readonly SOCKDIR
readonly CONNINFO="host=$SOCKDIR port=$PORT dbname=$DBNAME user=$SUPERUSER"

# The server binaries' directory (initdb, pg_ctl, postgres, pg_isready, psql).
find_bindir() {
  local candidates=()
  [ -n "${PG_BINDIR:-}" ] && candidates+=("$PG_BINDIR")
  if command -v pg_config >/dev/null 2>&1; then
    candidates+=("$(pg_config --bindir 2>/dev/null || true)")
  fi
  local d
  # Newest major version first.
  while IFS= read -r d; do candidates+=("$d"); done < <(
    ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5,5nr)
  for d in "${candidates[@]}"; do
    if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/pg_isready" ]; then
      echo "$d"
      return 0
    fi
  done
  return 1
}

# Runs a command as the server's owner: the postgres user when we are root.
as_owner() {
  if $as_root; then
    runuser -u "$SUPERUSER" -- "$@"
  else
    "$@"
  fi
}

# Stops a server still running on DATA (left by an interrupted run); never fails.
stop_server() {
  if [ -f "$DATA/postmaster.pid" ] && [ -n "${BIN:-}" ]; then
    (cd / && as_owner "$BIN/pg_ctl" -D "$DATA" stop -m fast -w -t 30 >/dev/null 2>&1) ||
      (cd / && as_owner "$BIN/pg_ctl" -D "$DATA" stop -m immediate -w -t 30 >/dev/null 2>&1) ||
      true
  fi
}

cmd_conninfo() {
  echo "$CONNINFO"
}

cmd_start() {
  BIN="$(find_bindir)" ||
    die "PostgreSQL server binaries (initdb, pg_ctl) not found:" \
      "install postgresql (scripts/install-deps.sh), or set PG_BINDIR"
  if $as_root && ! id -u "$SUPERUSER" >/dev/null 2>&1; then
    die "running as root, but there is no '$SUPERUSER' system user to run the server as:" \
      "install postgresql (scripts/install-deps.sh)"
  fi

  mkdir -p "$DIR"
  stop_server
  rm -rf "$DATA" "$LOG" "$DIR/conninfo"
  if [ "$SERVER_HOME" = "$TMPHOME" ] || [ "$SOCKDIR" = "$TMPHOME" ]; then
    # Made afresh, by us: a name anyone could guess, which another user may have made
    # first (with a link in it, for root to write through).
    rm -rf "$TMPHOME"
    mkdir -m 0755 "$TMPHOME" || die "cannot make $TMPHOME"
    [ -d "$TMPHOME" ] && [ ! -L "$TMPHOME" ] && [ "$(stat -c %u "$TMPHOME")" = "$(id -u)" ] ||
      die "$TMPHOME is not a directory of ours"
  fi
  mkdir -p "$SERVER_HOME" "$DATA" "$SOCKDIR"
  chmod 700 "$DATA"
  if $as_root; then
    chown -h "$SUPERUSER:" "$SERVER_HOME" "$DATA" "$SOCKDIR"
    as_owner test -w "$DATA" ||
      die "the '$SUPERUSER' user cannot write $DATA (is a parent directory not searchable?)"
  fi

  # Commands run from SERVER_HOME: the postgres user may not be able to enter the
  # caller's cwd.
  cd "$SERVER_HOME"
  if ! as_owner "$BIN/initdb" -D "$DATA" -U "$SUPERUSER" --auth=trust -E UTF8 \
    --locale=C --no-sync >"$SERVER_HOME/initdb.log" 2>&1; then
    cat "$SERVER_HOME/initdb.log" >&2
    die "initdb failed (log above: $SERVER_HOME/initdb.log)"
  fi

  cat >>"$DATA/postgresql.conf" <<EOF

# pg-test-server.sh: a throwaway server for the tests.
listen_addresses = ''
port = $PORT
unix_socket_directories = '$SOCKDIR'
unix_socket_permissions = 0777
max_connections = 300
fsync = off
full_page_writes = off
synchronous_commit = on
EOF

  if ! as_owner "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >/dev/null 2>&1; then
    [ -f "$LOG" ] && tail -n 30 "$LOG" >&2
    die "the server did not start (log: $LOG)"
  fi

  local i
  for i in $(seq 1 60); do
    if "$BIN/pg_isready" -q -h "$SOCKDIR" -p "$PORT" -d postgres -U "$SUPERUSER"; then
      break
    fi
    [ "$i" -eq 60 ] && die "the server is not ready after 30 s (log: $LOG)"
    sleep 0.5
  done

  local psql="$BIN/psql"
  [ -x "$psql" ] || psql="$(command -v psql)" || die "psql not found: install postgresql-client"
  "$psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCKDIR" -p "$PORT" -U "$SUPERUSER" -d postgres \
    -c "CREATE DATABASE $DBNAME OWNER $SUPERUSER" >/dev/null ||
    die "cannot create the database $DBNAME (log: $LOG)"

  echo "$CONNINFO" >"$DIR/conninfo"
  echo "$CONNINFO"
}

cmd_crash() {
  BIN="$(find_bindir)" || die "PostgreSQL server binaries not found"
  cd /
  as_owner "$BIN/pg_ctl" -D "$DATA" stop -m immediate -w -t 30 >/dev/null ||
    die "the server did not stop (log: $LOG)"
}

cmd_restart() {
  BIN="$(find_bindir)" || die "PostgreSQL server binaries not found"
  [ -f "$DIR/conninfo" ] || die "no cluster under $DIR: run start first"
  cd "$SERVER_HOME"
  if ! as_owner "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >/dev/null 2>&1; then
    [ -f "$LOG" ] && tail -n 30 "$LOG" >&2
    die "the server did not start again (log: $LOG)"
  fi
}

cmd_stop() {
  BIN="$(find_bindir)" || BIN=""
  cd /
  stop_server
  rm -rf "$DATA" "$DIR/conninfo"
  # A directory of our own under /tmp goes too (the server removed the socket); the
  # server's logs are kept beside the conninfo's place.
  if [ "$SERVER_HOME" = "$TMPHOME" ] || [ "$SOCKDIR" = "$TMPHOME" ]; then
    if [ "$SERVER_HOME" = "$TMPHOME" ] && [ -d "$DIR" ]; then
      cp -f "$TMPHOME/server.log" "$TMPHOME/initdb.log" "$DIR/" 2>/dev/null || true
    fi
    rm -rf "$TMPHOME"
  else
    rm -rf "$SOCKDIR"
  fi
}

case "$cmd" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  crash) cmd_crash ;;
  restart) cmd_restart ;;
  conninfo) cmd_conninfo ;;
  *) usage ;;
esac
