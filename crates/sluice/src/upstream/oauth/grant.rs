//! The token request (RFC 6749 §4.4, the client credentials grant, with the `resource`
//! indicator of RFC 8707).
//!
//! Takes what discovery found and the upstream's `[upstream.auth]`; gives the
//! `Authorization: Bearer` value (marked sensitive: never printed by `http`'s `Debug`) and
//! when it expires. Refuses (an [`UpstreamError::Auth`]): a server that lists its grants or
//! client authentication methods without the ones configured, a refusal from the token
//! endpoint (told by its OAuth error code only, never its body), and an answer without a usable
//! bearer token.

use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde::Deserialize;

use super::discovery::Found;
use crate::config::{Proof, SigningAlg, TokenEndpointAuth, UpstreamAuth};
use crate::upstream::client::{Answer, HttpClient, UpstreamError};

/// The lifetime taken for a token whose answer gives none.
pub(super) const DEFAULT_LIFETIME: Duration = Duration::from_secs(3600);
/// The shortest and longest lifetime believed (an `expires_in` outside is taken as the bound:
/// no token fetched per request, no overflow).
pub(super) const LIFETIME: (Duration, Duration) =
    (Duration::from_secs(10), Duration::from_secs(24 * 3600));

/// A bearer token held for an upstream.
pub(super) struct Token {
    /// `Bearer <token>`, sensitive.
    pub header: HeaderValue,
    /// When to get the next one: nine tenths into its lifetime.
    pub renew_at: Instant,
    /// When it stops being sent.
    pub expires_at: Instant,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    token_type: String,
    expires_in: Option<u64>,
    refresh_token: Option<String>,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: String,
}

/// Asks the token endpoint for a token for `found.resource` with `scopes`.
pub(super) async fn client_credentials(
    client: &HttpClient,
    name: &str,
    found: &Found,
    cfg: &UpstreamAuth,
    scopes: &[String],
) -> Result<Token, UpstreamError> {
    let fail = |why: String| UpstreamError::Auth(name.to_owned(), why);
    let server = "its authorization server";
    offered(found, cfg, "client_credentials", server).map_err(fail)?;
    let (headers, body) = request(found, cfg, scopes)?;
    let (token, _) = exchange(client, name, found, headers, body, "the client credentials").await?;
    Ok(token)
}

