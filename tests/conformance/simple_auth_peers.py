"""The Python SDK's `simple-auth` example as an upstream for tests/conformance/simple_auth.py:
starts its authorization server (`mcp-simple-auth-as`) and its OAuth-protected MCP server
(`mcp-simple-auth-rs`) unmodified, from `$SLUICE_SIMPLE_AUTH` (the venv scripts/peers.sh
installs), on free loopback ports, each waited for by its "Uvicorn running on" line.

Gives two more things the scenarios need:
- `Seen`, an observer of the MCP server's token introspection: the server asks its
  authorization server about the bearer token of every request it gets (RFC 7662, no cache);
  it is started with `HTTP_PROXY` naming a small forward proxy here, which relays each
  introspection to the real authorization server and keeps only the token's SHA-256 (never
  printed), so a scenario can tell which distinct tokens reached the server during a call;
  anything other than a POST to the authorization server's `/introspect` is refused (403);
- `browse`, a browser for the authorization URL: the authorization server redirects to its
  login page; the form is read (its action and fields, the demo credentials filled in as the
  page shows them), posted, and the redirects followed to Sluice's callback, whose page is
  returned. Nothing of the URL, the code or the token is printed.
"""

from __future__ import annotations

import hashlib
import html.parser
import http.server
import json
import os
import socket
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request

import sluice_driver as driver

BIN = os.environ.get("SLUICE_SIMPLE_AUTH", "")


class Failed(Exception):
    """A step that did not hold."""


def check(ok: bool, what: str) -> None:
    if not ok:
        raise Failed(what)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(name: str, args: list[str], work: str, env: dict | None = None) -> subprocess.Popen:
    """Starts `$SLUICE_SIMPLE_AUTH/<name> args`, its log in `work`; returns once it listens."""
    log_path = os.path.join(work, f"{name}.log")
    clean = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            [os.path.join(BIN, name), *args],
            env=dict(clean, **(env or {})),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    driver.line_with(log_path, proc, "Uvicorn running on")
    return proc


class Seen:
    """The SHA-256 of each token the MCP server introspected, in order."""

    def __init__(self, issuer: str):
        self.issuer = issuer
        self.digests: list[str] = []
        self.lock = threading.Lock()

    def mark(self) -> int:
        with self.lock:
            return len(self.digests)

    def since(self, mark: int) -> set[str]:
        with self.lock:
            return set(self.digests[mark:])

    def add(self, token: str) -> None:
        with self.lock:
            self.digests.append(hashlib.sha256(token.encode()).hexdigest())


DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def observe(seen: Seen) -> str:
    """The forward proxy relaying introspections to the authorization server; gives its URL."""

    class Relay(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != f"{seen.issuer}/introspect":
                self.send_error(403)
                return
            token = urllib.parse.parse_qs(body.decode()).get("token", [""])[0]
            seen.add(token)
            kind = {"Content-Type": self.headers.get("Content-Type", "")}
            try:
                with DIRECT.open(urllib.request.Request(self.path, body, kind), timeout=10) as r:
                    status, data, ctype = r.status, r.read(), r.headers.get("Content-Type")
            except urllib.error.HTTPError as e:
                status, data, ctype = e.code, e.read(), e.headers.get("Content-Type")
            self.send_response(status)
            self.send_header("Content-Type", ctype or "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Relay)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def upstream(work: str) -> tuple[list[subprocess.Popen], str, Seen]:
    """simple-auth's authorization server and MCP server; gives them, the MCP URL and the
    introspection observer."""
    as_port, rs_port = free_port(), free_port()
    issuer = f"http://localhost:{as_port}"
    seen = Seen(issuer)
    procs = [start("mcp-simple-auth-as", [f"--port={as_port}"], work)]
    proxy = observe(seen)
    env = {"HTTP_PROXY": proxy, "http_proxy": proxy, "NO_PROXY": "", "no_proxy": ""}
    args = [f"--port={rs_port}", f"--auth-server={issuer}", "--transport=streamable-http"]
    procs.append(start("mcp-simple-auth-rs", args, work, env))
    return procs, f"http://localhost:{rs_port}/mcp", seen


def register(issuer: str, redirect_uri: str) -> dict:
    """Registers a confidential client at the authorization server (RFC 7591), as an operator
    would register Sluice beforehand; gives its `client_id` and `client_secret`."""
    metadata = {
        "client_name": "Sluice",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_post",
    }
    kind = {"Content-Type": "application/json"}
    req = urllib.request.Request(f"{issuer}/register", json.dumps(metadata).encode(), kind)
    with DIRECT.open(req, timeout=10) as r:
        return json.loads(r.read())


class Form(html.parser.HTMLParser):
    """The first form of a page: its action and its inputs' names and values."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "form" and self.action is None:
            self.action = a.get("action") or ""
        elif tag == "input" and a.get("name"):
            self.fields[a["name"] or ""] = a.get("value") or ""


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # noqa: D102
        return None


BROWSER = urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect)


def fetch(url: str, form: dict | None = None) -> tuple[int, str, str]:
    """One GET (or a form POST) without following redirects: status, Location, page."""
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    try:
        with BROWSER.open(urllib.request.Request(url, data), timeout=15) as r:
            return r.status, "", r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Location", ""), e.read().decode("utf-8", "replace")


def follow(url: str, form: dict | None = None) -> tuple[int, str, str]:
    """GETs (or posts to) `url` and follows redirects (at most five): the last URL, status, page."""
    status, location, page = fetch(url, form)
    for _ in range(5):
        if status not in (301, 302, 303, 307, 308) or not location:
            break
        url = urllib.parse.urljoin(url, location)
        status, location, page = fetch(url)
    return url, status, page


def browse(authorization_url: str) -> tuple[int, str]:
    """Signs in at simple-auth's login page as its demo user; gives the status and the text of
    the page the browser ends on (Sluice's callback)."""
    login_url, status, page = follow(authorization_url)
    form = Form()
    form.feed(page)
    if status != 200 or not form.action or "password" not in form.fields:
        return status, f"no login form at the authorization URL ({status})"
    _, status, page = follow(urllib.parse.urljoin(login_url, form.action), form.fields)
    return status, page
