//! Who may ask for codes: clients registered at `/register` (RFC 7591) and clients whose
//! `client_id` is the URL of their Client ID Metadata Document.
//!
//! Takes a registration request's JSON, or a `client_id`; gives the client (its redirect URIs).
//! Refuses a registration past its source's [`REGISTRATIONS_PER_MINUTE`](super::store), when
//! the table is full, without `redirect_uris` or with one `checks::redirect_ok` refuses, over
//! [`MAX_REDIRECTS`](super::checks::MAX_REDIRECTS), or asking a grant or response type other
//! than the code flow's. Refuses a metadata document URL that is not `https://` (or `http://`
//! on loopback with `allow_loopback_metadata`), has a fragment, credentials or no path; a
//! document over [`MAX_DOCUMENT`] bytes or later than [`DOCUMENT_WAIT`], or whose `client_id`
//! is not its URL exactly. Documents are cached [`DOCUMENT_TTL`] in the clients' table (its
//! bound is theirs).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::json;

use super::checks::{redirect_ok, shown, MAX_REDIRECTS};
use super::records::{Client, Origin};
use super::store::Store;
use crate::upstream::client::HttpClient;

/// The largest metadata document taken.
pub const MAX_DOCUMENT: usize = 5 * 1024;
/// The wait for a metadata document.
pub const DOCUMENT_WAIT: Duration = Duration::from_secs(5);
/// How long a fetched document is used before it is read again.
pub const DOCUMENT_TTL: Duration = Duration::from_secs(300);

/// A registration request, or a metadata document (the fields Sluice reads).
#[derive(Deserialize)]
struct Metadata {
    client_id: Option<String>,
    #[serde(default)]
    redirect_uris: Vec<String>,
    client_name: Option<String>,
    #[serde(default)]
    grant_types: Option<Vec<String>>,
    #[serde(default)]
    response_types: Option<Vec<String>>,
}

