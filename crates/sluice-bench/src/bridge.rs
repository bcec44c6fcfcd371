//! Bridge A: one sampling round against the fast legacy mock, direct and through Sluice.
//!
//! Direct (the upstream's own time): on one 2025-11-25 session, POST `tools/call sample`, read
//! the `sampling/createMessage` ask from its stream, POST the answer, read the result. Through
//! Sluice: POST the modern `tools/call` (answered `input_required` with a sealed
//! `requestState`), then the retry with `inputResponses` (answered with the result). Both use
//! the same pooled client over keep-alive connections, one round at a time.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use serde_json::{json, Value};
use sluice::upstream::client::{final_message, Answer, HttpClient, Messages};

use crate::wire;

pub(crate) fn legacy_headers(sid: Option<&HeaderValue>) -> HeaderMap {
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
        HeaderValue::from_static("2025-11-25"),
    );
    if let Some(s) = sid {
        h.insert("mcp-session-id", s.clone());
    }
    h
}

/// A 2025-11-25 session with the legacy mock, as a legacy client holds it.
pub(crate) struct LegacySession {
    pub(crate) sid: Option<HeaderValue>,
}

/// Opens a session: `initialize`, then `notifications/initialized`.
pub(crate) async fn open(c: &HttpClient, url: &Uri) -> Result<LegacySession, String> {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {"sampling": {}}, "clientInfo": {"name": "sluice-bench", "version": "1"}}});
    let (h, a) = c
        .send(
            Method::POST,
            "legacy",
            url,
            legacy_headers(None),
            Bytes::from(init.to_string()),
            None,
        )
        .await
        .map_err(|e| e.to_string())?;
    final_message(a, "legacy")
        .await
        .map_err(|e| e.to_string())?;
    let sid = h.get("mcp-session-id").cloned();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    c.post(
        "legacy",
        url,
        legacy_headers(sid.as_ref()),
        Bytes::from(note.to_string()),
        None,
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(LegacySession { sid })
}

/// POSTs `tools/call sample` on the session; gives the call's stream once its ask arrived, and the ask's id.
pub(crate) async fn call_until_ask(
    c: &HttpClient,
    url: &Uri,
    s: &LegacySession,
    id: u64,
) -> Result<(Messages, String), String> {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "sample", "arguments": {}}});
    let t = Some(Duration::from_secs(10));
    let a = c
        .post(
            "legacy",
            url,
            legacy_headers(s.sid.as_ref()),
            Bytes::from(call.to_string()),
            t,
        )
        .await
        .map_err(|e| e.to_string())?;
    let Answer::Sse(mut stream) = a else {
        return Err("the legacy mock did not stream the call".into());
    };
    let ask = stream
        .next()
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the call's stream ended before the ask")?;
    let ask: Value = serde_json::from_str(ask.text()).map_err(|e| e.to_string())?;
    if ask["method"] != "sampling/createMessage" {
        return Err(format!("expected a sampling/createMessage ask, got {ask}"));
    }
    Ok((stream, ask["id"].to_string()))
}

fn sampled() -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "bench-model"})
}

/// Rounds straight to the legacy mock; gives each round's time.
pub(crate) async fn direct(
    c: &HttpClient,
    url: &Uri,
    warm: usize,
    n: usize,
) -> Result<Vec<Duration>, String> {
    let s = open(c, url).await?;
    let mut times = Vec::with_capacity(n);
    for i in 0..warm + n {
        let t0 = Instant::now();
        let (mut stream, ask_id) = call_until_ask(c, url, &s, 1 + i as u64).await?;
        let reply = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{ask_id},\"result\":{}}}",
            sampled()
        );
        c.post(
            "legacy",
            url,
            legacy_headers(s.sid.as_ref()),
            Bytes::from(reply),
            None,
        )
        .await
        .map_err(|e| e.to_string())?;
        let done = stream
            .next()
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the call's stream ended before the result")?;
        if !done.text().contains("\"result\"") {
            return Err(format!(
                "direct round {i}: unexpected final message {}",
                done.text()
            ));
        }
        if i >= warm {
            times.push(t0.elapsed());
        }
    }
    Ok(times)
}

fn sample_call(id: u64, extra: Option<(&str, &str)>) -> Bytes {
    let mut params =
        json!({"name": "sample", "arguments": {}, "_meta": wire::meta(json!({"sampling": {}}))});
    if let Some((key, state)) = extra {
        params["inputResponses"] = json!({ key: sampled() });
        params["requestState"] = Value::String(state.to_owned());
    }
    Bytes::from(
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string(),
    )
}

/// POSTs `body` with `headers`; gives the JSON of an HTTP 200 answer, or says what came instead.
pub(crate) async fn post_json(
    c: &HttpClient,
    url: &Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Value, String> {
    match c
        .post("sluice", url, headers, body, None)
        .await
        .map_err(|e| e.to_string())?
    {
        Answer::Json(StatusCode::OK, b) => serde_json::from_slice(&b).map_err(|e| e.to_string()),
        Answer::Json(s, b) | Answer::Status(s, b) => {
            Err(format!("HTTP {s}: {}", String::from_utf8_lossy(&b)))
        }
        Answer::Sse(_) => Err("unexpected SSE answer".into()),
    }
}

/// Starts a modern call of `sample` through Sluice; gives the `requestState` and input key of its round.
pub(crate) async fn start_round(
    c: &HttpClient,
    url: &Uri,
    id: u64,
) -> Result<(String, String), String> {
    let v = post_json(
        c,
        url,
        wire::modern_headers("sample"),
        sample_call(id, None),
    )
    .await?;
    let r = &v["result"];
    if r["resultType"] != "input_required" {
        return Err(format!("expected input_required, got {v}"));
    }
    let state = r["requestState"]
        .as_str()
        .ok_or("no requestState")?
        .to_owned();
    let key = r["inputRequests"]
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .ok_or("no inputRequests")?;
    Ok((state, key))
}

/// Rounds through Sluice; gives each round's time (both requests) and that of its first request.
pub(crate) async fn via_sluice(
    c: &HttpClient,
    url: &Uri,
    warm: usize,
    n: usize,
) -> Result<(Vec<Duration>, Vec<Duration>), String> {
    let (mut times, mut firsts) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..warm + n {
        let t0 = Instant::now();
        let (state, key) = start_round(c, url, 2 * i as u64 + 1).await?;
        let first = t0.elapsed();
        let v = post_json(
            c,
            url,
            wire::modern_headers("sample"),
            sample_call(2 * i as u64 + 2, Some((&key, &state))),
        )
        .await?;
        if v["result"]["resultType"] != "complete" || v["result"]["content"][0]["text"] != "sampled"
        {
            return Err(format!("round {i} through Sluice ended in {v}"));
        }
        if i >= warm {
            times.push(t0.elapsed());
            firsts.push(first);
        }
    }
    Ok((times, firsts))
}
