//! What a mock's handler answers, and the helpers that write answers and descriptors.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::watch;

/// What a handler answers.
pub enum Reply {
    /// JSON text as written, with an HTTP status.
    Json(u16, String),
    /// Raw bytes with an HTTP status and content type.
    Raw(u16, &'static str, Bytes),
    /// A result for the request's id: `resultType` "complete" added when missing, `_meta` set
    /// to the server's info.
    Result(Value),
    /// A JSON-RPC error for the request's id, with an HTTP status.
    Error(u16, i64, &'static str),
    /// An SSE answer.
    Sse(Sse),
    /// This answer after a pause.
    After(Duration, Box<Reply>),
    /// This answer once the gate reads `true`.
    Gate(watch::Receiver<bool>, Box<Reply>),
    /// Never answers (until the mock stops).
    Hang,
}

impl Reply {
    /// The result `r` ([`Reply::Result`]) once the gate reads `true`.
    pub fn gate(gate: watch::Receiver<bool>, r: Value) -> Reply {
        Reply::Gate(gate, Box::new(Reply::Result(r)))
    }

    /// The result `r` ([`Reply::Result`]) after `pause`.
    pub fn after(pause: Duration, r: Value) -> Reply {
        Reply::After(pause, Box::new(Reply::Result(r)))
    }
}

/// An SSE answer: body chunks, each written after its pause; `hang` keeps the stream open
/// afterwards; `on_close` runs when the body is dropped (finished, or cancelled by Sluice).
pub struct Sse {
    pub(super) chunks: Vec<(Duration, Bytes)>,
    pub(super) hang: bool,
    pub(super) on_close: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl Sse {
    /// Runs `f` when Sluice drops the stream (or it ends).
    pub fn on_close(mut self, f: impl FnOnce() + Send + Sync + 'static) -> Sse {
        self.on_close = Some(Box::new(f));
        self
    }
}

impl From<Sse> for Reply {
    fn from(s: Sse) -> Reply {
        Reply::Sse(s)
    }
}

/// SSE text chunks written `every` apart; `hang` keeps the stream open afterwards.
pub fn sse(chunks: Vec<String>, every: Duration, hang: bool) -> Reply {
    let chunks = chunks
        .into_iter()
        .enumerate()
        .map(|(i, c)| (if i == 0 { Duration::ZERO } else { every }, Bytes::from(c)))
        .collect();
    Reply::Sse(Sse {
        chunks,
        hang,
        on_close: None,
    })
}

/// An SSE answer of these body chunks, in order, one HTTP chunk each.
pub fn chunked(chunks: Vec<Bytes>) -> Reply {
    Reply::Sse(Sse {
        chunks: chunks.into_iter().map(|c| (Duration::ZERO, c)).collect(),
        hang: false,
        on_close: None,
    })
}

/// An SSE stream of JSON-RPC messages, each after its pause (the request's id is not filled
/// in: write it into the messages).
pub fn stream(events: Vec<(Duration, Value)>) -> Reply {
    Reply::Sse(Sse {
        chunks: events
            .into_iter()
            .map(|(p, m)| (p, Bytes::from(ev(&m))))
            .collect(),
        hang: false,
        on_close: None,
    })
}

/// An SSE answer sending these chunks, then held open until Sluice drops it.
pub fn held(chunks: Vec<String>) -> Sse {
    Sse {
        chunks: chunks
            .into_iter()
            .map(|c| (Duration::ZERO, Bytes::from(c)))
            .collect(),
        hang: true,
        on_close: None,
    }
}

/// A JSON-RPC result body for `id`, HTTP 200.
pub fn ok(id: &Value, result: Value) -> Reply {
    Reply::Json(
        200,
        json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
    )
}

/// A JSON-RPC error body for `id`, with the HTTP status.
pub fn err(status: u16, id: &Value, code: i64, message: &str) -> Reply {
    Reply::Json(
        status,
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            .to_string(),
    )
}

/// `{"jsonrpc":"2.0","id":<id>,"result":<raw>}` as written (no re-encoding), HTTP 200.
pub fn result(id: impl std::fmt::Display, raw: &str) -> Reply {
    Reply::Json(200, result_text(id, raw))
}

/// The text of a JSON-RPC result message (`id` is raw JSON text, or `{id}` for a script).
pub fn result_text(id: impl std::fmt::Display, raw: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{raw}}}"#)
}

/// A JSON-RPC error answer, HTTP 200.
pub fn error(id: impl std::fmt::Display, code: i64, message: &str) -> Reply {
    let id: Value = serde_json::from_str(&id.to_string()).unwrap_or(Value::Null);
    Reply::Json(
        200,
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            .to_string(),
    )
}

/// One SSE event carrying `msg` on one data line.
pub fn ev(msg: &Value) -> String {
    event(&msg.to_string())
}

/// One SSE event carrying `data` on one line.
pub fn event(data: &str) -> String {
    format!("data: {data}\n\n")
}

/// `bytes` cut into chunks of `size` bytes (the last may be shorter).
pub fn chunks(bytes: &[u8], size: usize) -> Vec<Bytes> {
    bytes
        .chunks(size.max(1))
        .map(Bytes::copy_from_slice)
        .collect()
}

/// A plain tool descriptor, as text.
pub fn tool(name: &str) -> String {
    json!({"name": name, "description": format!("the {name} tool"), "inputSchema": {"type": "object"}}).to_string()
}

/// A tool descriptor with string arguments.
pub fn tool_args(name: &str, args: &[&str]) -> Value {
    let props: serde_json::Map<String, Value> = args
        .iter()
        .map(|a| ((*a).to_owned(), json!({"type": "string"})))
        .collect();
    json!({"name": name, "description": format!("the {name} tool"), "inputSchema": {"type": "object", "properties": props}})
}

/// A tool descriptor marked destructive.
pub fn destructive(name: &str) -> Value {
    let mut t = tool_args(name, &[]);
    t["annotations"] = json!({"destructiveHint": true});
    t
}
