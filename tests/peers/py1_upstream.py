"""A pure 2025-11-25 MCP upstream on the last 1.x Python SDK (PyPI `mcp==1.30.0`), for `cargo test --test peers` (bridge_a).

It knows only the handshake-era wire (initialize, Mcp-Session-Id, SSE, server->client requests
sent mid-call) and nothing of Sluice, server/discover or input_required. Its tools ask the client
things mid-call through the SDK's public session API, either on the POST stream of the call
(`related_request_id` set) or, without a related id, on the session's standalone GET stream:

  two_rounds(topic, tag)        sampling on the POST stream, then a second sampling that quotes the
                                first answer; returns both answers
  two_rounds_get(topic, tag)    the same, both asks on the GET stream
  elicit(question, tag)         a form elicitation (schema {answer: string}) on the POST stream
  roots(tag)                    roots/list (the SDK's list_roots: on the GET stream)
  sample_system(text, system, tag)
                                one sampling on the POST stream with `systemPrompt` = system;
                                returns the answer
  keyed(text, tag)              one sampling on the POST stream whose params carry
                                `_meta["dev.sluice/inputKey"] = "llm"`
  pair(topic, tag)              one round of two concurrent asks on the POST stream: sampling
                                (input key "llm") and elicitation (input key "confirm")
  ask_once(text, via, tag)      one sampling, `via` = "post" or "get"; returns the answer
  sample_forever(tag)           samples "round 1", "round 2", ... until cancelled
  sample_with(include_context, tools, max_tokens, tag)
                                one sampling on the POST stream shaped by its arguments
                                (`includeContext`, a `tools` list, `maxTokens`); an ask the
                                client side refuses is reported in the result, not raised
  erase(what, tag)              annotated `destructiveHint: true`; asks nothing, returns "erased <what>"
  slow(ms, tag)                 sleeps `ms` milliseconds, then returns "slept <ms>"
  steps(n)                      reports progress 1..n of n (notifications/progress), then returns
                                "did <n> steps"
  counter()                     returns "pid <its pid> call <n>": the calls this process served
                                (a server's state is per process)

Every tool given a non-empty `tag` appends one line per event to `<events dir>/<tag>`: `start`;
`cancel-notified` when a `notifications/cancelled` naming the call arrives while it runs; then
`done`, `cancelled` (the SDK cancelled the call's task) or `error <type>`. `sample_forever` also
records `answered <n>` after each answered ask; `sample_with` records `asked` before its ask and
`answered` or `refused <code>` after it. Tests read these files
to see what the upstream saw. (`cancel-notified` comes from wrapping the SDK's
`RequestResponder.cancel`, which the SDK calls only for a `notifications/cancelled`: it tells a
cancellation by notification from one by the session ending.)

Binds 127.0.0.1 on a free port and prints `LISTENING <port>` on stdout once it accepts requests.
The process ends when its stdin reaches end-of-file (the test binary holds the pipe), or when killed.

Run by hand:  $SLUICE_PY1 tests/peers/py1_upstream.py --events /tmp/ev   (then Ctrl-D)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

import anyio

from common import Events, serve
from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from mcp.shared import session as shared_session
from mcp.shared.exceptions import McpError
from mcp.shared.message import ServerMessageMetadata

INPUT_KEY = "dev.sluice/inputKey"
EVENTS = Events()

mcp = FastMCP("bridge-a-py1-upstream", host="127.0.0.1")


record = EVENTS.record


# (id(session), request id) -> tag of the calls in progress.
RUNNING: dict[tuple[int, Any], str] = {}
_sdk_cancel = shared_session.RequestResponder.cancel


async def _cancel_noting_the_notification(self: Any) -> None:
    tag = RUNNING.get((id(self._session), self.request_id))
    if tag:
        record(tag, "cancel-notified")
    await _sdk_cancel(self)


shared_session.RequestResponder.cancel = _cancel_noting_the_notification


@contextlib.asynccontextmanager
async def track(ctx: Context, tag: str):
    """Records start, then done / cancelled / error, for tests that watch the upstream."""
    key = (id(ctx.session), ctx.request_context.request_id)
    RUNNING[key] = tag
    record(tag, "start")
    try:
        yield
    except anyio.get_cancelled_exc_class():
        record(tag, "cancelled")
        raise
    except BaseException as exc:
        record(tag, f"error {type(exc).__name__}")
        raise
    finally:
        RUNNING.pop(key, None)
    record(tag, "done")


async def ask(ctx: Context, request: Any, result_type: type[Any], post: bool) -> Any:
    """Sends a server->client request mid-call: on the call's POST stream, or (no related id) on GET."""
    related = ctx.request_context.request_id if post else None
    return await ctx.session.send_request(
        types.ServerRequest(request), result_type, metadata=ServerMessageMetadata(related_request_id=related)
    )


async def sample(ctx: Context, prompt: str, post: bool = True, key: str | None = None, system: str | None = None) -> str:
    meta = {"_meta": {INPUT_KEY: key}} if key else {}
    params = types.CreateMessageRequestParams(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        maxTokens=50,
        systemPrompt=system,
        **meta,
    )
    result = await ask(ctx, types.CreateMessageRequest(params=params), types.CreateMessageResult, post)
    text = result.content.text if isinstance(result.content, types.TextContent) else repr(result.content)
    return f"{text} (model={result.model})"


async def elicit_answer(ctx: Context, question: str, key: str | None = None) -> str:
    meta = {"_meta": {INPUT_KEY: key}} if key else {}
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    params = types.ElicitRequestFormParams(message=question, requestedSchema=schema, **meta)
    result = await ask(ctx, types.ElicitRequest(params=params), types.ElicitResult, True)
    return f"{result.action} {(result.content or {}).get('answer', '-')}"


