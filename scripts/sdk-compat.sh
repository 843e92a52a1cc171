#!/usr/bin/env bash
# Proves the official Svix Python SDK works against vow unchanged: starts `vow serve` on SQLite,
# then on PostgreSQL, and runs tests/sdk/svix_roundtrip.py against each.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${VOW_TEST_SDK_VENV:-target/sdk-venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q -r tests/sdk/requirements.txt

cargo build -q -p vow-server --bin vow --locked
vow="${CARGO_TARGET_DIR:-$PWD/target}/debug/vow"  # where the cargo build above put it
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run_against() { # $1 = label, $2 = database url, rest = extra serve args
  local label=$1 url=$2; shift 2
  local port; port=$(free_port)
  # (vow ignores VOW_TEST_* variables; every other VOW_* must be a setting.)
  # Loopback is allowed so the script's own receiver gets real deliveries.
  VOW_LISTEN="127.0.0.1:$port" VOW_DATABASE_URL="$url" VOW_ADMIN_TOKEN="sdk-test-token" \
    VOW_ALLOWED_SUBNETS=127.0.0.0/8 \
    "$vow" serve "$@" >"$work/$label.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$port/api/v1/health" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/$label.log"; exit 1; }
    sleep 0.1
  done
  echo "-- Svix SDK against vow on $label"
  VOW_URL="http://127.0.0.1:$port" VOW_TOKEN="sdk-test-token" "$venv/bin/python" tests/sdk/svix_roundtrip.py ||
    { cat "$work/$label.log"; exit 1; }
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
}

run_against sqlite "sqlite://$work/vow.db"

pg="${VOW_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
db="vow_test_sdk_$$"
psql "$pg" -qc "create database $db" >/dev/null
run_against postgres "${pg%/*}/$db" --migrate
psql "$pg" -qc "drop database $db" >/dev/null
