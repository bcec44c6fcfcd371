"""What the conformance suite's client commands share (tests/conformance/oauth_*.py): starting
the Sluice binary at `$SLUICE_BIN` with a config, waiting for lines of its log, and posting
2026-07-28 requests to it. Standard library only."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request

WAIT = 20.0


def post(base: str, method: str, params: dict, caps: dict | None = None, key: str | None = None) -> dict:
    """One 2026-07-28 request (`caps`: the client's capabilities, `key`: an API key sent as its
    bearer); an HTTP error's body with its `status`."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps or {},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
    }
    if "name" in params:
        headers["Mcp-Name"] = params["name"]
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(base, json.dumps(body).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return {"status": e.code, **json.loads(e.read() or b"{}")}


def start(config: str, work: str, env: dict) -> tuple[subprocess.Popen, str]:
    """Sluice serving `config` (written in `work`), its log at trace level in `work`; gives the
    process and the log's path."""
    path = os.path.join(work, "sluice.toml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(config)
    log_path = os.path.join(work, "sluice.log")
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            [os.environ["SLUICE_BIN"], "serve", "--config", path],
            env=dict(os.environ, RUST_LOG="trace", **env),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return proc, log_path


def line_with(log_path: str, proc: subprocess.Popen, needle: str) -> str:
    """The first line of Sluice's log holding `needle` (a separate process: its log polled)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"sluice exited with {proc.returncode}")
        with open(log_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if needle in line:
                    return line
        time.sleep(0.05)
    raise SystemExit(f"sluice did not log {needle!r}")


def endpoint(log_path: str, proc: subprocess.Popen) -> str:
    """Sluice's MCP endpoint, from its `sluice listening addr=…` line."""
    line = line_with(log_path, proc, "sluice listening")
    return f"http://{line.split('addr=', 1)[1].split()[0].strip(chr(34))}/mcp"
