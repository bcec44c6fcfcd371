//! Sluice as an OpenID Connect relying party of the company IdP: discovery, the authorization
//! request (code flow, PKCE S256, nonce, state), the code exchange and the ID token's checks.
//!
//! Takes `[auth.login]`'s IdP settings and the client secret read at startup; gives the URL to
//! send a browser to, and the principal and groups of a signed-in user (from the configured
//! claims). Refuses: a discovery document whose `issuer` is not the configured one (exact
//! strings, OpenID Discovery §4.3) or that lacks an endpoint; a callback `iss` that is not the
//! IdP's; a token answer without an ID token; an ID token whose signature does not verify
//! under the IdP's JWKS (RS256/ES256/PS256 only), whose `iss`, `aud` (Sluice's client id),
//! `exp` or `nonce` do not hold, or without the principal claim.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::{decode, decode_header, jwk::JwkSet, Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;
use subtle::ConstantTimeEq as _;

use super::fetch;
use crate::config::LoginConfig;
use crate::upstream::client::HttpClient;

/// The wait for any answer of the IdP.
const WAIT: Duration = Duration::from_secs(10);
/// Discovery and keys are read again after this.
const FRESH: Duration = Duration::from_secs(3_600);
/// The largest discovery document or JWKS taken.
const MAX_DOC: usize = 256 * 1024;

/// The IdP's endpoints, from its discovery document.
#[derive(Deserialize, Clone)]
struct Discovery {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
    #[serde(default)]
    authorization_response_iss_parameter_supported: bool,
    #[serde(default)]
    token_endpoint_auth_methods_supported: Option<Vec<String>>,
}

/// What Sluice knows of the IdP, read once an hour.
struct Known {
    at: Instant,
    disc: Discovery,
    keys: JwkSet,
}

/// The relying party.
pub struct Idp {
    cfg: LoginConfig,
    secret: Option<String>,
    known: tokio::sync::Mutex<Option<Arc<Known>>>,
}

/// A signed-in user, as the configured claims name them.
pub struct User {
    /// The principal claim's value.
    pub principal: String,
    /// The groups claim's values.
    pub groups: Vec<String>,
}

impl Idp {
    /// For `cfg`, with the client secret read from its variable (`None`: a public client).
    pub fn new(cfg: &LoginConfig, secret: Option<String>) -> Idp {
        Idp {
            cfg: cfg.clone(),
            secret,
            known: tokio::sync::Mutex::new(None),
        }
    }

    async fn known(&self, http: &HttpClient, fresh: bool) -> Result<Arc<Known>, String> {
        let mut k = self.known.lock().await;
        if let Some(k) = k.as_ref().filter(|k| !fresh && k.at.elapsed() < FRESH) {
            return Ok(k.clone());
        }
        let base = self.cfg.idp_issuer.trim_end_matches('/');
        let url = format!("{base}/.well-known/openid-configuration");
        let got = fetch::get(http, &url, WAIT, MAX_DOC).await?;
        let disc: Discovery = serde_json::from_value(got.json).map_err(|_| {
            "the IdP's discovery document lacks an endpoint (authorization, token or jwks_uri)"
                .to_owned()
        })?;
        let plain = |u: &str| {
            let uri = u.parse::<http::Uri>().ok();
            let host = uri.as_ref().and_then(|u| u.host()).unwrap_or_default();
            let scheme = uri
                .as_ref()
                .and_then(|u| u.scheme_str())
                .unwrap_or_default();
            !(scheme == "https" || (scheme == "http" && crate::config::is_loopback(host)))
        };
        if [
            &disc.authorization_endpoint,
            &disc.token_endpoint,
            &disc.jwks_uri,
        ]
        .into_iter()
        .any(|u| plain(u))
        {
            return Err("the IdP's discovery document names an endpoint that is not https (plain http is taken on loopback only)".into());
        }
        if disc.issuer != self.cfg.idp_issuer {
            return Err(format!("the IdP's discovery document names issuer {:?}, not the configured auth.login.idp_issuer", super::checks::shown(&disc.issuer)));
        }
        let keys: JwkSet =
            serde_json::from_value(fetch::get(http, &disc.jwks_uri, WAIT, MAX_DOC).await?.json)
                .map_err(|_| "the IdP's jwks_uri holds no JWKS".to_owned())?;
        let fresh = Arc::new(Known {
            at: Instant::now(),
            disc,
            keys,
        });
        *k = Some(fresh.clone());
        Ok(fresh)
    }

    /// Where to send the browser: the IdP's authorization endpoint with `state`, `nonce` and the
    /// S256 challenge of `verifier`.
    pub async fn authorize_url(
        &self,
        http: &HttpClient,
        state: &str,
        nonce: &str,
        verifier: &str,
    ) -> Result<String, String> {
        let k = self.known(http, false).await?;
        let scope = self.cfg.idp_scopes.join(" ");
        let challenge = super::checks::challenge(verifier);
        let callback = self.cfg.callback();
        Ok(super::web::with_query(
            &k.disc.authorization_endpoint,
            &[
                ("response_type", "code"),
                ("client_id", &self.cfg.idp_client_id),
                ("redirect_uri", &callback),
                ("scope", &scope),
                ("state", state),
                ("nonce", nonce),
                ("code_challenge", &challenge),
                ("code_challenge_method", "S256"),
            ],
        ))
    }

