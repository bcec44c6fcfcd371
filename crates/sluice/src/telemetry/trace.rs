//! The spans of a request, with the OTel MCP semantic-convention attributes and never content.
//!
//! ```text
//! {method}               server   the request (mcp.method.name, jsonrpc.request.id, gen_ai.tool.name, …)
//!   authenticate         internal
//!   validate | route | policy
//!   {method} {name}      client   the upstream call (sluice.upstream; its trace context goes upstream)
//!   {method}             client   a federated list's page from one upstream (sluice.list.cached)
//!   round                internal a bridge A round on a 2025-11-25 upstream (sluice.round)
//! ```
//!
//! Takes the request's `traceparent`/`tracestate` (from `params._meta`, which travels with the
//! message, else its headers); gives spans parented on it and the [`Carrier`] that puts the
//! upstream call's own context into the upstream's headers and `_meta`. Refuses nothing: an
//! unreadable trace context is ignored (a new trace starts). Names a peer chose are recorded as
//! `mcp/recorded.rs` keeps them (bounded; a URI without query, parameters or credentials, an
//! opaque URI as its scheme); argument values, prompts and results are never read.
//! With tracing off every function here returns at once (`Span::none()`, no carrier).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use http::HeaderMap;
use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{Span as _, TraceContextExt as _, Tracer as _};
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use serde_json::{Map, Value};
use tracing::field::Empty;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::mcp::jsonrpc::Envelope;
use crate::mcp::method::Method;
use crate::mcp::recorded;

/// The `tracing` target of every span here (the log lines never show it).
pub const TARGET: &str = "sluice::otel";
/// The OTel tracer's (instrumentation scope's) name.
pub const TRACER: &str = "sluice";
/// The longest `traceparent` read (W3C: 55 characters): a longer one is ignored before the
/// propagator splits it. `tracestate` has its own bounds (`tracestate.rs`).
const MAX_CONTEXT: usize = 1024;

static ON: AtomicBool = AtomicBool::new(false);

/// Called once the exporter is installed.
pub(super) fn enable() {
    ON.store(true, Ordering::Relaxed);
}

/// Whether spans are exported.
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The span of one request to the MCP endpoint, from its arrival. Its parent is set once the
/// body is read ([`RequestTrace::begin`]); until then nothing may run inside it.
pub struct RequestTrace {
    span: Span,
    from_headers: Option<Context>,
    auth: Option<(SystemTime, SystemTime)>,
    begun: bool,
}

impl RequestTrace {
    /// The span of a request that just arrived (none with tracing off).
    pub fn start(headers: &HeaderMap) -> RequestTrace {
        if !on() {
            return RequestTrace {
                span: Span::none(),
                from_headers: None,
                auth: None,
                begun: true,
            };
        }
        let span = tracing::info_span!(target: TARGET, "request",
            otel.name = "mcp", otel.kind = "server", otel.status_code = Empty,
            mcp.method.name = Empty, mcp.protocol.version = Empty, jsonrpc.request.id = Empty,
            gen_ai.operation.name = Empty, gen_ai.tool.name = Empty, gen_ai.prompt.name = Empty, mcp.resource.uri = Empty,
            error.type = Empty, rpc.response.status_code = Empty, http.response.status_code = Empty,
            network.transport = "tcp", network.protocol.name = "http");
        let tracestate = headers.get_all("tracestate").iter().filter_map(header_text);
        let from_headers = context_of(headers.get("traceparent").and_then(header_text), tracestate);
        // ... parented only once the caller is authenticated (see `refuse_parent`).
        RequestTrace {
            span,
            from_headers,
            auth: None,
            begun: false,
        }
    }

    /// Runs authentication, timed for its span.
    pub fn authenticate<T>(&mut self, f: impl FnOnce() -> T) -> T {
        if self.begun {
            return f();
        }
        let t0 = SystemTime::now();
        let out = f();
        self.auth = Some((t0, SystemTime::now()));
        out
    }

    /// Parents the span on the request's trace context (`_meta` first, then the headers'),
    /// names it after the request and adds the authentication span. Once only; a request
    /// refused before its body was read begins with no envelope.
    pub fn begin(&mut self, env: Option<&Envelope>, version: Option<&str>) {
        if std::mem::replace(&mut self.begun, true) {
            return;
        }
        if let Some(parent) = env
            .and_then(meta_context)
            .or_else(|| self.from_headers.take())
        {
            let _ = self.span.set_parent(parent);
        }
        if let Some(env) = env {
            describe(&self.span, env, version);
        }
        if let Some((t0, t1)) = self.auth.take() {
            let tracer = opentelemetry::global::tracer(TRACER);
            let cx = self.span.context();
            let mut s = tracer
                .span_builder("authenticate")
                .with_start_time(t0)
                .start_with_context(&tracer, &cx);
            s.end_with_timestamp(t1);
        }
    }

