//! A 2025-11-25 session over a stdio process: one process is one session (the stdio transport
//! has no session id), started for it and ended with it.
//!
//! Takes the upstream's stdio [`Spec`], a started process (a warm spare or a new one), the bridged
//! capabilities and the principal; gives a [`Session`] that has done `initialize` and
//! `notifications/initialized` on the process, with a task reading its stdout: responses to
//! Sluice's own requests go to their waiter, everything else is routed as on an HTTP session's
//! GET stream (pings answered, list changes reported, the rest to the leasing call).
//! Refuses, by ending the process and marking the upstream unhealthy with a message naming
//! it (never the bytes): a stdout line over `limits.max_sse_event_bytes`, and a line that is not
//! JSON-RPC (a stdio server must write only MCP messages to stdout).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::HeaderValue;
use serde_json::{json, Value};
use tokio_util::codec::LinesCodecError;

use super::session::{route, ListChanged, Route, Session};
use crate::mcp::jsonrpc::Incoming;
use crate::mcp::method::Method as McpMethod;
use crate::upstream::client::UpstreamError;
use crate::upstream::stdio::{Lines, Proc, Spec};
use crate::upstream::Upstream;

/// What one session's process needs beyond the upstream.
pub(super) struct Open<'a> {
    pub(super) spec: &'a Spec,
    pub(super) started: (Arc<Proc>, Lines),
    pub(super) caps: super::Bridged,
    pub(super) principal: &'a str,
    pub(super) on_list_changed: ListChanged,
    pub(super) response: Duration,
    pub(super) max_event: usize,
}

/// Starts a process and runs the handshake on it.
pub(super) async fn open(up: Arc<Upstream>, o: Open<'_>) -> Result<Arc<Session>, UpstreamError> {
    let (proc, lines) = o.started;
    let (tx, rx) = crate::upstream::queue::bounded(256, o.max_event);
    let leased = Arc::new(AtomicBool::new(false));
    let reader = Reader { up: up.clone(), proc: proc.clone(), tx, leased: leased.clone(), on_list_changed: o.on_list_changed };
    let task = tokio::spawn(reader.run(lines)).abort_handle();
    match handshake(&proc, &up, o.caps, o.response).await {
        Ok((version, init)) => {
            o.spec.succeeded();
            Ok(Arc::new(Session::over_stdio(up, version, init, o.principal, o.caps, rx, leased, proc, task)))
        }
        Err(e) => {
            o.spec.failed();
            task.abort();
            proc.end("its initialize handshake failed");
            Err(e)
        }
    }
}

async fn handshake(proc: &Proc, up: &Upstream, caps: super::Bridged, response: Duration) -> Result<(HeaderValue, Value), UpstreamError> {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": McpMethod::Initialize.as_str(), "params": {
        "protocolVersion": "2025-11-25", "capabilities": caps.to_legacy(), "clientInfo": crate::upstream::discover::server_info()}});
    let line = proc.request(0, Bytes::from(init.to_string()), response).await?;
    let msg: Incoming =
        serde_json::from_str(&line).map_err(|_| UpstreamError::Protocol(up.name.clone(), "initialize answer is not JSON-RPC".into()))?;
    let result: Value = match (msg.result, msg.error) {
        (Some(r), _) => serde_json::from_str(r.get()).unwrap_or(Value::Null),
        (_, Some(e)) => return Err(UpstreamError::Protocol(up.name.clone(), format!("initialize failed with error {}", e.code))),
        _ => return Err(UpstreamError::Protocol(up.name.clone(), "initialize answer has no result".into())),
    };
    let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or("2025-11-25");
    let version = HeaderValue::from_str(version).map_err(|_| UpstreamError::Protocol(up.name.clone(), "bad protocolVersion".into()))?;
    let note = json!({"jsonrpc": "2.0", "method": McpMethod::Initialized.as_str()});
    proc.send(note.to_string().as_bytes()).await?;
    Ok((version, result))
}

/// The task that reads a process's stdout.
struct Reader {
    up: Arc<Upstream>,
    proc: Arc<Proc>,
    tx: crate::upstream::queue::Sender<String>,
    leased: Arc<AtomicBool>,
    on_list_changed: ListChanged,
}

impl Reader {
    async fn run(self, mut lines: Lines) {
        while let Some(line) = lines.next().await {
            let line = match line {
                Ok(l) => l,
                Err(LinesCodecError::MaxLineLengthExceeded) => {
                    let max = self.proc_max();
                    return self.fault(&format!("it wrote a stdout line over {max} bytes (limits.max_sse_event_bytes)"));
                }
                Err(LinesCodecError::Io(_)) => return,
            };
            if line.trim().is_empty() {
                continue;
            }
            let Ok(msg) = serde_json::from_str::<Incoming>(&line) else {
                let n = line.len();
                return self.fault(&format!(
                    "it wrote a {n}-byte stdout line that is not JSON-RPC; a stdio server must write only MCP messages to stdout (logs go to stderr)"
                ));
            };
            // A response to a request of Sluice's own (the handshake, a list) goes to its waiter;
            // any other, the call's own answer among them, is routed like every message.
            let line = match msg.id.as_ref().and_then(|i| i.get().parse::<u64>().ok()).filter(|_| msg.is_response()) {
                Some(id) => match self.proc.complete(id, line) {
                    Ok(()) => continue,
                    Err(line) => line,
                },
                None => line,
            };
            match route(&msg, &self.leased, &self.up.name) {
                Route::Reply(id, outcome) => {
                    let body = super::session::reply_body(&id, outcome);
                    if self.proc.send(&body).await.is_err() {
                        return;
                    }
                }
                Route::ListChanged => (self.on_list_changed)(&line),
                Route::ToCall => {
                    let size = line.len();
                    if self.tx.send(line, size).await.is_err() {
                        return;
                    }
                }
                Route::Drop => {}
            }
        }
    }

    fn proc_max(&self) -> usize {
        self.up.stdio.as_ref().map_or(0, |s| s.max_line)
    }

    /// Ends the process for a protocol error and marks the upstream unhealthy, saying why.
    fn fault(&self, why: &str) {
        tracing::warn!(upstream = %self.up.name, reason = %why, "stdio upstream broke the protocol; its process is ended");
        self.up.mark_failed(&format!("upstream '{}' (stdio): {why}", self.up.name));
        self.proc.end(why);
    }
}
