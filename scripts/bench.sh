#!/usr/bin/env bash
# Sluice's benchmark (issues 7 and 14; docs/benchmarks.md explains every figure).
#
#   bash scripts/bench.sh            full run: 5 alternating runs per path and measure, then the
#                                    scale figures, ~9 minutes (plus mcp-proxy's install, once)
#   bash scripts/bench.sh --smoke    one short run of everything, under 60 s once built; no thresholds
#   bash scripts/bench.sh --profile  instruction counts per call and per bridge A round (callgrind),
#                                    context switches per round, the heap of parked exchanges
#                                    (massif, on a system-allocator build) and a perf sample
#
# Installs wrk (Debian's package) when missing, builds the release binaries (sluice and
# sluice-bench, same profile), raises the open-files limit, runs `sluice-bench run` bounded in
# time, and stops every process it started. The table goes to stdout and target/bench/results.md
# (the profile to target/bench/profile/). Extra arguments go to `sluice-bench run`/`profile`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

mode=run
limit=1200
case "${1:-}" in
  --smoke) limit=60 ;;
  --profile) mode=profile; limit=900; shift ;;
esac

if ! command -v wrk >/dev/null 2>&1; then
  echo "bench: installing wrk" >&2
  if ! apt-get install -y wrk >/dev/null 2>&1; then
    apt-get update >/dev/null && apt-get install -y wrk >/dev/null
  fi
fi
# The [cluster] rows need Redis and HAProxy (Debian's packages); without them the rows are left out.
if [ "$mode" = run ] && { ! command -v redis-server >/dev/null 2>&1 || ! command -v haproxy >/dev/null 2>&1; }; then
  echo "bench: installing redis-server and haproxy (the [cluster] rows)" >&2
  if ! apt-get install -y --no-install-recommends redis-server haproxy >/dev/null 2>&1; then
    apt-get update >/dev/null && apt-get install -y --no-install-recommends redis-server haproxy >/dev/null || true
  fi
fi
if [ "$mode" = profile ] && ! command -v valgrind >/dev/null 2>&1; then
  echo "bench: valgrind is not installed (apt-get install -y valgrind); the profile will skip instruction counts" >&2
fi

# The comparison row: mcp-proxy from crates.io (MCP_PROXY names a binary to use instead). A full
# run installs it into target/bench/tools (a few minutes, once); smoke and profile runs use it
# only when it is already there.
peer="${MCP_PROXY:-$root/target/bench/tools/bin/mcp-proxy}"
if [ "$mode" = run ] && [ "$limit" != 60 ] && [ ! -x "$peer" ]; then
  echo "bench: installing mcp-proxy 0.6.0 (the comparison row) into target/bench/tools" >&2
  cargo install mcp-proxy --version 0.6.0 --locked --no-default-features --features protocol-2026-07-28 \
    --root "$root/target/bench/tools" --target-dir "$root/target/bench/tools/build" >&2 ||
    echo "bench: mcp-proxy could not be installed; its row is left out" >&2
fi
peer_args=()
if [ "$mode" = run ] && [ -x "$peer" ]; then peer_args=(--mcp-proxy "$peer"); fi

echo "bench: building release binaries" >&2
cargo build --release --locked --bin sluice --bin sluice-bench >&2
if [ "$mode" = profile ]; then
  # massif sees only malloc: the heap profile runs a sluice built with the system allocator.
  cargo build --release --locked --features system-alloc --bin sluice --target-dir "$root/target/sysalloc" >&2
fi

# Parked exchanges hold two upstream connections each: raise the open-files limit to the hard one.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

work="$root/target/bench"
mkdir -p "$work"
pids="$work/pids"
: >"$pids"
cleanup() {
  if [ -n "${bench_pid:-}" ]; then kill "$bench_pid" 2>/dev/null || true; fi
  # $pids lists the processes the run started and has not reaped yet (the benchmark's own peers
  # also exit when the run's pipe to them closes). Only a process still running our binaries is
  # killed, so a pid reused by someone else is left alone.
  while read -r p; do
    if [ -n "$p" ] && grep -qaE "target/release/sluice|sluice-bench-redis|target/bench/haproxy.cfg" "/proc/$p/cmdline" 2>/dev/null; then kill -9 "$p" 2>/dev/null || true; fi
  done <"$pids"
}
trap cleanup EXIT INT TERM

if [ "$mode" = profile ]; then
  timeout -k 10 "$limit" "$root/target/release/sluice-bench" profile --sluice "$root/target/release/sluice" \
    --dir "$work/profile" --pid-file "$pids" "$@" &
else
  timeout -k 10 "$limit" "$root/target/release/sluice-bench" run --sluice "$root/target/release/sluice" \
    --dir "$work" --pid-file "$pids" "${peer_args[@]}" "$@" &
fi
bench_pid=$!
status=0
wait "$bench_pid" || status=$?
bench_pid=
exit "$status"
