#!/usr/bin/env python3
"""Sluice in front of the Python SDK's `simple-auth` example (an authorization server and an
OAuth-protected MCP server, tests/conformance/simple_auth_peers.py starts them unmodified),
the upstream in `[upstream.auth] mode = "oauth"`, each principal signing in through MCP.

Run with the python of `$SLUICE_SIMPLE_AUTH` (it has the SDK, `mcp==2.3.0`), `$SLUICE_BIN` the
Sluice binary, and one argument:

- `principals`: Sluice with three API keys (alice, bob, carol). Alice and bob each call the
  sign-in tool as a 2026-07-28 client with URL elicitation, sign in at the login page like a
  browser, and call `get_time`; the introspections the MCP server makes tell which tokens it
  saw: one during alice's call, another during bob's, a third once carol signed in, and alice's
  own again on her next call (a Sluice that sent one principal's token for another fails here).
  Carol's call of `get_time` is refused with `-31040` and the URL while her client declares no
  URL elicitation, and nothing of hers reaches the server; with URL elicitation it is answered
  with the sign-in round, and the retry after she signed in gives the tool's result.
- `legacy`: a 2025-11-25 client (the SDK's `Client` in `mode="legacy"`, through bridge B) with
  an elicitation callback calls `get_time` while signed out: it must be sent a real
  `elicitation/create` in `mode: "url"` (with an `elicitationId`), which it follows like a
  browser and accepts; the same call then comes back with the tool's result.

Sluice's client is registered at the authorization server beforehand, as an operator would
(`client_secret_post`, its secret in Sluice's environment). With a second argument `dcr`
Sluice registers itself instead (Dynamic Client Registration: it picks `client_secret_post`
of the methods this server lists).

Either way no simple-auth code or token (`mcp_` and hex) and not the client secret is in any
line of Sluice's trace log.
Prints one line per step; exits 0 only when every step held.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import sys
import tempfile

import simple_auth_peers as peers
import sluice_driver as driver
from simple_auth_peers import Failed, check

URL_CAPS = {"elicitation": {"url": {}}}
NAMES = ["alice", "bob", "carol", "dave"]


def config(url: str, keys: dict[str, str], port: int, client: dict | None) -> str:
    """Sluice on `port`: the keys, the upstream in `oauth` mode, its client pre-registered
    (`client`) or, without one, registered by Sluice itself (DCR)."""
    auth = 'mode = "oauth"\n'
    if client:
        auth += (
            f'client_id = "{client["client_id"]}"\nclient_secret_env = "SIMPLE_AUTH_SECRET"\n'
            'token_endpoint_auth = "client_secret_post"\n'
        )
    entries = "".join(
        f'[[auth.api_keys]]\nsha256 = "{hashlib.sha256(k.encode()).hexdigest()}"\n'
        f'principal = "{name}"\n\n'
        for name, k in keys.items()
    )
    return (
        f'listen = "127.0.0.1:{port}"\nprefix = "always"\n\n[timeouts]\nrefresh_ms = 600000\n\n'
        f'{entries}[[upstream]]\nname = "simple"\nurl = {json.dumps(url)}\n\n[upstream.auth]\n{auth}'
    )


def tools(base: str, key: str) -> list[str]:
    answer = driver.post(base, "tools/list", {}, URL_CAPS, key)
    return [t["name"] for t in answer.get("result", {}).get("tools", [])]


def sign_in_round(base: str, key: str, name: str) -> dict:
    """Calls tool `name`, answers its sign-in round by signing in like a browser; gives the
    retry's answer."""
    call = {"name": name, "arguments": {}}
    result = driver.post(base, "tools/call", call, URL_CAPS, key).get("result", {})
    check(result.get("resultType") == "input_required", f"{name}: no sign-in round: {result}")
    ask = result["inputRequests"]["sluice_sign_in"]
    check(ask.get("method") == "elicitation/create", f"not an elicitation: {ask.get('method')}")
    check(ask["params"].get("mode") == "url", "the sign-in round is not a URL elicitation")
    status, page = peers.browse(ask["params"]["url"])
    check(status == 200 and "Signed in to simple" in page, f"the sign-in ended {status}: {page[:400]}")
    retry = {
        **call,
        "inputResponses": {"sluice_sign_in": {"action": "accept"}},
        "requestState": result["requestState"],
    }
    return driver.post(base, "tools/call", retry, URL_CAPS, key)


