"""What the Python peers share: serving on 127.0.0.1 port 0 with a `LISTENING <port>` line,
exiting when the parent's pipe closes, per-tag event files, and the client plan / summary
protocol (`argv[1]` is a JSON plan; one `SUMMARY {...}` line on stdout; exit 0 only when the
summary lists no failures).

Standard library only at import time: the SDK-side imports (anyio, uvicorn) happen inside the
functions that need them, so any python3 can import this module.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, Awaitable, Callable


def wait_stdin_closed() -> None:
    """Blocks until stdin reaches end-of-file (the parent holds the pipe and never writes)."""
    while sys.stdin.buffer.read(4096):
        pass


def exit_when_stdin_closes() -> None:
    """Exits the process when the parent's pipe closes (even when the parent crashed)."""

    def watch() -> None:
        try:
            wait_stdin_closed()
        finally:
            os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def tls_files(folder: str) -> tuple[str, str]:
    """A CA of its own and a certificate it signs for 127.0.0.1 and localhost, written into
    `folder` (`ca.pem`, `cert.pem`, `key.pem`): the key and certificate to serve with. The test
    gives `ca.pem` to its client as the one CA to trust (`SSL_CERT_FILE`)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress

    now = datetime.datetime.now(datetime.timezone.utc)
    day = datetime.timedelta(days=1)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("sluice test CA"))
        .issuer_name(name("sluice test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - day)
        .not_valid_after(now + day)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    san = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - day)
        .not_valid_after(now + day)
        .add_extension(san, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    paths = {n: os.path.join(folder, n) for n in ("ca.pem", "cert.pem", "key.pem")}
    with open(paths["ca.pem"], "wb") as f:
        f.write(ca.public_bytes(pem))
    with open(paths["cert.pem"], "wb") as f:
        f.write(cert.public_bytes(pem))
    with open(paths["key.pem"], "wb") as f:
        f.write(
            key.private_bytes(
                pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    return paths["key.pem"], paths["cert.pem"]


def serve(app: Any, tls: str | None = None) -> None:
    """Serves the ASGI `app` on 127.0.0.1 on a free port, prints `LISTENING <port>` once it
    accepts requests, and runs until stdin closes. With `tls` (a folder), over HTTPS with a
    certificate of [`tls_files`]."""
    import anyio
    import uvicorn

    async def run() -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        ssl = {}
        if tls is not None:
            keyfile, certfile = tls_files(tls)
            ssl = {"ssl_keyfile": keyfile, "ssl_certfile": certfile}
        uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", **ssl))
        async with anyio.create_task_group() as tg:
            tg.start_soon(uv.serve, [sock])
            while not uv.started:
                await anyio.sleep(0.01)
            print(f"LISTENING {port}", flush=True)

    exit_when_stdin_closes()
    anyio.run(run)


class Events:
    """Per-tag event files: `record(tag, event)` appends one line to `<dir>/<tag>`."""

    def __init__(self) -> None:
        self.dir = Path(".")
        self.stdio = False
        self.sse = False

    def parse_args(self, description: str) -> None:
        """Reads `--events DIR` from the command line and creates the directory."""
        parser = argparse.ArgumentParser(description=description)
        parser.add_argument("--events", required=True, help="directory for the per-tag event files")
        parser.add_argument("--stdio", action="store_true", help="serve on stdin/stdout instead of HTTP")
        parser.add_argument("--sse", action="store_true", help="serve the 2024-11-05 HTTP+SSE transport (/sse) instead")
        args = parser.parse_args()
        self.dir = Path(args.events)
        self.stdio = args.stdio
        self.sse = args.sse
        self.dir.mkdir(parents=True, exist_ok=True)

    def record(self, tag: str, event: str) -> None:
        if tag:
            with open(self.dir / tag, "a", encoding="utf-8") as f:
                f.write(event + "\n")


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or `exc` itself."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def run_plan(run: Callable[[dict, dict], Awaitable[None]], **report: Any) -> int:
    """Runs `run(plan, summary)` on the plan in argv[1], then prints the summary (with the
    `report` members added, read after the run) as one `SUMMARY` line. Returns the exit code."""
    import anyio

    plan = json.loads(sys.argv[1])
    summary: dict = {"failures": [], "calls": []}
    try:
        anyio.run(run, plan, summary)
    except BaseException as exc:  # noqa: BLE001 - the summary must be printed whatever happened
        for leaf in leaves(exc):
            summary["failures"].append(f"client raised {type(leaf).__name__}: {leaf}")
        traceback.print_exc()
    summary.update(report)
    print("SUMMARY " + json.dumps(summary), flush=True)
    return 1 if summary["failures"] else 0