/// A refusal: the RFC 7591 error code and what to do.
pub type Refusal = (&'static str, String);

/// Validates what a client says of itself.
fn client_of(m: Metadata, id: String, origin: Origin) -> Result<Client, Refusal> {
    let bad = |d: String| ("invalid_client_metadata", d);
    if m.redirect_uris.is_empty() || m.redirect_uris.len() > MAX_REDIRECTS {
        return Err((
            "invalid_redirect_uri",
            format!("send 1 to {MAX_REDIRECTS} redirect_uris"),
        ));
    }
    for r in &m.redirect_uris {
        redirect_ok(r).map_err(|e| ("invalid_redirect_uri", e))?;
    }
    let grants = m.grant_types.unwrap_or_default();
    if let Some(g) = grants
        .iter()
        .find(|g| !matches!(g.as_str(), "authorization_code" | "refresh_token"))
    {
        return Err(bad(format!(
            "grant_type {:?} is not offered: use authorization_code and refresh_token",
            shown(g)
        )));
    }
    let responses = m.response_types.unwrap_or_default();
    if responses.iter().any(|r| r != "code") {
        return Err(bad("only response_type code is offered".into()));
    }
    // Shown on the consent page: no control, and no bidirectional control that could make
    // "evil.example" read as something else there.
    let client_name = m.client_name.map(|n| {
        n.chars()
            .filter(|c| !c.is_control() && !crate::escape::breaks_lines(*c))
            .take(100)
            .collect()
    });
    Ok(Client {
        client_id: id,
        redirect_uris: m.redirect_uris,
        client_name,
        origin,
    })
}

/// Registers a client (RFC 7591 §3.2.1's answer, or a refusal with its status).
pub async fn register(
    store: &Store,
    source: std::net::IpAddr,
    body: &[u8],
) -> Result<serde_json::Value, (http::StatusCode, Refusal)> {
    if !store.count_registration(source).await {
        return Err((http::StatusCode::TOO_MANY_REQUESTS, ("slow_down", "too many registrations from this address: wait a minute and register once; a client keeps its registration".into())));
    }
    let bad = http::StatusCode::BAD_REQUEST;
    let m: Metadata = serde_json::from_slice(body).map_err(|_| {
        (
            bad,
            (
                "invalid_client_metadata",
                "the body is not a JSON registration request".to_owned(),
            ),
        )
    })?;
    let client = client_of(
        m,
        format!("sluice-{}", super::checks::secret()),
        Origin::Registered,
    )
    .map_err(|r| (bad, r))?;
    if !store.put_client(client.clone()).await {
        return Err((
            http::StatusCode::SERVICE_UNAVAILABLE,
            (
                "temporarily_unavailable",
                "the registration table is full: try again later".into(),
            ),
        ));
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    Ok(json!({
        "client_id": client.client_id,
        "client_id_issued_at": now,
        "redirect_uris": client.redirect_uris,
        "client_name": client.client_name,
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
    }))
}

/// Whether `client_id` names a metadata document rather than a registration.
pub fn is_document(client_id: &str) -> bool {
    client_id.starts_with("https://") || client_id.starts_with("http://")
}

/// Checks a metadata document URL against the fetch limits.
pub fn document_url_ok(url: &str, allow_loopback: bool) -> Result<(), String> {
    let refuse = |why: &str| Err(format!("client_id {:?} {why}", shown(url)));
    let Ok(uri) = url.parse::<http::Uri>() else {
        return refuse("is not a URL");
    };
    let host = uri.host().unwrap_or_default();
    let path = uri.path();
    if url.contains('#') || uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return refuse("has a fragment or credentials");
    }
    if path.is_empty() || path == "/" {
        return refuse("has no path (a metadata document's URL names a document)");
    }
    let loopback = crate::config::is_loopback(host);
    if internal(host) && !(allow_loopback && loopback) {
        return refuse("names a loopback, private or link-local address: a client's metadata document is fetched from the public internet only");
    }
    match uri.scheme_str() {
        Some("https") if !host.is_empty() => Ok(()),
        Some("http") if allow_loopback && loopback => Ok(()),
        _ => refuse(
            "is not an https:// URL: Client ID Metadata Documents are fetched over https only",
        ),
    }
}

/// Whether `host` is `localhost` or an IP literal of this machine, a private, shared (CGNAT),
/// link-local, broadcast or unspecified range (IPv4 mapped or NAT64-embedded too), or a number
/// in a form other than four dotted decimals (`2130706433`, `0x7f.0x1`, `127.1`: a host whose
/// last label is a number is an address to a URL parser). A name that resolves to an internal address is not caught here.
fn internal(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    match h.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(v4)) => internal_v4(v4),
        Ok(std::net::IpAddr::V6(v6)) => {
            let seg = v6.segments();
            let o = v6.octets();
            let embedded = std::net::Ipv4Addr::new(o[12], o[13], o[14], o[15]);
            let nat64 = seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (seg[0] & 0xfe00) == 0xfc00
                || (seg[0] & 0xffc0) == 0xfe80
                || (nat64 && internal_v4(embedded))
                || v6.to_ipv4_mapped().is_some_and(internal_v4)
        }
        Err(_) => {
            // As a URL parser reads a host whose last label is a number: an IPv4 address.
            let last = h.trim_end_matches('.').rsplit('.').next().unwrap_or("");
            let hex = last
                .strip_prefix("0x")
                .or_else(|| last.strip_prefix("0X"))
                .is_some_and(|x| x.bytes().all(|b| b.is_ascii_hexdigit()));
            let numeric = !last.is_empty() && (hex || last.bytes().all(|b| b.is_ascii_digit()));
            numeric
                || h.eq_ignore_ascii_case("localhost")
                || h.to_ascii_lowercase().ends_with(".localhost")
        }
    }
}

fn internal_v4(v4: std::net::Ipv4Addr) -> bool {
    let [a, b, ..] = v4.octets();
    v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || a == 0
        || (a == 100 && (b & 0xc0) == 64)
}

