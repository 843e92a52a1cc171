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
cleanup() { stop_vow; rm -rf "$work"; }
trap cleanup EXIT
. scripts/serve-lib.sh

run_against() { # $1 = label, $2 = database url, rest = extra serve args
  local label=$1 url=$2; shift 2
  start_vow "$label" "$url" sdk-test-token "$@"
  echo "-- Svix SDK against vow on $label"
  VOW_URL="http://127.0.0.1:$port" VOW_TOKEN="sdk-test-token" "$venv/bin/python" tests/sdk/svix_roundtrip.py ||
    { cat "$work/$label.log"; exit 1; }
  stop_vow
}

run_against sqlite "sqlite://$work/vow.db"

pg="${VOW_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
db="vow_test_sdk_$$"
psql "$pg" -qc "create database $db" >/dev/null
run_against postgres "${pg%/*}/$db" --migrate
psql "$pg" -qc "drop database $db" >/dev/null
