"""A hostile 2026-07-28 stdio server for Sluice's tests (no SDK: the wire by hand).

Run: python3 tests/peers/hostile_modern_stdio.py LOG_FILE

It answers `server/discover` and `tools/list` as a 2026-07-28 server (and `initialize` with
-32601: it speaks no 2025-11-25), and appends what it saw to LOG_FILE, one line each:
`token T` (the progress token a `take` call carried), `held ID`, `cancelled ID`. Its tools:
  take      sends a progress notification with the call's token, then answers "took N bytes"
  pid       answers its process id
  hold      never answers (a client that goes away should make Sluice cancel it)
  ping_me   sends Sluice a `ping` request and answers the call with what came back
  huge      writes one 2 MiB notification line and never answers the call
  garbage   writes a line that is not JSON
"""

import json
import os
import sys

TOOLS = ["take", "pid", "hold", "ping_me", "huge", "garbage"]


def send(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def result(rid, body: dict) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": {**body, "resultType": "complete"}})


def text(rid, s: str) -> None:
    result(rid, {"content": [{"type": "text", "text": s}]})


def main() -> None:
    log = open(sys.argv[1], "a", buffering=1)
    waiting_pong = {}  # the id of Sluice's ping answer -> the call waiting on it
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method is None and rid in waiting_pong:
            text(waiting_pong.pop(rid), "pong: " + json.dumps(msg.get("result")))
            continue
        if method == "notifications/cancelled":
            log.write(f"cancelled {params.get('requestId')}\n")
            continue
        if rid is None:
            continue
        if method == "server/discover":
            result(rid, {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "ttlMs": 0,
                         "cacheScope": "private", "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "hostile-modern", "version": "1"}}})
        elif method == "tools/list":
            result(rid, {"tools": [{"name": t, "inputSchema": {"type": "object"}} for t in TOOLS], "ttlMs": 0})
        elif method == "tools/call":
            tool = params.get("name")
            if tool == "take":
                token = (params.get("_meta") or {}).get("progressToken")
                log.write(f"token {token}\n")
                if token is not None:
                    send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1, "total": 1}})
                text(rid, f"took {len(line)} bytes")
            elif tool == "pid":
                text(rid, str(os.getpid()))
            elif tool == "hold":
                log.write(f"held {rid}\n")
            elif tool == "ping_me":
                waiting_pong[f"ping-{rid}"] = rid
                send({"jsonrpc": "2.0", "id": f"ping-{rid}", "method": "ping"})
            elif tool == "huge":
                send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x" * (2 << 20)}})
            elif tool == "garbage":
                sys.stdout.write("this is not JSON-RPC\n")
                sys.stdout.flush()
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "method not found"}})


if __name__ == "__main__":
    main()
