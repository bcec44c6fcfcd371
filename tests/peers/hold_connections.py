"""Opens many idle TCP connections to one address and holds them, for `cargo test --test process` (hardening).

The connections come from this separate process so that the test process (which runs Sluice)
is not the one short of file descriptors. Standard library only (any python3).

  python3 tests/peers/hold_connections.py --port PORT --count N [--settle-ms MS]

Steps, each reported on stdout as one line the test reads:
  NOFILE soft=<s> hard=<h> target=<t>   after raising RLIMIT_NOFILE's soft limit as far as the hard
                                        limit allows (target = N + 64); followed by
  NOFILE-SHORT <reachable>              when the hard limit is below the target: the count is
                                        lowered to what fits, and said so
  OPENED <n> FAILED <f>                 after connecting (a connect error counts as failed)
  HELD <h> CLOSED <c>                   after --settle-ms: connections the server closed at once
                                        (EOF or reset) versus still open
Then holds every open connection, sending nothing, until stdin reaches end-of-file (the test
holds the pipe), and exits.
"""

from __future__ import annotations

import argparse
import resource
import select
import socket
import sys
import time

from common import wait_stdin_closed


def raise_nofile(target: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = target if hard == resource.RLIM_INFINITY else min(target, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (ValueError, OSError) as e:
            print(f"NOFILE-ERROR {e}", flush=True)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    print(f"NOFILE soft={soft} hard={hard} target={target}", flush=True)
    return target if soft == resource.RLIM_INFINITY else soft


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--settle-ms", type=int, default=500)
    args = p.parse_args()
    reachable = raise_nofile(args.count + 64)
    count = args.count
    if reachable < args.count + 64:
        count = max(0, reachable - 64)
        print(f"NOFILE-SHORT {count}", flush=True)
    socks: list[socket.socket] = []
    failed = 0
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", args.port))
            s.setblocking(False)
            socks.append(s)
        except OSError:
            failed += 1
            s.close()
    print(f"OPENED {len(socks)} FAILED {failed}", flush=True)
    # A connection the server closed at once becomes readable (EOF or reset) within the settle time.
    time.sleep(args.settle_ms / 1000)
    poller = select.poll()
    by_fd = {s.fileno(): s for s in socks}
    for fd in by_fd:
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    closed = set()
    for fd, _ in poller.poll(0):
        s = by_fd[fd]
        try:
            if s.recv(1) == b"":
                closed.add(fd)
        except BlockingIOError:
            pass
        except OSError:
            closed.add(fd)
    print(f"HELD {len(socks) - len(closed)} CLOSED {len(closed)}", flush=True)
    wait_stdin_closed()
    for s in socks:
        s.close()


if __name__ == "__main__":
    main()
