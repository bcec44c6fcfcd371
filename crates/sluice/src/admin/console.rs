//! The operator console: one HTML page, one script and one stylesheet, served under `/console`.
//!
//! Takes the path of a GET the admin listener received (before authentication: the page
//! holds nothing secret, and signs in through the API); gives the asset, embedded in the
//! binary at build time, with its content type, `Cache-Control: no-store` and the strict
//! headers every console answer carries (a CSP allowing only this origin's script, style and
//! API, no framing, no sniffing, no referrer). Refuses (`None`, which the listener answers
//! 404) any other path: nothing is read from disk, nothing fetched from elsewhere.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::BodyExt;

use super::Answer;

/// The console's Content-Security-Policy: this origin's script, style and API only.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; \
frame-ancestors 'none'";

const INDEX: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/console.js");
const STYLE: &str = include_str!("console/console.css");
const ICON: &[u8] = include_bytes!("console/icon.svg");

/// The asset at `path` (`/console`, `/console/` or `/console/<file>`), or `None`.
pub fn serve(path: &str) -> Option<Answer> {
    let (body, kind): (&'static [u8], &'static str) = match path {
        "/console" | "/console/" | "/console/index.html" => {
            (INDEX.as_bytes(), "text/html; charset=utf-8")
        }
        "/console/console.js" => (SCRIPT.as_bytes(), "text/javascript; charset=utf-8"),
        "/console/console.css" => (STYLE.as_bytes(), "text/css; charset=utf-8"),
        "/console/icon.svg" => (ICON, "image/svg+xml"),
        _ => return None,
    };
    Some(answer(body, kind))
}

fn answer(body: &'static [u8], kind: &'static str) -> Answer {
    let full = http_body_util::Full::new(Bytes::from_static(body));
    let mut r = Response::new(full.map_err(|e| match e {}).boxed());
    *r.status_mut() = StatusCode::OK;
    let h = r.headers_mut();
    let set = [
        (header::CONTENT_TYPE, kind),
        (header::CACHE_CONTROL, "no-store"),
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ];
    for (name, value) in set {
        h.insert(name, HeaderValue::from_static(value));
    }
    r
}

#[cfg(test)]
mod tests;
