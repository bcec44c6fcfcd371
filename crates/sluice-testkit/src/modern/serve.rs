//! The mock's HTTP side: requests recorded and answered (handlers, discover and the lists,
//! listen streams, the default answers), replies written to the wire.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::reply::{err, ev, ok, result_text, Reply, Sse};
use super::{list_index, Seen, Spec, MEMBERS};
use crate::V;

type Body = BoxBody<Bytes, Infallible>;

/// What a listen stream is told to send.
#[derive(Clone)]
pub(super) enum Note {
    /// This SSE text as it is.
    Raw(String),
    /// A notification of this method carrying the stream's subscription id.
    Method(String),
}

pub(super) struct State {
    pub(super) spec: Mutex<Spec>,
    pub(super) seen: Mutex<Vec<Seen>>,
    pub(super) notes: broadcast::Sender<Note>,
    pub(super) listening: watch::Sender<usize>,
    pub(super) streams_closed: AtomicUsize,
    /// Notified whenever a request is recorded, an SSE answer closes or a listen opens or
    /// closes: what [`Mock::until`] waits on.
    pub(super) changed: tokio::sync::Notify,
    pub(super) stop: CancellationToken,
}

/// Counts a closed SSE answer and runs its `on_close`.
struct CloseGuard(Arc<State>, Option<Box<dyn FnOnce() + Send + Sync>>);

impl Drop for CloseGuard {
    fn drop(&mut self) {
        self.0.streams_closed.fetch_add(1, Ordering::SeqCst);
        if let Some(f) = self.1.take() {
            f();
        }
        self.0.changed.notify_waiters();
    }
}

fn plain(status: u16, ctype: &str, body: impl Into<Bytes>) -> http::Response<Body> {
    http::Response::builder()
        .status(status)
        .header("content-type", ctype)
        .body(Full::new(body.into()).boxed())
        .expect("a response")
}

fn sse_body(rx: mpsc::Receiver<Bytes>, guard: Option<CloseGuard>) -> http::Response<Body> {
    let stream = futures_util::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), (rx, guard)))
    });
    http::Response::builder()
        .header("content-type", "text/event-stream")
        .body(BodyExt::boxed(StreamBody::new(stream)))
        .expect("an SSE response")
}

pub(super) async fn handle(
    st: Arc<State>,
    req: http::Request<hyper::body::Incoming>,
) -> Result<http::Response<Body>, Infallible> {
    if req.method() != http::Method::POST {
        return Ok(plain(405, "text/plain", Bytes::new()));
    }
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let body = String::from_utf8_lossy(&body).into_owned();
    let Ok(msg) = serde_json::from_str::<Value>(&body) else {
        return Ok(plain(
            400,
            "application/json",
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse"}})
                .to_string(),
        ));
    };
    // Subscribed before the request is recorded, so a test that saw the listen never misses
    // a notification it then pushes.
    let notes = st.notes.subscribe();
    let seen = Seen {
        method: msg["method"].as_str().unwrap_or("").to_owned(),
        id: msg.get("id").cloned().unwrap_or(Value::Null),
        params: msg.get("params").cloned().unwrap_or(Value::Null),
        headers: parts.headers,
        body,
    };
    if let Ok(mut s) = st.seen.lock() {
        s.push(seen.clone());
    }
    st.changed.notify_waiters();
    let observe = st.spec.lock().ok().and_then(|s| s.observe.clone());
    if let Some(f) = observe {
        f(&seen);
    }
    if seen.id.is_null() {
        return Ok(plain(202, "application/json", Bytes::new()));
    }
    let on = st.spec.lock().ok().and_then(|s| s.on.clone());
    if let Some(reply) = on.and_then(|h| h(&seen)) {
        return Ok(respond(&st, &seen, reply).await);
    }
    if seen.method == "subscriptions/listen" {
        return Ok(listen(&st, &seen, notes));
    }
    let known = st.spec.lock().ok().and_then(|s| listed(&s, &seen));
    if let Some(reply) = known {
        return Ok(respond(&st, &seen, reply).await);
    }
    let fallback = st.spec.lock().ok().and_then(|s| s.fallback.clone());
    if let Some(reply) = fallback.and_then(|h| h(&seen)) {
        return Ok(respond(&st, &seen, reply).await);
    }
    let reply = st
        .spec
        .lock()
        .map(|s| default_reply(&s, &seen))
        .unwrap_or(Reply::Hang);
    Ok(respond(&st, &seen, reply).await)
}