def time_text(answer: dict) -> str:
    result = answer.get("result", {})
    text = " ".join(c.get("text", "") for c in result.get("content", []))
    check(not result.get("isError") and "current_time" in text, f"get_time answered {answer}")
    return text


def call_time(base: str, key: str, seen: peers.Seen) -> set[str]:
    """Calls get_time; gives the tokens the server introspected meanwhile."""
    mark = seen.mark()
    time_text(driver.post(base, "tools/call", {"name": "simple__get_time", "arguments": {}}, URL_CAPS, key))
    return seen.since(mark)


def sign_in(base: str, key: str, who: str, seen: peers.Seen) -> set[str]:
    """`who` signs in with the sign-in tool and calls get_time; gives the tokens of that call."""
    check(tools(base, key) == ["simple__sluice_sign_in"], f"{who} signed out sees {tools(base, key)}")
    answer = sign_in_round(base, key, "simple__sluice_sign_in")
    text = json.dumps(answer.get("result", {}))
    check("Signed in to simple" in text, f"{who}'s sign-in retry answered {text[:300]}")
    check("simple__get_time" in tools(base, key), f"{who} signed in sees {tools(base, key)}")
    return call_time(base, key, seen)


def carol(base: str, key: str, seen: peers.Seen) -> set[str]:
    """Carol, signed out, calls get_time: -31040 without URL elicitation, the round with it."""
    mark = seen.mark()
    call = {"name": "simple__get_time", "arguments": {}}
    told = driver.post(base, "tools/call", call, {}, key)
    error = told.get("error", {})
    url = error.get("data", {}).get("url", "")
    check(error.get("code") == -31040 and url.startswith("http://localhost:"), f"carol told {told}")
    check(told.get("status") == 403, f"carol's -31040 came with HTTP {told.get('status')}")
    check(not seen.since(mark), "carol's refused call reached the server")
    print("carol without URL elicitation: -31040 with the URL, nothing reached the server")
    mark = seen.mark()
    time_text(sign_in_round(base, key, "simple__get_time"))
    print("carol signed in through get_time's sign-in round; its retry gave the time")
    return seen.since(mark)


def principals(base: str, keys: dict[str, str], seen: peers.Seen) -> None:
    a = sign_in(base, keys["alice"], "alice", seen)
    check(len(a) == 1, f"alice's call reached the server with {len(a)} tokens")
    print("alice signed in and called get_time: the server saw 1 token")
    b = sign_in(base, keys["bob"], "bob", seen)
    check(len(b) == 1 and not b & a, "bob's call reached the server with alice's token")
    print("bob signed in and called get_time: the server saw 1 token, not alice's")
    c = carol(base, keys["carol"], seen)
    check(c and not c & (a | b), "carol's call reached the server with alice's or bob's token")
    print("carol's retried call: the server saw a token neither alice's nor bob's")
    again = call_time(base, keys["alice"], seen)
    check(again == a, "alice's second call did not reach the server with her own token")
    again = call_time(base, keys["bob"], seen)
    check(again == b, "bob's second call did not reach the server with his own token")
    print("alice and bob called again: the server saw each one's own token")


def main() -> int:
    mode = sys.argv[1]
    work = tempfile.mkdtemp(prefix="sluice-simple-auth-")
    procs, url, seen = peers.upstream(work)
    keys = {n: f"{n}-{secrets.token_hex(16)}" for n in NAMES}
    port = peers.free_port()
    # `dcr`: Sluice registers itself; else its client is registered beforehand.
    client = None if "dcr" in sys.argv else peers.register(seen.issuer, f"http://127.0.0.1:{port}/oauth/callback")
    secret = (client or {}).get("client_secret", "")
    proc, log_path = driver.start(config(url, keys, port, client), work, {"SIMPLE_AUTH_SECRET": secret})
    procs.append(proc)
    code = 0
    try:
        base = driver.endpoint(log_path, proc)
        if mode == "legacy":
            import simple_auth_legacy

            simple_auth_legacy.run(base, keys["dave"])
        else:
            principals(base, keys, seen)
    except Failed as e:
        print(f"FAILED: {e}", file=sys.stderr)
        code = 1
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
    with open(log_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if re.search(r"mcp_[0-9a-f]{32}", text) or (secret and secret in text):
        print("Sluice's trace log holds a simple-auth code, token or client secret", file=sys.stderr)
        return 1
    print(f"trace log of {len(text)} bytes holds no code, token or client secret")
    return code


if __name__ == "__main__":
    sys.exit(main())
