//! A 2026-07-28 stdio server: stateless, so one process serves every principal, its requests
//! multiplexed by id (the stdio transport has one stdin and one stdout for all of them).
//!
//! Takes a modern request's body (a client's call, a probe, a list page, a listen); gives its
//! [`lines::Answer`]: the notifications that belong to it, then its response. Each request is
//! written with an id of the process's own (a client's id could clash with another's), and a
//! `progressToken` the client gave is replaced by one derived from that id (none is added);
//! the rest of the body keeps its bytes. What comes back is routed by decoded value (the
//! response by id, progress by token, listen notifications by `subscriptionId`, a server's
//! `notifications/cancelled` by `requestId`) and given back the client's own id and token. A
//! request whose answer is dropped before it finished is cancelled with `notifications/cancelled`
//! (the stdio cancellation). One writer task owns the process's stdin: every line is written
//! whole or not at all, whoever gave up waiting. The process is started on first use and again
//! after it exited (with the spec's back-off, reset by the first response it gives); a request
//! written before it gave any line has `start_ms` for each message (its boot), not the response
//! timeout. Its place is its own, not one of `max_processes` (those are the 2025-11-25 sessions'
//! of a dual-era server).
//!
//! Bounds: one route per request in flight (requests are bounded by `limits.max_in_flight`);
//! [`NOTES`] notifications queued per request and none over `limits.max_sse_event_bytes` (more
//! are dropped while its reader is slow: one slow client never stalls the process's reader for
//! the others); [`WRITES`] lines queued for stdin, a request waiting at most
//! `timeouts.response_ms` for room; a stdout line over the bound is dropped (the request it
//! answered times out; the process and the other requests go on). Refuses, ending the process
//! and marking the upstream unhealthy with why (never the bytes), a line that is not a JSON
//! object; an object that is neither a request, a response nor a notification is ignored.
//! Unrelated log messages are not relayed: over stdio nothing says which request one belongs to,
//! and a principal must not see another's. A server→client request (a 2026-07-28 server has
//! none but `ping`) is answered: `ping` with an empty result, anything else with `-32601`, when
//! stdin has room (the reader never waits on stdin).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio_util::codec::LinesCodecError;

use super::{Line, Lines, Proc, Spec};
use crate::mcp::jsonrpc::Envelope;
use crate::mcp::method::Method;
use crate::upstream::client::{Answer, HttpClient, UpstreamError};
use crate::upstream::lines::{self, Final};
use crate::upstream::Upstream;

/// Notifications queued for one request before more are dropped.
pub const NOTES: usize = 64;

/// Lines queued for the process's stdin.
pub const WRITES: usize = 64;

/// The prefix of the progress tokens Sluice writes (followed by the request's own id).
const TOKEN_PREFIX: &str = "sluice-";

/// How long a listen may stay silent: over stdio there is no keep-alive to bound it by, and the
/// process's exit ends it anyway.
const LISTEN_SILENCE: Duration = Duration::from_secs(86_400);

/// The running process of a modern stdio upstream, if any.
pub struct Shared {
    live: Mutex<Option<Arc<Live>>>,
    /// One start at a time.
    starting: tokio::sync::Mutex<()>,
    /// Its one place: free again once the process before has exited.
    place: Arc<Semaphore>,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            live: Mutex::default(),
            starting: tokio::sync::Mutex::new(()),
            place: Arc::new(Semaphore::new(1)),
        }
    }
}

/// One process and the requests in flight on it.
struct Live {
    proc: Arc<Proc>,
    /// Lines for its stdin, written whole by its writer task.
    writes: mpsc::Sender<Bytes>,
    routes: Mutex<HashMap<u64, Route>>,
    next: AtomicU64,
    /// Whether it has written a line yet (until then it may still be booting).
    booted: AtomicBool,
    /// Whether it has answered a request (a start that never does is a failed start).
    answered: AtomicBool,
    /// Ended on purpose (a 2025-11-25 server found by the probe): its end is no failed start.
    retired: AtomicBool,
    /// The largest notification relayed (`limits.max_sse_event_bytes`).
    max_note: usize,
}

/// Where what answers one request goes, and what to give back to it.
struct Route {
    id: Value,
    token: Option<Value>,
    listen: bool,
    notes: mpsc::Sender<String>,
    fin: oneshot::Sender<Final>,
}

