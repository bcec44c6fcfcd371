//! An admin request's body.
//!
//! Takes the body of an authenticated request (or of a sign-in, whose body is its credential);
//! gives its bytes. Refuses one over [`MAX_BODY`] (413 `too_large`) or slower than the deadline
//! given (408 `body_timeout`).

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;

use super::{error, Answer};

/// The largest request body (a decision, a sign-in): 64 KiB.
pub const MAX_BODY: usize = 64 * 1024;

/// Reads a request's body: at most [`MAX_BODY`], within `within`.
pub async fn read(
    body: hyper::body::Incoming,
    within: std::time::Duration,
) -> Result<Bytes, Answer> {
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    match tokio::time::timeout(within, limited.collect()).await {
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(_)) => Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "the admin API takes bodies of at most 64 KiB",
        )),
        Err(_) => Err(error(
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            "the request body did not arrive within timeouts.body_read_ms",
        )),
    }
}
