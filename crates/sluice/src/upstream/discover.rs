//! Probing an upstream with `server/discover`, and the requests Sluice makes on its own behalf.
//!
//! Takes an upstream; gives its [`Status`]: modern and healthy with its capabilities, or
//! unhealthy with a reason that names it. Refuses (marks unhealthy) a server that does not
//! speak 2026-07-28: a recognized modern error means modern (digest §8.1); any other answer
//! means a handshake-era server, which this build does not bridge yet.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::client::{final_message, modern_headers, HttpClient};
use super::{Discovered, Status, Upstream, Wire};
use crate::mcp::jsonrpc::Incoming;
use crate::mcp::method::Method;
use crate::telemetry::trace::Carrier;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Sluice's identity, as it names itself to clients and upstreams.
pub fn server_info() -> Value {
    json!({"name": "sluice", "version": env!("CARGO_PKG_VERSION")})
}

/// A request body Sluice sends for itself: its own `_meta` envelope, declaring no client
/// capabilities, plus `extra` params members.
pub fn internal_body(method: &Method, extra: Map<String, Value>) -> Bytes {
    traced_body(method, extra, None)
}

/// [`internal_body`] carrying a span's trace context in its `_meta`.
fn traced_body(method: &Method, extra: Map<String, Value>, trace: Option<&Carrier>) -> Bytes {
    let mut params = extra;
    let mut meta = Map::new();
    meta.insert(
        crate::mcp::META_PROTOCOL_VERSION.into(),
        json!(crate::mcp::version::MODERN),
    );
    meta.insert(crate::mcp::META_CLIENT_CAPABILITIES.into(), json!({}));
    meta.insert(crate::mcp::META_CLIENT_INFO.into(), server_info());
    if let Some(c) = trace {
        c.put_map(&mut meta);
    }
    params.insert("_meta".into(), Value::Object(meta));
    let id = format!("sluice-{}", NEXT_ID.fetch_add(1, Ordering::Relaxed));
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method.as_str(), "params": params});
    Bytes::from(body.to_string())
}

/// Sends one internal request and returns its `result` (or the JSON-RPC error as `Err`).
pub async fn call(
    client: &HttpClient,
    up: &std::sync::Arc<Upstream>,
    method: &Method,
    extra: Map<String, Value>,
) -> Result<Box<serde_json::value::RawValue>, String> {
    let mut headers = modern_headers(&up.modern_base, method.as_str(), None);
    // Within a traced request (a federated list's page), the upstream is told the current span.
    let trace = Carrier::of(&tracing::Span::current());
    if let Some(c) = &trace {
        c.put_headers(&mut headers);
    }
    let body = traced_body(method, extra, trace.as_ref());
    let answer = up
        .post_modern(client, method, headers, body, Some(client_timeout(client)))
        .await
        .map_err(|e| e.to_string())?;
    let (_, body) = final_message(answer, &up.name)
        .await
        .map_err(|e| e.to_string())?;
    result_of(&body, &up.name, method)
}

/// The `result` of the answer to one of Sluice's own requests (either era); the error names the
/// upstream, the method and what was wrong (not JSON-RPC, an error's code, neither member).
pub fn result_of(
    body: &[u8],
    upstream: &str,
    method: &Method,
) -> Result<Box<serde_json::value::RawValue>, String> {
    let msg = Incoming::parse(body).map_err(|_| {
        format!("upstream '{upstream}' answered {method} with something that is not JSON-RPC")
    })?;
    match (msg.result, msg.error) {
        (Some(r), _) => Ok(r),
        (None, Some(e)) => Err(format!(
            "upstream '{upstream}' answered {method} with error {}",
            e.code
        )),
        _ => Err(format!(
            "upstream '{upstream}' answered {method} with neither result nor error"
        )),
    }
}

fn client_timeout(c: &HttpClient) -> std::time::Duration {
    c.response_timeout()
}

/// What a `server/discover` probe found.
pub enum Probe {
    /// A modern server (healthy or not, recorded in the status).
    Modern(Status),
    /// Not a modern answer (digest §8.1): try the handshake era.
    NotModern(String),
    /// Unreachable or timed out: no evidence either way.
    Failed(Status),
}

