"""A 2025-11-25 MCP client on the last 1.x Python SDK (PyPI `mcp==1.30.0`), for `cargo test --test peers` (bridge_b).

It knows only the handshake-era wire: `initialize`, `Mcp-Session-Id`, SSE, and server->client
requests that arrive mid-call, which its sampling callback answers. It knows nothing of
server/discover or input_required: through Sluice (bridge B) every `input_required` round of a
2026-07-28 upstream has to reach it as a real `sampling/createMessage` request.

Takes one argument, a JSON plan:
  {"url": "http://127.0.0.1:PORT/mcp",
   "token": "api key" | null,                    # sent as Authorization: Bearer
   "calls": [{"name": "py__ask_llm", "arguments": {...}, "expect": ["substring", ...]},
             {"name": "mock__forever", "arguments": {...}, "expect_error": -31010}, ...]}

Does, in order: initialize (declaring sampling), ping, logging/setLevel "debug", tools/list,
then each call. The sampling callback answers `ECHO1[<prompt>]` from model `fake-llm-py1`.

Prints one JSON summary line on stdout (`SUMMARY {...}`): the negotiated version, the server's
name, whether a session id was issued, the tool names, per call its text, everything the
sampling callback was asked (with the id of the server's request), and the HTTP answers the
transport saw (method, status, content type). Exits 0 only when every call completed without
`isError` and its text contains every `expect` substring, or, for a call with `expect_error`,
failed with a JSON-RPC error of that code (`McpError`).

Run by hand:  $SLUICE_PY1 tests/peers/py1_client.py '{"url": "...", "calls": []}'
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import httpx

from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.context import RequestContext
from mcp.shared.exceptions import McpError

from common import run_plan

ASKED: list[dict[str, Any]] = []
HTTP: list[dict[str, Any]] = []


async def fake_llm(context: RequestContext[ClientSession, Any], params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    """Sampling callback: a deterministic stand-in for the host's LLM."""
    first = params.messages[0].content
    prompt = first.text if isinstance(first, types.TextContent) else "?"
    ASKED.append({"prompt": prompt, "request_id": context.request_id, "max_tokens": params.maxTokens})
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=f"ECHO1[{prompt}]"), model="fake-llm-py1", stopReason="endTurn"
    )


async def on_response(response: httpx.Response) -> None:
    request = response.request
    method = None
    if request.method == "POST":
        try:
            method = json.loads(request.content or b"{}").get("method")
        except ValueError:
            method = "?"
    HTTP.append(
        {
            "verb": request.method,
            "method": method,
            "status": response.status_code,
            "content_type": response.headers.get("content-type", ""),
        }
    )


def text_of(result: types.CallToolResult) -> str:
    return " | ".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def run(plan: dict, summary: dict) -> None:
    failures: list[str] = summary["failures"]
    headers = {"Authorization": f"Bearer {plan['token']}"} if plan.get("token") else None
    http = httpx.AsyncClient(
        headers=headers, timeout=httpx.Timeout(10, read=20), event_hooks={"response": [on_response]}
    )
    async with http:
        async with streamable_http_client(plan["url"], http_client=http) as (read, write, session_id):
            async with ClientSession(
                read,
                write,
                sampling_callback=fake_llm,
                client_info=types.Implementation(name="bridge-b-py1-client", version="1.30.0"),
            ) as session:
                init = await session.initialize()
                summary["protocol_version"] = init.protocolVersion
                summary["server_name"] = init.serverInfo.name
                summary["session_id_issued"] = bool(session_id())
                summary["ping"] = (await session.send_ping()).model_dump(exclude_none=True)
                summary["set_level"] = (await session.set_logging_level("debug")).model_dump(exclude_none=True)
                summary["tools"] = [t.name for t in (await session.list_tools()).tools]
                for call in plan["calls"]:
                    entry: dict[str, Any] = {"name": call["name"]}
                    summary["calls"].append(entry)
                    try:
                        result = await session.call_tool(call["name"], call.get("arguments") or {})
                    except McpError as exc:
                        entry["error"] = {"code": exc.error.code, "message": exc.error.message, "data": exc.error.data}
                        if exc.error.code != call.get("expect_error"):
                            failures.append(f"call {call['name']} failed with {entry['error']}")
                        continue
                    except Exception as exc:  # report every call, then fail
                        entry["exception"] = f"{type(exc).__name__}: {exc}"
                        failures.append(f"call {call['name']} raised {entry['exception']}")
                        continue
                    if "expect_error" in call:
                        failures.append(f"call {call['name']} completed; expected error {call['expect_error']}")
                    entry["text"] = text_of(result)
                    entry["is_error"] = bool(result.isError)
                    if result.isError:
                        failures.append(f"call {call['name']} answered isError: {entry['text']}")
                    for want in call.get("expect", []):
                        if want not in entry["text"]:
                            failures.append(f"call {call['name']} answered {entry['text']!r}, expected {want!r} in it")


def main() -> int:
    return run_plan(run, asked=ASKED, http=HTTP)


if __name__ == "__main__":
    sys.exit(main())