fn respond<'a>(
    st: &'a Arc<State>,
    seen: &'a Seen,
    reply: Reply,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = http::Response<Body>> + Send + 'a>> {
    Box::pin(async move {
        match reply {
            Reply::Json(status, body) => plain(status, "application/json", body),
            Reply::Raw(status, ctype, bytes) => plain(status, ctype, bytes),
            Reply::Result(mut r) => {
                if r.get("resultType").is_none() {
                    r["resultType"] = json!("complete");
                }
                r["_meta"] = st.spec.lock().map(|s| server_meta(&s)).unwrap_or_default();
                plain(200, "application/json", json!({"jsonrpc": "2.0", "id": seen.id, "result": r}).to_string())
            }
            Reply::Error(status, code, message) => plain(
                status,
                "application/json",
                json!({"jsonrpc": "2.0", "id": seen.id, "error": {"code": code, "message": message}}).to_string(),
            ),
            Reply::Sse(Sse { chunks, hang, on_close }) => {
                // A stream, not a task: a million one-byte chunks cost what the bytes cost.
                let guard = CloseGuard(st.clone(), on_close);
                let stop = st.stop.clone();
                let chunks = futures_util::stream::unfold(chunks.into_iter(), |mut it| async move {
                    let (pause, c) = it.next()?;
                    if !pause.is_zero() {
                        tokio::time::sleep(pause).await;
                    }
                    Some((Ok::<_, Infallible>(Frame::data(c)), it))
                });
                let tail = futures_util::stream::once(async move {
                    if hang {
                        stop.cancelled().await;
                    }
                    drop(guard);
                })
                .filter_map(|()| async { None::<Result<Frame<Bytes>, Infallible>> });
                http::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(BodyExt::boxed(StreamBody::new(chunks.chain(tail))))
                    .expect("an SSE response")
            }
            Reply::After(pause, r) => {
                tokio::time::sleep(pause).await;
                respond(st, seen, *r).await
            }
            Reply::Gate(mut gate, r) => {
                let _ = gate.wait_for(|open| *open).await;
                respond(st, seen, *r).await
            }
            Reply::Hang => {
                st.stop.cancelled().await;
                plain(503, "text/plain", Bytes::new())
            }
        }
    })
}

/// A listen stream: the acknowledgement, then each notification the test sends, until Sluice
/// closes it or the mock stops.
fn listen(
    st: &Arc<State>,
    seen: &Seen,
    mut notes: broadcast::Receiver<Note>,
) -> http::Response<Body> {
    let id = seen.id.clone();
    let filter = seen
        .params
        .get("notifications")
        .cloned()
        .unwrap_or(json!({}));
    let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id}, "notifications": filter}});
    let (tx, rx) = mpsc::channel(64);
    let st = st.clone();
    tokio::spawn(async move {
        if tx.send(Bytes::from(ev(&ack))).await.is_err() {
            return;
        }
        st.listening.send_modify(|n| *n += 1);
        st.changed.notify_waiters();
        loop {
            let text = tokio::select! {
                _ = st.stop.cancelled() => break,
                _ = tx.closed() => break,
                n = notes.recv() => match n {
                    Ok(Note::Raw(text)) => text,
                    Ok(Note::Method(method)) => ev(&json!({"jsonrpc": "2.0", "method": method,
                        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id}}})),
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => break,
                },
            };
            if tx.send(Bytes::from(text)).await.is_err() {
                break;
            }
        }
        st.listening.send_modify(|n| *n -= 1);
        st.changed.notify_waiters();
    });
    sse_body(rx, None)
}