/// What an error answer to `server/discover` says of the upstream: a recognized modern error
/// means a modern server (digest §8.1); anything else a 2025-11-25 one.
fn error_verdict(up: &Upstream, code: i64, http_status: http::StatusCode) -> Probe {
    use crate::mcp::jsonrpc::{
        HEADER_MISMATCH, METHOD_NOT_FOUND, MISSING_CAPABILITY, UNSUPPORTED_VERSION,
    };
    match code {
        UNSUPPORTED_VERSION | MISSING_CAPABILITY | HEADER_MISMATCH => Probe::Modern(failed(
            up,
            format!(
                "upstream '{}' is modern but refused server/discover with {} (does it support {}?)",
                up.name,
                code,
                crate::mcp::version::MODERN
            ),
        )),
        METHOD_NOT_FOUND if http_status == http::StatusCode::NOT_FOUND => Probe::Modern(failed(
            up,
            format!(
                "upstream '{}' is modern but does not implement server/discover",
                up.name
            ),
        )),
        code => Probe::NotModern(format!(
            "upstream '{}' answered server/discover with error {code} (HTTP {http_status})",
            up.name
        )),
    }
}

impl Discovered {
    /// What a `server/discover` result says (absent members: none, 0, private).
    fn from_result(result: &Map<String, Value>) -> Discovered {
        Discovered {
            capabilities: result
                .get("capabilities")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            instructions: result
                .get("instructions")
                .and_then(Value::as_str)
                .map(str::to_owned),
            ttl_ms: result.get("ttlMs").and_then(Value::as_u64).unwrap_or(0),
            public: result.get("cacheScope").and_then(Value::as_str) == Some("public"),
        }
    }
}

/// Probes an upstream with `server/discover`; a modern verdict is recorded.
pub async fn probe(client: &HttpClient, up: &std::sync::Arc<Upstream>, legacy: DualEra) -> Probe {
    let headers = modern_headers(&up.modern_base, Method::ServerDiscover.as_str(), None);
    let body = internal_body(&Method::ServerDiscover, Map::new());
    // Over stdio, no answer in time (or a process that exits on a request before `initialize`)
    // means a 2025-11-25 server (digest §8.1), unless it was found modern before or never started.
    let stdio_first = up.stdio.is_some() && up.status().discovered.is_none();
    let not_modern = |e: &super::client::UpstreamError| {
        format!(
            "upstream '{}' does not answer server/discover as a 2026-07-28 server ({e})",
            up.name
        )
    };
    // A request that could not be sent (no process started, backing off, stdin full) is no answer.
    let answer = match up
        .post_modern(
            client,
            &Method::ServerDiscover,
            headers,
            body,
            Some(client.response_timeout()),
        )
        .await
    {
        Ok(a) => a,
        Err(e) => return Probe::Failed(failed(up, e.to_string())),
    };
    let (http_status, body) = match final_message(answer, &up.name).await {
        Ok(x) => x,
        Err(e) if up.stdio.is_some() && !stdio_first => {
            return Probe::Failed(failed(up, e.to_string()))
        }
        Err(e) => return Probe::NotModern(not_modern(&e)),
    };
    let msg = match Incoming::parse(&body) {
        Ok(m) => m,
        Err(_) => {
            return Probe::NotModern(format!(
            "upstream '{}' answered server/discover with HTTP {http_status} and no JSON-RPC body",
            up.name
        ))
        }
    };
    if let Some(err) = msg.error {
        return error_verdict(up, err.code, http_status);
    }
    let result: Map<String, Value> = msg
        .result
        .and_then(|r| serde_json::from_str(r.get()).ok())
        .unwrap_or_default();
    let discovered = Discovered::from_result(&result);
    // Whether it speaks 2025-11-25 too is `link/`'s to re-check; until then its answer stands.
    let status = Status {
        probed: true,
        healthy: true,
        discovered: Some(discovered),
        error: None,
        wire: Wire::Modern,
        legacy: legacy.0,
        legacy_checked: legacy.1,
    };
    up.set_status(status.clone());
    Probe::Modern(status)
}

/// What the last probe learned of a modern upstream's 2025-11-25 wire (whether it answers, with
/// sessions or statelessly, and when it was asked), carried into the new status so it never
/// reads "no" between two checks.
pub type DualEra = (super::LegacySide, Option<std::time::Instant>);

/// Records a failed probe (told once, as a change of health, when the whole probe ends:
/// `Upstream::report_health`; a probe that fails again logs nothing).
fn failed(up: &Upstream, why: String) -> Status {
    tracing::debug!(upstream = %up.name, reason = %crate::escape::Escaped(&why), "upstream probe failed");
    let mut s = (*up.status()).clone();
    s.probed = true;
    s.healthy = false;
    s.error = Some(why);
    up.set_status(s.clone());
    s
}
