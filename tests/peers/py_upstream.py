"""A modern MCP upstream on the official Python SDK (PyPI `mcp==2.3.0`), for `cargo test --test peers` (interop).

Binds 127.0.0.1 on a free port, prints `LISTENING <port>` on stdout once it accepts requests, and
serves the streamable HTTP endpoint `/mcp` (2026-07-28 stateless requests; the SDK also answers
handshake-era clients, which these tests do not use).

Tools:
  echo(text)      -> text
  add(a, b)       -> a + b
  ask_llm(prompt) -> a `Resolve(Sample)` parameter: on 2026-07-28 the first call answers
                     resultType=input_required with a sampling request and an SDK-sealed
                     requestState; the retry carrying inputResponses completes.
  ask_raw(prompt) -> the tool body itself returns an `InputRequiredResult` (key "llm",
                     requestState "raw-round-1") and completes on the retry.
  trace_seen(note) -> the W3C trace context the SDK took from the request's `_meta` (its
                     OpenTelemetry middleware's parent span), "TRACEID-SPANID", or "none";
                     with a tracestate, "TRACEID-SPANID;TRACESTATE" (its W3C header form).
  ask_llm_legacy(prompt)
                  -> 2025-11-25 style: `ctx.session.create_message(...)` mid-call, on the
                     call's own stream; works only for a client on the 2025-11-25 wire (on
                     2026-07-28 there is no back-channel and the call fails).

The process ends when its stdin reaches end-of-file, so a test binary that exits (or crashes)
never leaves it behind: the test keeps the write end of the pipe open and never writes to it.

Run by hand:  $SLUICE_PY2 tests/peers/py_upstream.py   (then Ctrl-D or Ctrl-C)
With --stdio it serves the stdio transport instead (Sluice starts it as a stdio upstream); with
--tls FOLDER, HTTPS with a certificate of a CA of its own (common.tls_files: FOLDER/ca.pem).
"""

from __future__ import annotations

import warnings
from typing import Annotated

import anyio

from common import serve
from mcp.server.mcpserver import Context, MCPServer, Resolve, Sample
from mcp.types import (
    CallToolResult,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
)

# Sampling is deprecated as of 2026-07-28 (SEP-2577) but still on the wire; keep stderr quiet.
warnings.filterwarnings("ignore", category=DeprecationWarning)

server = MCPServer("interop-py-upstream", version="1.0.0")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def trace_seen(note: str) -> str:
    """The trace context this call arrived with, as the SDK's OpenTelemetry middleware read it."""
    from opentelemetry import trace

    # With the API alone (no SDK), the middleware's span is the propagated parent itself.
    sc = trace.get_current_span().get_span_context()
    if not sc.is_valid:
        return "none"
    state = sc.trace_state.to_header() if sc.trace_state else ""
    return f"{sc.trace_id:032x}-{sc.span_id:016x}" + (f";{state}" if state else "")


def _ask_client_llm(prompt: str) -> Sample:
    """Resolver: have the client's LLM answer `prompt` (an input_required round on 2026-07-28)."""
    return Sample([SamplingMessage(role="user", content=TextContent(type="text", text=prompt))], max_tokens=32)


@server.tool()
async def ask_llm(prompt: str, reply: Annotated[CreateMessageResult, Resolve(_ask_client_llm)]) -> str:
    """Ask the client's LLM through the SDK's resolver."""
    said = reply.content.text if isinstance(reply.content, TextContent) else repr(reply.content)
    return f"llm said: {said} (model={reply.model})"


@server.tool()
async def ask_llm_legacy(prompt: str, ctx: Context) -> str:
    """2025-11-25 style: send sampling/createMessage on this call's stream, mid-call."""
    result = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=32,
        related_request_id=ctx.request_id,
    )
    said = result.content.text if isinstance(result.content, TextContent) else repr(result.content)
    return f"legacy sampling said: {said} (model={result.model})"


@server.tool()
async def ask_raw(prompt: str, ctx: Context) -> CallToolResult | InputRequiredResult:
    """Drive one input_required round by hand: ask for a sample, complete on the retry."""
    responses = ctx.input_responses or {}
    if "llm" not in responses:
        sample = CreateMessageRequest(
            params=CreateMessageRequestParams(
                messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
                max_tokens=32,
            )
        )
        return InputRequiredResult(input_requests={"llm": sample}, request_state="raw-round-1")
    reply = responses["llm"]
    content = getattr(reply, "content", None)
    said = content.text if isinstance(content, TextContent) else repr(reply)
    return CallToolResult(content=[TextContent(type="text", text=f"raw said: {said} (state={ctx.request_state})")])


def main() -> None:
    import sys

    if "--stdio" in sys.argv[1:]:
        server.run("stdio")
    elif "--tls" in sys.argv[1:]:
        folder = sys.argv[sys.argv.index("--tls") + 1]
        serve(server.streamable_http_app(host="127.0.0.1"), tls=folder)
    else:
        serve(server.streamable_http_app(host="127.0.0.1"))


if __name__ == "__main__":
    main()
