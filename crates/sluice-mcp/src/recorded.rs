//! What of a peer's method, name, id or URI a record may keep: audit records, span attributes.
//!
//! Takes text a client or an upstream wrote, before anything has resolved it; gives the part
//! that names something and never a part that may carry content or a credential, failing
//! closed to [`OTHER`] (or a URI's bare `scheme:`) whenever the text does not read as what it
//! should be. Refuses nothing; escaping is the writer's (`escape.rs`). The grammars:
//!
//! - a method Sluice does not know, a request id, an input key: 1 to 64 of `A-Z a-z 0-9 _ . / : -`
//!   (an integer id as it is);
//! - a tool or prompt name: 1 to 128 letters or digits (any script) or `_ . / : - @ + ~`, so no
//!   space, control, separator or format character: a sentence is not a name;
//! - a resource URI: `scheme://host[:port]/path` keeps its scheme, host, port and path (each
//!   path segment without `;parameters`), never its query, fragment or user info; `file:/path`
//!   and `file:///path` keep their path; anything else with a scheme (`data:`, `mailto:`,
//!   `urn:`, an authority that is not a host, a backslash or a space anywhere) keeps `scheme:`
//!   only, and text with no scheme is [`OTHER`].
//!
//! Everything is at most [`MAX_CHARS`] characters, and the work is linear in the first
//! [`MAX_READ`] bytes: text past them is never read.

/// The most characters a recorded name keeps.
pub const MAX_CHARS: usize = 200;
/// The most bytes of a peer's text read to record it.
const MAX_READ: usize = 4096;
/// The longest token (unknown method, id, input key) kept as it is.
const MAX_TOKEN: usize = 64;
/// The longest scheme a URI is read with (registered ones are far shorter).
const MAX_SCHEME: usize = 32;
/// The longest tool or prompt name kept as it is.
const MAX_NAME: usize = 128;
/// What text that does not read as what it should be is recorded as.
pub const OTHER: &str = "_OTHER";

/// A method as a record may name it.
pub fn method(m: &crate::method::Method) -> &str {
    match m.known() {
        Some(k) => k,
        None => token(m.as_str()),
    }
}

/// An unknown method, an id or an input key as a record may keep it.
pub fn token(s: &str) -> &str {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | ':' | '-');
    if !s.is_empty() && s.len() <= MAX_TOKEN && s.chars().all(ok) {
        s
    } else {
        OTHER
    }
}

/// A JSON-RPC id (its JSON text) as a record may keep it: an integer, or a string token.
pub fn id(json: &str) -> &str {
    if !json.is_empty()
        && json.len() <= MAX_TOKEN
        && json
            .bytes()
            .enumerate()
            .all(|(i, b)| b.is_ascii_digit() || (i == 0 && b == b'-'))
    {
        return json;
    }
    match json.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(s) => token(s),
        None => OTHER,
    }
}

/// A tool or prompt name (`uri == false`) or a resource URI as a record may keep it.
pub fn name(s: &str, uri: bool) -> String {
    if uri {
        return self::uri(s);
    }
    let ok =
        |c: char| c.is_alphanumeric() || matches!(c, '_' | '.' | '/' | ':' | '-' | '@' | '+' | '~');
    let s = head(s);
    if !s.is_empty() && s.chars().count() <= MAX_NAME && s.chars().all(ok) {
        s.to_owned()
    } else {
        OTHER.to_owned()
    }
}