/// Writes one modern request to the upstream's shared process; gives its answer as a stream
/// bounded by `stream_timeout` per message (by `start_ms` while the process has not spoken yet).
pub async fn post(
    up: &Arc<Upstream>,
    client: &HttpClient,
    body: Bytes,
    stream_timeout: Option<Duration>,
) -> Result<Answer, UpstreamError> {
    let spec = up.stdio.as_ref().ok_or_else(|| {
        UpstreamError::Protocol(up.name.clone(), "it is not a stdio server".into())
    })?;
    let live = live(up, spec, client.max_event_bytes()).await?;
    let n = live.next.fetch_add(1, Ordering::Relaxed);
    let (line, route_of, own) =
        rewrite(body, n).map_err(|why| UpstreamError::Protocol(up.name.clone(), why))?;
    if !own {
        // A client's request: from now on its stderr may carry the client's content.
        live.proc.handshaken();
    }
    let (notes, notes_rx) = mpsc::channel(NOTES);
    let (fin, fin_rx) = oneshot::channel();
    if let Ok(mut r) = live.routes.lock() {
        r.insert(n, route_of(notes, fin));
    }
    // Cancel-safe: a line is queued whole or not at all, and the writer writes it whole.
    let queued = tokio::time::timeout(spec.write_timeout, live.writes.send(line)).await;
    if !matches!(queued, Ok(Ok(()))) {
        if let Ok(mut r) = live.routes.lock() {
            r.remove(&n);
        }
        return Err(match queued {
            Err(_) => {
                UpstreamError::Timeout(up.name.clone(), spec.write_timeout.as_millis() as u64)
            }
            _ => live.proc.exit_error(),
        });
    }
    let guard = Cancel {
        live: live.clone(),
        id: n,
    };
    let bound = match stream_timeout {
        Some(t) if live.booted.load(Ordering::Acquire) => t,
        Some(t) => t.max(spec.cfg.start),
        None => LISTEN_SILENCE,
    };
    Ok(Answer::Sse(client.lines_stream(
        &up.name,
        lines::Answer::new(notes_rx, fin_rx, Box::new(guard)),
        Some(bound),
    )))
}

/// Ends the shared process, if one runs, and waits for it: a server found not to be 2026-07-28
/// was sent a request before `initialize`, and its 2025-11-25 sessions each get a process of
/// their own (the first of them not held back by this one's end).
pub async fn retire(spec: &Spec, why: &str) {
    let Some(l) = spec.shared.live.lock().ok().and_then(|mut g| g.take()) else {
        return;
    };
    l.retired.store(true, Ordering::Release);
    l.proc.end(why);
    l.proc.ended().await;
    spec.reset_backoff();
}

/// The running process, or a new one.
async fn live(
    up: &Arc<Upstream>,
    spec: &Arc<Spec>,
    max_note: usize,
) -> Result<Arc<Live>, UpstreamError> {
    let running = || {
        spec.shared
            .live
            .lock()
            .ok()
            .and_then(|g| g.clone())
            .filter(|l| !l.proc.is_done())
    };
    if let Some(l) = running() {
        return Ok(l);
    }
    let _one = spec.shared.starting.lock().await;
    if let Some(l) = running() {
        return Ok(l);
    }
    let place = tokio::time::timeout(spec.grace, spec.shared.place.clone().acquire_owned()).await;
    let Ok(Ok(place)) = place else {
        return Err(UpstreamError::Exited(
            up.name.clone(),
            "its last process has not exited yet".into(),
        ));
    };
    let (proc, lines) = spec.start_alone(place)?;
    let (writes, rx) = mpsc::channel(WRITES);
    tokio::spawn(write(proc.clone(), rx));
    let l = Arc::new(Live {
        proc,
        writes,
        routes: Mutex::default(),
        next: AtomicU64::new(1),
        booted: AtomicBool::new(false),
        answered: AtomicBool::new(false),
        retired: AtomicBool::new(false),
        max_note,
    });
    if let Ok(mut g) = spec.shared.live.lock() {
        *g = Some(l.clone());
    }
    tokio::spawn(read(Arc::downgrade(up), spec.clone(), l.clone(), lines));
    Ok(l)
}

/// The one writer of the process's stdin (each write bounded by `timeouts.response_ms`; one
/// that is not read ends the process).
async fn write(proc: Arc<Proc>, mut lines: mpsc::Receiver<Bytes>) {
    while let Some(line) = lines.recv().await {
        if proc.send(&line).await.is_err() {
            return;
        }
    }
}

type RouteOf = Box<dyn FnOnce(mpsc::Sender<String>, oneshot::Sender<Final>) -> Route + Send>;