    /// An unauthenticated caller's trace context is not followed (it would choose the trace
    /// its refusal joins and whether it is sampled).
    pub fn refuse_parent(&mut self) {
        self.from_headers = None;
    }

    /// The span, for the stages to run in.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// Its trace id (hex), for the audit record; `None` with tracing off.
    pub fn trace_id(&self) -> Option<String> {
        if self.span.is_disabled() {
            return None;
        }
        let id = self.span.context().span().span_context().trace_id();
        (id != opentelemetry::trace::TraceId::INVALID).then(|| format!("{id:032x}"))
    }

    /// Records how it ended: the HTTP status and, for an error, its JSON-RPC code.
    pub fn outcome(&self, status: u16, code: Option<i64>) {
        if self.span.is_disabled() {
            return;
        }
        self.span.record("http.response.status_code", status);
        if let Some(code) = code {
            self.span.record("error.type", code.to_string());
            self.span
                .record("rpc.response.status_code", code.to_string());
            self.span.record("otel.status_code", "ERROR");
        }
    }
}

impl Drop for RequestTrace {
    fn drop(&mut self) {
        self.begin(None, None); // a request refused early still gets its parent and authenticate span
    }
}

/// `$fut.await`, inside `$span` when spans are exported. With tracing off the future is awaited
/// as it is: no span is built and the future is not moved into an `Instrumented` wrapper (on
/// the hot path that move was a measured memcpy of the whole pipeline future per request).
macro_rules! traced {
    ($span:expr, $fut:expr) => {
        if $crate::telemetry::trace::on() {
            tracing::Instrument::instrument($fut, $span).await
        } else {
            $fut.await
        }
    };
}
pub(crate) use traced;

/// The span of one pipeline stage (`validate`, `route`, `policy`), a child of the current one.
pub fn stage(name: &'static str) -> Span {
    if !on() {
        return Span::none();
    }
    tracing::info_span!(target: TARGET, "stage", otel.name = name)
}

/// The span of a call to an upstream: `method` with the upstream's own name (or URI).
pub fn upstream_call(
    method: &str,
    own: &str,
    uri: bool,
    upstream: &str,
    transport: &'static str,
) -> Span {
    if !on() {
        return Span::none();
    }
    let own = recorded::name(own, uri);
    tracing::info_span!(target: TARGET, "upstream",
        otel.name = format!("{method} {own}"), otel.kind = "client",
        mcp.method.name = method, sluice.upstream = upstream, sluice.upstream.name = own, network.transport = transport)
}

/// The span of one upstream's part of a federated list (`cached`: served from its table).
pub fn list_page(method: &str, upstream: &str, cached: bool) -> Span {
    if !on() {
        return Span::none();
    }
    tracing::info_span!(target: TARGET, "list", otel.name = method.to_owned(), otel.kind = "client",
        mcp.method.name = method, sluice.upstream = upstream, sluice.list.cached = cached)
}

/// The span of a bridge A round: the upstream's call driven until its next asks or its answer.
pub fn round(upstream: &str, round: u32) -> Span {
    if !on() {
        return Span::none();
    }
    tracing::info_span!(target: TARGET, "round", otel.name = "round", sluice.upstream = upstream, sluice.round = round)
}

/// A span's trace context as it goes upstream: W3C `traceparent` and `tracestate`.
#[derive(Debug, Clone)]
pub struct Carrier {
    traceparent: String,
    tracestate: Option<String>,
}

impl Carrier {
    /// The context of `span` (`None` with tracing off).
    pub fn of(span: &Span) -> Option<Carrier> {
        if !on() || span.is_disabled() {
            return None;
        }
        let mut out: HashMap<String, String> = HashMap::new();
        TraceContextPropagator::new().inject_context(&span.context(), &mut out);
        let traceparent = out.remove("traceparent")?;
        Some(Carrier {
            traceparent,
            tracestate: out.remove("tracestate").filter(|s| !s.is_empty()),
        })
    }

    /// The headers with this context in place of any the client sent.
    pub fn put_headers(&self, h: &mut HeaderMap) {
        h.remove("tracestate");
        if let Ok(v) = self.traceparent.parse() {
            h.insert("traceparent", v);
        }
        if let Some(v) = self.tracestate.as_deref().and_then(|s| s.parse().ok()) {
            h.insert("tracestate", v);
        }
    }

