//! The answers of the login front: plain HTML pages for people, RFC 6749 JSON errors for
//! clients, redirects, and form and query parsing.
//!
//! Takes text and parameters; gives responses that are never cached, never framed and run no
//! script. Refuses nothing; a parameter sent twice is read as absent (RFC 6749 §3.1).

use std::borrow::Cow;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};

/// The body type of every answer (the gateway's own).
pub type Body = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

/// Parameters of a query string or a form body.
pub struct Params(Vec<(String, String)>);

impl Params {
    /// Parses `application/x-www-form-urlencoded` text.
    pub fn parse(text: &[u8]) -> Params {
        Params(
            form_urlencoded::parse(text)
                .map(|(k, v): (Cow<'_, str>, Cow<'_, str>)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// The value of `name`, when sent exactly once and not empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        let mut it = self.0.iter().filter(|(k, _)| k == name);
        match (it.next(), it.next()) {
            (Some((_, v)), None) if !v.is_empty() => Some(v),
            _ => None,
        }
    }

    /// Whether `name` was sent more than once.
    pub fn repeated(&self, name: &str) -> bool {
        self.0.iter().filter(|(k, _)| k == name).count() > 1
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn base(status: StatusCode) -> http::response::Builder {
    Response::builder()
        .status(status)
        .header(http::header::CACHE_CONTROL, "no-store")
        .header("referrer-policy", "no-referrer")
        .header("x-content-type-options", "nosniff")
}

/// A plain page: a title and paragraphs (escaped here), and optionally a form's raw HTML.
pub fn page(
    status: StatusCode,
    title: &str,
    paragraphs: &[&str],
    form: Option<String>,
) -> Response<Body> {
    let mut body = format!(
        "<!doctype html>\n<html lang=\"en\"><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width\"><title>{t}</title>\n<main>\n<h1>{t}</h1>\n",
        t = escape(title)
    );
    for p in paragraphs {
        body.push_str(&format!("<p>{}</p>\n", escape(p)));
    }
    body.push_str(&form.unwrap_or_default());
    body.push_str("</main>\n</html>\n");
    base(status)
        .header(http::header::CONTENT_TYPE, "text/html; charset=utf-8")
        .header(
            "content-security-policy",
            "default-src 'none'; form-action 'self' https: http:; frame-ancestors 'none'",
        )
        .body(Full::new(Bytes::from(body)).boxed())
        .unwrap_or_default()
}

/// A form posting `fields` (hidden, escaped) to `action`, with a submit button per
/// `(name, value, label)`.
pub fn form(action: &str, fields: &[(&str, &str)], buttons: &[(&str, &str, &str)]) -> String {
    let mut f = format!("<form method=\"post\" action=\"{}\">\n", escape(action));
    for (k, v) in fields {
        f.push_str(&format!(
            "<input type=\"hidden\" name=\"{}\" value=\"{}\">\n",
            escape(k),
            escape(v)
        ));
    }
    for (name, value, label) in buttons {
        f.push_str(&format!(
            "<button type=\"submit\" name=\"{}\" value=\"{}\">{}</button>\n",
            escape(name),
            escape(value),
            escape(label)
        ));
    }
    f.push_str("</form>\n");
    f
}

/// An RFC 6749 §5.2 error: `{"error", "error_description"}`.
pub fn error(status: StatusCode, code: &str, description: &str) -> Response<Body> {
    json(
        status,
        serde_json::json!({"error": code, "error_description": description}),
    )
}

/// A JSON answer.
pub fn json(status: StatusCode, v: serde_json::Value) -> Response<Body> {
    base(status)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::PRAGMA, "no-cache")
        .body(Full::new(Bytes::from(v.to_string())).boxed())
        .unwrap_or_default()
}

/// A 302 to `location`, setting `cookie` when given.
pub fn redirect(location: &str, cookie: Option<String>) -> Response<Body> {
    let mut b = base(StatusCode::FOUND).header(http::header::LOCATION, location);
    if let Some(c) = cookie {
        b = b.header(http::header::SET_COOKIE, c);
    }
    b.body(Full::new(Bytes::new()).boxed()).unwrap_or_default()
}

/// The answer to a CORS preflight of the metadata, `/register` or `/token`.
pub fn preflight() -> Response<Body> {
    base(StatusCode::NO_CONTENT)
        .header(http::header::ACCESS_CONTROL_ALLOW_ORIGIN, "*")
        .header(
            http::header::ACCESS_CONTROL_ALLOW_METHODS,
            "GET, POST, OPTIONS",
        )
        .header(
            http::header::ACCESS_CONTROL_ALLOW_HEADERS,
            "content-type, authorization, mcp-protocol-version",
        )
        .header(http::header::ACCESS_CONTROL_MAX_AGE, "600")
        .body(Full::new(Bytes::new()).boxed())
        .unwrap_or_default()
}

/// `base` with `params` added to its query (form-encoded).
pub fn with_query(base: &str, params: &[(&str, &str)]) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    for (k, v) in params {
        q.append_pair(k, v);
    }
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}{}", q.finish())
}

/// The prefix of the browser cookie binding a sign-in to the browser that started it.
pub const COOKIE: &str = "sluice_login";

/// The cookie's name for sign-in `id` (one per sign-in: two begun at once in one browser do
/// not overwrite each other's).
pub fn cookie_name(id: &str) -> String {
    let h = super::checks::hashed(id);
    let tag: String = h[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("{COOKIE}_{tag}")
}

/// The value of cookie `name` in `headers`.
pub fn cookie<'a>(headers: &'a http::HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The `Set-Cookie` of the binding cookie: HTTP only, `SameSite=Lax` (sent on the IdP's
/// top-level redirect back, not on a cross-site POST), `Secure` when Sluice is on https.
pub fn set_cookie(name: &str, value: &str, secure: bool, path: &str) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{name}={value}; Path={path}; HttpOnly; SameSite=Lax; Max-Age=600{secure}")
}