@mcp.tool()
async def two_rounds(topic: str, ctx: Context, tag: str = "") -> str:
    """Two sampling rounds on the call's POST stream."""
    async with track(ctx, tag):
        first = await sample(ctx, f"pick files for {topic}")
        second = await sample(ctx, f"summarize {topic} given {first}")
        return f"two_rounds[{topic}] first: {first} | second: {second}"


@mcp.tool()
async def two_rounds_get(topic: str, ctx: Context, tag: str = "") -> str:
    """Two sampling rounds on the session's GET stream."""
    async with track(ctx, tag):
        first = await sample(ctx, f"pick files for {topic}", post=False)
        second = await sample(ctx, f"summarize {topic} given {first}", post=False)
        return f"two_rounds_get[{topic}] first: {first} | second: {second}"


@mcp.tool()
async def elicit(question: str, ctx: Context, tag: str = "") -> str:
    """A form elicitation on the call's POST stream."""
    async with track(ctx, tag):
        return f"elicit[{question}]: " + await elicit_answer(ctx, question)


@mcp.tool()
async def roots(ctx: Context, tag: str = "") -> str:
    """roots/list through the SDK's list_roots (which sends it on the GET stream)."""
    async with track(ctx, tag):
        listed = await ctx.session.list_roots()
        return "roots: " + ", ".join(f"{r.name or '-'}={r.uri}" for r in listed.roots)


@mcp.tool()
async def sample_system(text: str, system: str, ctx: Context, tag: str = "") -> str:
    """One sampling on the POST stream with a system prompt."""
    async with track(ctx, tag):
        return f"sample_system: " + await sample(ctx, f"question {text}", system=system)


@mcp.tool()
async def keyed(text: str, ctx: Context, tag: str = "") -> str:
    """One sampling whose input key is named by the hint: "llm"."""
    async with track(ctx, tag):
        return f"keyed[{text}]: " + await sample(ctx, f"keyed {text}", key="llm")


@mcp.tool()
async def pair(topic: str, ctx: Context, tag: str = "") -> str:
    """Two concurrent asks (one round): sampling "llm" and elicitation "confirm"."""
    async with track(ctx, tag):
        said, confirmed = await asyncio.gather(
            sample(ctx, f"pair {topic}", key="llm"), elicit_answer(ctx, f"confirm {topic}?", key="confirm")
        )
        return f"pair[{topic}] llm: {said} | confirm: {confirmed}"


@mcp.tool()
async def ask_once(text: str, ctx: Context, via: str = "post", tag: str = "") -> str:
    """One sampling on the POST (via=post) or GET (via=get) stream."""
    async with track(ctx, tag):
        return f"ask_once[{text}] via {via}: " + await sample(ctx, f"question {text}", post=via != "get")


@mcp.tool()
async def sample_forever(ctx: Context, tag: str = "") -> str:
    """Samples round after round until cancelled."""
    async with track(ctx, tag):
        n = 0
        while True:
            n += 1
            await sample(ctx, f"round {n}")
            record(tag, f"answered {n}")


@mcp.tool()
async def sample_with(
    ctx: Context, include_context: str = "", tools: bool = False, max_tokens: int = 50, tag: str = ""
) -> str:
    """One sampling shaped by the arguments; a refused ask is reported, and the call goes on."""
    async with track(ctx, tag):
        params = types.CreateMessageRequestParams(
            messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text="shaped ask"))],
            maxTokens=max_tokens,
            includeContext=include_context or None,
            tools=[types.Tool(name="lookup", inputSchema={"type": "object"})] if tools else None,
        )
        result_type = types.CreateMessageResultWithTools if tools else types.CreateMessageResult
        record(tag, "asked")
        try:
            result = await ask(ctx, types.CreateMessageRequest(params=params), result_type, True)
        except McpError as exc:
            record(tag, f"refused {exc.error.code}")
            return f"sample_with: the ask was refused ({exc.error.code}: {exc.error.message})"
        record(tag, "answered")
        content = result.content[0] if isinstance(result.content, list) else result.content
        text = content.text if isinstance(content, types.TextContent) else repr(content)
        return f"sample_with: {text} (model={result.model})"


@mcp.tool(annotations=types.ToolAnnotations(destructiveHint=True))
async def erase(what: str, ctx: Context, tag: str = "") -> str:
    """Destructive (by its annotations): erases `what`."""
    async with track(ctx, tag):
        return f"erased {what}"


@mcp.tool()
async def steps(n: int, ctx: Context) -> str:
    """Reports progress 1..n of n, then returns."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n)
    return f"did {n} steps"


@mcp.tool()
async def slow(ms: int, ctx: Context, tag: str = "") -> str:
    """Works (sleeps) for `ms` milliseconds."""
    async with track(ctx, tag):
        await anyio.sleep(ms / 1000)
        return f"slept {ms}"


CALLS = 0


@mcp.tool()
async def counter() -> str:
    """Counts the calls this process has served: `pid P call N` (a server's state is per process)."""
    global CALLS
    CALLS += 1
    return f"pid {os.getpid()} call {CALLS}"


def main() -> None:
    EVENTS.parse_args(__doc__.splitlines()[0])
    if EVENTS.stdio:
        mcp.run(transport="stdio")
    elif EVENTS.sse:
        serve(mcp.sse_app())
    else:
        serve(mcp.streamable_http_app())


if __name__ == "__main__":
    main()