/// POSTs a token request (`what`: what it presents, for errors) to `found`'s token endpoint;
/// gives the token and the refresh token, if one came.
pub(super) async fn exchange(
    client: &HttpClient,
    name: &str,
    found: &Found,
    headers: HeaderMap,
    body: Bytes,
    what: &str,
) -> Result<(Token, Option<String>), UpstreamError> {
    let fail = |why: String| UpstreamError::Auth(name.to_owned(), why);
    let (_, answer) = client
        .send(
            http::Method::POST,
            name,
            &found.token_endpoint,
            headers,
            body,
            None,
        )
        .await?;
    let (status, body) = whole(answer, "token").map_err(fail)?;
    if status != StatusCode::OK {
        let code = serde_json::from_slice::<ErrorAnswer>(&body)
            .ok()
            .map(|e| e.error)
            .filter(|e| e.len() <= 64 && e.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
        return Err(fail(match code {
            Some(c) => format!(
                "its token endpoint refused {what}: {c} (HTTP {})",
                status.as_u16()
            ),
            None => format!("its token endpoint answered HTTP {}", status.as_u16()),
        }));
    }
    let t: TokenAnswer = serde_json::from_slice(&body).map_err(|_| {
        fail(
            "its token endpoint's answer is not a token response (access_token, token_type)".into(),
        )
    })?;
    if !t.token_type.eq_ignore_ascii_case("bearer") {
        return Err(fail(
            "its token endpoint gave a token that is not a bearer token".into(),
        ));
    }
    let mut header = HeaderValue::from_str(&format!("Bearer {}", t.access_token))
        .ok()
        .filter(|_| !t.access_token.is_empty())
        .ok_or_else(|| {
            fail("its token endpoint gave a token that cannot be sent in a header".into())
        })?;
    header.set_sensitive(true);
    let life = t
        .expires_in
        .map_or(DEFAULT_LIFETIME, Duration::from_secs)
        .clamp(LIFETIME.0, LIFETIME.1);
    let now = Instant::now();
    let token = Token {
        header,
        renew_at: now + life.mul_f64(0.9),
        expires_at: now + life,
    };
    Ok((token, t.refresh_token.filter(|r| !r.is_empty())))
}

/// Refused when the server lists its grants or client authentication methods without the
/// configured ones (`grant`; `server`: how the refusal names it).
pub(super) fn offered(
    found: &Found,
    cfg: &UpstreamAuth,
    grant: &str,
    server: &str,
) -> Result<(), String> {
    if found
        .grant_types
        .as_ref()
        .is_some_and(|g| !g.iter().any(|g| g == grant))
    {
        let named = match grant {
            "client_credentials" => "the client_credentials grant",
            _ => "the token exchange grant",
        };
        return Err(format!(
            "{server} does not offer {named} (grant_types_supported)"
        ));
    }
    let method = match cfg.token_endpoint_auth {
        TokenEndpointAuth::ClientSecretBasic => "client_secret_basic",
        TokenEndpointAuth::ClientSecretPost => "client_secret_post",
        TokenEndpointAuth::PrivateKeyJwt => "private_key_jwt",
        TokenEndpointAuth::None => "none",
    };
    match &found.auth_methods {
        Some(methods) if !methods.iter().any(|m| m == method) => Err(format!("{server} does not accept token_endpoint_auth = \"{method}\" (token_endpoint_auth_methods_supported)")),
        _ => Ok(()),
    }
}

/// A client assertion (RFC 7523 §3): the client as issuer and subject, the authorization
/// server's issuer as audience, valid for one minute, with a unique id.
pub(super) fn assertion(
    cfg: &UpstreamAuth,
    audience: &str,
    key: &jsonwebtoken::EncodingKey,
    alg: SigningAlg,
) -> Result<String, UpstreamError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let claims = serde_json::json!({
        "iss": cfg.client_id, "sub": cfg.client_id, "aud": audience,
        "iat": now, "exp": now + 60, "jti": format!("{:032x}", rand::random::<u128>()),
    });
    let alg = match alg {
        SigningAlg::ES256 => jsonwebtoken::Algorithm::ES256,
        SigningAlg::RS256 => jsonwebtoken::Algorithm::RS256,
    };
    jsonwebtoken::encode(&jsonwebtoken::Header::new(alg), &claims, key).map_err(|_| {
        UpstreamError::Auth(
            String::new(),
            "the client assertion could not be signed".into(),
        )
    })
}

/// The token request's headers and form body.
fn request(
    found: &Found,
    cfg: &UpstreamAuth,
    scopes: &[String],
) -> Result<(HeaderMap, Bytes), UpstreamError> {
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("grant_type", "client_credentials");
    form.append_pair("resource", &found.resource);
    if !scopes.is_empty() {
        form.append_pair("scope", &scopes.join(" "));
    }
    let mut headers = HeaderMap::new();
    client_auth(&mut form, &mut headers, cfg, &found.issuer)?;
    post_headers(&mut headers, &found.token_endpoint, FORM);
    Ok((headers, Bytes::from(form.finish())))
}

/// Sluice's client authentication as `[upstream.auth]` configures it: a `private_key_jwt`
/// assertion for the server `issuer`, or [`authenticate`] with the configured secret.
pub(super) fn client_auth(
    form: &mut form_urlencoded::Serializer<'_, String>,
    headers: &mut HeaderMap,
    cfg: &UpstreamAuth,
    issuer: &str,
) -> Result<(), UpstreamError> {
    match (cfg.token_endpoint_auth, &cfg.proof) {
        (TokenEndpointAuth::PrivateKeyJwt, Proof::Key { key, alg, .. }) => {
            form.append_pair("client_id", &cfg.client_id);
            form.append_pair(
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            );
            form.append_pair("client_assertion", &assertion(cfg, issuer, key, *alg)?);
            Ok(())
        }
        (how, _) => {
            let secret = Some(cfg.secret().unwrap_or_default());
            authenticate(form, headers, &cfg.client_id, secret, how)
        }
    }
}

