//! Taking up a call's stream again (SEP-1699): a 2025-11-25 server may end a POST's SSE stream
//! before its answer, after an event with an id; the client reconnects with a `GET` carrying
//! `Last-Event-ID` and the server sends what followed.
//!
//! Takes a session and where its stream ended ([`Resume`]); gives the answer to that `GET`.
//! Refuses an event id that cannot be a header value (a protocol error naming the upstream).

use bytes::Bytes;
use http::{HeaderValue, Method};

use super::Session;
use crate::upstream::client::{Answer, HttpClient, Resume, UpstreamError};

/// The header a resuming `GET` carries.
const LAST_EVENT_ID: http::HeaderName = http::HeaderName::from_static("last-event-id");

impl Session {
    /// `GET`s the session's stream from `from.last_id`; `stream_timeout` bounds each message as
    /// on the POST it takes up.
    pub async fn resume(
        &self,
        client: &HttpClient,
        from: &Resume,
        stream_timeout: std::time::Duration,
    ) -> Result<Answer, UpstreamError> {
        let id = HeaderValue::from_str(&from.last_id).map_err(|_| {
            UpstreamError::Protocol(
                self.up.name.clone(),
                "its SSE event id is not a usable Last-Event-ID header".into(),
            )
        })?;
        let mut headers = self.headers();
        headers.insert(
            http::header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        headers.remove(http::header::CONTENT_TYPE);
        headers.insert(LAST_EVENT_ID, id);
        client
            .send(
                Method::GET,
                &self.up.name,
                &self.up.uri,
                headers,
                Bytes::new(),
                Some(stream_timeout),
            )
            .await
            .map(|(_, a)| a)
    }
}
