//! Stage 7, respond: what the client gets back, and the stamping every answer needs.
//!
//! Takes an upstream's final JSON-RPC message (or Sluice's own result or error); gives the
//! client's body with `resultType`, Sluice's `serverInfo` in `_meta`, cache hints where the spec
//! requires them, and error codes mapped to ones 2026-07-28 allows, plus the HTTP status the
//! code fixes. Refuses nothing: a message it cannot read becomes `-32603` naming the upstream.

use std::convert::Infallible;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::error::GatewayError;
use crate::mcp::jsonrpc::{self, RawObject};
use crate::mcp::method::Method;

/// The body type of every response Sluice writes.
pub type Body = BoxBody<Bytes, Infallible>;

/// The frames of an SSE answer, and what must live exactly as long as the stream: its place
/// among the open streams and its audit record (emitted when the stream ends, with what its
/// last message said).
pub struct SseBody {
    rx: mpsc::Receiver<Bytes>,
    permit: Option<crate::streams::StreamPermit>,
    audit: Option<crate::audit::StreamAudit>,
}

impl From<mpsc::Receiver<Bytes>> for SseBody {
    fn from(rx: mpsc::Receiver<Bytes>) -> Self {
        SseBody { rx, permit: None, audit: None }
    }
}

impl SseBody {
    /// The next frame.
    pub async fn recv(&mut self) -> Option<Bytes> {
        let frame = self.rx.recv().await;
        if let (Some(f), Some(a)) = (&frame, &self.audit) {
            a.observe(f);
        }
        frame
    }

    /// Holds `permit` until the stream ends.
    pub fn hold(&mut self, permit: crate::streams::StreamPermit) {
        self.permit = Some(permit);
    }

    /// Emits `audit` when the stream ends.
    pub fn audit(&mut self, audit: crate::audit::StreamAudit) {
        self.audit = Some(audit);
    }
}

/// What a request ends in.
pub enum Reply {
    /// One JSON object with a status.
    Json(StatusCode, Bytes),
    /// An SSE stream of frames (status 200).
    Sse(SseBody),
    /// 202 with an empty body.
    Accepted,
    /// A status with a short plain-text explanation (edge refusals).
    Plain(StatusCode, &'static str),
    /// 401 / 403 with a `WWW-Authenticate` challenge and a JSON-RPC error body.
    Challenge(StatusCode, String, Bytes),
    /// 429 (or 503) with `Retry-After` (seconds) and a JSON-RPC error body.
    Limited(StatusCode, Bytes, u64),
    /// 503 with `Retry-After: 1`: too many requests in progress (load shedding).
    Overloaded,
    /// A legacy `initialize` answer carrying the new `Mcp-Session-Id`.
    Session(StatusCode, Bytes, String),
}

impl Reply {
    /// The reply for a stage error, carrying the request's id.
    pub fn error(id: &str, err: &GatewayError) -> Reply {
        let (status, code, data) = err.classify();
        Reply::Json(status, jsonrpc::error_body(id, code, &err.to_string(), data.as_ref()))
    }

    /// The reply for a governance refusal: 429 with `Retry-After` for a spent window budget.
    pub fn refusal(id: &str, r: &crate::policy::Refusal) -> Reply {
        let e = GatewayError::Refused(r.clone());
        let retry_after_ms = match r {
            crate::policy::Refusal::Sampling { retry_after_ms } | crate::policy::Refusal::Tokens { retry_after_ms } => *retry_after_ms,
            crate::policy::Refusal::Streams { .. } => 1000,
            _ => return Reply::error(id, &e),
        };
        let (status, code, data) = e.classify();
        Reply::Limited(status, jsonrpc::error_body(id, code, &e.to_string(), data.as_ref()), retry_after_ms.div_ceil(1000).max(1))
    }

    /// The body of this reply when it is one JSON object (for sending it in-stream instead).
    pub fn json_body(&self) -> Option<&Bytes> {
        match self {
            Reply::Json(_, b) | Reply::Limited(_, b, _) | Reply::Challenge(_, _, b) | Reply::Session(_, b, _) => Some(b),
            _ => None,
        }
    }

