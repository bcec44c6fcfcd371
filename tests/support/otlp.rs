//! An OTLP/HTTP trace receiver: `POST /v1/traces` bodies decoded with the official protobuf
//! definitions (`opentelemetry-proto`), their spans kept flat, and every raw body kept too (so
//! a test can look for a canary in exactly the bytes that left Sluice). Answers each export with
//! an empty `ExportTraceServiceResponse`. Waits end on the next export (a notification),
//! bounded by a deadline.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message;
use tokio_util::sync::CancellationToken;

/// One span as received.
#[derive(Debug, Clone)]
pub(crate) struct Span {
    pub(crate) name: String,
    pub(crate) trace_id: String,
    pub(crate) span_id: String,
    /// Empty for a root span.
    pub(crate) parent: String,
    /// 1 internal, 2 server, 3 client (OTLP's `SpanKind`).
    pub(crate) kind: i32,
    /// Attribute values as text.
    pub(crate) attrs: BTreeMap<String, String>,
    /// The resource's `service.name`.
    pub(crate) service: String,
}

impl Span {
    /// An attribute's value, if set.
    pub(crate) fn attr(&self, key: &str) -> Option<&str> {
        self.attrs.get(key).map(String::as_str)
    }
}

#[derive(Default)]
struct Seen {
    spans: Mutex<Vec<Span>>,
    raw: Mutex<Vec<Bytes>>,
    changed: tokio::sync::Notify,
}

/// The running receiver; stopped when dropped.
pub(crate) struct Receiver {
    /// `http://127.0.0.1:port` (Sluice appends `/v1/traces`).
    pub(crate) url: String,
    seen: Arc<Seen>,
    stop: CancellationToken,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Starts a receiver on a free loopback port.
pub(crate) async fn start() -> Receiver {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the OTLP receiver");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    let (seen, stop) = (Arc::new(Seen::default()), CancellationToken::new());
    let (s, token) = (seen.clone(), stop.clone());
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                _ = token.cancelled() => return,
                a = listener.accept() => match a { Ok((s, _)) => s, Err(_) => continue },
            };
            let (s, token) = (s.clone(), token.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let s = s.clone();
                    async move { Ok::<_, Infallible>(export(&s, req).await) }
                });
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let conn = builder.serve_connection(TokioIo::new(stream), svc);
                tokio::select! { _ = conn => {}, _ = token.cancelled() => {} }
            });
        }
    });
    Receiver { url, seen, stop }
}

async fn export(
    seen: &Seen,
    req: http::Request<hyper::body::Incoming>,
) -> http::Response<Full<Bytes>> {
    let answer = |status: u16| {
        http::Response::builder()
            .status(status)
            .header("content-type", "application/x-protobuf")
            .body(Full::new(Bytes::new()))
    };
    if req.method() != http::Method::POST || req.uri().path() != "/v1/traces" {
        return answer(404).expect("a response");
    }
    let protobuf = req
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"application/x-protobuf"));
    let Ok(body) = req.into_body().collect().await.map(|b| b.to_bytes()) else {
        return answer(400).expect("a response");
    };
    let Ok(decoded) = ExportTraceServiceRequest::decode(body.clone()) else {
        return answer(400).expect("a response");
    };
    assert!(protobuf, "an OTLP/HTTP export is application/x-protobuf");
    let mut spans = Vec::new();
    for rs in decoded.resource_spans {
        let service = rs
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .map(|kv| text(kv.value.as_ref().and_then(|v| v.value.as_ref())))
            .unwrap_or_default();
        for ss in rs.scope_spans {
            for s in ss.spans {
                spans.push(Span {
                    name: s.name,
                    trace_id: hex(&s.trace_id),
                    span_id: hex(&s.span_id),
                    parent: hex(&s.parent_span_id),
                    kind: s.kind,
                    attrs: s
                        .attributes
                        .into_iter()
                        .map(|kv| {
                            (
                                kv.key,
                                text(kv.value.as_ref().and_then(|v| v.value.as_ref())),
                            )
                        })
                        .collect(),
                    service: service.clone(),
                });
            }
        }
    }
    seen.raw.lock().expect("raw").push(body);
    seen.spans.lock().expect("spans").extend(spans);
    seen.changed.notify_waiters();
    answer(200).expect("a response")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn text(v: Option<&Any>) -> String {
    match v {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

impl Receiver {
    /// Every span received so far.
    pub(crate) fn spans(&self) -> Vec<Span> {
        self.seen.spans.lock().expect("spans").clone()
    }

    /// Every export body received so far, concatenated.
    pub(crate) fn raw(&self) -> Vec<u8> {
        self.seen
            .raw
            .lock()
            .expect("raw")
            .iter()
            .flat_map(|b| b.iter().copied())
            .collect()
    }

    /// Waits (at most `within`) until the spans of trace `trace_id` satisfy `done`; gives them.
    pub(crate) async fn trace(
        &self,
        trace_id: &str,
        within: Duration,
        done: impl Fn(&[Span]) -> bool,
    ) -> Vec<Span> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let changed = self.seen.changed.notified();
            let spans: Vec<Span> = self
                .spans()
                .into_iter()
                .filter(|s| s.trace_id == trace_id)
                .collect();
            if done(&spans) {
                return spans;
            }
            tokio::select! {
                _ = changed => {}
                _ = tokio::time::sleep_until(deadline) => panic!("trace {trace_id} incomplete after {within:?}: {spans:#?}"),
            }
        }
    }
}
