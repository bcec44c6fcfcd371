//! What the benchmark sends: a stateless 2026-07-28 `tools/call` with ~1 KiB of arguments, its
//! headers, and the wrk script that sends it and prints one machine-readable line.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use serde_json::{json, Value};

pub(crate) use sluice_testkit::fast::arg_text;

/// The `_meta` envelope of a modern request; `caps` are the declared client capabilities.
pub(crate) fn meta(caps: Value) -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps})
}

/// A modern `tools/call` of `name` with the ~1 KiB arguments.
pub(crate) fn tools_call(id: u64, name: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": {"text": arg_text()}, "_meta": meta(json!({}))}})
    .to_string()
}

/// The identical-call breaker of every benchmarked Sluice: on (its cost is measured), with a
/// limit no run reaches, since every run repeats one call with the same arguments; off with
/// `SLUICE_BENCH_LOOPS=off`, to measure what it costs.
pub(crate) fn loops() -> &'static str {
    match std::env::var("SLUICE_BENCH_LOOPS").as_deref() {
        Ok("off") => "\n[loop_breaker]\nmax_identical_calls = 0\n",
        _ => "\n[loop_breaker]\nmax_identical_calls = 1000000\n",
    }
}

/// The API key of the production-like Sluice (its SHA-256 is in that Sluice's config).
pub(crate) const API_KEY: &str = "sluice-bench-api-key-4f1c2e7a9b3d5f60";

/// The headers a modern client mirrors for a `tools/call` of `name`, with `Authorization:
/// Bearer <bearer>` when given.
pub(crate) fn authed_headers(name: &str, bearer: Option<&str>) -> HeaderMap {
    let mut h = modern_headers(name);
    if let Some(v) = bearer.and_then(|b| HeaderValue::from_str(&format!("Bearer {b}")).ok()) {
        h.insert(http::header::AUTHORIZATION, v);
    }
    h
}

/// The headers a modern client mirrors for a `tools/call` of `name`.
pub(crate) fn modern_headers(name: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(
        http::header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    h.insert(
        "mcp-protocol-version",
        HeaderValue::from_static("2026-07-28"),
    );
    h.insert("mcp-method", HeaderValue::from_static("tools/call"));
    if let Ok(v) = HeaderValue::from_str(name) {
        h.insert("mcp-name", v);
    }
    h
}

/// The wrk script: POSTs the call of `name` (with `Authorization: Bearer <bearer>` when given)
/// and, when done, prints `BENCH requests=… duration_us=… errors=… p50_us=… p99_us=…`.
pub(crate) fn wrk_script(name: &str, bearer: Option<&str>) -> String {
    let body = tools_call(1, name);
    let auth = bearer
        .map(|b| format!("wrk.headers[\"Authorization\"] = \"Bearer {b}\"\n"))
        .unwrap_or_default();
    format!(
        r#"wrk.method = "POST"
wrk.body = [==[{body}]==]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "{name}"
{auth}done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("BENCH requests=%d duration_us=%d errors=%d p50_us=%d p99_us=%d\n",
    summary.requests, summary.duration, e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"#
    )
}

/// One wrk run's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct WrkRun {
    pub(crate) rps: f64,
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) errors: u64,
    pub(crate) requests: u64,
}

/// Reads the `BENCH` line of a wrk run.
pub(crate) fn parse_wrk(out: &str) -> Option<WrkRun> {
    let line = out.lines().find(|l| l.starts_with("BENCH "))?;
    let field = |k: &str| -> Option<f64> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
            .and_then(|v| v.parse().ok())
    };
    let (requests, duration) = (field("requests")?, field("duration_us")?);
    Some(WrkRun {
        rps: if duration > 0.0 {
            requests / (duration / 1e6)
        } else {
            0.0
        },
        p50_us: field("p50_us")?,
        p99_us: field("p99_us")?,
        errors: field("errors")? as u64,
        requests: requests as u64,
    })
}

/// A body as `Bytes`.
pub(crate) fn bytes(s: String) -> Bytes {
    Bytes::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_call_carries_1_kib_of_arguments_and_wrk_lines_parse() {
        let v: Value = serde_json::from_str(&tools_call(1, "echo")).unwrap();
        assert_eq!(
            v["params"]["arguments"].to_string().len(),
            sluice_testkit::fast::ARGS_BYTES
        );
        let r = parse_wrk(
            "noise\nBENCH requests=1000 duration_us=2000000 errors=0 p50_us=70 p99_us=210\n",
        )
        .unwrap();
        assert_eq!(
            (r.rps, r.p50_us, r.p99_us, r.errors),
            (500.0, 70.0, 210.0, 0)
        );
    }
}
