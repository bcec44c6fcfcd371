"""Holds idle HTTP/2 (h2c, prior knowledge) connections from several source addresses, for
`cargo test --test e2e` (binary::shares): each sends the client preface and SETTINGS, then no
request and no credential, and answers every PING and SETTINGS, as any HTTP/2 client does.
Standard library only (any python3).

  python3 tests/peers/hold_h2.py --port PORT --count N --source 127.0.0.2 [--source 127.0.0.3 ...]

Reports on stdout, one line each, for the test to read:
  SOURCE <addr> HELD <h> CLOSED <c>   once each of that source's N connections is decided: held
                                      (the server sent its SETTINGS) or closed at once (end of
                                      file or reset before any frame)
  CLOSED <addr> GOAWAY|EOF            each time a held connection ends later: after a GOAWAY
                                      frame, or without one (closed outright)
  ALL-CLOSED GOAWAY <g> EOF <e>       once every connection has ended
Then it answers frames until stdin reaches end-of-file (the test holds the pipe), and exits.
"""

from __future__ import annotations

import argparse
import select
import socket
import struct
import sys

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS, PING, GOAWAY = 4, 6, 7
ACK = 1


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


class Conn:
    def __init__(self, source: str, port: int) -> None:
        self.source = source
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((source, 0))
        self.sock.connect(("127.0.0.1", port))
        try:
            self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
        except OSError:
            pass  # closed at once: the next read says so
        self.buf = b""
        self.settings = False
        self.goaway = False

    def read(self) -> bool:
        """Reads and answers what arrived; False once the connection has ended."""
        try:
            data = self.sock.recv(65536)
        except OSError:
            return False
        if not data:
            return False
        self.buf += data
        while len(self.buf) >= 9:
            length = int.from_bytes(self.buf[:3], "big")
            if len(self.buf) < 9 + length:
                break
            kind, flags, payload = self.buf[3], self.buf[4], self.buf[9 : 9 + length]
            self.buf = self.buf[9 + length :]
            try:
                if kind == SETTINGS and not flags & ACK:
                    self.settings = True
                    self.sock.sendall(frame(SETTINGS, ACK, 0))
                elif kind == PING and not flags & ACK:
                    self.sock.sendall(frame(PING, ACK, 0, payload))
                elif kind == GOAWAY:
                    self.goaway = True
            except OSError:
                return False
        return True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--source", action="append", required=True)
    args = p.parse_args()
    conns = [Conn(src, args.port) for src in args.source for _ in range(args.count)]
    undecided = {src: args.count for src in args.source}
    counts = {src: [0, 0] for src in args.source}  # held, closed at once
    open_conns = set(conns)
    ended = {"GOAWAY": 0, "EOF": 0}

    def decide(c: Conn, held: bool) -> None:
        counts[c.source][0 if held else 1] += 1
        undecided[c.source] -= 1
        if undecided[c.source] == 0:
            held_n, closed_n = counts[c.source]
            print(f"SOURCE {c.source} HELD {held_n} CLOSED {closed_n}", flush=True)

    decided: set[Conn] = set()
    stdin_open, all_closed = True, False
    while stdin_open:
        watched = [c.sock for c in open_conns] + [sys.stdin]
        readable, _, _ = select.select(watched, [], [], 1.0)
        for r in readable:
            if r is sys.stdin:
                stdin_open = bool(sys.stdin.buffer.read1(1024))
                continue
            c = next(c for c in open_conns if c.sock is r)
            alive = c.read()
            if c not in decided and (c.settings or not alive):
                decided.add(c)
                decide(c, alive)
                if not alive:
                    open_conns.discard(c)
                    c.sock.close()
                    continue
            if not alive:
                open_conns.discard(c)
                c.sock.close()
                how = "GOAWAY" if c.goaway else "EOF"
                ended[how] += 1
                print(f"CLOSED {c.source} {how}", flush=True)
        if not open_conns and not all_closed:
            all_closed = True
            print(f"ALL-CLOSED GOAWAY {ended['GOAWAY']} EOF {ended['EOF']}", flush=True)
    for c in open_conns:
        c.sock.close()


if __name__ == "__main__":
    main()
