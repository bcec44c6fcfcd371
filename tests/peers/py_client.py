"""An MCP client on the official Python SDK (PyPI `mcp==2.3.0`) in `2026-07-28` mode, for `cargo test --test peers` (interop).

Takes one argument, a JSON plan:
  {"url": "http://127.0.0.1:PORT/mcp",
   "expect_tools": ["py__echo", ...],          # the exact tool names, in order
   "calls": [{"name": "py__echo", "arguments": {...}, "expect": "substring of the text"}, ...]}

Does, in order: `server/discover` (validated against the SDK's DiscoverResult), `tools/list`
twice (the second bypasses the SDK's response cache, so both reach the server), then each call.
Tools answering `input_required` are driven by the SDK: the sampling callback below answers
`sampling/createMessage` with `ECHO[<prompt>]` and the elicitation callback accepts forms with
`{"answer": "yes-from-python"}`.

Prints one JSON summary line on stdout (`SUMMARY {...}`) and exits 0 only when every check held:
discover parsed, both listings equal `expect_tools`, every call completed without `isError` and
its text contains `expect`.

Run by hand:  $SLUICE_PY2 tests/peers/py_client.py '{"url": "...", "expect_tools": [], "calls": []}'
"""

from __future__ import annotations

import sys
import warnings

import anyio

from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    DiscoverResult,
    ElicitRequestParams,
    ElicitResult,
    TextContent,
)

from common import run_plan

warnings.filterwarnings("ignore", category=DeprecationWarning)

SAMPLED: list[str] = []
ELICITED: list[str] = []


async def fake_llm(context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
    """Sampling callback: a deterministic stand-in for the host's LLM."""
    first = params.messages[0].content
    prompt = first.text if isinstance(first, TextContent) else "?"
    SAMPLED.append(prompt)
    return CreateMessageResult(
        role="assistant",
        content=TextContent(type="text", text=f"ECHO[{prompt}]"),
        model="fake-llm-py",
        stop_reason="endTurn",
    )


async def fake_user(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
    """Elicitation callback: a user who accepts every form."""
    ELICITED.append(getattr(params, "message", "?"))
    return ElicitResult(action="accept", content={"answer": "yes-from-python"})


def text_of(result) -> str:
    return " | ".join(c.text for c in result.content if isinstance(c, TextContent))


async def run(plan: dict, summary: dict) -> None:
    failures: list[str] = summary["failures"]
    async with Client(
        plan["url"],
        mode="2026-07-28",
        sampling_callback=fake_llm,
        elicitation_callback=fake_user,
        read_timeout_seconds=10,
        raise_exceptions=True,
    ) as client:
        summary["protocol_version"] = client.protocol_version

        raw = await client.session.send_discover("2026-07-28")
        discovered = DiscoverResult.model_validate(raw)
        summary["discover"] = {
            "supported_versions": list(discovered.supported_versions),
            "tools": discovered.capabilities.tools is not None,
            "server_info": (raw.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo"),
        }

        first = await client.list_tools()
        second = await client.list_tools(cache_mode="bypass")
        summary["tools_first"] = [t.name for t in first.tools]
        summary["tools_second"] = [t.name for t in second.tools]
        summary["list_hints"] = {"ttl_ms": second.ttl_ms, "cache_scope": second.cache_scope}
        for label, names in (("first", summary["tools_first"]), ("second", summary["tools_second"])):
            if names != plan["expect_tools"]:
                failures.append(f"tools/list ({label}) gave {names}, expected {plan['expect_tools']}")

        for call in plan["calls"]:
            entry = {"name": call["name"]}
            summary["calls"].append(entry)
            try:
                result = await client.call_tool(call["name"], call.get("arguments") or {})
            except Exception as exc:  # report every call, then fail
                entry["exception"] = f"{type(exc).__name__}: {exc}"
                failures.append(f"call {call['name']} raised {entry['exception']}")
                continue
            entry["text"] = text_of(result)
            entry["is_error"] = bool(result.is_error)
            if result.is_error:
                failures.append(f"call {call['name']} answered isError: {entry['text']}")
            elif call.get("expect", "") not in entry["text"]:
                failures.append(f"call {call['name']} answered {entry['text']!r}, expected it to contain {call['expect']!r}")


def main() -> int:
    return run_plan(run, sampled=SAMPLED, elicited=ELICITED)


if __name__ == "__main__":
    sys.exit(main())
