//! The authorization code grant with PKCE, per user (OAuth 2.1 §4.1, RFC 7636, RFC 8707):
//! the authorization URL a user opens, the code exchanged for their token, and the refresh.
//!
//! Takes the discovered server, Sluice's [`Client`] there, the redirect URI and the scopes;
//! gives the URL with a fresh `state` and S256 challenge ([`Started`]), and token requests
//! that carry the verifier, the `resource` exactly as the resource metadata wrote it, and
//! Sluice's client authentication. Refuses a server that lists PKCE methods without `S256`
//! and one without an `authorization_endpoint`.

use base64::Engine as _;
use bytes::Bytes;
use http::HeaderMap;
use sha2::Digest as _;

use super::super::discovery::Found;
use super::register::Client;
use crate::upstream::client::UpstreamError;

/// An authorization the user is asked to give.
pub(crate) struct Started {
    /// The URL the user opens.
    pub url: String,
    /// Its `state`: the key of the pending authorization.
    pub state: String,
    /// The PKCE verifier the code is exchanged with.
    pub verifier: String,
}

fn random() -> String {
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The authorization URL for `client` at `found`'s server.
pub(crate) fn start(
    name: &str,
    found: &Found,
    client: &Client,
    redirect: &str,
    scopes: &[String],
) -> Result<Started, UpstreamError> {
    let fail = |why: &str| UpstreamError::Auth(name.to_owned(), why.to_owned());
    let at =
        found.user.authorization.as_ref().ok_or_else(|| {
            fail("its authorization server's metadata has no authorization_endpoint")
        })?;
    // MCP authorization: a server that does not list S256 is not used (its absence included).
    if !found
        .user
        .pkce_methods
        .as_ref()
        .is_some_and(|m| m.iter().any(|x| x == "S256"))
    {
        return Err(fail("its authorization server does not list PKCE with S256 in code_challenge_methods_supported, which MCP authorization requires"));
    }
    let (state, verifier) = (random(), random());
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()));
    let mut q = form_urlencoded::Serializer::new(String::new());
    q.append_pair("response_type", "code")
        .append_pair("client_id", &client.id)
        .append_pair("redirect_uri", redirect)
        .append_pair("state", &state)
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256")
        .append_pair("resource", &found.resource);
    if !scopes.is_empty() {
        q.append_pair("scope", &scopes.join(" "));
    }
    let base = at.to_string();
    let sep = if at.query().is_some() { '&' } else { '?' };
    Ok(Started {
        url: format!("{base}{sep}{}", q.finish()),
        state,
        verifier,
    })
}

/// The token request for `grant` (`authorization_code` with `code`, `redirect_uri` and the
/// verifier, or `refresh_token`), `client` authenticated as it registered.
pub(crate) fn request(
    found: &Found,
    client: &Client,
    grant: &[(&str, &str)],
) -> Result<(HeaderMap, Bytes), UpstreamError> {
    let mut form = form_urlencoded::Serializer::new(String::new());
    for (k, v) in grant {
        form.append_pair(k, v);
    }
    form.append_pair("resource", &found.resource);
    let mut headers = HeaderMap::new();
    let secret = client.secret.as_deref();
    super::super::grant::authenticate(&mut form, &mut headers, &client.id, secret, client.method)?;
    let (at, kind) = (&found.token_endpoint, super::super::grant::FORM);
    super::super::grant::post_headers(&mut headers, at, kind);
    Ok((headers, Bytes::from(form.finish())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TokenEndpointAuth;

    fn found() -> Found {
        let mut f = super::super::super::discovery::tests_found();
        f.user.authorization = Some("http://as:1/authorize".parse().unwrap());
        f.user.pkce_methods = Some(vec!["S256".into()]);
        f
    }

    fn public() -> Client {
        Client {
            id: "https://sluice.example/oauth/client-metadata.json".into(),
            secret: None,
            method: TokenEndpointAuth::None,
            how: "metadata document",
        }
    }

    #[test]
    fn the_url_carries_pkce_s256_the_resource_as_written_and_a_fresh_state() {
        let scopes = ["read".to_owned(), "offline_access".to_owned()];
        let s = start(
            "u",
            &found(),
            &public(),
            "http://127.0.0.1:9/oauth/callback",
            &scopes,
        )
        .unwrap();
        let q: std::collections::HashMap<String, String> =
            form_urlencoded::parse(s.url.split_once('?').unwrap().1.as_bytes())
                .into_owned()
                .collect();
        assert_eq!(q["code_challenge_method"], "S256");
        let want = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(sha2::Sha256::digest(s.verifier.as_bytes()));
        assert_eq!(q["code_challenge"], want);
        assert_eq!(q["resource"], "http://up:1/mcp");
        assert_eq!(q["state"], s.state);
        assert_eq!(q["scope"], "read offline_access");
        assert_eq!(s.verifier.len(), 43);
        let again = start("u", &found(), &public(), "http://x/oauth/callback", &[]).unwrap();
        assert_ne!(again.state, s.state);
        assert!(!again.url.contains("scope="), "{}", again.url);
    }

    #[test]
    fn a_server_without_s256_is_refused() {
        let mut f = found();
        f.user.pkce_methods = Some(vec!["plain".into()]);
        let e = start("u", &f, &public(), "http://x/oauth/callback", &[])
            .err()
            .unwrap();
        assert!(e.to_string().contains("S256"), "{e}");
        f.user.pkce_methods = None;
        let e = start("u", &f, &public(), "http://x/oauth/callback", &[]);
        assert!(e.err().unwrap().to_string().contains("S256"));
    }

    #[test]
    fn a_public_client_sends_its_id_and_no_secret() {
        let grant = [("grant_type", "refresh_token"), ("refresh_token", "r")];
        let (h, body) = request(&found(), &public(), &grant).unwrap();
        assert!(!h.contains_key(http::header::AUTHORIZATION));
        let body = String::from_utf8(body.to_vec()).unwrap();
        assert!(
            body.starts_with("grant_type=refresh_token&refresh_token=r&resource="),
            "{body}"
        );
        assert!(body.contains("client_id=https%3A%2F%2Fsluice"), "{body}");
    }
}
