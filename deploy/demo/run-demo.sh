#!/usr/bin/env bash
# make demo: a gateway, a connector and the hello-world workflow on loopback.
# Everything lives in a temporary directory and stops with Ctrl-C: the
# connector's storage root and the gateway's store (SQLite), so a demo never
# touches ~/.uncaged.
#
# The port: DEMO_PORT when it is set, and then it must be free: if the
# gateway cannot listen there, the demo stops and shows the end of the
# gateway's log. Without DEMO_PORT it is 8080, or, when something else holds
# 8080, a free port the gateway picks; the demo says which. Either way the
# address comes from our gateway's own log line, so the demo never talks to
# another server that happens to answer on the port.
#
# DEMO_BIN is where the binaries are (default: the repository's bin/, which
# `make demo` builds).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${DEMO_BIN:-$here/../../bin}"
# How long each step may take before the demo gives up on it, in tenths of
# a second: generous, for a loaded machine.
patience=300
work="$(mktemp -d -t uncaged-demo-XXXXXX)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # the engine host the connector started outlives it (threads go on
  # when connect stops): stop it too, and wait until it is gone
  if [ -d "$work/root" ]; then UNCAGED_WORKFLOW_STORAGE_ROOT="$work/root" "$bin/uncaged-workflow" engine stop --force >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# fail says what went wrong, with the end of a log, and stops the demo.
fail() {
  local what="$1" log="${2:-}"
  echo "demo: $what" >&2
  if [ -n "$log" ] && [ -s "$log" ]; then
    echo "--- last lines of $(basename "$log") ---" >&2
    tail -n 20 "$log" >&2
    echo "---" >&2
  fi
  exit 1
}

# start_gateway serves on 127.0.0.1:$1 (0: a port the system picks) and
# sets gateway_pid and, once it listens, address; it returns 1 when the
# gateway exited instead.
start_gateway() {
  : >"$work/gateway.log"
  UNCAGED_GATEWAY_LOG_FORMAT=json "$bin/uncaged-gateway" serve --listen "127.0.0.1:$1" --data-dir "$UNCAGED_GATEWAY_DATA_DIR" 2>"$work/gateway.log" &
  gateway_pid=$!
  address=""
  for _ in $(seq "$patience"); do
    address="$(sed -n 's/.*"msg":"gateway listening","address":"\([^"]*\)".*/\1/p' "$work/gateway.log")"
    [ -n "$address" ] && break
    if ! kill -0 "$gateway_pid" 2>/dev/null; then
      wait "$gateway_pid" 2>/dev/null || true
      return 1
    fi
    sleep 0.1
  done
  [ -n "$address" ] || fail "the gateway did not start listening within $((patience / 10))s" "$work/gateway.log"
  pids+=("$gateway_pid")
}

export UNCAGED_GATEWAY_KEY="$("$bin/uncaged-gateway" key generate)"
export UNCAGED_WORKFLOW_STORAGE_ROOT="$work/root"
# Every gateway command here (token create records its tokens) uses it.
export UNCAGED_GATEWAY_DATA_DIR="$work/gateway"
dashboard_token="$("$bin/uncaged-gateway" token create --dashboard)"
connector_token="$("$bin/uncaged-gateway" token create --connector demo)"

if [ -n "${DEMO_PORT:-}" ]; then
  echo "starting the gateway on 127.0.0.1:$DEMO_PORT (DEMO_PORT) ..."
  start_gateway "$DEMO_PORT" ||
    fail "the gateway could not listen on 127.0.0.1:$DEMO_PORT (DEMO_PORT); free the port or pick another" "$work/gateway.log"
else
  echo "starting the gateway on 127.0.0.1:8080 ..."
  if ! start_gateway 8080; then
    grep -q "address already in use" "$work/gateway.log" ||
      fail "the gateway could not start" "$work/gateway.log"
    echo "port 8080 is taken; listening on a free port instead (DEMO_PORT=<port> picks one)"
    start_gateway 0 || fail "the gateway could not start" "$work/gateway.log"
  fi
fi
port="${address##*:}"
url="http://127.0.0.1:$port"
# The log line says our gateway holds the port; its health says it serves.
for _ in $(seq "$patience"); do
  kill -0 "$gateway_pid" 2>/dev/null || fail "the gateway stopped" "$work/gateway.log"
  curl -fsS "$url/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "$url/healthz" >/dev/null 2>&1 || fail "the gateway at $url does not answer /healthz" "$work/gateway.log"
echo "the gateway is listening on $url"

"$bin/uncaged-workflow" workflow add hello-world "$here/hello-world.esm.js" 2>"$work/add.log" ||
  fail "could not add the hello-world workflow" "$work/add.log"
echo "starting the connector \"demo\" ..."
UNCAGED_WORKFLOW_TOKEN="$connector_token" "$bin/uncaged-workflow" connect --name demo --gateway "$url" 2>"$work/connector.log" &
pids+=($!)
online=""
for _ in $(seq "$patience"); do
  if curl -fsS -H "Authorization: Bearer $dashboard_token" "$url/api/gateway/endpoints" 2>/dev/null | grep -q '"online"'; then
    online=1
    break
  fi
  sleep 0.1
done
[ -n "$online" ] || fail "the connector did not come online within $((patience / 10))s" "$work/connector.log"

thread="$("$bin/uncaged-workflow" run hello-world --prompt "demo")"
cat <<INFO

  dashboard  $url/#token=$dashboard_token
             (one click logs in: the dashboard keeps the token and removes
             it from the address bar)
  token      $dashboard_token

  machines   curl -H "Authorization: Bearer \$TOKEN" $url/api/gateway/endpoints
  threads    curl -H "Authorization: Bearer \$TOKEN" $url/api/clients/demo/threads
  live       curl -N -H "Authorization: Bearer \$TOKEN" $url/api/clients/demo/threads/$thread/live

  gateway    store $UNCAGED_GATEWAY_DATA_DIR/gateway.db (SQLite), log $work/gateway.log
  connector  storage root $UNCAGED_WORKFLOW_STORAGE_ROOT, log $work/connector.log
             threads run in its engine host, log $UNCAGED_WORKFLOW_STORAGE_ROOT/logs/engine.log
             (all of $work is removed when the demo stops)

  a hello-world thread ($thread) is running; watching it here. Ctrl-C stops everything.

INFO
"$bin/uncaged-workflow" live "$thread"
echo
echo "the gateway and the connector keep running; Ctrl-C to stop."
wait