/// A URI as a record may keep it; see the module head.
pub fn uri(s: &str) -> String {
    let cut_short = s.len() > MAX_READ;
    let s = head(s);
    let Some((scheme, rest)) = split_scheme(s) else {
        return OTHER.to_owned();
    };
    let bare = || format!("{scheme}:");
    // What is recorded ends at the query or fragment; a backslash or space before it is a URI
    // some reader parses otherwise (`https:/\user@host`): only the scheme then.
    let whole = rest;
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    if rest
        .chars()
        .any(|c| c == '\\' || c.is_whitespace() || c.is_control())
    {
        return bare();
    }
    let file = scheme.eq_ignore_ascii_case("file");
    // An `@` anywhere (even past a `#`) is user info some reader finds (`https://a:1/2@h`), and an
    // authority that does not end within what is read may be one.
    if whole.contains('@')
        || (cut_short && rest.strip_prefix("//").is_some_and(|h| !h.contains('/')))
    {
        return bare();
    }
    let (host, path) = match rest.strip_prefix("//") {
        Some(hier) => hier.split_at(hier.find('/').unwrap_or(hier.len())),
        None if file && rest.starts_with('/') => ("", rest),
        None => return bare(),
    };
    if !(file && host.is_empty()) && !is_host(host) {
        return bare();
    }
    let slashes = if rest.starts_with("//") { "//" } else { "" };
    // The path ends at the first character RFC 3986 does not allow in one (bidi and other
    // invisible characters, anything not ASCII): what follows is not recorded.
    let pchar = |c: char| c.is_ascii_alphanumeric() || "-._~%!$&'()*+,;=:/".contains(c);
    let path = &path[..path.find(|c: char| !pchar(c)).unwrap_or(path.len())];
    let mut out = format!("{scheme}:{slashes}{host}");
    for (i, seg) in path.split('/').enumerate() {
        if out.chars().count() >= MAX_CHARS {
            break;
        }
        if i > 0 {
            out.push('/');
        }
        out.push_str(seg.split(';').next().unwrap_or(""));
    }
    out.chars().take(MAX_CHARS).collect()
}

