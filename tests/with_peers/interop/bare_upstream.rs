//! A spec-breaking modern upstream, on the mock of tests/support/modern.rs: it answers
//! 2026-07-28 requests but leaves out what the spec requires of every result: no `resultType`,
//! no `ttlMs` / `cacheScope` on `server/discover` and `tools/list`, no `serverInfo` in `_meta`.
//!
//! Tools: `shout(text)` (upper-cases) and `count(text)` (characters). Anything else, including
//! `subscriptions/listen`, gets `-32601` with HTTP 404, as a modern server would answer.

use serde_json::{json, Value};

use crate::support::modern::{err, ok, Mock, Spec};

/// The tools it lists, in order.
pub(crate) const TOOLS: [&str; 2] = ["shout", "count"];

/// Starts it on 127.0.0.1, port 0.
pub(crate) async fn start() -> Mock {
    let schema =
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
    let tools = json!({"tools": [
        {"name": "shout", "description": "Upper-case the text", "inputSchema": schema},
        {"name": "count", "description": "Count the characters", "inputSchema": schema},
    ]});
    Spec::raw("bare")
        .on(move |s| {
            let text = |t: String| ok(&s.id, json!({"content": [{"type": "text", "text": t}]}));
            let arg = s
                .params
                .pointer("/arguments/text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            Some(match s.method.as_str() {
                "server/discover" => ok(
                    &s.id,
                    json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}),
                ),
                "tools/list" => ok(&s.id, tools.clone()),
                "tools/call" => match s.tool() {
                    "shout" => text(arg.to_uppercase()),
                    "count" => text(arg.chars().count().to_string()),
                    _ => err(200, &s.id, -32602, "unknown tool"),
                },
                _ => err(404, &s.id, -32601, "method not found"),
            })
        })
        .start()
        .await
}