    /// A request's `_meta` (its JSON text, if it has one) with this context in place of the
    /// client's; its other members keep their order and values.
    /// `None` when the `_meta` cannot be read as a map (it then goes as it came).
    pub fn put_meta(&self, raw: Option<&str>) -> Option<String> {
        let mut meta: Map<String, Value> = match raw {
            Some(r) => serde_json::from_str(r).ok()?,
            None => Map::new(),
        };
        self.put_map(&mut meta);
        Some(Value::Object(meta).to_string())
    }

    /// The same, on a decoded `_meta`.
    pub fn put_map(&self, meta: &mut Map<String, Value>) {
        meta.insert(
            "traceparent".into(),
            Value::String(self.traceparent.clone()),
        );
        match &self.tracestate {
            Some(s) => meta.insert("tracestate".into(), Value::String(s.clone())),
            None => meta.shift_remove("tracestate"),
        };
    }
}

/// The request's attributes: each a value Sluice validated (the method when it knows it, else
/// `_OTHER`; the protocol version only when it serves it) or a peer's text as `recorded` keeps it
/// (the id, the tool, prompt or URI named).
fn describe(span: &Span, env: &Envelope, version: Option<&str>) {
    let method = env.method.known().unwrap_or(recorded::OTHER);
    span.record("mcp.method.name", method);
    span.record("jsonrpc.request.id", recorded::id(env.id_json()));
    // Recorded before the version check runs: only a version that check would let through.
    if let Some(v) = version.filter(|v| crate::mcp::version::is_supported_modern(v)) {
        span.record("mcp.protocol.version", v);
    }
    span.record("otel.name", method);
}

/// Names the request's span after what routing resolved (`name`: the tool, prompt or URI the
/// client named, now known to be served; `uri`: it is a URI). Text nothing resolved is never
/// recorded: a client's sentence in `params.name` names no tool.
pub fn named(span: &Span, method: &Method, name: &str, uri: bool) {
    if !on() || span.is_disabled() {
        return;
    }
    let n = recorded::name(name, uri);
    match method {
        Method::ToolsCall => {
            span.record("gen_ai.operation.name", "execute_tool");
            span.record("gen_ai.tool.name", n.as_str());
        }
        Method::PromptsGet => {
            span.record("gen_ai.prompt.name", n.as_str());
        }
        Method::ResourcesRead => {
            span.record("mcp.resource.uri", n.as_str());
        }
        _ => {}
    }
    // The span keeps its method's name: it started (its context went into the authenticate
    // span and the audit record) before routing, and a started span's name is not changed.
}

fn header_text(v: &http::HeaderValue) -> Option<&str> {
    v.to_str().ok()
}

fn valid(cx: Context) -> Option<Context> {
    cx.span().span_context().is_valid().then_some(cx)
}

/// The trace context in a request's `params._meta`, if it holds a valid one.
fn meta_context(env: &Envelope) -> Option<Context> {
    let raw = env.param("_meta")?;
    let meta: crate::mcp::jsonrpc::RawObject<'_> = serde_json::from_str(raw).ok()?;
    let text = |k: &str| {
        meta.get(k)
            .and_then(|v| serde_json::from_str::<String>(v).ok())
    };
    context_of(
        text("traceparent").as_deref(),
        text("tracestate").as_deref(),
    )
}

/// The context of a `traceparent` and the `tracestate` values beside it: the tracestate only
/// as `tracestate.rs` bounds and validates it (what the propagator then reads, and what the
/// upstream call's context carries on).
fn context_of<'a>(
    traceparent: Option<&str>,
    tracestate: impl IntoIterator<Item = &'a str>,
) -> Option<Context> {
    let mut m = HashMap::new();
    m.insert(
        "traceparent".to_owned(),
        traceparent.filter(|t| t.len() <= MAX_CONTEXT)?.to_owned(),
    );
    if let Some(s) = super::tracestate::sanitize(tracestate) {
        m.insert("tracestate".to_owned(), s);
    }
    valid(TraceContextPropagator::new().extract(&m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meta_that_cannot_be_read_as_a_map_is_left_alone_and_a_readable_one_keeps_its_members() {
        let c = Carrier {
            traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
            tracestate: None,
        };
        assert_eq!(c.put_meta(Some(r#"{"x":1e400}"#)), None);
        let out = c
            .put_meta(Some(r#"{"a":1,"tracestate":"k=v","b":2}"#))
            .unwrap();
        assert_eq!(
            out,
            r#"{"a":1,"b":2,"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}"#
        );
    }
}
