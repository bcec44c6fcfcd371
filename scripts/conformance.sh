#!/usr/bin/env bash
# Runs the official conformance suite through a fresh Sluice whose only upstream is the
# project's own modern fixture (tests/fixtures/modern_fixture.py on mcp==2.3.0):
#   --suite all --spec-version 2026-07-28    and    --requirements 2026-07-28
# Needs the peers (eval "$(bash scripts/peers.sh)") and a built Sluice (SLUICE_BIN, default
# target/release/sluice). Fails on any FAILURE or WARNING outside the tasks-* extension.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
: "${SLUICE_PY2:?run: eval \"\$(bash scripts/peers.sh)\"}" "${SLUICE_NODE22:?}" "${SLUICE_CONFORMANCE:?}"
bin="${SLUICE_BIN:-$root/target/release/sluice}"
out="${CONFORMANCE_OUT:-$root/target/conformance}"
rm -rf "$out" && mkdir -p "$out"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

wait_line() { # wait_line FILE PATTERN SECONDS
  for _ in $(seq 1 $(( $3 * 10 ))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "timed out waiting for '$2' in $1" >&2; cat "$1" >&2; return 1
}

"$SLUICE_PY2" "$root/tests/fixtures/modern_fixture.py" --port 0 >"$out/fixture.out" 2>"$out/fixture.err" &
pids+=($!)
wait_line "$out/fixture.out" LISTENING 30
port=$(awk '/LISTENING/ {print $2; exit}' "$out/fixture.out")

# Sluice on a free loopback port: ask the OS for one.
sport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
RUST_LOG=warn "$bin" serve --listen "127.0.0.1:$sport" --upstream "fixture=http://127.0.0.1:$port/mcp" >"$out/sluice.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$sport/readyz" >/dev/null && break; sleep 0.1; done
url="http://127.0.0.1:$sport/mcp"

status=0
run() { # run LABEL ARGS...
  local label=$1; shift
  "$SLUICE_NODE22" "$SLUICE_CONFORMANCE" server --url "$url" "$@" -o "$out/$label" >"$out/$label.log" 2>&1 || true
  python3 "$root/scripts/conformance_check.py" "$out/$label" "$label" || status=1
}
run modern-suite-all --suite all --spec-version 2026-07-28
run modern-requirements --requirements 2026-07-28
exit $status
