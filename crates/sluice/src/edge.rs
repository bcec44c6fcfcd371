//! Stage 1, the edge: what is refused before a body is read.
//!
//! Takes the HTTP request head and body; gives the body bytes (bounded). Refuses a foreign
//! `Host` or `Origin` on a loopback listener, or an `Origin` not allowed by config (403); a
//! method other than POST (405); an `Accept` that does not list both `application/json` and
//! `text/event-stream` (406); a body over `limits.max_body_bytes` (413); a body that has not
//! arrived whole within `timeouts.body_read_ms` of its head (408).

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::BodyExt;

use crate::respond::Reply;

/// Whether `host` (no port) is a loopback name.
fn is_loopback_host(host: &str) -> bool {
    ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .any(|h| h.eq_ignore_ascii_case(host))
}

/// Whether `authority` is exactly `host[:port]` with a loopback host (IPv6 in brackets) and a
/// numeric port: what `http::uri::Authority` would accept here, without its parse and copy,
/// which cost about 2,000 instructions on every request (callgrind; the test checks both agree).
fn is_loopback_authority(authority: &str) -> bool {
    let (host, rest) = if authority.starts_with('[') {
        match authority.find(']') {
            Some(i) => authority.split_at(i + 1),
            None => return false,
        }
    } else {
        authority
            .find(':')
            .map_or((authority, ""), |i| authority.split_at(i))
    };
    let port_ok = rest.is_empty()
        || rest.strip_prefix(':').is_some_and(|p| {
            !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok()
        });
    port_ok && is_loopback_host(host)
}

/// Checks `Host` (or HTTP/2's `:authority`) and `Origin` (DNS-rebinding protection, digest §5.6).
pub fn check_origin(
    parts: &http::request::Parts,
    loopback: bool,
    allowed: &[String],
) -> Result<(), Reply> {
    let h = &parts.headers;
    let forbidden = Reply::Plain(
        StatusCode::FORBIDDEN,
        "forbidden: Host or Origin is not allowed for this endpoint\n",
    );
    let authority = parts.uri.authority().map(|a| a.as_str());
    let host_header = h
        .get(http::header::HOST)
        .map(|v| v.to_str().unwrap_or("\u{0}"));
    if loopback {
        // An unreadable Host is foreign; HTTP/2 names the host in `:authority` instead.
        let host = host_header.or(authority).unwrap_or("");
        if !host.is_empty() && !is_loopback_authority(host) {
            return Err(forbidden);
        }
    }
    let Some(origin) = h.get(http::header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("");
    if allowed.iter().any(|a| a == origin) {
        return Ok(());
    }
    let authority = origin.split_once("://").map(|(_, rest)| rest).unwrap_or("");
    let ok = if loopback {
        is_loopback_authority(authority)
    } else {
        let host = host_header
            .or(parts.uri.authority().map(|a| a.as_str()))
            .unwrap_or("");
        !authority.is_empty() && authority.eq_ignore_ascii_case(host)
    };
    if ok {
        Ok(())
    } else {
        Err(forbidden)
    }
}

/// Refuses any method but POST on the MCP endpoint.
pub fn check_method(m: &Method) -> Result<(), Reply> {
    if m == Method::POST {
        Ok(())
    } else {
        Err(Reply::Plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed: this 2026-07-28 endpoint takes POST only\n",
        ))
    }
}

/// Refuses an `Accept` that does not list both MCP media types.
pub fn check_accept(h: &HeaderMap) -> Result<(), Reply> {
    // What the SDKs send, as one value: accepted without splitting it.
    let mut all = h.get_all(http::header::ACCEPT).iter();
    if let (Some(v), None) = (all.next(), all.next()) {
        if matches!(
            v.as_bytes(),
            b"application/json, text/event-stream" | b"text/event-stream, application/json"
        ) {
            return Ok(());
        }
    }
    let (mut json, mut sse) = (false, false);
    for v in h.get_all(http::header::ACCEPT) {
        for part in v.to_str().unwrap_or("").split(',') {
            let ty = part.split(';').next().unwrap_or("").trim();
            json |= ty.eq_ignore_ascii_case("application/json");
            sse |= ty.eq_ignore_ascii_case("text/event-stream");
        }
    }
    if json && sse {
        Ok(())
    } else {
        Err(Reply::Plain(
            StatusCode::NOT_ACCEPTABLE,
            "not acceptable: Accept must list application/json and text/event-stream\n",
        ))
    }
}

/// Reads the body, refusing it past `max` bytes (no deadline of its own: the caller's).
pub async fn read_body(
    h: &HeaderMap,
    body: hyper::body::Incoming,
    max: usize,
) -> Result<Bytes, Reply> {
    read_body_within(h, body, max, std::time::Duration::MAX).await
}

