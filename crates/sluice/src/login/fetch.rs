//! The login front's outgoing requests: the IdP's discovery document, its keys and its token
//! endpoint, and clients' metadata documents, over the gateway's pooled HTTP client.
//!
//! Takes a URL (and a form for a POST); gives the answer's status and JSON. Refuses (an error
//! naming the URL's host and what went wrong, never a body): an answer later than `within`,
//! larger than `max` bytes (the client's own bound applies first), or not JSON.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};

use crate::upstream::client::{Answer, HttpClient};

/// What came back: the status and the JSON body.
pub struct Got {
    /// The HTTP status.
    pub status: StatusCode,
    /// The body, parsed.
    pub json: serde_json::Value,
}

/// GETs JSON from `url`.
pub async fn get(
    http: &HttpClient,
    url: &str,
    within: Duration,
    max: usize,
) -> Result<Got, String> {
    send(
        http,
        http::Method::GET,
        url,
        HeaderMap::new(),
        Bytes::new(),
        within,
        max,
    )
    .await
}

/// POSTs a form to `url`, with `basic` as HTTP Basic credentials when given.
pub async fn post_form(
    http: &HttpClient,
    url: &str,
    form: &[(&str, &str)],
    basic: Option<(&str, &str)>,
    within: Duration,
) -> Result<Got, String> {
    let body = {
        let mut body = form_urlencoded::Serializer::new(String::new());
        for (k, v) in form {
            body.append_pair(k, v);
        }
        body.finish()
    };
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-www-form-urlencoded"),
    );
    if let Some((id, secret)) = basic {
        // RFC 6749 §2.3.1: each part form-encoded before joining.
        let enc = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        use base64::Engine as _;
        let raw = format!("{}:{}", enc(id), enc(secret));
        let value = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        );
        let mut v = HeaderValue::from_str(&value).map_err(|_| "bad client credentials")?;
        v.set_sensitive(true);
        headers.insert(http::header::AUTHORIZATION, v);
    }
    let body = Bytes::from(body);
    send(
        http,
        http::Method::POST,
        url,
        headers,
        body,
        within,
        64 * 1024,
    )
    .await
}

async fn send(
    http: &HttpClient,
    method: http::Method,
    url: &str,
    mut headers: HeaderMap,
    body: Bytes,
    within: Duration,
    max: usize,
) -> Result<Got, String> {
    let uri: http::Uri = url
        .parse()
        .map_err(|_| format!("{} is not a URL", shown(url)))?;
    let host = uri.host().unwrap_or_default().to_owned();
    headers.insert(
        http::header::ACCEPT,
        HeaderValue::from_static("application/json"),
    );
    if let Some(a) = uri.authority() {
        if let Ok(v) = HeaderValue::from_str(a.as_str()) {
            headers.insert(http::header::HOST, v);
        }
    }
    let sent = http.send_within(method, &host, &uri, headers, body, None, max);
    let (_, answer) = tokio::time::timeout(within, sent)
        .await
        .map_err(|_| format!("{host} did not answer within {} ms", within.as_millis()))?
        .map_err(|e| match e {
            crate::upstream::client::UpstreamError::TooLarge(..) => {
                format!("{host} answered more than {max} bytes")
            }
            e => format!("{host} could not be reached: {e}"),
        })?;
    let (status, bytes) = match answer {
        Answer::Json(s, b) | Answer::Status(s, b) => (s, b),
        Answer::Sse(_) => return Err(format!("{host} answered an event stream, not JSON")),
    };
    if bytes.len() > max {
        return Err(format!("{host} answered more than {max} bytes"));
    }
    let json = serde_json::from_slice(&bytes)
        .map_err(|_| format!("{host} answered {status} without a JSON body"))?;
    Ok(Got { status, json })
}

fn shown(s: &str) -> String {
    super::checks::shown(s)
}