/// At most [`MAX_READ`] bytes of `s`, cut at a character boundary.
fn head(s: &str) -> &str {
    let mut end = s.len().min(MAX_READ);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `scheme` and what follows `scheme:`, when `s` starts with a URI scheme (RFC 3986: a letter,
/// then letters, digits, `+ - .`).
fn split_scheme(s: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = s.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    let ok = first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    (ok && scheme.len() <= MAX_SCHEME).then_some((scheme, rest))
}

/// A host with an optional port: a name (letters, digits, `-`, `.`, `_`), or an IP literal in
/// brackets (an IPv6 address); the port all digits.
fn is_host(s: &str) -> bool {
    let (host, port) = match s.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((addr, after)) if addr.parse::<std::net::Ipv6Addr>().is_ok() => (
                addr,
                after
                    .strip_prefix(':')
                    .or(if after.is_empty() { None } else { Some("x") }),
            ),
            _ => return false,
        },
        None => match s.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        },
    };
    let name_ok = !host.is_empty()
        && (s.starts_with('[')
            || host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')));
    let port_ok =
        port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    name_ok && port_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::Method;

    #[test]
    fn a_uri_keeps_what_names_a_resource_and_nothing_that_carries_content_or_credentials() {
        assert_eq!(uri("file:///a/b?token=x#f"), "file:///a/b");
        assert_eq!(uri("file:/etc/x;p=1"), "file:/etc/x");
        assert_eq!(uri("https://host:8443/x/y"), "https://host:8443/x/y");
        assert_eq!(uri("https://[::1]:8080/x"), "https://[::1]:8080/x");
        assert_eq!(uri("https://host/a%20b/~c"), "https://host/a%20b/~c");
        assert_eq!(
            uri("https://host/a;jsessionid=SECRET/b;v=1"),
            "https://host/a/b"
        );
        assert_eq!(uri("HTTPS://Host/x"), "HTTPS://Host/x");
        assert_eq!(uri(&"n".repeat(500)), OTHER);
        assert_eq!(
            uri(&format!("https://h/{}", "e".repeat(500)))
                .chars()
                .count(),
            MAX_CHARS
        );
        assert_eq!(uri("https://h/x\u{202e}fdp.exe"), "https://h/x");
        assert_eq!(uri("https://h/caf\u{e9}"), "https://h/caf");
    }

    #[test]
    fn a_uri_that_does_not_parse_as_a_host_and_path_keeps_its_scheme_only() {
        for (sent, kept) in [
            ("https://alice:s3cr3t@host/x/y", "https:"),
            ("https://alice:pa#ss@host/x", "https:"),
            ("https://alice:pa/ss@host/x", "https:"),
            ("https:/alice:pw@host/x", "https:"),
            ("https:///alice:pw@host/x", "https:"),
            ("https:/\\alice:pw@host", "https:"),
            ("https://host;token=SECRET/x", "https:"),
            ("https://host/a b", "https:"),
            ("https://[::1]x/", "https:"),
            ("https://[deadbeefcafe]/", "https:"),
            ("https://host/a@b", "https:"),
            ("https://alice:1234/5@host/x", "https:"),
            ("https://alice:12#34@host", "https:"),
            ("data:text/plain;base64,U0VDUkVU", "data:"),
            ("data:/plain,THE PROMPT", "data:"),
            ("mailto:alice@example.com", "mailto:"),
            ("urn:isbn:0451450523", "urn:"),
        ] {
            assert_eq!(uri(sent), kept, "{sent}");
        }
        let long_user = format!("https://{}@api.example.com/x", "eyJhbGciOi".repeat(500));
        assert_eq!(uri(&long_user), "https:", "user info past what is read");
        assert!(uri(&format!("{}:x", "a".repeat(4000))).len() <= MAX_CHARS);
        for sent in [
            "//alice:s3cr3t@db/x",
            " https://alice:s3cr3t@host/x",
            "notes/today;secret",
            "",
            "9x://h/",
            "the-api-key-is-sk.live.4eC39HqLyjWDarjtT1zdp7dc:x",
        ] {
            assert_eq!(uri(sent), OTHER, "{sent}");
        }
    }

    #[test]
    fn a_long_uri_costs_no_more_than_its_first_bytes() {
        let long = format!("https://h/{}", "/".repeat(4 << 20));
        let t0 = std::time::Instant::now();
        for _ in 0..100 {
            assert!(uri(&long).len() <= MAX_CHARS);
        }
        // 100 reads of a 4 MiB URI: bounded by MAX_READ, far under a second even unoptimised.
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t0.elapsed()
        );
    }

    #[test]
    fn a_name_is_kept_only_when_it_reads_as_one() {
        assert_eq!(name("github__create_issue", false), "github__create_issue");
        assert_eq!(name("weather:get", false), "weather:get");
        assert_eq!(name("天气", false), "天气");
        assert_eq!(name(&"t".repeat(128), false).len(), 128);
        for sent in [
            "the password is hunter2",
            "a\u{2028}b",
            "x\u{202e}y",
            "",
            &"t".repeat(129),
        ] {
            assert_eq!(name(sent, false), OTHER, "{sent:?}");
        }
    }

    #[test]
    fn an_unknown_method_an_id_or_a_key_is_kept_only_when_it_reads_as_a_token() {
        assert_eq!(method(&Method::ToolsCall), "tools/call");
        assert_eq!(method(&Method::parse("x-acme/op.v2")), "x-acme/op.v2");
        assert_eq!(
            method(&Method::parse("please summarise: the secret is 42")),
            OTHER
        );
        assert_eq!(method(&Method::parse("a\nERROR forged")), OTHER);
        assert_eq!(method(&Method::parse(&"m".repeat(65))), OTHER);
        assert_eq!(method(&Method::parse("")), OTHER);
        assert_eq!((id("42"), id("-7"), id("\"req-1\"")), ("42", "-7", "req-1"));
        assert_eq!(
            (id("\"the secret is 42\""), id("1.5"), id("null")),
            (OTHER, OTHER, OTHER)
        );
        assert_eq!((token("ask_1"), token("a b")), ("ask_1", OTHER));
    }
}
