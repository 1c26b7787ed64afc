#!/usr/bin/env bash
# Installs, with apt, whatever the build, the tests and the benchmarks need and this
# machine does not have yet; with arguments, those packages instead (the Makefile's
# bench, fuzz, format, lint and docs targets name theirs). Idempotent: a machine that
# has everything runs no apt. Works as root (a fresh Debian 12 image) or through sudo.
set -euo pipefail

packages=(
  g++ make cmake ninja-build pkg-config curl
  libcaf-dev libsqlitecpp-dev libsqlite3-dev nlohmann-json3-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev
  libpq-dev postgresql
  libssl-dev  # libcrypto: HMAC-SHA256 of the commit notes
  util-linux  # setpriv: a test runs beehive-ctl as another user when run as root
)
if [ $# -gt 0 ]; then
  packages=("$@")
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "install-deps: need root or sudo to install: ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
