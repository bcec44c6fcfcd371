"""An MCP host on the official Python SDK (PyPI `mcp==2.3.0`) signing in to Sluice's
`[auth.login]` (issue 32) with the SDK's own `OAuthClientProvider` (an `httpx2` auth flow): the
SDK reads the 401's resource metadata and Sluice's authorization server metadata, registers
(Dynamic Client Registration), and hands the authorization URL (PKCE S256) to the redirect
handler below, which does the browser's part: follows redirects with one cookie jar, answers
Sluice's consent form ("Continue") and the IdP's sign-in and consent forms
(tests/peers/idp.mjs: any login name is a user) until the browser is sent to the client's
redirect URI; the callback handler gives the SDK that code and state. Then it lists the tools and
calls one, mode `auto` (Sluice answers the 2026-07-28 wire).

Takes one argument, a JSON plan:
  {"url": "http://127.0.0.1:PORT/mcp", "user": "dave", "tool": "NAME", "arguments": {...}}

Prints one line `SUMMARY {...}`: `steps`, `tools`, `text` (the call's), `failures`, and
`canaries` (the code, the consent cookie and the tokens, for the test to check none is in
Sluice's output). Exits 0 only without failures.

Run by hand:  $SLUICE_PY2 tests/peers/py_login_client.py '{"url": "...", "user": "dave", ...}'
"""

from __future__ import annotations

import re
import sys
from urllib.parse import parse_qs, urljoin, urlparse

import httpx2

from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from mcp.types import TextContent

from common import run_plan

REDIRECT = "http://127.0.0.1:1/callback"
STEPS: list[str] = []
CANARIES: list[str] = []


class Memory:
    """The SDK's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens = None
        self.info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens) -> None:
        self.tokens = tokens
        CANARIES.extend(t for t in (tokens.access_token, tokens.refresh_token) if t)
        STEPS.append("tokens saved")

    async def get_client_info(self):
        return self.info

    async def set_client_info(self, info) -> None:
        self.info = info
        STEPS.append("registered")


async def browse(start: str, user: str) -> str:
    """The browser: from `start` until it is sent to REDIRECT; gives that URL."""
    async with httpx2.AsyncClient(follow_redirects=False, timeout=10) as web:
        res = await web.get(start)
        at = start
        for _ in range(20):
            if 300 <= res.status_code < 400:
                nxt = urljoin(at, res.headers["location"])
                if nxt.startswith(REDIRECT):
                    CANARIES.extend(c.value for c in web.cookies.jar if c.name.startswith("sluice_login"))
                    return nxt
                at, res = nxt, await web.get(nxt)
                continue
            html = res.text
            if res.status_code != 200:
                raise RuntimeError(f"{urlparse(at).netloc} answered {res.status_code}: {html[:300]}")
            action = re.search(r'<form[^>]*action="([^"]+)"', html)
            if not action:
                raise RuntimeError(f"no form at {at}: {html[:300]}")
            form = dict(re.findall(r'<input[^>]*type="hidden"[^>]*name="([^"]+)"[^>]*value="([^"]*)"', html))
            if 'name="decision"' in html:
                form["decision"] = "allow"
                STEPS.append("consented at Sluice")
            if 'name="login"' in html:
                form.update(login=user, password="any")
                STEPS.append("signed in at the IdP")
            at = urljoin(at, action.group(1).replace("&amp;", "&"))
            res = await web.post(at, data=form)
    raise RuntimeError("the browser was not sent back within 20 steps")


async def run(plan: dict, summary: dict) -> None:
    back: dict[str, str] = {}

    async def redirect_handler(url: str) -> None:
        STEPS.append("sent to authorize")
        back["url"] = await browse(url, plan["user"])

    async def callback_handler() -> AuthorizationCodeResult:
        q = parse_qs(urlparse(back["url"]).query)
        CANARIES.append(q["code"][0])
        STEPS.append("back with a code")
        return AuthorizationCodeResult(code=q["code"][0], state=q.get("state", [None])[0], iss=q.get("iss", [None])[0])

    metadata = OAuthClientMetadata(
        client_name="Sluice login test host (Python)",
        redirect_uris=[REDIRECT],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    provider = OAuthClientProvider(plan["url"], metadata, Memory(), redirect_handler, callback_handler)
    async with httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(10, read=20)) as http:
        async with Client(streamable_http_client(plan["url"], http_client=http), mode="auto", raise_exceptions=True) as client:
            STEPS.append("connected")
            summary["tools"] = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool(plan["tool"], plan.get("arguments") or {})
            summary["text"] = " | ".join(c.text for c in result.content if isinstance(c, TextContent))
            if result.is_error:
                summary["failures"].append(f"the call failed: {summary['text']}")


def main() -> int:
    return run_plan(run, steps=STEPS, canaries=CANARIES)


if __name__ == "__main__":
    sys.exit(main())