/// The client a metadata document describes (cached, else fetched).
pub async fn document(
    store: &Store,
    http: &HttpClient,
    url: &str,
    allow_loopback: bool,
) -> Result<Client, String> {
    if let Some(c) = store
        .client(url)
        .await
        .filter(|c| c.origin == Origin::Document)
    {
        return Ok(c);
    }
    document_url_ok(url, allow_loopback)?;
    let got = super::fetch::get(http, url, DOCUMENT_WAIT, MAX_DOCUMENT).await?;
    if !got.status.is_success() {
        return Err(format!(
            "the client's metadata document answered {}",
            got.status.as_u16()
        ));
    }
    let m: Metadata = serde_json::from_value(got.json)
        .map_err(|_| "the client's metadata document is not one".to_owned())?;
    if m.client_id.as_deref() != Some(url) {
        return Err("the client's metadata document names another client_id than its URL".into());
    }
    let c = client_of(m, url.to_owned(), Origin::Document).map_err(|(_, d)| d)?;
    store.put_document(c.clone(), DOCUMENT_TTL).await;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_document_urls_are_https_only() {
        assert!(document_url_ok("https://app.example/client.json", false).is_ok());
        assert!(document_url_ok("http://app.example/client.json", false).is_err());
        assert!(document_url_ok("http://127.0.0.1:9/client.json", false).is_err());
        assert!(document_url_ok("http://127.0.0.1:9/client.json", true).is_ok());
        assert!(
            document_url_ok("http://app.example/client.json", true).is_err(),
            "only loopback"
        );
        assert!(document_url_ok("https://app.example", false).is_err());
        assert!(document_url_ok("https://u:p@app.example/c.json", false).is_err());
        for internal in [
            "https://10.1.2.3/c.json",
            "https://127.0.0.1/c.json",
            "https://[::1]/c.json",
            "https://169.254.169.254/c.json",
            "https://localhost/c.json",
            "https://192.168.0.1/c.json",
            "https://[fd00::1]/c.json",
            "https://[::ffff:10.0.0.1]/c.json",
        ] {
            assert!(document_url_ok(internal, false).is_err(), "{internal}");
        }
        assert!(
            document_url_ok("https://10.1.2.3/c.json", true).is_err(),
            "loopback only"
        );
    }

    #[tokio::test]
    async fn registrations_are_checked_and_counted() {
        let s = Store::default();
        let ip: std::net::IpAddr = "192.0.2.9".parse().unwrap();
        let ok = br#"{"redirect_uris":["http://127.0.0.1:33418/cb"],"client_name":"T"}"#;
        let r = register(&s, ip, ok).await.unwrap();
        let id = r["client_id"].as_str().unwrap();
        assert_eq!(
            s.client(id).await.unwrap().redirect_uris,
            vec!["http://127.0.0.1:33418/cb"]
        );
        let bad = [
            &br#"{"redirect_uris":[]}"#[..],
            br#"{"redirect_uris":["http://evil.example/cb"]}"#,
            br#"{"redirect_uris":["https://a.example/cb"],"grant_types":["client_credentials"]}"#,
            br#"not json"#,
        ];
        for b in bad {
            assert_eq!(
                register(&s, ip, b).await.unwrap_err().0,
                http::StatusCode::BAD_REQUEST
            );
        }
        for _ in 5..super::super::store::REGISTRATIONS_PER_MINUTE {
            register(&s, ip, ok).await.unwrap();
        }
        let limited = register(&s, ip, ok).await.unwrap_err();
        assert_eq!(limited.0, http::StatusCode::TOO_MANY_REQUESTS);
    }

    #[test]
    fn internal_hosts_in_every_spelling_are_caught() {
        for h in [
            "127.0.0.1",
            "10.1.2.3",
            "100.64.0.1",
            "0.1.2.3",
            "255.255.255.255",
            "2130706433",
            "0x7f.0x1",
            "127.1",
            "0",
            "localhost",
            "a.localhost",
            "[::1]",
            "[::ffff:127.0.0.1]",
            "[64:ff9b::a9fe:a9fe]",
            "[fd00::1]",
            "[fe80::1]",
        ] {
            assert!(internal(h), "{h}");
        }
        for h in [
            "example.com",
            "cafe.be",
            "8.8.8.8",
            "[2001:db8::1]",
            "100.128.0.1",
        ] {
            assert!(!internal(h), "{h}");
        }
    }

    #[test]
    fn a_client_name_loses_controls_and_bidirectional_marks() {
        let doc = serde_json::json!({
            "client_name": "Claude\u{202e}elpmaxe.live\u{2066}\u{7}",
            "redirect_uris": ["http://127.0.0.1:9/cb"],
        });
        let m: Metadata = serde_json::from_value(doc).unwrap();
        let c = client_of(m, "c".into(), Origin::Registered).unwrap();
        assert_eq!(c.client_name.as_deref(), Some("Claudeelpmaxe.live"));
    }
}