/// The request as written to the process (its id `n`; a progress token it carries replaced by
/// one derived from `n`; every other member its own bytes), and how to route what answers it.
/// Also whether it is `server/discover` (what Sluice's own probe asks; it carries no content).
fn rewrite(body: Bytes, n: u64) -> Result<(Bytes, RouteOf, bool), String> {
    let env =
        Envelope::parse(body).map_err(|_| "a request that is not a JSON-RPC request".to_owned())?;
    let own = env.method == Method::ServerDiscover;
    let id: Value = env
        .id
        .as_ref()
        .and_then(|i| serde_json::from_str(i.get()).ok())
        .ok_or("a request without an id")?;
    let listen = env.method == Method::SubscriptionsListen;
    let mut token = None;
    let line = env.rewrite(Some(&n.to_string()), |key, raw| {
        if key != "_meta" {
            return None;
        }
        let mut meta: Map<String, Value> = serde_json::from_str(raw).ok()?;
        let t = meta.get_mut("progressToken")?;
        token = Some(std::mem::replace(
            t,
            Value::from(format!("{TOKEN_PREFIX}{n}")),
        ));
        Some(Some(Value::Object(meta).to_string()))
    });
    Ok((
        line,
        Box::new(move |notes, fin| Route {
            id,
            token,
            listen,
            notes,
            fin,
        }),
        own,
    ))
}

/// Cancels its request when dropped before the request finished.
struct Cancel {
    live: Arc<Live>,
    id: u64,
}

impl Drop for Cancel {
    fn drop(&mut self) {
        let open = self
            .live
            .routes
            .lock()
            .ok()
            .and_then(|mut r| r.remove(&self.id))
            .is_some();
        if open && !self.live.proc.is_done() {
            let note = json!({"jsonrpc": "2.0", "method": Method::Cancelled.as_str(),
                "params": {"requestId": self.id, "reason": "the client went away"}});
            let _ = self.live.writes.try_send(Bytes::from(note.to_string()));
        }
    }
}

/// Reads the process's stdout until it ends, routing each message; then fails what is in flight.
async fn read(up: Weak<Upstream>, spec: Arc<Spec>, live: Arc<Live>, mut lines: Lines) {
    while let Some(item) = lines.next().await {
        let line = match item {
            Ok(Line::Text(l)) => l,
            Ok(Line::TooLong) | Err(LinesCodecError::MaxLineLengthExceeded) => {
                tracing::warn!(upstream = %spec.name, max = live.proc.max_line, "stdio upstream wrote a stdout line over the bound (limits.max_response_bytes); it is dropped");
                continue;
            }
            Err(LinesCodecError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
                fault(&up, &live, "it wrote a stdout line that is not UTF-8 text");
                break;
            }
            Err(LinesCodecError::Io(_)) => break,
        };
        if line.trim().is_empty() {
            continue;
        }
        live.booted.store(true, Ordering::Release);
        match serde_json::from_str::<Map<String, Value>>(&line) {
            Ok(msg) => deliver(&live, &spec, msg),
            Err(_) => {
                let n = line.len();
                fault(&up, &live, &format!("it sent a {n}-byte message that is not JSON-RPC (a stdio server must write only MCP messages to stdout; logs go to stderr)"));
                break;
            }
        }
    }
    // Its stdout ended: it exits (or is ended when it does not within its grace).
    if tokio::time::timeout(spec.grace, live.proc.ended())
        .await
        .is_err()
    {
        live.proc.end("it closed its stdout but kept running");
        live.proc.ended().await;
    }
    let why = match live.proc.exit_error() {
        UpstreamError::Exited(_, why) => why,
        other => other.to_string(),
    };
    if !live.answered.load(Ordering::Acquire) && !live.retired.load(Ordering::Acquire) {
        spec.failed(); // it never answered: the next start backs off
        if !spec.is_closed() {
            spec.log_failed_start(&why, &live.proc).await;
        }
    }
    // A process that served and ended on its own (not retired, not at shutdown): the upstream
    // is down, told once with its exit status; its re-prober starts the next process
    // (`catalog::reprobe`). One that never answered is a failed start, which the probe tells.
    let crashed = live.answered.load(Ordering::Acquire)
        && !live.retired.load(Ordering::Acquire)
        && !spec.is_closed();
    if let Some(up) = up
        .upgrade()
        .filter(|u| crashed && !u.retired.is_cancelled())
    {
        up.mark_failed(&format!("upstream '{}' stopped: {why}", up.name));
    }
    let routes = live
        .routes
        .lock()
        .map(|mut r| std::mem::take(&mut *r))
        .unwrap_or_default();
    for (_, route) in routes {
        let _ = route.fin.send(Err(why.clone()));
    }
}

