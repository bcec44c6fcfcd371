//! `[upstream.auth] mode = "oauth"`: how Sluice is known to the upstream's authorization server
//! when it asks each user's consent (issue 31).
//!
//! Takes the table as written; gives the client id (empty: Sluice registers itself, by its
//! Client ID Metadata Document or by Dynamic Client Registration) and the secret, if any.
//! Refuses `private_key_jwt` (not offered for consent yet), a secret without a `client_id`
//! (a registered client gets its own), a pre-registered confidential client without
//! `client_secret_env`, a `client_metadata_url` that is not an `https` URL with a path, and a
//! `redirect_uri` that is not an `http(s)` URL whose path is `/oauth/callback`.

use super::auth_kinds::TokenEndpointAuth;
use super::ConfigError;

/// What the `oauth` mode reads of an `[upstream.auth]` table.
pub(super) struct Fields<'a> {
    pub client_id: Option<&'a str>,
    pub secret_env: bool,
    pub method: TokenEndpointAuth,
    pub key_file: bool,
    pub metadata_url: Option<&'a str>,
    pub redirect_uri: Option<&'a str>,
}

/// The path of Sluice's OAuth callback on its public listener.
pub const CALLBACK_PATH: &str = "/oauth/callback";

/// The client id of an `oauth` upstream's table (empty: Sluice registers itself), and
/// whether it takes the secret of `client_secret_env`.
pub(super) fn client(
    raw: &Fields<'_>,
    err: &dyn Fn(String) -> ConfigError,
) -> Result<(String, bool), ConfigError> {
    if raw.method == TokenEndpointAuth::PrivateKeyJwt || raw.key_file {
        return Err(err("mode = \"oauth\" takes client_secret_basic, client_secret_post or none; private_key_jwt is for mode = \"client_credentials\"".into()));
    }
    if let Some(url) = raw.metadata_url {
        let ok = url
            .parse::<http::Uri>()
            .ok()
            .filter(|u| u.scheme_str() == Some("https") && u.authority().is_some())
            .is_some_and(|u| u.path().len() > 1 && u.query().is_none());
        if !ok {
            return Err(err(format!(
                "client_metadata_url {:?} is not an https URL with a path (a Client ID Metadata Document's URL is the client id)",
                crate::escape::shown(url, 120)
            )));
        }
    }
    if let Some(url) = raw.redirect_uri {
        let ok = url
            .parse::<http::Uri>()
            .ok()
            .filter(|u| matches!(u.scheme_str(), Some("https" | "http")))
            .is_some_and(|u| u.path() == CALLBACK_PATH && u.query().is_none());
        if !ok {
            return Err(err(format!(
                "redirect_uri {:?} is not an http(s) URL whose path is {CALLBACK_PATH} (where Sluice takes the browser back)",
                crate::escape::shown(url, 120)
            )));
        }
    }
    let Some(id) = raw.client_id.map(str::to_owned) else {
        if raw.secret_env {
            return Err(err("client_secret_env without client_id: Sluice registers itself and gets its own secret; set the client_id it was registered with, or remove the secret".into()));
        }
        return Ok((String::new(), false));
    };
    if id.trim().is_empty() {
        return Err(err("client_id is empty: set the pre-registered client id, or remove it to let Sluice register itself".into()));
    }
    if raw.method == TokenEndpointAuth::None {
        if raw.secret_env {
            return Err(err(
                "token_endpoint_auth = \"none\" sends no secret: remove client_secret_env".into(),
            ));
        }
        return Ok((id, false));
    }
    if !raw.secret_env {
        return Err(err("a pre-registered client_id needs client_secret_env (a confidential client), or token_endpoint_auth = \"none\" (a public one)".into()));
    }
    Ok((id, true))
}
