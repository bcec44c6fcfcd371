//! The bridge B mock: a [`Spec::raw`] preset that notes what it saw and did.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use super::{err, held, ok, tool_args, Mock, Reply, Spec};

/// The bridge B mock: a [`Spec::raw`] mock noting, in order, every request (`"<method>
/// <name>"`) and what its tools did. Tools:
///
/// - `echo(text)`: completes at once with the text (and a `resultType` Sluice must strip for a
///   legacy client);
/// - `forever(topic)`: always answers `input_required` with one sampling request (input key
///   `llm`), whatever the retry carries: a loop bomb only the round cap ends; notes
///   `forever answered <n>`;
/// - `hang(tag)`: opens an SSE answer and never finishes it; notes `start <tag>` and, when
///   Sluice drops it (the request was cancelled), `closed <tag>`.
pub struct Noted {
    /// The mock.
    pub mock: Mock,
    events: Arc<Mutex<Vec<String>>>,
    changed: Arc<tokio::sync::Notify>,
}

impl Noted {
    /// Its MCP endpoint.
    pub fn url(&self) -> String {
        self.mock.url()
    }

    /// What it noted so far.
    pub fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }

    /// How many events equal `event`.
    pub fn count(&self, event: &str) -> usize {
        self.events().iter().filter(|e| *e == event).count()
    }

    /// Waits (at most 2 s) until it noted `event`; fails the test otherwise.
    pub async fn wait_event(&self, event: &str) {
        let wait = async {
            loop {
                let changed = self.changed.notified();
                if self.count(event) > 0 {
                    return;
                }
                changed.await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(2), wait)
            .await
            .is_err()
        {
            panic!(
                "the mock upstream did not see {event:?} within 2 s; it saw {:?}",
                self.events()
            );
        }
    }
}

/// Starts the [`Noted`] bridge B mock.
pub async fn noted() -> Noted {
    let events = Arc::new(Mutex::new(Vec::<String>::new()));
    let changed = Arc::new(tokio::sync::Notify::new());
    let note = {
        let (events, changed) = (events.clone(), changed.clone());
        move |e: String| {
            events.lock().unwrap().push(e);
            changed.notify_waiters();
        }
    };
    let meta = json!({"io.modelcontextprotocol/serverInfo": {"name": "bridge-b-mock", "version": "1.0.0"}});
    let (on_note, tool_note) = (note.clone(), note);
    let m = meta.clone();
    let mock = Spec::raw("bridge-b-mock")
        .caps(json!({"tools": {}}))
        .discover_member("serverInfo", json!({"name": "bridge-b-mock", "version": "1.0.0"}))
        .list_meta(true)
        .tools_json(json!([tool_args("echo", &["text"]), tool_args("forever", &["topic"]), tool_args("hang", &["tag"])]))
        // A 2026-07-28 server with tools only: the other lists are methods it does not know.
        .on(|s| {
            matches!(s.method.as_str(), "prompts/list" | "resources/list" | "resources/templates/list")
                .then(|| err(404, &s.id, -32601, "method not found"))
        })
        .observe(move |s| on_note(format!("{} {}", s.method, s.params["name"].as_str().unwrap_or("")).trim_end().to_owned()))
        .fallback(move |s| {
            let p = &s.params;
            match (s.method.as_str(), s.tool()) {
                ("tools/call", "echo") => {
                    Some(ok(&s.id, json!({"resultType": "complete", "content": [{"type": "text", "text": p["arguments"]["text"]}], "_meta": m})))
                }
                ("tools/call", "forever") => {
                    let answered = p["inputResponses"].as_object().map_or(0, |r| r.len());
                    tool_note(format!("forever answered {answered}"));
                    Some(ok(
                        &s.id,
                        json!({"resultType": "input_required", "requestState": "mock-state",
                            "inputRequests": {"llm": {"method": "sampling/createMessage", "params": {
                                "messages": [{"role": "user", "content": {"type": "text", "text": format!("one more idea about {}", p["arguments"]["topic"].as_str().unwrap_or("?"))}}],
                                "maxTokens": 16}}},
                            "_meta": m}),
                    ))
                }
                ("tools/call", "hang") => {
                    let tag = p["arguments"]["tag"].as_str().unwrap_or("").to_owned();
                    tool_note(format!("start {tag}"));
                    let closed = tool_note.clone();
                    Some(held(vec![": working\n\n".to_owned()]).on_close(move || closed(format!("closed {tag}"))).into())
                }
                ("tools/call", _) => Some(Reply::Json(200, json!({"jsonrpc": "2.0", "id": s.id, "error": {"code": -32602, "message": "unknown tool"}}).to_string())),
                _ => None,
            }
        })
        .start()
        .await;
    let _ = meta;
    Noted {
        mock,
        events,
        changed,
    }
}