    /// The HTTP status this reply will carry.
    pub fn status(&self) -> StatusCode {
        match self {
            Reply::Json(s, _) | Reply::Plain(s, _) | Reply::Challenge(s, _, _) | Reply::Session(s, _, _) => *s,
            Reply::Limited(s, ..) => *s,
            Reply::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
            Reply::Sse(_) => StatusCode::OK,
            Reply::Accepted => StatusCode::ACCEPTED,
        }
    }

    /// Builds the hyper response.
    pub fn into_response(self) -> Response<Body> {
        let mut b = Response::builder().status(self.status());
        let body = match self {
            Reply::Json(_, bytes) => {
                b = b.header(http::header::CONTENT_TYPE, "application/json");
                Full::new(bytes).boxed()
            }
            Reply::Sse(body) => {
                b = b
                    .header(http::header::CONTENT_TYPE, "text/event-stream")
                    .header(http::header::CACHE_CONTROL, "no-cache")
                    .header("x-accel-buffering", "no");
                let stream = futures_util::stream::unfold(body, |mut body| async move {
                    body.recv().await.map(|frame| (Ok::<_, Infallible>(hyper::body::Frame::data(frame)), body))
                });
                StreamBody::new(stream).boxed()
            }
            Reply::Accepted => Full::new(Bytes::new()).boxed(),
            Reply::Session(_, bytes, sid) => {
                b = b.header(http::header::CONTENT_TYPE, "application/json").header(crate::mcp::headers::SESSION_ID, sid);
                Full::new(bytes).boxed()
            }
            Reply::Overloaded => {
                b = b.header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8").header(http::header::RETRY_AFTER, "1");
                Full::new(Bytes::from_static(b"service unavailable: too many requests in progress (limits.max_in_flight); retry shortly\n"))
                    .boxed()
            }
            Reply::Limited(_, bytes, secs) => {
                b = b.header(http::header::CONTENT_TYPE, "application/json").header(http::header::RETRY_AFTER, secs.to_string());
                Full::new(bytes).boxed()
            }
            Reply::Challenge(_, challenge, bytes) => {
                b = b.header(http::header::CONTENT_TYPE, "application/json").header(http::header::WWW_AUTHENTICATE, challenge);
                Full::new(bytes).boxed()
            }
            Reply::Plain(status, text) => {
                b = b.header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8");
                if status == StatusCode::METHOD_NOT_ALLOWED {
                    b = b.header(http::header::ALLOW, HeaderValue::from_static("POST"));
                }
                Full::new(Bytes::from_static(text.as_bytes())).boxed()
            }
        };
        b.body(body).unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
    }
}

/// Methods whose complete results must carry `ttlMs` and `cacheScope`.
pub fn is_cacheable(method: &Method) -> bool {
    matches!(
        method,
        Method::ServerDiscover
            | Method::ToolsList
            | Method::PromptsList
            | Method::ResourcesList
            | Method::ResourcesTemplatesList
            | Method::ResourcesRead
    )
}

/// What a result's `resultType` says, decoded (an escaped spelling reads as what it spells).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultKind {
    /// `complete`, or absent (earlier servers).
    Complete,
    /// `input_required`: a round, which Sluice seals and judges.
    InputRequired,
    /// Anything else (an extension Sluice does not serve, a typo, not a string).
    Other,
}

/// Decodes `resultType` (the last of repeated keys, as the members are read).
pub fn result_kind(m: &RawObject<'_>) -> ResultKind {
    match m.get("resultType").map(serde_json::from_str::<std::borrow::Cow<'_, str>>) {
        None => ResultKind::Complete,
        Some(Ok(t)) if t == "complete" => ResultKind::Complete,
        Some(Ok(t)) if t == "input_required" => ResultKind::InputRequired,
        Some(_) => ResultKind::Other,
    }
}

/// An upstream's final JSON-RPC message, read once.
pub enum Final<'a> {
    /// A result: its members (each key once, with its last value) and its decoded kind.
    Result(RawObject<'a>, ResultKind),
    /// A JSON-RPC error.
    Error(jsonrpc::RpcError),
    /// Not a JSON-RPC response.
    Bad,
}

