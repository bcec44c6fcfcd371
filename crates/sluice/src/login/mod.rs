//! `[auth.login]`: Sluice as the OAuth authorization server MCP clients sign in to, the user's
//! sign-in delegated to the company's OpenID Connect provider (issue 32).
//!
//! Takes the HTTP requests of its paths ([`Login::serves`]): the RFC 8414 metadata,
//! `/register` (RFC 7591), `/authorize` with its consent page (`/login/consent`), the IdP's
//! redirect back (`/login/callback`) and `/token`; gives metadata, pages for people, redirects
//! and RFC 6749 JSON for clients, and access tokens signed by `auth::issued` (which the bearer
//! check takes as principals). Refuses what `authorize.rs`, `token.rs`, `clients.rs` and
//! `idp.rs` refuse; a body over [`MAX_BODY`] bytes or slower than [`BODY_WAIT`]; any method
//! but the path's. Nothing of a code, token, verifier, cookie or claim is logged.

pub mod authorize;
pub mod bounds;
pub mod checks;
pub mod clients;
pub mod fetch;
pub mod idp;
#[cfg(test)]
mod idp_tests;
pub mod records;
pub mod revocations;
pub mod shared;
pub mod store;
#[cfg(test)]
mod tests;
pub mod token;
pub mod web;

use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::json;

use crate::auth::issued::Issued;
use crate::config::{LoginConfig, LOGIN_CALLBACK};
use crate::upstream::client::HttpClient;
use web::Body;

/// The largest request body taken (a registration, a form).
pub const MAX_BODY: usize = 16 * 1024;
/// The wait for a request body.
pub const BODY_WAIT: Duration = Duration::from_secs(10);
/// The consent form's path.
pub const CONSENT: &str = "/login/consent";

/// Sluice's client secret at the IdP, from `idp_client_secret_env` (`None` without one).
/// Refuses an unset or empty variable.
pub fn client_secret(cfg: &LoginConfig) -> Result<Option<String>, String> {
    let Some(var) = &cfg.idp_client_secret_env else {
        return Ok(None);
    };
    match std::env::var(var) {
        Ok(s) if !s.is_empty() => Ok(Some(s)),
        _ => Err(format!(
            "auth.login.idp_client_secret_env names {}, which is not set or empty: set it to Sluice's client secret at the IdP",
            crate::escape::shown_var(var)
        )),
    }
}

/// The connecting address of a request (set by the server on each request's extensions).
#[derive(Clone, Copy, Debug)]
pub struct Source(pub std::net::IpAddr);

/// The login front of one config generation.
pub struct Login {
    cfg: LoginConfig,
    resource: String,
    /// The scopes a signed-in user may be granted (`auth.required_scopes`).
    grantable: Vec<String>,
    store: Arc<store::Store>,
    idp: idp::Idp,
    issued: Arc<Issued>,
    http: HttpClient,
}

impl Login {
    /// For `cfg`, Sluice's `auth` (its `resource`, the scopes every caller needs), the state
    /// kept across reloads, the token signer, the HTTP client and the IdP client secret
    /// ([`client_secret`]).
    pub fn new(
        cfg: &LoginConfig,
        auth: &crate::config::AuthConfig,
        store: Arc<store::Store>,
        issued: Arc<Issued>,
        http: HttpClient,
        secret: Option<String>,
    ) -> Login {
        Login {
            cfg: cfg.clone(),
            resource: auth.resource.clone(),
            grantable: auth.required_scopes.clone(),
            store,
            idp: idp::Idp::new(cfg, secret),
            issued,
            http,
        }
    }

    /// Whether `path` is one of the login front's.
    pub fn serves(&self, path: &str) -> bool {
        matches!(path, "/authorize" | "/token" | CONSENT | LOGIN_CALLBACK)
            || (path == "/register" && self.cfg.dynamic_registration)
            || self.is_metadata(path)
    }

