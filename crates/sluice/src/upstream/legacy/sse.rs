//! A 2024-11-05 HTTP+SSE connection (`transport = "sse"`): the GET stream Sluice opens on the
//! upstream's URL, whose first event names the endpoint to POST messages to, and which then
//! carries every message of the session (answers, server requests, notifications).
//!
//! Takes the upstream and the HTTP client; gives an [`SseLink`] (where to POST, the requests
//! Sluice waits on, the stream's end) and the stream, for the session's reader. The stream is
//! bounded like any upstream SSE stream (`limits.max_sse_event_bytes` per event,
//! `timeouts.stream_idle_ms` of silence ends it, and with it the session). Refuses (errors
//! naming the upstream) an answer to the GET that is not an event stream, a first event that
//! is not an endpoint, and an endpoint on another scheme, host or port than the upstream's own
//! URL (a server must not make Sluice POST elsewhere).

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Uri};

use crate::upstream::client::{Answer, HttpClient, Messages, UpstreamError};
use crate::upstream::pending::Pending;
use crate::upstream::Upstream;

/// Where a session's messages go, and what waits on its stream.
pub struct SseLink {
    up: Arc<Upstream>,
    client: HttpClient,
    post_to: Uri,
    /// Sluice's own requests waiting, and the stream's end.
    pub pending: Pending,
    /// The largest event read from the stream.
    pub max_event: usize,
}

fn headers(up: &Upstream, accept: &'static str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(http::header::HOST, up.host.clone());
    h.insert(http::header::ACCEPT, HeaderValue::from_static(accept));
    for (k, v) in &up.extra {
        h.insert(k, v.clone());
    }
    if let Some(token) = up.held_token() {
        h.insert(http::header::AUTHORIZATION, token);
    }
    h
}

/// Opens the stream and reads its endpoint event (within `timeouts.response_ms`).
pub async fn connect(
    client: &HttpClient,
    up: &Arc<Upstream>,
) -> Result<(Arc<SseLink>, Messages), UpstreamError> {
    let name = || up.name.clone();
    up.authorize(client).await?;
    let answer = client
        .send(
            Method::GET,
            &up.name,
            &up.uri,
            headers(up, "text/event-stream"),
            Bytes::new(),
            None,
        )
        .await?;
    let mut stream = match answer {
        (_, Answer::Sse(s)) => s,
        (_, Answer::Json(s, _)) | (_, Answer::Status(s, _)) => {
            return Err(UpstreamError::Protocol(
                name(),
                format!(
                    "GET answered HTTP {s}, not an event stream: is it a 2024-11-05 SSE endpoint?"
                ),
            ))
        }
    };
    let first = tokio::time::timeout(client.response_timeout(), stream.next_data())
        .await
        .map_err(|_| UpstreamError::Timeout(name(), client.response_timeout().as_millis() as u64))??
        .ok_or_else(|| UpstreamError::Closed(name()))?;
    let post_to =
        endpoint(&up.uri, first.trim()).map_err(|why| UpstreamError::Protocol(name(), why))?;
    let link = SseLink {
        up: up.clone(),
        client: client.clone(),
        post_to,
        pending: Pending::new(&up.name),
        max_event: client.max_event_bytes(),
    };
    Ok((Arc::new(link), stream))
}

/// The endpoint event's URI, resolved against the stream's URL and held to its origin.
fn endpoint(base: &Uri, data: &str) -> Result<Uri, String> {
    let refused = || {
        "its first SSE event is not an endpoint on its own origin (a 2024-11-05 server names where to POST)".to_owned()
    };
    if data.starts_with('/') {
        let authority = base.authority().ok_or_else(refused)?;
        return Uri::builder()
            .scheme("http")
            .authority(authority.as_str())
            .path_and_query(data)
            .build()
            .map_err(|_| refused());
    }
    let uri: Uri = data.parse().map_err(|_| refused())?;
    let same = uri.scheme() == base.scheme()
        && uri.authority().map(|a| a.as_str()) == base.authority().map(|a| a.as_str());
    if !same || uri.path_and_query().is_none() {
        return Err(refused());
    }
    Ok(uri)
}

impl SseLink {
    /// POSTs one message to the session's endpoint (202 expected; the answer comes on the stream).
    pub async fn send(&self, msg: &[u8]) -> Result<(), UpstreamError> {
        let mut h = headers(&self.up, "application/json, text/event-stream");
        h.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let answer = self
            .client
            .post(
                &self.up.name,
                &self.post_to,
                h,
                Bytes::copy_from_slice(msg),
                None,
            )
            .await?;
        match answer {
            Answer::Status(s, _) | Answer::Json(s, _) if s.is_success() => Ok(()),
            Answer::Status(http::StatusCode::NOT_FOUND, _)
            | Answer::Json(http::StatusCode::NOT_FOUND, _) => {
                self.pending
                    .close("it no longer knows the session (HTTP 404)");
                Err(UpstreamError::SessionGone(self.up.name.clone()))
            }
            Answer::Status(s, _) | Answer::Json(s, _) => Err(UpstreamError::Protocol(
                self.up.name.clone(),
                format!("HTTP {s} to a message POSTed to its endpoint"),
            )),
            Answer::Sse(_) => Err(UpstreamError::Protocol(
                self.up.name.clone(),
                "an event stream in answer to a message POST".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::endpoint;

    #[test]
    fn the_endpoint_is_resolved_on_the_streams_origin_and_held_to_it() {
        let base: http::Uri = "http://127.0.0.1:9000/sse".parse().unwrap();
        assert_eq!(
            endpoint(&base, "/messages/?session_id=ab")
                .unwrap()
                .to_string(),
            "http://127.0.0.1:9000/messages/?session_id=ab"
        );
        assert_eq!(
            endpoint(&base, "http://127.0.0.1:9000/m?s=1")
                .unwrap()
                .to_string(),
            "http://127.0.0.1:9000/m?s=1"
        );
        for bad in [
            "http://169.254.169.254/latest",
            "http://127.0.0.1:9001/m",
            "{\"jsonrpc\":\"2.0\"}",
            "",
            "messages",
        ] {
            assert!(endpoint(&base, bad).is_err(), "{bad:?} accepted");
        }
    }
}
