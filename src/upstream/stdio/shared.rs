//! A 2026-07-28 stdio server: stateless, so one process serves every principal, its requests
//! multiplexed by id (the stdio transport has one stdin and one stdout for all of them).
//!
//! Takes a modern request's body (a client's call, a probe, a list page, a listen); gives its
//! [`lines::Answer`]: the notifications that belong to it, then its response. Each request is
//! written with an id of the process's own (a client's id could clash with another's), its
//! `progressToken` replaced by one derived from that id; what comes back is routed by decoded
//! value (the response by id, progress by token, listen notifications by `subscriptionId`, a
//! server's `notifications/cancelled` by `requestId`) and given back the client's own id and
//! token. A request whose answer is dropped before it finished is cancelled with
//! `notifications/cancelled` (the stdio cancellation). The process is started on first use and
//! again after it exited (with the spec's back-off); until it wrote its first line a wait is
//! bounded by `start_ms` (its boot), not the response timeout.
//!
//! Bounds: one route per request in flight (requests are bounded by `limits.max_in_flight`);
//! [`NOTES`] notifications queued per request, more dropped while its reader is slow (one slow
//! client never stalls the process's reader for the others); a stdout line over the bound is
//! dropped (the request it answered times out; the process and the other requests go on).
//! Refuses, ending the process and marking the upstream unhealthy with why (never the bytes),
//! a line that is not a JSON-RPC message. Unrelated log messages are not relayed: over stdio
//! nothing says which request one belongs to, and a principal must not see another's. A
//! server→client request (a 2026-07-28 server has none but `ping`) is answered: `ping` with an
//! empty result, anything else with `-32601`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::LinesCodecError;

use super::{Line, Lines, Proc, Spec};
use crate::mcp::method::Method;
use crate::upstream::client::{Answer, HttpClient, UpstreamError};
use crate::upstream::lines::{self, Final};
use crate::upstream::Upstream;

/// Notifications queued for one request before more are dropped.
pub const NOTES: usize = 64;

/// The prefix of the progress tokens Sluice writes (followed by the request's own id).
const TOKEN_PREFIX: &str = "sluice-";

/// The running process of a modern stdio upstream, if any.
#[derive(Default)]
pub struct Shared {
    live: Mutex<Option<Arc<Live>>>,
    /// One start at a time.
    starting: tokio::sync::Mutex<()>,
}

/// One process and the requests in flight on it.
struct Live {
    proc: Arc<Proc>,
    routes: Mutex<HashMap<u64, Route>>,
    next: AtomicU64,
    /// Whether it has written a line yet (until then it may still be booting).
    booted: AtomicBool,
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
pub async fn post(up: &Arc<Upstream>, client: &HttpClient, body: &[u8], stream_timeout: Option<Duration>) -> Result<Answer, UpstreamError> {
    let spec = up.stdio.as_ref().ok_or_else(|| UpstreamError::Protocol(up.name.clone(), "it is not a stdio server".into()))?;
    let live = live(up, spec).await?;
    let n = live.next.fetch_add(1, Ordering::Relaxed);
    let (line, route_of) = rewrite(body, n).map_err(|why| UpstreamError::Protocol(up.name.clone(), why))?;
    let (notes, notes_rx) = mpsc::channel(NOTES);
    let (fin, fin_rx) = oneshot::channel();
    if let Ok(mut r) = live.routes.lock() {
        r.insert(n, route_of(notes, fin));
    }
    let guard = Cancel { live: live.clone(), id: n };
    live.proc.send(line.as_bytes()).await?;
    let booted = live.booted.load(Ordering::Acquire);
    let bound = stream_timeout.map(|t| if booted { t } else { t.max(spec.cfg.start) });
    Ok(Answer::Sse(client.lines_stream(&up.name, lines::Answer::new(notes_rx, fin_rx, Box::new(guard)), bound)))
}

/// Ends the shared process, if one runs: a server found not to be 2026-07-28 was sent a request
/// before `initialize`, and its 2025-11-25 sessions each get a process of their own.
pub fn retire(spec: &Spec, why: &str) {
    if let Some(l) = spec.shared.live.lock().ok().and_then(|mut g| g.take()) {
        l.proc.end(why);
    }
}

/// The running process, or a new one.
async fn live(up: &Arc<Upstream>, spec: &Arc<Spec>) -> Result<Arc<Live>, UpstreamError> {
    let running = || spec.shared.live.lock().ok().and_then(|g| g.clone()).filter(|l| !l.proc.is_done());
    if let Some(l) = running() {
        return Ok(l);
    }
    let _one = spec.shared.starting.lock().await;
    if let Some(l) = running() {
        return Ok(l);
    }
    let slot = spec.slot_within(spec.grace).await.ok_or_else(|| spec.full())?;
    let (proc, lines) = spec.start_alone(slot)?;
    let l = Arc::new(Live { proc, routes: Mutex::default(), next: AtomicU64::new(1), booted: AtomicBool::new(false) });
    if let Ok(mut g) = spec.shared.live.lock() {
        *g = Some(l.clone());
    }
    tokio::spawn(read(Arc::downgrade(up), spec.clone(), l.clone(), lines));
    Ok(l)
}

type RouteOf = Box<dyn FnOnce(mpsc::Sender<String>, oneshot::Sender<Final>) -> Route + Send>;

/// The request as written to the process (its id `n`, its progress token derived from `n`),
/// and how to route what answers it.
fn rewrite(body: &[u8], n: u64) -> Result<(String, RouteOf), String> {
    let mut msg: Map<String, Value> = serde_json::from_slice(body).map_err(|_| "a request that is not a JSON object".to_owned())?;
    let id = msg.insert("id".into(), Value::from(n)).ok_or("a request without an id")?;
    let listen = msg.get("method").and_then(Value::as_str) == Some(Method::SubscriptionsListen.as_str());
    let meta = msg.get_mut("params").and_then(Value::as_object_mut).and_then(|p| p.get_mut("_meta")).and_then(Value::as_object_mut);
    let token = meta.and_then(|m| m.insert("progressToken".into(), Value::from(format!("{TOKEN_PREFIX}{n}"))));
    let text = serde_json::to_string(&msg).map_err(|_| "a request that cannot be written".to_owned())?;
    Ok((text, Box::new(move |notes, fin| Route { id, token, listen, notes, fin })))
}

/// Cancels its request when dropped before the request finished.
struct Cancel {
    live: Arc<Live>,
    id: u64,
}

impl Drop for Cancel {
    fn drop(&mut self) {
        let open = self.live.routes.lock().ok().and_then(|mut r| r.remove(&self.id)).is_some();
        if !open || self.live.proc.is_done() {
            return;
        }
        let note = json!({"jsonrpc": "2.0", "method": Method::Cancelled.as_str(),
            "params": {"requestId": self.id, "reason": "the client went away"}});
        let proc = self.live.proc.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { proc.send(note.to_string().as_bytes()).await });
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
        if !live.booted.swap(true, Ordering::AcqRel) {
            spec.succeeded();
        }
        match serde_json::from_str::<Map<String, Value>>(&line) {
            Ok(msg) => deliver(&live, msg).await,
            Err(_) => {
                let n = line.len();
                fault(&up, &live, &format!("it sent a {n}-byte message that is not JSON-RPC (a stdio server must write only MCP messages to stdout; logs go to stderr)"));
                break;
            }
        }
    }
    if !live.booted.load(Ordering::Acquire) {
        spec.failed();
    }
    // Its stdout ended: it exits (or is ended when it does not within its grace).
    if tokio::time::timeout(spec.grace, live.proc.ended()).await.is_err() {
        live.proc.end("it closed its stdout but kept running");
        live.proc.ended().await;
    }
    let why = match live.proc.exit_error() {
        UpstreamError::Exited(_, why) => why,
        other => other.to_string(),
    };
    let routes = live.routes.lock().map(|mut r| std::mem::take(&mut *r)).unwrap_or_default();
    for (_, route) in routes {
        let _ = route.fin.send(Err(why.clone()));
    }
}