    /// Checks the callback's `iss` (RFC 9207): when sent it must be the IdP's; when the IdP
    /// says it sends one, it must be there.
    pub async fn iss_ok(&self, http: &HttpClient, iss: Option<&str>) -> Result<(), String> {
        let k = self.known(http, false).await?;
        match iss {
            Some(i) if i == k.disc.issuer => Ok(()),
            Some(_) => {
                Err("the sign-in answer came from another issuer than the configured IdP".into())
            }
            None if k.disc.authorization_response_iss_parameter_supported => {
                Err("the sign-in answer lacks the IdP's iss".into())
            }
            None => Ok(()),
        }
    }

    /// Exchanges the IdP's `code` and checks the ID token: the user it names.
    pub async fn finish(
        &self,
        http: &HttpClient,
        code: &str,
        verifier: &str,
        nonce: &str,
    ) -> Result<User, String> {
        let k = self.known(http, false).await?;
        let callback = self.cfg.callback();
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", callback.as_str()),
            ("code_verifier", verifier),
        ];
        let basic_ok = k
            .disc
            .token_endpoint_auth_methods_supported
            .as_ref()
            .is_none_or(|m| m.iter().any(|m| m == "client_secret_basic"));
        let basic = match &self.secret {
            Some(s) if basic_ok => Some((self.cfg.idp_client_id.as_str(), s.as_str())),
            Some(s) => {
                form.push(("client_id", &self.cfg.idp_client_id));
                form.push(("client_secret", s));
                None
            }
            None => {
                form.push(("client_id", &self.cfg.idp_client_id));
                None
            }
        };
        let got = fetch::post_form(http, &k.disc.token_endpoint, &form, basic, WAIT).await?;
        if !got.status.is_success() {
            let err = got
                .json
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("an error");
            let err = if err.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                err
            } else {
                "an error"
            };
            return Err(format!(
                "the IdP refused the code ({}: {err})",
                got.status.as_u16()
            ));
        }
        let id_token = got.json.get("id_token").and_then(Value::as_str).ok_or(
            "the IdP's token answer has no id_token: is `openid` among the client's scopes?",
        )?;
        let claims = self.id_token(http, k, id_token).await?;
        let sent = claims
            .get("nonce")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !bool::from(sent.as_bytes().ct_eq(nonce.as_bytes())) {
            return Err("the ID token's nonce is not the one sent".into());
        }
        self.user(&claims)
    }

    /// The verified claims of `token` (keys read again once when its `kid` is unknown).
    async fn id_token(
        &self,
        http: &HttpClient,
        mut k: Arc<Known>,
        token: &str,
    ) -> Result<Value, String> {
        let header = decode_header(token).map_err(|_| "the ID token is not a JWT")?;
        if !matches!(
            header.alg,
            Algorithm::RS256 | Algorithm::ES256 | Algorithm::PS256
        ) {
            return Err("the ID token is signed with an algorithm Sluice does not take".into());
        }
        let find = |k: &Known| {
            k.keys
                .keys
                .iter()
                .find(|j| header.kid.is_none() || j.common.key_id == header.kid)
                .cloned()
        };
        let jwk = match find(&k) {
            Some(j) => j,
            None => {
                k = self.known(http, true).await?;
                find(&k).ok_or("no key of the IdP's JWKS matches the ID token")?
            }
        };
        let key = DecodingKey::from_jwk(&jwk).map_err(|_| "a key of the IdP's JWKS is unusable")?;
        let mut v = Validation::new(header.alg);
        v.leeway = 30;
        v.set_issuer(&[&self.cfg.idp_issuer]);
        v.set_audience(&[&self.cfg.idp_client_id]);
        v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = decode::<Value>(token, &key, &v)
            .map(|d| d.claims)
            .map_err(|e| format!("the ID token is refused: {e}"))?;
        // OIDC Core 3.1.3.7: with several audiences, or an `azp`, it must name Sluice.
        let several = claims
            .get("aud")
            .and_then(Value::as_array)
            .is_some_and(|a| a.len() > 1);
        let azp = claims.get("azp").and_then(Value::as_str);
        if (several || azp.is_some()) && azp != Some(self.cfg.idp_client_id.as_str()) {
            return Err("the ID token was issued to another party (azp)".into());
        }
        Ok(claims)
    }

    fn user(&self, claims: &Value) -> Result<User, String> {
        // An address the IdP did not verify is anyone's to claim: not a principal.
        if self.cfg.principal_claim == "email"
            && claims.get("email_verified") != Some(&Value::Bool(true))
        {
            return Err("the ID token's email is not verified (email_verified is not true): the IdP must verify it, or set auth.login.principal_claim to another claim".into());
        }
        let principal = claims.get(&self.cfg.principal_claim).and_then(Value::as_str)
            .filter(|p| !p.is_empty() && *p != crate::auth::INTERNAL_PRINCIPAL)
            .ok_or_else(|| format!("the ID token has no usable {:?} claim: set auth.login.principal_claim to a claim your IdP sends", self.cfg.principal_claim))?;
        let groups = crate::auth::jwt::groups_of(claims, &self.cfg.groups_claim);
        Ok(User {
            principal: principal.to_owned(),
            groups,
        })
    }
}
