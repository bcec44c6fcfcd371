//! The `WWW-Authenticate: Bearer` challenge of a protected MCP server (RFC 6750 §3, RFC 9728
//! §5.1).
//!
//! Takes the header's text; gives the Bearer challenge's parameters Sluice uses
//! (`resource_metadata`, `scope`, `error`). Refuses nothing: a header that is not a Bearer
//! challenge, or that does not parse, gives no parameters (discovery then falls back to the
//! well-known locations). One pass over the text, no backtracking.

/// What a Bearer challenge says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Challenge {
    /// `resource_metadata`: where the protected resource metadata is.
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes the request needs, space-separated.
    pub scope: Option<String>,
    /// `error`: `invalid_token`, `insufficient_scope`, ….
    pub error: Option<String>,
}

/// The Bearer challenge in `header` (several challenges may share one header).
pub(super) fn parse(header: &str) -> Challenge {
    let mut out = Challenge::default();
    let mut rest = header;
    let mut in_bearer = false;
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return out;
        }
        let end = rest
            .find(|c: char| c == '=' || c == ',' || c == ' ' || c == '\t')
            .unwrap_or(rest.len());
        let (word, after) = rest.split_at(end);
        let after_ws = after.trim_start_matches([' ', '\t']);
        if let Some(value_start) = after_ws.strip_prefix('=') {
            let (value, tail) = value(value_start.trim_start_matches([' ', '\t']));
            if in_bearer {
                match word.to_ascii_lowercase().as_str() {
                    "resource_metadata" => out.resource_metadata = Some(value),
                    "scope" => out.scope = Some(value),
                    "error" => out.error = Some(value),
                    _ => {}
                }
            }
            rest = tail;
        } else {
            // A scheme name starts a new challenge.
            in_bearer = word.eq_ignore_ascii_case("bearer");
            rest = after;
        }
    }
}

/// A parameter's value (a token or a quoted string) and what follows it.
fn value(s: &str) -> (String, &str) {
    let Some(quoted) = s.strip_prefix('"') else {
        let end = s.find([',', ' ', '\t']).unwrap_or(s.len());
        return (s[..end].to_owned(), &s[end..]);
    };
    let mut v = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (v, &quoted[i + 1..]),
            '\\' => {
                if let Some((_, e)) = chars.next() {
                    v.push(e);
                }
            }
            c => v.push(c),
        }
    }
    (v, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parameters_of_a_bearer_challenge_are_read() {
        let c = parse(
            r#"Bearer error="invalid_token", error_description="Missing Authorization header", scope="mcp:basic mcp:read", resource_metadata="http://h:1/.well-known/oauth-protected-resource/mcp""#,
        );
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(c.scope.as_deref(), Some("mcp:basic mcp:read"));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://h:1/.well-known/oauth-protected-resource/mcp")
        );
    }

    #[test]
    fn only_the_bearer_challenge_counts() {
        let c = parse(
            r#"Basic realm="x", scope="no", Bearer scope=mcp:write,error=insufficient_scope"#,
        );
        assert_eq!(c.scope.as_deref(), Some("mcp:write"));
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(parse("Basic realm=\"r\""), Challenge::default());
        assert_eq!(parse(""), Challenge::default());
    }

    #[test]
    fn escapes_and_an_unclosed_quote_are_taken_as_written() {
        let c = parse(r#"bearer scope="a\"b", error="open"#);
        assert_eq!(c.scope.as_deref(), Some("a\"b"));
        assert_eq!(c.error.as_deref(), Some("open"));
    }

    #[test]
    fn a_long_hostile_header_is_read_in_one_pass() {
        let h = format!("Bearer {}", "a=\"\\".repeat(100_000));
        let t = std::time::Instant::now();
        let _ = parse(&h);
        // Linear: ~10 ms in a debug build; the bound is wide for a loaded machine.
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
    }
}