/// Ends the process for a protocol error and marks the upstream unhealthy, saying why.
fn fault(up: &Weak<Upstream>, live: &Live, why: &str) {
    if let Some(up) = up.upgrade() {
        tracing::warn!(upstream = %up.name, reason = %why, "stdio upstream broke the protocol; its process is ended");
        up.mark_failed(&format!("upstream '{}': {why}", up.name));
    }
    live.proc.end(why);
}

/// Routes one message from the process.
async fn deliver(live: &Live, mut msg: Map<String, Value>) {
    let method = msg.get("method").and_then(Value::as_str).map(Method::parse);
    match (method, msg.contains_key("id")) {
        (None, true) => {
            let Some(n) = msg.get("id").and_then(whole_number) else { return };
            let Some(route) = live.routes.lock().ok().and_then(|mut r| r.remove(&n)) else { return };
            msg.insert("id".into(), route.id.clone());
            if let Some(meta) = msg.get_mut("result").and_then(|r| r.get_mut("_meta")) {
                restore_subscription(meta, n, &route.id);
            }
            let _ = route.fin.send(Ok(Value::Object(msg).to_string()));
        }
        (Some(m), true) => {
            let id = msg.get("id").cloned().unwrap_or(Value::Null);
            let answer = match m {
                Method::Ping => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
                _ => json!({"jsonrpc": "2.0", "id": id, "error": {"code": crate::mcp::jsonrpc::METHOD_NOT_FOUND,
                    "message": "Sluice serves a 2026-07-28 stdio server no server-to-client requests but ping"}}),
            };
            let _ = live.proc.send(answer.to_string().as_bytes()).await;
        }
        (Some(m), false) => notify(live, m, msg),
        (None, false) => {} // neither a request, a response nor a notification: nothing to route
    }
}

/// Routes one notification to the request it belongs to, with the client's own id and token.
fn notify(live: &Live, method: Method, mut msg: Map<String, Value>) {
    let params = msg.get("params");
    let meta = params.and_then(|p| p.get("_meta"));
    let by_token = || {
        let t = params?.get("progressToken")?.as_str()?.strip_prefix(TOKEN_PREFIX)?;
        t.parse::<u64>().ok()
    };
    let target = match method {
        Method::Progress => by_token(),
        Method::Cancelled => params.and_then(|p| p.get("requestId")).and_then(whole_number),
        _ => meta.and_then(|m| m.get(crate::mcp::META_SUBSCRIPTION_ID)).and_then(whole_number),
    };
    let Ok(mut routes) = live.routes.lock() else { return };
    let Some(n) = target else {
        // A list change that names no subscription goes to every listen (they are Sluice's own).
        if matches!(method, Method::ToolsListChanged | Method::PromptsListChanged | Method::ResourcesListChanged) {
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
        if let (Some(t), true) = (&route.token, method == Method::Progress) {
            p.insert("progressToken".into(), t.clone());
        }
        if let Some(meta) = p.get_mut("_meta") {
            restore_subscription(meta, n, &route.id);
        }
    }
    if route.notes.try_send(Value::Object(msg).to_string()).is_err() {
        tracing::debug!("a request's reader is slow: a notification from its stdio upstream is dropped");
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
    v.as_u64().or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && (0.0..9.0e15).contains(f)).map(|f| f as u64))
}
