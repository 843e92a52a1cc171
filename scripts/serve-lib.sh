# Sourced by the SDK checks: start `vow serve` on a free port and wait until it answers.
# Needs $vow (the binary) and $work (a scratch folder); sets $pid and $port.

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_vow LABEL DATABASE_URL TOKEN [serve args...]: vow's log goes to $work/LABEL.log; exits
# with that log when vow does not come up within 10 s. (vow ignores VOW_TEST_* variables; every
# other VOW_* must be a setting. Loopback is allowed so a script's own receiver gets deliveries.)
start_vow() {
  local label=$1 url=$2 token=$3; shift 3
  port=$(free_port)
  VOW_LISTEN="127.0.0.1:$port" VOW_DATABASE_URL="$url" VOW_ADMIN_TOKEN="$token" \
    VOW_ALLOWED_SUBNETS=127.0.0.0/8 \
    "$vow" serve "$@" >"$work/$label.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$port/api/v1/health" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "vow did not start on $label; its log:" >&2
  cat "$work/$label.log" >&2
  exit 1
}

# stop_vow: stops the vow start_vow started.
stop_vow() {
  if [ -n "${pid:-}" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  pid=""
}