    fn is_metadata(&self, path: &str) -> bool {
        let suffix = path.strip_prefix("/.well-known/oauth-authorization-server");
        let own = self
            .cfg
            .issuer
            .splitn(4, '/')
            .nth(3)
            .map(|p| format!("/{p}"));
        suffix == Some("") || (suffix.is_some() && suffix.map(str::to_owned) == own)
    }

    /// Answers a request on one of its paths. The metadata, `/register` and `/token` answer
    /// any origin (CORS, no credentials: a browser-based host such as the Inspector signs in
    /// from its own page); the browser's pages do not.
    pub async fn handle(&self, req: Request<hyper::body::Incoming>) -> Response<Body> {
        let path = req.uri().path();
        let cors = matches!(path, "/register" | "/token") || self.is_metadata(path);
        if cors && req.method() == Method::OPTIONS {
            return web::preflight();
        }
        let mut r = self.answer(req).await;
        if cors {
            let any = http::HeaderValue::from_static("*");
            r.headers_mut()
                .insert(http::header::ACCESS_CONTROL_ALLOW_ORIGIN, any);
        }
        r
    }

    async fn answer(&self, req: Request<hyper::body::Incoming>) -> Response<Body> {
        let (parts, body) = req.into_parts();
        let path = parts.uri.path().to_owned();
        let query = web::Params::parse(parts.uri.query().unwrap_or_default().as_bytes());
        let source = parts.extensions.get::<Source>().map(|s| s.0);
        match (&parts.method, path.as_str()) {
            (&Method::GET, p) if self.is_metadata(p) => web::json(StatusCode::OK, self.metadata()),
            (&Method::GET, "/authorize") => authorize::start(self, source, &query).await,
            (&Method::GET, LOGIN_CALLBACK) => {
                authorize::callback(self, &parts.headers, &query).await
            }
            (&Method::POST, _) => {
                let Some(bytes) = read(body).await else {
                    return web::error(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "invalid_request",
                        "the body is too large or too slow",
                    );
                };
                match path.as_str() {
                    "/register" => self.register(source, &bytes).await,
                    "/token" => token::token(self, &web::Params::parse(&bytes)).await,
                    CONSENT => {
                        authorize::consent(self, &parts.headers, &web::Params::parse(&bytes)).await
                    }
                    _ => web::error(
                        StatusCode::METHOD_NOT_ALLOWED,
                        "invalid_request",
                        "use GET here",
                    ),
                }
            }
            _ => web::error(
                StatusCode::METHOD_NOT_ALLOWED,
                "invalid_request",
                "this method is not served here",
            ),
        }
    }

    async fn register(&self, source: Option<std::net::IpAddr>, body: &[u8]) -> Response<Body> {
        let source = source.unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
        match clients::register(&self.store, source, body).await {
            Ok(v) => web::json(StatusCode::CREATED, v),
            Err((status, (code, what))) => web::error(status, code, &what),
        }
    }

    /// The RFC 8414 metadata.
    pub fn metadata(&self) -> serde_json::Value {
        let i = &self.cfg.issuer;
        let mut m = json!({
            "issuer": i,
            "authorization_endpoint": format!("{i}/authorize"),
            "token_endpoint": format!("{i}/token"),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "scopes_supported": self.grantable,
            "authorization_response_iss_parameter_supported": true,
            "client_id_metadata_document_supported": self.cfg.client_metadata_documents,
        });
        if self.cfg.dynamic_registration {
            m["registration_endpoint"] = json!(format!("{i}/register"));
        }
        m
    }

    /// Whether Sluice's issuer is `https://` (cookies are then `Secure`).
    fn secure(&self) -> bool {
        self.cfg.issuer.starts_with("https://")
    }
}

/// The body, when within [`MAX_BODY`] and [`BODY_WAIT`].
async fn read(body: hyper::body::Incoming) -> Option<bytes::Bytes> {
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    match tokio::time::timeout(BODY_WAIT, limited.collect()).await {
        Ok(Ok(c)) => Some(c.to_bytes()),
        _ => None,
    }
}
