#!/usr/bin/env bash
# Every test Sluice has, the way CI runs it: installs the real peers (redis-server, haproxy,
# chromium and chromium-driver from Debian, Python SDKs and selenium, Node 22, the official
# conformance suite), builds the manual (docs/, with mdBook 0.4.52 installed into target/tools),
# runs the Rust tests (unit, e2e, interop against the SDKs, the console in headless Chromium:
# its screenshots in target/console-screenshots/), then the conformance suite through Sluice,
# then one smoke run of the benchmark (it must run; its figures are not judged). Prints the
# time of each stage. Exit 0 only if all held.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
stage() { printf '\n=== %s\n' "$1"; stage_start=$(date +%s); }
done_stage() { echo "=== $1 took $(( $(date +%s) - stage_start )) s"; }
total_start=$(date +%s)

stage "format check"
cargo fmt --all -- --check
done_stage "format check"

stage "system packages (redis-server, haproxy: the cluster tests' real parts; chromium, chromium-driver: the console's browser test)"
if ! command -v redis-server >/dev/null 2>&1 || ! command -v haproxy >/dev/null 2>&1 ||
    ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends redis-server haproxy chromium chromium-driver >/dev/null
fi
redis-server --version
# No pipe into head here: with pipefail, haproxy killed by SIGPIPE fails the script at random.
haproxy_version="$(haproxy -v)"
echo "${haproxy_version%%$'\n'*}"
# chromium's wrapper script prints its version without starting a browser.
chromium --version
chromedriver --version
done_stage "system packages"

stage "peers (pinned SDKs, Node 22, conformance suite)"
eval "$(bash scripts/peers.sh)"
done_stage "peers"

stage "manual (mdBook: docs/ to target/manual)"
mdbook="$root/target/tools/bin/mdbook"
if [ ! -x "$mdbook" ]; then
    cargo install mdbook@0.4.52 --locked --no-default-features --features search --root "$root/target/tools" -q
fi
"$mdbook" build docs
done_stage "manual"

stage "build (release)"
cargo build --release --locked
done_stage "build"

stage "cargo test (unit, e2e, interop)"
cargo test --release --locked --no-fail-fast -- --test-threads="${SLUICE_TEST_THREADS:-4}"
done_stage "cargo test"

stage "conformance through Sluice (modern fixture upstream)"
SLUICE_BIN="$root/target/release/sluice" bash scripts/conformance.sh
done_stage "conformance"

stage "benchmark smoke (one short run of every measure; figures not judged)"
bash scripts/bench.sh --smoke >/dev/null
done_stage "benchmark smoke"

echo
echo "all stages held in $(( $(date +%s) - total_start )) s"
