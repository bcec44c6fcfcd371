"""A 2024-11-05 HTTP+SSE MCP client on the official Python SDK (`mcp.client.sse.sse_client`), for
`cargo test --test peers` (bridge_b::sse_clients). Runs on `mcp==1.30.0` ($SLUICE_PY1) and
`mcp==2.3.0` ($SLUICE_PY2): both still ship the old transport.

It opens the SSE stream, POSTs every message to the endpoint the stream's first event names, and
reads every answer, and each server->client request mid-call, from the stream; its sampling
callbacks answer those. Through Sluice every `input_required` round (of a 2026-07-28 upstream,
or of a 2025-11-25 one's mid-call ask, bridged by bridge A) must reach it as a real
`sampling/createMessage` on the stream.

Takes one argument, a JSON plan:
  {"url": "http://127.0.0.1:PORT/sse",
   "token": "api key" | null,                    # Authorization: Bearer, on the GET and every POST
   "calls": [{"name": "py__ask_llm", "arguments": {...}, "expect": ["substring", ...]}, ...]}

Does, in order: initialize (declaring sampling and elicitation), ping, tools/list, then each
call. The sampling callback answers `ECHO1[<prompt>]` from model `fake-llm-sse`; the elicitation
callback accepts every form with `{"answer": "yes-over-sse"}`.

Prints one `SUMMARY {...}` line: the negotiated version, the server's name, the tool names, per
call its text, what the sampling and elicitation callbacks were asked, and every HTTP answer the transport saw
(verb, status, content type). Exits 0 only when every call completed without `isError` and its
text holds every `expect` substring.

Run by hand:  $SLUICE_PY1 tests/peers/py_sse_client.py '{"url": "http://127.0.0.1:8080/sse", "calls": []}'
"""

from __future__ import annotations

import sys
from typing import Any

try:  # mcp==2.x speaks HTTP through its own fork, httpx2; mcp==1.x through httpx
    import httpx2 as httpx
except ImportError:
    import httpx

from mcp import ClientSession, types
from mcp.client.sse import sse_client

from common import run_plan

ASKED: list[dict[str, Any]] = []
ELICITED: list[str] = []
HTTP: list[dict[str, Any]] = []


async def fake_llm(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    """Sampling callback: a deterministic stand-in for the host's LLM."""
    first = params.messages[0].content
    prompt = first.text if isinstance(first, types.TextContent) else "?"
    ASKED.append({"prompt": prompt, "max_tokens": getattr(params, "maxTokens", None) or getattr(params, "max_tokens", None)})
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=f"ECHO1[{prompt}]"), model="fake-llm-sse", stopReason="endTurn"
    )


async def fake_user(context: Any, params: Any) -> types.ElicitResult:
    """Elicitation callback: a user who accepts every form."""
    ELICITED.append(getattr(params, "message", "?"))
    return types.ElicitResult(action="accept", content={"answer": "yes-over-sse"})


async def on_response(response: httpx.Response) -> None:
    HTTP.append({"verb": response.request.method, "status": response.status_code, "content_type": response.headers.get("content-type", "")})


def client_factory(headers: dict[str, str] | None = None, timeout: httpx.Timeout | None = None, auth: httpx.Auth | None = None) -> httpx.AsyncClient:
    """The SDK's own factory's settings, plus a hook that records every HTTP answer."""
    return httpx.AsyncClient(headers=headers, timeout=timeout, auth=auth, follow_redirects=True, event_hooks={"response": [on_response]})


def text_of(result: Any) -> str:
    return " | ".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def run(plan: dict, summary: dict) -> None:
    failures: list[str] = summary["failures"]
    headers = {"Authorization": f"Bearer {plan['token']}"} if plan.get("token") else None
    async with sse_client(plan["url"], headers=headers, timeout=10, sse_read_timeout=30, httpx_client_factory=client_factory) as (read, write):
        async with ClientSession(
            read, write, sampling_callback=fake_llm, elicitation_callback=fake_user, client_info=types.Implementation(name="sse-client", version="1")
        ) as session:
            init = await session.initialize()
            # mcp==1.x names the members as the wire does, mcp==2.x in snake case.
            summary["protocol_version"] = getattr(init, "protocolVersion", None) or getattr(init, "protocol_version", None)
            summary["server_name"] = (getattr(init, "serverInfo", None) or getattr(init, "server_info")).name
            summary["ping"] = (await session.send_ping()).model_dump(exclude_none=True)
            summary["tools"] = [t.name for t in (await session.list_tools()).tools]
            for call in plan["calls"]:
                entry: dict[str, Any] = {"name": call["name"]}
                summary["calls"].append(entry)
                try:
                    result = await session.call_tool(call["name"], call.get("arguments") or {})
                except Exception as exc:  # report every call, then fail
                    entry["exception"] = f"{type(exc).__name__}: {exc}"
                    failures.append(f"call {call['name']} raised {entry['exception']}")
                    continue
                entry["text"] = text_of(result)
                entry["is_error"] = bool(getattr(result, "isError", None) or getattr(result, "is_error", False))
                if entry["is_error"]:
                    failures.append(f"call {call['name']} answered isError: {entry['text']}")
                for want in call.get("expect", []):
                    if want not in entry["text"]:
                        failures.append(f"call {call['name']} answered {entry['text']!r}, expected {want!r} in it")


def main() -> int:
    return run_plan(run, asked=ASKED, elicited=ELICITED, http=HTTP)


if __name__ == "__main__":
    sys.exit(main())
