"""The `legacy` scenario of tests/conformance/simple_auth.py: a 2025-11-25 client, the Python
SDK's `Client` (`mcp==2.3.0`) in `mode="legacy"` over Streamable HTTP with an API key, reaching
a simple-auth upstream in `oauth` mode through Sluice's bridge B while signed out.

Takes Sluice's endpoint and the key; its elicitation callback takes only a URL-mode request
with an `elicitationId` (anything else is recorded as a failure and declined), signs in at that
URL like a browser (simple_auth_peers.browse) and accepts. Checks that only the sign-in tool is listed first, that the one call of
`simple__get_time` was sent exactly one such request and came back with the tool's result,
and that the upstream's tools are listed after; raises `Failed` otherwise.
"""

from __future__ import annotations

import anyio
import httpx2

from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitRequestParams, ElicitResult, TextContent

import simple_auth_peers as peers
from simple_auth_peers import check


async def session(base: str, key: str) -> list[str]:
    asked: list[str] = []

    async def user(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        if params.mode != "url" or not getattr(params, "elicitation_id", None):
            asked.append(f"not a URL elicitation with an id: {params.mode}")
            return ElicitResult(action="decline")
        status, page = await anyio.to_thread.run_sync(peers.browse, params.url)
        asked.append(f"url {status} {'Signed in to simple' in page}")
        return ElicitResult(action="accept")

    headers = {"Authorization": f"Bearer {key}"}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(10, read=30), trust_env=False)
    async with http:
        transport = streamable_http_client(base, http_client=http)
        async with Client(transport, mode="legacy", elicitation_callback=user, read_timeout_seconds=30) as client:
            check(client.protocol_version == "2025-11-25", f"negotiated {client.protocol_version}")
            names = [t.name for t in (await client.list_tools()).tools]
            check(names == ["simple__sluice_sign_in"], f"signed out, the tools listed are {names}")
            result = await client.call_tool("simple__get_time", {})
            text = " ".join(c.text for c in result.content if isinstance(c, TextContent))
            check(not result.is_error and "current_time" in text, f"get_time answered {text[:300]}")
            names = [t.name for t in (await client.list_tools()).tools]
            check("simple__get_time" in names and "simple__sluice_sign_in" not in names, f"signed in: {names}")
    return asked


def run(base: str, key: str) -> None:
    asked = anyio.run(session, base, key)
    check(asked == ["url 200 True"], f"the client was asked {asked}")
    print("a 2025-11-25 client was sent elicitation/create in mode url, signed in, accepted")
    print("its call of simple__get_time came back with the time; get_time is listed")
