"""A hostile 2025-11-25 stdio server for Sluice's tests (no SDK: the wire by hand).

Run: python3 tests/peers/hostile_stdio.py MODE MARKER_FILE

It answers `initialize`, `tools/list` (one tool, `take`) and `ping` like any server, then, by MODE:
  deaf      reads each line at most 4096 bytes at a time; on a longer one (a large call) it stops
            reading stdin for good and sleeps, so a writer to it blocks once the pipe is full
  mute      only the first process (the one that creates MARKER_FILE) answers; every later one
            reads `initialize` and never answers it
  slow      every process sleeps 3 s before it answers `initialize` (a server slow to boot)
  talk      the first process serves; the second writes `before-2;` to stderr as it boots, serves
            its handshake, and on `tools/call` writes `AFTER-HANDSHAKE;` (what a client's call
            could make it write) to stderr and exits 1 unanswered; every later one writes
            `boot-N;` to stderr and exits 3 before reading anything (a start that fails)
`take` answers "took N bytes" once it has read the whole call.
"""

import json
import os
import sys
import time


def send(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def main() -> None:
    mode, marker = sys.argv[1], sys.argv[2]
    first = False
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.close(fd)
        first = True
    except FileExistsError:
        pass
    if mode == "talk":
        with open(marker + ".count", "a+") as f:
            f.write("x\n")
            f.flush()
            f.seek(0)
            index = len(f.read().splitlines())
        if index == 2:
            sys.stderr.write("before-2;\n")
            sys.stderr.flush()
        elif index > 2:
            sys.stderr.write(f"boot-{index};\n")
            sys.stderr.flush()
            sys.exit(3)
    while True:
        line = sys.stdin.readline(4096)
        if not line:
            return
        if not line.endswith("\n"):
            if mode == "deaf":
                time.sleep(3600)
            continue
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if rid is None:
            continue
        if method == "initialize":
            if mode == "mute" and not first:
                time.sleep(3600)
            if mode == "slow":
                time.sleep(3)
            send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                                           "serverInfo": {"name": "hostile", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [{"name": "take", "inputSchema": {"type": "object"}}]}})
        elif method == "tools/call" and mode == "talk":
            sys.stderr.write("AFTER-HANDSHAKE;\n")
            sys.stderr.flush()
            sys.exit(1)
        elif method == "tools/call":
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": f"took {len(line)} bytes"}]}})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "method not found"}})


if __name__ == "__main__":
    main()