/// Reads the body, refusing it past `max` bytes, or when it is not whole within `deadline`
/// (a client that sends a head and holds its body back costs a connection and its principal's
/// share for that long, no more).
pub async fn read_body_within<B>(
    h: &HeaderMap,
    body: B,
    max: usize,
    deadline: std::time::Duration,
) -> Result<Bytes, Reply>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let too_large = Reply::Plain(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload too large: the body exceeds limits.max_body_bytes\n",
    );
    let declared = h
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > max) {
        return Err(too_large);
    }
    // A body already whole (the common case: a small body in the head's packets) is read
    // without arming the deadline's timer.
    let mut collect = std::pin::pin!(http_body_util::Limited::new(body, max).collect());
    let read = match std::future::poll_fn(|cx| {
        std::task::Poll::Ready(std::future::Future::poll(collect.as_mut(), cx))
    })
    .await
    {
        std::task::Poll::Ready(done) => Ok(done),
        std::task::Poll::Pending => tokio::time::timeout(deadline, collect).await,
    };
    match read {
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large),
        Ok(Err(_)) => Err(Reply::Plain(StatusCode::BAD_REQUEST, "bad request: the body could not be read\n")),
        Err(_) => Err(Reply::Plain(
            StatusCode::REQUEST_TIMEOUT,
            "request timeout: the body did not arrive whole within timeouts.body_read_ms of the request head; send it at once\n",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (http::HeaderName::from_static(k), v.parse().unwrap()))
            .collect()
    }

    fn head(pairs: &[(&'static str, &str)]) -> http::request::Parts {
        head_at("/mcp", pairs)
    }

    fn head_at(uri: &str, pairs: &[(&'static str, &str)]) -> http::request::Parts {
        let mut r = http::Request::builder().uri(uri).body(()).unwrap();
        *r.headers_mut() = headers(pairs);
        r.into_parts().0
    }

    #[test]
    fn an_http2_authority_is_checked_like_a_host() {
        assert!(check_origin(&head_at("http://evil.example.com/mcp", &[]), true, &[]).is_err());
        assert!(check_origin(&head_at("http://localhost:8080/mcp", &[]), true, &[]).is_ok());
    }

    #[test]
    fn loopback_host_and_origin_are_accepted_on_any_port_and_others_refused() {
        assert!(check_origin(
            &head(&[("host", "127.0.0.1:9"), ("origin", "http://localhost:3000")]),
            true,
            &[]
        )
        .is_ok());
        assert!(check_origin(&head(&[("host", "[::1]:9")]), true, &[]).is_ok());
        assert!(check_origin(&head(&[("host", "evil.example.com")]), true, &[]).is_err());
        assert!(check_origin(
            &head(&[("host", "localhost"), ("origin", "http://evil.example.com")]),
            true,
            &[]
        )
        .is_err());
        let allowed = vec!["https://app.example.com".to_owned()];
        assert!(check_origin(
            &head(&[("host", "localhost"), ("origin", "https://app.example.com")]),
            true,
            &allowed
        )
        .is_ok());
    }

    /// The reference: `http::uri::Authority`, held to exactly `host[:port]` with a decimal port.
    fn by_authority(s: &str) -> bool {
        s.parse::<http::uri::Authority>().is_ok_and(|a| {
            let port = a.port();
            let exact = a.as_str().len()
                == a.host().len() + port.as_ref().map_or(0, |p| p.as_str().len() + 1);
            // Digits only: `u16`'s parse (which http uses) also takes a leading `+`.
            let digits = port
                .as_ref()
                .is_none_or(|p| p.as_str().bytes().all(|b| b.is_ascii_digit()));
            exact && digits && !s.contains('@') && is_loopback_host(a.host())
        })
    }

    #[test]
    fn loopback_authorities_are_exactly_host_and_port_as_http_parses_them() {
        let ok = [
            "localhost",
            "LOCALHOST:1",
            "127.0.0.1:8080",
            "[::1]",
            "[::1]:9",
            "localhost:65535",
        ];
        let foreign = [
            "",
            "evil.com",
            "localhost.evil.com",
            "a@localhost",
            "localhost@evil.com",
            "[::1",
            "::1",
            "localhost:x",
            "127.0.0.1:8080/",
            "[::1]evil.com:80",
            "localhost:",
            "localhost:65536",
            "localhost:1:2",
            "[::1]:",
            "[::1]:x",
            "127.0.0.1 :80",
            " localhost",
            "[::2]",
            "127.0.0.2",
            "localhost:+80",
            "localhost:-1",
            "[::1]]",
            "localhost:099999",
        ];
        for a in ok {
            assert!(is_loopback_authority(a), "{a}");
        }
        for a in foreign {
            assert!(!is_loopback_authority(a), "{a}");
        }
        for a in ok.iter().chain(foreign.iter()) {
            assert_eq!(
                is_loopback_authority(a),
                by_authority(a),
                "disagrees with http::uri::Authority on {a:?}"
            );
        }
    }

    #[test]
    fn accept_must_list_both_types() {
        assert!(check_accept(&headers(&[(
            "accept",
            "application/json, text/event-stream"
        )]))
        .is_ok());
        assert!(check_accept(&headers(&[("accept", "application/json")])).is_err());
        assert!(check_accept(&HeaderMap::new()).is_err());
    }
}
