//! The small checks of the login front: random secrets, PKCE S256, redirect URIs.
//!
//! Takes strings a client sent; gives decisions made on parsed values. Refuses a PKCE method
//! other than `S256` and a challenge or verifier outside RFC 7636's alphabet and length, a
//! redirect URI with a fragment, over [`MAX_URI`] bytes, `http://` on a host that is not
//! loopback, or a scheme that runs code (`javascript:`, `data:`, `file:`); a redirect URI that
//! matches none registered (exactly, or a loopback one with another port: RFC 8252 §7.3).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sha2::Digest as _;
use subtle::ConstantTimeEq as _;

/// The longest redirect URI taken.
pub const MAX_URI: usize = 2_000;
/// The most redirect URIs a client may register.
pub const MAX_REDIRECTS: usize = 10;

/// A 32-byte key: the SHA-256 of a secret (what the store keys a secret's record by).
pub type Hashed = [u8; 32];

/// The SHA-256 of a secret.
pub fn hashed(secret: &str) -> Hashed {
    sha2::Sha256::digest(secret.as_bytes()).into()
}

/// A fresh random secret: 32 bytes, base64url.
pub fn secret() -> String {
    let bytes: [u8; 32] = rand::random();
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The S256 challenge of `verifier`.
pub fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()))
}

/// Checks the challenge a client sent to `/authorize`: S256 only, 43 base64url characters.
pub fn challenge_ok(challenge: Option<&str>, method: Option<&str>) -> Result<String, &'static str> {
    let c = challenge.ok_or("code_challenge is required (PKCE with S256)")?;
    match method {
        Some("S256") => {}
        None | Some("plain") => {
            return Err("code_challenge_method must be S256 (plain is refused)")
        }
        Some(_) => return Err("code_challenge_method must be S256"),
    }
    if c.len() != 43 || !c.bytes().all(unreserved) {
        return Err("code_challenge is not an S256 challenge (43 base64url characters)");
    }
    Ok(c.to_owned())
}

/// Whether `verifier` (RFC 7636 §4.1: 43 to 128 unreserved characters) answers `challenge`,
/// compared in constant time.
pub fn verifier_ok(verifier: &str, challenge_sent: &str) -> bool {
    let shaped = (43..=128).contains(&verifier.len()) && verifier.bytes().all(unreserved);
    shaped
        && bool::from(
            challenge(verifier)
                .as_bytes()
                .ct_eq(challenge_sent.as_bytes()),
        )
}

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Checks a redirect URI a client registers (or its metadata document lists).
pub fn redirect_ok(uri: &str) -> Result<(), String> {
    let refuse = |why: &str| Err(format!("redirect_uri {:?} {why}", shown(uri)));
    if uri.len() > MAX_URI {
        return refuse("is too long");
    }
    if uri.contains('#') {
        return refuse("has a fragment");
    }
    let Ok(parsed) = uri.parse::<http::Uri>() else {
        return refuse("is not an absolute URI");
    };
    match parsed.scheme_str().map(str::to_ascii_lowercase).as_deref() {
        None => refuse("is not an absolute URI"),
        Some("https") if parsed.host().is_some() => Ok(()),
        Some("http") if parsed.host().is_some_and(crate::config::is_loopback) => Ok(()),
        Some("http") => refuse("is plain http on a host that is not loopback: use https"),
        Some("javascript" | "data" | "file" | "vbscript" | "blob") => {
            refuse("has a refused scheme")
        }
        Some(_) => Ok(()),
    }
}

/// Whether `asked` is one of `registered`: the same string, or (both loopback `http://`) the
/// same but for the port.
pub fn redirect_matches(asked: &str, registered: &[String]) -> bool {
    registered
        .iter()
        .any(|r| r == asked || loopback_same(asked, r))
}

fn loopback_same(a: &str, b: &str) -> bool {
    let (Ok(a), Ok(b)) = (a.parse::<http::Uri>(), b.parse::<http::Uri>()) else {
        return false;
    };
    let loopback = |u: &http::Uri| {
        u.scheme_str() == Some("http") && u.host().is_some_and(crate::config::is_loopback)
    };
    loopback(&a)
        && loopback(&b)
        && a.host() == b.host()
        && a.path_and_query().map(|p| p.as_str()) == b.path_and_query().map(|p| p.as_str())
}

/// At most 100 characters of `s`, for an error message.
pub fn shown(s: &str) -> String {
    s.chars().take(100).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_is_s256_only() {
        let v = secret();
        let c = challenge(&v);
        assert!(challenge_ok(Some(&c), Some("S256")).is_ok());
        assert!(challenge_ok(Some(&c), Some("plain"))
            .unwrap_err()
            .contains("plain is refused"));
        assert!(challenge_ok(Some(&c), None).is_err(), "no method is plain");
        assert!(challenge_ok(None, Some("S256")).is_err());
        assert!(challenge_ok(Some("short"), Some("S256")).is_err());
        assert!(verifier_ok(&v, &c));
        assert!(!verifier_ok(&secret(), &c));
        assert!(!verifier_ok(&c, &c), "the challenge is not its verifier");
    }

    #[test]
    fn redirects_are_matched_exactly_but_for_loopback_ports() {
        let reg = vec![
            "http://127.0.0.1:3000/callback".to_owned(),
            "https://app.example/cb".to_owned(),
        ];
        assert!(redirect_matches("http://127.0.0.1:3000/callback", &reg));
        assert!(redirect_matches("http://127.0.0.1:49152/callback", &reg));
        assert!(!redirect_matches("http://127.0.0.1:3000/other", &reg));
        assert!(!redirect_matches("http://localhost:3000/callback", &reg));
        assert!(!redirect_matches("https://app.example/cb/", &reg));
        assert!(!redirect_matches("https://app.example:444/cb", &reg));
        assert!(!redirect_matches("https://evil.example/cb", &reg));
    }

    #[test]
    fn registered_redirects_are_refused_when_unsafe() {
        assert!(redirect_ok("https://app.example/cb").is_ok());
        assert!(redirect_ok("http://localhost:1234/cb").is_ok());
        assert!(redirect_ok("cursor://anysphere.cursor-mcp/oauth/callback").is_ok());
        assert!(redirect_ok("http://app.example/cb").is_err());
        assert!(redirect_ok("https://app.example/cb#x").is_err());
        assert!(redirect_ok("javascript:alert(1)").is_err());
        assert!(redirect_ok("/relative").is_err());
        assert!(redirect_ok(&format!("https://a.example/{}", "x".repeat(MAX_URI))).is_err());
    }
}
