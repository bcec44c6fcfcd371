#!/usr/bin/env bash
# Runs the official conformance suite through a fresh Sluice whose only upstream is one of the
# project's own fixtures, both legs (--suite all --spec-version 2026-07-28, --requirements
# 2026-07-28) for each: tests/fixtures/modern_fixture.py (mcp==2.3.0, both eras: each suite must
# score through Sluice exactly what it scores against the fixture direct, over HTTP and, but for
# sse-polling, with Sluice starting it over stdio) and
# tests/fixtures/legacy_fixture.py (mcp==1.30.0, bridge A turns its asks into rounds), and that
# legacy fixture again over stdio (it must score the same counts as over HTTP, but for the one
# scenario only an HTTP transport can pass, sse-polling). Sluice runs
# with the default approval policy (--policy policies/default.toml), as a deployment would.
# Needs the peers (eval "$(bash scripts/peers.sh)") and a built Sluice (SLUICE_BIN, default
# target/release/sluice). Fails on any FAILURE or WARNING outside the tasks-* extension.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
: "${SLUICE_PY2:?run: eval \"\$(bash scripts/peers.sh)\"}" "${SLUICE_PY1:?}" "${SLUICE_NODE22:?}" "${SLUICE_CONFORMANCE:?}"
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

# with_fixture NAME PYTHON FIXTURE: a fresh fixture upstream and a fresh Sluice in front of it;
# sets $url (Sluice's) and $fixture_url (the fixture's own) and records the pids for cleanup.
with_fixture() {
  local name=$1 py=$2 fixture=$3
  "$py" "$root/tests/fixtures/$fixture" --port 0 >"$out/$name-fixture.out" 2>"$out/$name-fixture.err" &
  pids+=($!)
  wait_line "$out/$name-fixture.out" LISTENING 30
  local port
  port=$(awk '/LISTENING/ {print $2; exit}' "$out/$name-fixture.out")
  fixture_url="http://127.0.0.1:$port/mcp"
  with_sluice "$name" "fixture=http://127.0.0.1:$port/mcp"
}

# with_sluice NAME UPSTREAM [CONFIG]: a fresh Sluice in front of UPSTREAM (an --upstream value,
# or empty when CONFIG holds the upstream); sets $url.
with_sluice() {
  local name=$1 upstream=$2 config=${3:-} sport
  sport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  local args=(serve --listen "127.0.0.1:$sport" --policy "$root/policies/default.toml")
  [ -n "$upstream" ] && args+=(--upstream "$upstream")
  [ -n "$config" ] && args+=(--config "$config")
  RUST_LOG=warn "$bin" "${args[@]}" >"$out/$name-sluice.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$sport/readyz" >/dev/null && break; sleep 0.1; done
  url="http://127.0.0.1:$sport/mcp"
}

status=0
run() { # run LABEL ARGS...
  local label=$1; shift
  "$SLUICE_NODE22" "$SLUICE_CONFORMANCE" server --url "$url" "$@" -o "$out/$label" >"$out/$label.log" 2>&1 || true
  python3 "$root/scripts/conformance_check.py" "$out/$label" "$label" "$out/$label.counts" || status=1
}

# same LABEL OTHER [KIND]: the two legs scored exactly the same counts (KIND "stdio": leaving
# out the scenarios only an HTTP transport can pass, conformance_check.py's HTTP_ONLY).
same() {
  local a="$out/$1.counts${3:+.$3}" b="$out/$2.counts${3:+.$3}"
  if ! cmp -s "$a" "$b"; then
    echo "conformance [$1] differs from [$2]: $(cat "$a") vs $(cat "$b")"; status=1
  else
    echo "conformance [$1] = [$2]: $(cat "$a")"
  fi
}

# stdio_legs NAME PYTHON FIXTURE OTHER: a fresh Sluice that starts FIXTURE --stdio itself (three
# processes kept warm, spare_processes), both suites through it, each required to score what the
# OTHER legs scored but for the HTTP-only scenarios.
stdio_legs() {
  local name=$1 py=$2 fixture=$3 other=$4
  cat >"$out/$name-stdio.toml" <<EOF
[[upstream]]
name = "fixture"
command = ["$py", "$root/tests/fixtures/$fixture", "--stdio"]
spare_processes = 3
EOF
  with_sluice "$name-stdio" "" "$out/$name-stdio.toml"
  run "$name-stdio-suite-all" --suite all --spec-version 2026-07-28
  same "$name-stdio-suite-all" "$other-suite-all" stdio
  run "$name-stdio-2025-suite-all" --suite all --spec-version 2025-11-25
  same "$name-stdio-2025-suite-all" "$other-2025-suite-all" stdio
}

# Modern fixture (mcp==2.3.0): Sluice forwards.
with_fixture modern "$SLUICE_PY2" modern_fixture.py
run modern-suite-all --suite all --spec-version 2026-07-28
run modern-requirements --requirements 2026-07-28
# 2025-11-25 clients through Sluice to the modern fixture (bridge B).
run modern-2025-suite-all --suite all --spec-version 2025-11-25
run modern-2025-requirements --requirements 2025-11-25
# The modern fixture speaks both eras: each suite must score through Sluice exactly what it
# scores against the fixture direct (every status counted, INFO included).
sluice_url=$url url=$fixture_url
run modern-direct-suite-all --suite all --spec-version 2026-07-28
same modern-suite-all modern-direct-suite-all
run modern-direct-2025-suite-all --suite all --spec-version 2025-11-25
same modern-2025-suite-all modern-direct-2025-suite-all
url=$sluice_url

# The same modern fixture over stdio (Sluice starts it: one process for every 2026-07-28
# request, multiplexed by id; one more per 2025-11-25 session): the counts it scores direct
# over HTTP, but for sse-polling (over stdio there is no HTTP stream to end).
stdio_legs modern "$SLUICE_PY2" modern_fixture.py modern-direct

# Legacy fixture (mcp==1.30.0): every mid-call ask becomes an input_required round (bridge A).
with_fixture legacy "$SLUICE_PY1" legacy_fixture.py
run legacy-suite-all --suite all --spec-version 2026-07-28
run legacy-requirements --requirements 2026-07-28
# 2025-11-25 clients through Sluice to the legacy fixture.
run legacy-2025-suite-all --suite all --spec-version 2025-11-25
run legacy-2025-requirements --requirements 2025-11-25

# The same legacy fixture over stdio (Sluice starts it, one process per session): the same counts,
# but for sse-polling (a server ending its HTTP stream mid-call: over stdio there is none).
# The suite opens three new capability sets within a second and waits 500-600 ms on some calls;
# the fixture takes over a second to boot, so three processes are kept warm (spare_processes).
# With the default max_processes = 4: the suite leaves four input_required exchanges unanswered
# (each holds its process until park_ms), and a new call of the same principal cancels the one
# parked longest to take its process (bridge::make_room).
stdio_legs legacy "$SLUICE_PY1" legacy_fixture.py legacy
exit $status