fn server_meta(s: &Spec) -> Value {
    json!({"io.modelcontextprotocol/serverInfo": {"name": s.server, "version": s.version}})
}

/// Discover and the lists.
fn listed(s: &Spec, seen: &Seen) -> Option<Reply> {
    let id = &seen.id;
    if let Some(i) = list_index(&seen.method) {
        let items = &s.lists[i];
        let start: usize = seen.params["cursor"]
            .as_str()
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let end = s.page.map_or(items.len(), |n| (start + n).min(items.len()));
        let mut r = format!(
            "{{\"{}\":[{}]",
            MEMBERS[i],
            items[start.min(end)..end].join(",")
        );
        if end < items.len() {
            r.push_str(&format!(",\"nextCursor\":\"{end}\""));
        }
        if let Some((ttl, scope)) = s.hints {
            r.push_str(&format!(
                ",\"ttlMs\":{ttl},\"cacheScope\":\"{scope}\",\"resultType\":\"complete\""
            ));
            if s.list_meta {
                r.push_str(&format!(",\"_meta\":{}", server_meta(s)));
            }
        }
        r.push('}');
        return Some(Reply::Json(200, result_text(id, &r)));
    }
    if seen.method != "server/discover" {
        return None;
    }
    if let Some(r) = &s.discover {
        return Some(match r {
            Reply::Json(status, t) => Reply::Json(*status, t.replace("{id}", &id.to_string())),
            Reply::Raw(st, ct, b) => Reply::Raw(*st, ct, b.clone()),
            _ => panic!("a discover override is JSON or raw bytes"),
        });
    }
    let caps = s.capabilities.clone().unwrap_or_else(|| {
        let mut caps = json!({"tools": {"listChanged": true}, "resources": {"subscribe": true, "listChanged": true}});
        if s.has_prompts {
            caps["prompts"] = json!({"listChanged": true});
            caps["completions"] = json!({});
        }
        caps
    });
    let mut r = json!({"resultType": "complete", "supportedVersions": [V], "capabilities": caps,
        "ttlMs": s.discover_hints.0, "cacheScope": s.discover_hints.1, "_meta": server_meta(s)});
    if let Some(i) = &s.instructions {
        r["instructions"] = i.clone().into();
    }
    for (k, v) in &s.discover_members {
        r[k] = v.clone();
    }
    Some(ok(id, r))
}

/// The answers of a [`Spec::new`] mock to the routed methods.
fn default_reply(s: &Spec, seen: &Seen) -> Reply {
    let id = &seen.id;
    let p = &seen.params;
    if !s.answers {
        return err(404, id, -32601, "method not found");
    }
    match seen.method.as_str() {
        "tools/call" => ok(
            id,
            json!({"resultType": "complete", "content": [{"type": "text", "text": format!("{} ran {}", s.server, p["name"].as_str().unwrap_or("?"))}], "_meta": server_meta(s)}),
        ),
        "prompts/get" => ok(
            id,
            json!({"resultType": "complete", "messages": [{"role": "user", "content": {"type": "text", "text": format!("{} prompt {}", s.server, p["name"])}}]}),
        ),
        "resources/read" => ok(
            id,
            json!({"resultType": "complete", "contents": [{"uri": p["uri"], "text": format!("{} read {}", s.server, p["uri"].as_str().unwrap_or(""))}], "ttlMs": 1000, "cacheScope": "public"}),
        ),
        "completion/complete" => ok(
            id,
            json!({"resultType": "complete", "completion": {"values": [format!("{} completes", s.server)]}}),
        ),
        _ => err(404, id, -32601, "method not found"),
    }
}
