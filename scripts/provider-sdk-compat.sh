#!/usr/bin/env bash
# Proves that what the providers' official SDKs sign is what vow accepts, and what they sign turned
# bad is what it refuses: installs the pinned SDKs (npm `stripe`, `@octokit/webhooks-methods` and
# `standardwebhooks`; PyPI `svix`, `standardwebhooks` and `stripe`), starts `vow serve` on SQLite,
# then on a fresh PostgreSQL database, and runs tests/provider-sdk/ against each.
set -euo pipefail
cd "$(dirname "$0")/.."
suite=tests/provider-sdk

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ]; then
  echo "provider-sdk-compat: Node.js 20 or later is needed (found: $(node --version 2>&1))" >&2
  exit 1
fi
npm ci --prefix "$suite" --no-audit --no-fund --loglevel=error

venv="${VOW_TEST_PROVIDER_SDK_VENV:-target/provider-sdk-venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check -r "$suite/requirements.txt"
python=$(cd "$venv" && pwd)/bin/python

cargo build -q -p vow-server --bin vow --locked
vow="${CARGO_TARGET_DIR:-$PWD/target}/debug/vow"  # where the cargo build above put it

pg="${VOW_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
[ -n "${VOW_TEST_DATABASE_URL:-}" ] || scripts/ensure-postgres.sh
db="vow_test_provider_sdk_$$"
work=$(mktemp -d)
pid=""
created=""
cleanup() {
  stop_vow
  if [ -n "$created" ]; then psql "$pg" -qc "drop database if exists $db" >/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

. scripts/serve-lib.sh

run_against() { # $1 = label, $2 = database url, rest = extra serve args
  local label=$1 url=$2; shift 2
  start_vow "$label" "$url" provider-sdk-test-token "$@"
  echo "-- providers' official SDKs against vow on $label"
  VOW_URL="http://127.0.0.1:$port" VOW_TOKEN="provider-sdk-test-token" \
    VOW_TEST_PYTHON="$python" \
    node --test --test-reporter=spec "$suite/provider-sdk.test.mjs" ||
    { echo "provider-sdk-compat: the suite failed on $label; vow's log:" >&2; cat "$work/$label.log" >&2; exit 1; }
  stop_vow
}

run_against sqlite "sqlite://$work/vow.db"

psql "$pg" -qc "create database $db" >/dev/null
created=1
run_against postgres "${pg%/*}/$db" --migrate