/// Reads an upstream's final message.
pub fn read_final(msg: &str) -> Final<'_> {
    #[derive(serde::Deserialize)]
    struct Wire<'a> {
        #[serde(borrow, default)]
        result: Option<RawObject<'a>>,
        #[serde(default)]
        error: Option<jsonrpc::RpcError>,
    }
    match serde_json::from_str::<Wire<'_>>(msg) {
        Ok(Wire { result: Some(r), .. }) => {
            // A repeated key is written once, with its last value, as the round sealing reads it.
            let r = r.dedup_last();
            let kind = result_kind(&r);
            Final::Result(r, kind)
        }
        Ok(Wire { error: Some(e), .. }) => Final::Error(e),
        _ => Final::Bad,
    }
}

/// Stamps a result object: `resultType` (absent means complete), Sluice's `serverInfo` (given
/// as JSON text) in `_meta`, and cache hints on complete results of cacheable methods.
#[cfg(test)]
fn stamp_result(raw: &str, method: &str, server_info: &str) -> Option<String> {
    let method = &Method::parse(method);
    let mut out = String::with_capacity(raw.len() + server_info.len() + 96);
    stamp_into(&mut out, &members(raw)?, method, server_info);
    Some(out)
}

fn members(raw: &str) -> Option<RawObject<'_>> {
    serde_json::from_str::<RawObject<'_>>(raw).ok().map(RawObject::dedup_last)
}

fn push_key(out: &mut String, key: &str, first: &mut bool) {
    if !std::mem::take(first) {
        out.push(',');
    }
    jsonrpc::push_json_str(out, key);
    out.push(':');
}

