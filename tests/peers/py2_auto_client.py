"""An MCP client on the official Python SDK (PyPI `mcp==2.3.0`) in its default `auto` mode, for `cargo test --test peers` (bridge_b).

`auto` probes `server/discover` first and falls back to the 2025-11-25 `initialize` handshake
only when the server does not answer it. Sluice serves both eras on one endpoint, so this client
must end up speaking 2026-07-28 through it (and never be mistaken for a legacy client).

Takes one argument, a JSON plan:
  {"url": "http://127.0.0.1:PORT/mcp",
   "calls": [{"name": "py__ask_llm", "arguments": {...}, "expect": ["substring", ...]}, ...]}

The sampling callback answers `ECHO2[<prompt>]` from model `fake-llm-auto`. Prints one JSON
summary line on stdout (`SUMMARY {...}`: the mode the client settled on, its protocol version,
the server's name, the tool names, per call its text, the prompts sampled and the HTTP answers
seen) and exits 0 only when every call completed without `isError` and held every `expect`.

Run by hand:  $SLUICE_PY2 tests/peers/py2_auto_client.py '{"url": "...", "calls": []}'
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import anyio
import httpx2

from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CreateMessageRequestParams, CreateMessageResult, TextContent

from common import run_plan

warnings.filterwarnings("ignore", category=DeprecationWarning)

SAMPLED: list[str] = []
HTTP: list[dict[str, Any]] = []


async def fake_llm(context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
    first = params.messages[0].content
    prompt = first.text if isinstance(first, TextContent) else "?"
    SAMPLED.append(prompt)
    return CreateMessageResult(
        role="assistant", content=TextContent(type="text", text=f"ECHO2[{prompt}]"), model="fake-llm-auto", stop_reason="endTurn"
    )


async def on_response(response: httpx2.Response) -> None:
    request = response.request
    method = None
    if request.method == "POST":
        try:
            method = json.loads(request.content or b"{}").get("method")
        except ValueError:
            method = "?"
    HTTP.append({"verb": request.method, "method": method, "status": response.status_code})


def text_of(result) -> str:
    return " | ".join(c.text for c in result.content if isinstance(c, TextContent))


async def run(plan: dict, summary: dict) -> None:
    failures: list[str] = summary["failures"]
    http = httpx2.AsyncClient(timeout=httpx2.Timeout(10, read=20), event_hooks={"response": [on_response]})
    async with http:
        async with Client(
            streamable_http_client(plan["url"], http_client=http),
            mode="auto", sampling_callback=fake_llm, read_timeout_seconds=10, raise_exceptions=True
        ) as client:
            summary["protocol_version"] = client.protocol_version
            info = client.server_info
            summary["server_name"] = getattr(info, "name", None)
            summary["tools"] = [t.name for t in (await client.list_tools()).tools]
            for call in plan["calls"]:
                entry: dict[str, Any] = {"name": call["name"]}
                summary["calls"].append(entry)
                try:
                    result = await client.call_tool(call["name"], call.get("arguments") or {})
                except Exception as exc:  # report every call, then fail
                    entry["exception"] = f"{type(exc).__name__}: {exc}"
                    failures.append(f"call {call['name']} raised {entry['exception']}")
                    continue
                entry["text"] = text_of(result)
                if result.is_error:
                    failures.append(f"call {call['name']} answered isError: {entry['text']}")
                for want in call.get("expect", []):
                    if want not in entry["text"]:
                        failures.append(f"call {call['name']} answered {entry['text']!r}, expected {want!r} in it")


def main() -> int:
    return run_plan(run, sampled=SAMPLED, http=HTTP)


if __name__ == "__main__":
    sys.exit(main())