/// Ends the process for a protocol error and marks the upstream unhealthy, saying why.
fn fault(up: &Weak<Upstream>, live: &Live, why: &str) {
    if let Some(up) = up.upgrade() {
        tracing::warn!(upstream = %up.name, reason = %crate::escape::Escaped(why), "stdio upstream broke the protocol; its process is ended");
        up.mark_failed(&format!("upstream '{}': {why}", up.name));
    }
    live.proc.end(why);
}

/// Routes one message from the process.
fn deliver(live: &Live, spec: &Spec, mut msg: Map<String, Value>) {
    let method = msg.get("method").and_then(Value::as_str).map(Method::parse);
    let is_response = msg.contains_key("result") || msg.contains_key("error");
    match (method, msg.get("id").cloned()) {
        (None, Some(id)) if is_response => {
            let Some(n) = whole_number(&id) else { return };
            let Some(route) = live.routes.lock().ok().and_then(|mut r| r.remove(&n)) else {
                return;
            };
            if !live.answered.swap(true, Ordering::AcqRel) {
                live.proc.handshaken();
                spec.succeeded();
            }
            msg.insert("id".into(), route.id.clone());
            if let Some(meta) = msg.get_mut("result").and_then(|r| r.get_mut("_meta")) {
                restore_subscription(meta, n, &route.id);
            }
            let _ = route.fin.send(Ok(Value::Object(msg).to_string()));
        }
        (Some(m), Some(id)) => {
            let answer = match m {
                Method::Ping => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
                _ => {
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": crate::mcp::jsonrpc::METHOD_NOT_FOUND,
                    "message": "Sluice serves a 2026-07-28 stdio server no server-to-client requests but ping"}})
                }
            };
            // Never waits on stdin: with no room, the server's request goes unanswered.
            let _ = live.writes.try_send(Bytes::from(answer.to_string()));
        }
        (Some(m), None) => notify(live, m, msg),
        _ => {} // neither a request, a response nor a notification: nothing to route
    }
}

/// Routes one notification to the request it belongs to, with the client's own id and token.
fn notify(live: &Live, method: Method, mut msg: Map<String, Value>) {
    let params = msg.get("params");
    let meta = params.and_then(|p| p.get("_meta"));
    let by_token = || {
        let t = params?
            .get("progressToken")?
            .as_str()?
            .strip_prefix(TOKEN_PREFIX)?;
        t.parse::<u64>().ok()
    };
    let target = match method {
        Method::Progress => by_token(),
        Method::Cancelled => params
            .and_then(|p| p.get("requestId"))
            .and_then(whole_number),
        _ => meta
            .and_then(|m| m.get(crate::mcp::META_SUBSCRIPTION_ID))
            .and_then(whole_number),
    };
    let Ok(mut routes) = live.routes.lock() else {
        return;
    };
    let Some(n) = target else {
        // A list change that names no subscription goes to every listen (they are Sluice's own).
        if matches!(
            method,
            Method::ToolsListChanged | Method::PromptsListChanged | Method::ResourcesListChanged
        ) {
            let text = Value::Object(msg).to_string();
            for r in routes.values().filter(|r| r.listen) {
                let _ = r.notes.try_send(text.clone());
            }
        }
        return;
    };
    if method == Method::Cancelled {
        routes.remove(&n); // the server ended it (a listen): the stream ends
        return;
    }
    let Some(route) = routes.get(&n) else { return };
    if let Some(p) = msg.get_mut("params").and_then(Value::as_object_mut) {
        if method == Method::Progress {
            // Progress only under a token the client gave (one of Sluice's own it never saw).
            let Some(t) = &route.token else { return };
            p.insert("progressToken".into(), t.clone());
        }
        if let Some(meta) = p.get_mut("_meta") {
            restore_subscription(meta, n, &route.id);
        }
    }
    let text = Value::Object(msg).to_string();
    if text.len() > live.max_note || route.notes.try_send(text).is_err() {
        tracing::debug!(
            upstream_note_dropped = true,
            "a notification from a stdio upstream is dropped (over limits.max_sse_event_bytes, or its reader is slow)"
        );
    }
}

/// Gives a `subscriptionId` that is the process's id `n` back the client's own id.
fn restore_subscription(meta: &mut Value, n: u64, id: &Value) {
    if let Some(s) = meta.get_mut(crate::mcp::META_SUBSCRIPTION_ID) {
        if whole_number(s) == Some(n) {
            *s = id.clone();
        }
    }
}

/// A JSON-RPC id as a whole number (`7` and `7.0` alike).
fn whole_number(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && (0.0..9.0e15).contains(f))
            .map(|f| f as u64)
    })
}