/// Authenticates client `id` to a token endpoint (RFC 6749 §2.3.1) as `how` says: HTTP Basic
/// (each part form-encoded, then joined by a colon; nothing of the client in the form: some
/// servers refuse both), or the secret in the form, or (a public client, or no secret) its id
/// in the form only.
pub(super) fn authenticate(
    form: &mut form_urlencoded::Serializer<'_, String>,
    headers: &mut HeaderMap,
    id: &str,
    secret: Option<&str>,
    how: TokenEndpointAuth,
) -> Result<(), UpstreamError> {
    match (how, secret) {
        (TokenEndpointAuth::ClientSecretBasic, Some(secret)) => {
            let enc = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let pair = format!("{}:{}", enc(id), enc(secret));
            let b64 = base64::engine::general_purpose::STANDARD.encode(pair);
            let mut v = HeaderValue::from_str(&format!("Basic {b64}"))
                .map_err(|_| UpstreamError::Auth(String::new(), "bad client credentials".into()))?;
            v.set_sensitive(true);
            headers.insert(http::header::AUTHORIZATION, v);
        }
        (TokenEndpointAuth::ClientSecretPost, Some(secret)) => {
            form.append_pair("client_id", id);
            form.append_pair("client_secret", secret);
        }
        _ => {
            form.append_pair("client_id", id);
        }
    }
    Ok(())
}

/// The status and body of an authorization server's `answer` from its `what` endpoint (an
/// event stream is refused: none of its endpoints sends one).
pub(super) fn whole(answer: Answer, what: &str) -> Result<(StatusCode, Bytes), String> {
    match answer {
        Answer::Json(s, b) | Answer::Status(s, b) => Ok((s, b)),
        Answer::Sse(_) => Err(format!("its {what} endpoint answered with an event stream")),
    }
}

/// The headers of a POST of `content_type` to an authorization server's endpoint `at`,
/// asking for JSON back.
pub(super) fn post_headers(headers: &mut HeaderMap, at: &http::Uri, content_type: &'static str) {
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    headers.insert(
        http::header::ACCEPT,
        HeaderValue::from_static("application/json"),
    );
    if let Ok(h) = HeaderValue::from_str(&super::discovery::host_port(at)) {
        headers.insert(http::header::HOST, h);
    }
}

/// The form content type of token requests.
pub(super) const FORM: &str = "application/x-www-form-urlencoded";

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(how: TokenEndpointAuth) -> UpstreamAuth {
        UpstreamAuth {
            mode: crate::config::AuthMode::ClientCredentials,
            client_metadata_url: None,
            redirect_uri: None,
            client_id: "sluice client".into(),
            proof: Proof::Secret {
                env: "S".into(),
                value: "s3cr:t&".into(),
            },
            token_endpoint_auth: how,
            scopes: None,
            issuer: None,
            target: Default::default(),
        }
    }

    fn found() -> Found {
        Found {
            issuer: "http://as:1".into(),
            token_endpoint: "http://as:1/token".parse().unwrap(),
            resource: "http://up:2/mcp".into(),
            scopes_supported: vec![],
            grant_types: None,
            auth_methods: None,
            user: Default::default(),
        }
    }

    #[test]
    fn basic_sends_the_form_encoded_pair_and_no_secret_in_the_body() {
        let scopes = ["a".to_owned(), "b".to_owned()];
        let (h, body) = request(
            &found(),
            &cfg(TokenEndpointAuth::ClientSecretBasic),
            &scopes,
        )
        .unwrap();
        let body = String::from_utf8(body.to_vec()).unwrap();
        assert_eq!(
            body,
            "grant_type=client_credentials&resource=http%3A%2F%2Fup%3A2%2Fmcp&scope=a+b"
        );
        let auth = h[http::header::AUTHORIZATION].to_str().unwrap();
        let pair = base64::engine::general_purpose::STANDARD
            .decode(auth.strip_prefix("Basic ").unwrap())
            .unwrap();
        assert_eq!(pair, b"sluice+client:s3cr%3At%26");
        assert!(h[http::header::AUTHORIZATION].is_sensitive());
    }

    #[test]
    fn post_sends_the_credentials_in_the_body() {
        let (h, body) = request(&found(), &cfg(TokenEndpointAuth::ClientSecretPost), &[]).unwrap();
        let body = String::from_utf8(body.to_vec()).unwrap();
        assert!(!h.contains_key(http::header::AUTHORIZATION));
        assert!(
            body.ends_with("&client_id=sluice+client&client_secret=s3cr%3At%26"),
            "{body}"
        );
        assert!(!body.contains("scope="), "{body}");
    }
}
