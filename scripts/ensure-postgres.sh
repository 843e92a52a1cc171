#!/usr/bin/env bash
# Makes sure a PostgreSQL server answers at 127.0.0.1:5432 as user postgres without a password:
# installs it from Debian's packages if it is missing, starts it if it is stopped. Exits non-zero
# (so tests fail rather than skip) when it still cannot be reached.
set -euo pipefail
url="postgres://postgres@127.0.0.1:5432/postgres"
ready() { command -v psql >/dev/null && psql "$url" -Atqc "select 1" >/dev/null 2>&1; }
ready && exit 0

if ! command -v pg_ctlcluster >/dev/null; then
  echo "PostgreSQL is not installed; installing it from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q && apt-get install -y -q postgresql postgresql-client
fi
version=$(ls /etc/postgresql | sort -V | tail -n 1)
conf="/etc/postgresql/$version/main"
# Trust local TCP connections, as the test machines are set up.
if ! grep -qE '^host\s+all\s+all\s+127\.0\.0\.1/32\s+trust' "$conf/pg_hba.conf"; then
  sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$conf/pg_hba.conf"
fi
pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null ||
  pg_ctlcluster --skip-systemctl-redirect "$version" main reload 2>/dev/null || true
for _ in $(seq 1 30); do ready && exit 0; sleep 1; done
echo "PostgreSQL does not answer at $url" >&2
exit 1