/// Writes the stamped result to `out`: members keep their order and bytes (compacted), only
/// `_meta` is rebuilt, and the members Sluice adds come last. Nothing is re-serialized.
fn stamp_into(out: &mut String, m: &RawObject<'_>, method: &Method, server_info: &str) {
    let find = |k: &str| m.get(k);
    let hints = result_kind(m) == ResultKind::Complete && is_cacheable(method);
    let ttl_ok = find("ttlMs").is_some_and(|r| r.parse::<u64>().is_ok());
    let scope_ok = find("cacheScope")
        .and_then(|r| serde_json::from_str::<std::borrow::Cow<'_, str>>(r).ok())
        .is_some_and(|s| s == "public" || s == "private");
    let mut first = true;
    out.push('{');
    let mut wrote_meta = false;
    for (k, v) in &m.0 {
        match k.as_ref() {
            "_meta" => {
                push_key(out, k, &mut first);
                write_meta(out, v.get(), server_info);
                wrote_meta = true;
            }
            "ttlMs" if hints && !ttl_ok => {}
            "cacheScope" if hints && !scope_ok => {}
            _ => {
                push_key(out, k, &mut first);
                out.push_str(&crate::mcp::compact_json(v.get()));
            }
        }
    }
    if find("resultType").is_none() {
        push_key(out, "resultType", &mut first);
        out.push_str("\"complete\"");
    }
    if !wrote_meta {
        push_key(out, "_meta", &mut first);
        write_meta(out, "{}", server_info);
    }
    if hints && !ttl_ok {
        push_key(out, "ttlMs", &mut first);
        out.push('0');
    }
    if hints && !scope_ok {
        push_key(out, "cacheScope", &mut first);
        out.push_str("\"private\"");
    }
    out.push('}');
}

/// `_meta` with Sluice's `serverInfo` (in place of the upstream's, or added last). A `_meta`
/// that is not an object is replaced.
fn write_meta(out: &mut String, raw: &str, server_info: &str) {
    let m = members(raw).unwrap_or_default();
    let mut first = true;
    out.push('{');
    let mut wrote = false;
    for (k, v) in &m.0 {
        push_key(out, k, &mut first);
        if k == crate::mcp::META_SERVER_INFO {
            out.push_str(server_info);
            wrote = true;
        } else {
            out.push_str(&crate::mcp::compact_json(v.get()));
        }
    }
    if !wrote {
        push_key(out, crate::mcp::META_SERVER_INFO, &mut first);
        out.push_str(server_info);
    }
    out.push('}');
}

/// Maps an upstream error to one 2026-07-28 allows, and the HTTP status its code fixes.
pub fn map_error(mut e: jsonrpc::RpcError, upstream_status: StatusCode, uri: Option<&str>) -> (StatusCode, jsonrpc::RpcError) {
    match e.code {
        -32002 => {
            // Resource not found was -32002 up to 2025-11-25; 2026-07-28 says -32602 with the uri.
            e.code = jsonrpc::INVALID_PARAMS;
            let mut data = e.data.take().and_then(|d| d.as_object().cloned()).unwrap_or_default();
            if let (false, Some(u)) = (data.contains_key("uri"), uri) {
                data.insert("uri".into(), u.into());
            }
            e.data = Some(Value::Object(data));
        }
        jsonrpc::HEADER_MISMATCH | jsonrpc::MISSING_CAPABILITY | jsonrpc::UNSUPPORTED_VERSION => {}
        c if (-32099..=-32020).contains(&c) => {
            e.code = jsonrpc::INTERNAL_ERROR;
            e.data = None;
        }
        _ => {}
    }
    let status = match e.code {
        jsonrpc::HEADER_MISMATCH | jsonrpc::MISSING_CAPABILITY | jsonrpc::UNSUPPORTED_VERSION => StatusCode::BAD_REQUEST,
        jsonrpc::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ if upstream_status.is_client_error() => upstream_status,
        _ => StatusCode::OK,
    };
    (status, e)
}

/// The client's body for an upstream's result (complete, or a round Sluice has sealed).
pub fn result_reply(id: &str, method: &Method, m: &RawObject<'_>, server_info: &str) -> (StatusCode, Bytes) {
    let mut out =
        String::with_capacity(256 + server_info.len() + id.len() + m.0.iter().map(|(k, v)| k.len() + v.get().len() + 4).sum::<usize>());
    out.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    out.push_str(id);
    out.push_str(",\"result\":");
    stamp_into(&mut out, m, method, server_info);
    out.push('}');
    (StatusCode::OK, Bytes::from(out))
}

/// The client's body for an upstream's JSON-RPC error.
pub fn error_reply(id: &str, e: jsonrpc::RpcError, upstream_status: StatusCode, uri: Option<&str>) -> (StatusCode, Bytes) {
    let (status, e) = map_error(e, upstream_status, uri);
    let err = serde_json::to_value(&e).unwrap_or_else(|_| json!({"code": jsonrpc::INTERNAL_ERROR, "message": "upstream error"}));
    (status, Bytes::from(format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{err}}}")))
}

/// Turns an upstream's final message into the client's body and status, where no round may
/// come (a legacy upstream's answer, a method that cannot return `input_required`): a result
/// that is not `complete` is the upstream's protocol error.
pub fn finish(
    id: &str,
    method: &Method,
    upstream: &str,
    upstream_status: StatusCode,
    msg: &str,
    uri: Option<&str>,
    server_info: &str,
) -> (StatusCode, Bytes) {
    match read_final(msg) {
        Final::Result(r, ResultKind::Complete) => result_reply(id, method, &r, server_info),
        Final::Result(_, _) => unexpected_result(id, upstream),
        Final::Error(e) => error_reply(id, e, upstream_status, uri),
        Final::Bad => bad_upstream(id, upstream),
    }
}

/// A result Sluice may not relay: `input_required` where no round may come, or a `resultType`
/// it does not serve. The value itself is the upstream's text and is not repeated.
pub fn unexpected_result(id: &str, upstream: &str) -> (StatusCode, Bytes) {
    let msg = format!(
        "upstream '{upstream}' answered with a resultType other than complete where only a complete result may come (or one Sluice does not serve); report it to that server's owners"
    );
    (StatusCode::BAD_GATEWAY, jsonrpc::error_body(id, jsonrpc::INTERNAL_ERROR, &msg, None))
}

fn bad_upstream(id: &str, upstream: &str) -> (StatusCode, Bytes) {
    let msg = format!("upstream '{upstream}' sent an answer that is not a JSON-RPC response; report it to that server's owners");
    (StatusCode::BAD_GATEWAY, jsonrpc::error_body(id, jsonrpc::INTERNAL_ERROR, &msg, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_without_result_type_or_hints_are_stamped() {
        let out = stamp_result(r#"{"tools":[],"_meta":{"x":1}}"#, "tools/list", r#"{"name":"sluice"}"#).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["resultType"], "complete");
        assert_eq!(v["ttlMs"], 0);
        assert_eq!(v["cacheScope"], "private");
        assert_eq!(v["_meta"]["x"], 1);
        assert_eq!(v["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "sluice");
    }

    #[test]
    fn stamping_keeps_member_order_and_bytes_and_replaces_server_info() {
        let raw = "{ \"content\": [ {\"type\":\"text\", \"text\": \"a  b\"} ],\n \"_meta\": {\"io.modelcontextprotocol/serverInfo\": {\"name\":\"up\"}, \"k\": 1.50},\n \"ttlMs\": -1, \"x\\u0041\": 2 }";
        let out = stamp_result(raw, "resources/read", r#"{"name":"sluice"}"#).unwrap();
        assert_eq!(
            out,
            r#"{"content":[{"type":"text","text":"a  b"}],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"sluice"},"k":1.50},"xA":2,"resultType":"complete","ttlMs":0,"cacheScope":"private"}"#
        );
        assert_eq!(stamp_result("[1]", "tools/call", "{}"), None);
        let twice = stamp_result(r#"{"resultType":"input_required","a":1,"resultType":"complete"}"#, "tools/call", "{}").unwrap();
        assert_eq!(twice, r#"{"resultType":"complete","a":1,"_meta":{"io.modelcontextprotocol/serverInfo":{}}}"#);
        let odd_meta = stamp_result(r#"{"_meta":7}"#, "tools/call", "{}").unwrap();
        assert_eq!(odd_meta, r#"{"_meta":{"io.modelcontextprotocol/serverInfo":{}},"resultType":"complete"}"#);
    }

    #[test]
    fn finish_wraps_the_stamped_result_in_the_client_id() {
        let (s, b) =
            finish("\"c1\"", &Method::ToolsCall, "u", StatusCode::OK, r#"{"jsonrpc":"2.0","id":9,"result":{"content":[]}}"#, None, "{}");
        assert_eq!(s, StatusCode::OK);
        assert_eq!(
            std::str::from_utf8(&b).unwrap(),
            r#"{"jsonrpc":"2.0","id":"c1","result":{"content":[],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{}}}}"#
        );
        let (s, _) = finish("1", &Method::ToolsCall, "u", StatusCode::OK, "not json", None, "{}");
        assert_eq!(s, StatusCode::BAD_GATEWAY);
    }

    #[test]
    fn result_types_are_decoded_and_only_complete_passes_where_no_round_may_come() {
        let kind = |r: &str| result_kind(&members(r).unwrap());
        assert_eq!(kind("{}"), ResultKind::Complete);
        assert_eq!(kind(r#"{"resultType":"compl\u0065te"}"#), ResultKind::Complete);
        assert_eq!(kind(r#"{"resultType":"input\u005frequired"}"#), ResultKind::InputRequired);
        assert_eq!(kind(r#"{"result\u0054ype":"input_required"}"#), ResultKind::InputRequired);
        assert_eq!(kind(r#"{"resultType":"complete","resultType":"input_required"}"#), ResultKind::InputRequired);
        for other in [r#"{"resultType":"task"}"#, r#"{"resultType":"Input_Required"}"#, r#"{"resultType":""}"#, r#"{"resultType":1}"#] {
            assert_eq!(kind(other), ResultKind::Other, "{other}");
        }
        for msg in [
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input\u005frequired","inputRequests":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"task"}}"#,
        ] {
            let (s, b) = finish("1", &Method::ToolsCall, "u", StatusCode::OK, msg, None, "{}");
            assert_eq!(s, StatusCode::BAD_GATEWAY, "{msg}");
            assert!(!String::from_utf8_lossy(&b).contains("inputRequests"));
        }
    }

    #[test]
    fn input_required_results_get_no_cache_hints() {
        let out = stamp_result(r#"{"resultType":"input_required","requestState":"s"}"#, "resources/read", "{}").unwrap();
        assert!(!out.contains("ttlMs"));
    }

    #[test]
    fn retired_and_undefined_codes_are_mapped() {
        let e = jsonrpc::RpcError { code: -32002, message: "nf".into(), data: None };
        let (_, e) = map_error(e, StatusCode::OK, Some("test://x"));
        assert_eq!((e.code, e.data.unwrap()["uri"].as_str()), (-32602, Some("test://x")));
        let e = jsonrpc::RpcError { code: -32042, message: "x".into(), data: None };
        assert_eq!(map_error(e, StatusCode::OK, None).1.code, -32603);
        let e = jsonrpc::RpcError { code: -32601, message: "x".into(), data: None };
        assert_eq!(map_error(e, StatusCode::OK, None).0, StatusCode::NOT_FOUND);
    }
}
