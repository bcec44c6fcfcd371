"""An MCP client on the official Python SDK (PyPI `mcp==2.3.0`) in `2026-07-28` mode, for `cargo test --test peers` (bridge_a).

Takes one argument, a JSON plan:
  {"url": "http://127.0.0.1:PORT/mcp",
   "callbacks": ["sampling", "elicitation", "roots"],   # which callbacks (and so capabilities) to declare
   "calls": [{"name": "two_rounds", "arguments": {...}, "expect": ["substring", ...]}, ...]}

Calls each tool with `Client.call_tool`, which drives `input_required` rounds itself: every
embedded request goes to the real callbacks below and the call is retried with the answers and
the server's requestState until the result is complete.

  sampling    answers `ECHO[<prompt>]` from model `fake-llm-py2`
  elicitation accepts with {"answer": "yes-from-py2", "name": "Py Two"}
  roots       lists file:///work/alpha (name "alpha") and file:///work/beta (name "beta")

Prints one JSON summary line on stdout (`SUMMARY {...}`: per call its text and the number of
rounds its callbacks served, plus everything the callbacks were asked) and exits 0 only when
every call completed without `isError` and its text contains every `expect` substring.

Run by hand:  $SLUICE_PY2 tests/peers/py2_bridge_client.py '{"url": "...", "callbacks": [], "calls": []}'
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
    ElicitRequestParams,
    ElicitResult,
    ListRootsResult,
    Root,
    TextContent,
)

from common import run_plan

# Sampling, elicitation and roots are deprecated as of 2026-07-28 (SEP-2577) but still on the wire.
warnings.filterwarnings("ignore", category=DeprecationWarning)

ASKED: list[dict] = []


async def fake_llm(context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
    first = params.messages[0].content
    prompt = first.text if isinstance(first, TextContent) else "?"
    ASKED.append({"method": "sampling/createMessage", "prompt": prompt})
    return CreateMessageResult(
        role="assistant", content=TextContent(type="text", text=f"ECHO[{prompt}]"), model="fake-llm-py2", stop_reason="endTurn"
    )


async def fake_user(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
    ASKED.append({"method": "elicitation/create", "message": getattr(params, "message", "?")})
    return ElicitResult(action="accept", content={"answer": "yes-from-py2", "name": "Py Two"})


async def fake_roots(context: ClientRequestContext) -> ListRootsResult:
    ASKED.append({"method": "roots/list"})
    return ListRootsResult(roots=[Root(uri="file:///work/alpha", name="alpha"), Root(uri="file:///work/beta", name="beta")])


def text_of(result) -> str:
    return " | ".join(c.text for c in result.content if isinstance(c, TextContent))


async def run(plan: dict, summary: dict) -> None:
    failures: list[str] = summary["failures"]
    callbacks = set(plan.get("callbacks", ["sampling", "elicitation", "roots"]))
    async with Client(
        plan["url"],
        mode="2026-07-28",
        sampling_callback=fake_llm if "sampling" in callbacks else None,
        elicitation_callback=fake_user if "elicitation" in callbacks else None,
        list_roots_callback=fake_roots if "roots" in callbacks else None,
        read_timeout_seconds=10,
        raise_exceptions=True,
    ) as client:
        summary["protocol_version"] = client.protocol_version
        await client.list_tools()  # the 2026-07-28 client calls only tools it has listed
        for call in plan["calls"]:
            entry: dict = {"name": call["name"]}
            summary["calls"].append(entry)
            before = len(ASKED)
            try:
                result = await client.call_tool(call["name"], call.get("arguments") or {})
            except Exception as exc:  # report every call, then fail
                entry["exception"] = f"{type(exc).__name__}: {exc}"
                failures.append(f"call {call['name']} raised {entry['exception']}")
                continue
            entry["asked"] = ASKED[before:]
            entry["text"] = text_of(result)
            entry["is_error"] = bool(result.is_error)
            if result.is_error:
                failures.append(f"call {call['name']} answered isError: {entry['text']}")
            for want in call.get("expect", []):
                if want not in entry["text"]:
                    failures.append(f"call {call['name']} answered {entry['text']!r}, expected it to contain {want!r}")


def main() -> int:
    return run_plan(run, asked=ASKED)


if __name__ == "__main__":
    sys.exit(main())
