#!/usr/bin/env bash
# make demo: a gateway, a connector and the hello-world workflow on loopback.
# Everything lives in a temporary directory and stops with Ctrl-C: the
# connector's storage root and the gateway's store (SQLite), so a demo never
# touches ~/.uncaged.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$here/../../bin"
port="${DEMO_PORT:-8080}"
work="$(mktemp -d -t uncaged-demo-XXXXXX)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # the engine host the connector started stops with it; make sure
  if [ -f "$work/root/engine.lock" ]; then kill "$(cat "$work/root/engine.lock")" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

export UNCAGED_GATEWAY_KEY="$("$bin/uncaged-gateway" key generate)"
export UNCAGED_WORKFLOW_STORAGE_ROOT="$work/root"
# Every gateway command here (token create records its tokens) uses it.
export UNCAGED_GATEWAY_DATA_DIR="$work/gateway"
dashboard_token="$("$bin/uncaged-gateway" token create --dashboard)"
connector_token="$("$bin/uncaged-gateway" token create --connector demo)"

echo "starting the gateway on 127.0.0.1:$port ..."
"$bin/uncaged-gateway" serve --listen "127.0.0.1:$port" --data-dir "$UNCAGED_GATEWAY_DATA_DIR" 2>"$work/gateway.log" &
pids+=($!)
for _ in $(seq 50); do curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

"$bin/uncaged-workflow" workflow add hello-world "$here/hello-world.esm.js" 2>/dev/null
echo "starting the connector \"demo\" ..."
UNCAGED_WORKFLOW_TOKEN="$connector_token" "$bin/uncaged-workflow" connect --name demo --gateway "http://127.0.0.1:$port" 2>"$work/connector.log" &
pids+=($!)
for _ in $(seq 100); do
  curl -fsS -H "Authorization: Bearer $dashboard_token" "http://127.0.0.1:$port/api/gateway/endpoints" 2>/dev/null | grep -q '"online"' && break
  sleep 0.1
done

thread="$("$bin/uncaged-workflow" run hello-world --prompt "demo")"
cat <<INFO

  dashboard  http://127.0.0.1:$port/
  token      $dashboard_token

  machines   curl -H "Authorization: Bearer \$TOKEN" http://127.0.0.1:$port/api/gateway/endpoints
  threads    curl -H "Authorization: Bearer \$TOKEN" http://127.0.0.1:$port/api/clients/demo/threads
  live       curl -N -H "Authorization: Bearer \$TOKEN" http://127.0.0.1:$port/api/clients/demo/threads/$thread/live

  gateway    store $UNCAGED_GATEWAY_DATA_DIR/gateway.db (SQLite), log $work/gateway.log
  connector  storage root $UNCAGED_WORKFLOW_STORAGE_ROOT, log $work/connector.log
             (all of $work is removed when the demo stops)

  a hello-world thread ($thread) is running; watching it here. Ctrl-C stops everything.

INFO
"$bin/uncaged-workflow" live "$thread"
echo
echo "the gateway and the connector keep running; Ctrl-C to stop."
wait
