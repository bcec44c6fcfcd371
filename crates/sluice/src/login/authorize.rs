//! The browser's way through a sign-in: `/authorize` (the client's request, then a consent
//! page), `/login/consent` (the user's choice, then off to the IdP) and `/login/callback` (the
//! IdP's answer, then Sluice's code to the client).
//!
//! Takes the client's parameters, the user's form and the IdP's redirect; gives pages, and
//! redirects that carry the client's `state` and Sluice's `iss` (RFC 9207). Refuses with a
//! page (never a redirect, which could reach an attacker's URI): an unknown client, a
//! `redirect_uri` that matches none registered, a `state` or `scope` over [`MAX_PARAM`] bytes, a
//! source past its sign-ins per minute (counted before any metadata document is fetched).
//! Refuses with a redirect to the client when its `redirect_uri` is a loopback or a custom
//! scheme (a native host), with a page otherwise (an https redirect is not followed
//! unattended before consent: RFC 9700's open redirector): `response_type` other than
//! `code`, PKCE missing or not S256, a `resource` other than Sluice's; with a redirect, the user
//! declining. Refuses with a page: a consent or callback without the
//! browser cookie set at `/authorize` (compared in constant time), a sign-in unknown, used or
//! expired, an IdP answer that fails `idp.rs`'s checks.

use http::{HeaderMap, Response, StatusCode};
use subtle::ConstantTimeEq as _;

use super::checks::{challenge_ok, redirect_matches, secret};
use super::records::{Client, Code, Grant, Origin, Pending};
use super::store::hashed;
use super::web::{self, Body, Params};
use super::{Login, CONSENT};

fn refused(text: &str) -> Response<Body> {
    web::page(
        StatusCode::BAD_REQUEST,
        "Sign-in refused",
        &[
            text,
            "Go back to your MCP client and start the sign-in again.",
        ],
        None,
    )
}

/// A redirect to the client with `params`, its `state` and Sluice's `iss`.
fn back(
    login: &Login,
    redirect: &str,
    state: Option<&str>,
    params: &[(&str, &str)],
) -> Response<Body> {
    let mut all = params.to_vec();
    if let Some(s) = state {
        all.push(("state", s));
    }
    all.push(("iss", &login.cfg.issuer));
    web::redirect(&web::with_query(redirect, &all), None)
}

/// The longest `state` or `scope` a client may send (bytes): each is kept with the sign-in.
pub const MAX_PARAM: usize = 1024;

/// Whether an error may go back to `redirect` unattended: a loopback `http` URI or a custom
/// scheme (a native host's); not an `https` one (anyone may register one).
fn redirects_unattended(redirect: &str) -> bool {
    let Ok(uri) = redirect.parse::<http::Uri>() else {
        return false;
    };
    match uri.scheme_str() {
        Some("https") => false,
        Some("http") => uri.host().is_some_and(crate::config::is_loopback),
        Some(_) => true,
        None => false,
    }
}

/// The client `client_id` names: its metadata document, or its registration.
async fn known(login: &Login, client_id: &str) -> Result<Client, Response<Body>> {
    if super::clients::is_document(client_id) && login.cfg.client_metadata_documents {
        let allow = login.cfg.allow_loopback_metadata;
        return super::clients::document(&login.store, &login.http, client_id, allow)
            .await
            .map_err(|e| {
                // The detail stays in the log: shown, it would map the network Sluice sees.
                tracing::debug!(reason = %crate::escape::Escaped(&e), "a client metadata document refused");
                refused("The client's metadata document could not be fetched, or is not a valid one for this client: its developer can check it.")
            });
    }
    let registered = login.cfg.dynamic_registration;
    let client = login.store.client(client_id).await;
    client.filter(|c| registered && c.origin == Origin::Registered).ok_or_else(|| {
        refused("This client is not registered here (or its registration expired): the client should register again.")
    })
}

/// `GET /authorize`.
pub async fn start(login: &Login, source: Option<std::net::IpAddr>, q: &Params) -> Response<Body> {
    let Some(client_id) = q.get("client_id") else {
        return refused("The request names no client (client_id).");
    };
    let long = |k: &str| q.get(k).is_some_and(|v| v.len() > MAX_PARAM);
    if long("state") || long("scope") || client_id.len() > MAX_PARAM {
        return refused("The request's client_id, state or scope is over 1024 bytes.");
    }
    let source = source.unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
    if !login.store.count_authorization(source).await {
        return refused("Too many sign-ins from this address: wait a minute and try again.");
    }
    let client = match known(login, client_id).await {
        Ok(c) => c,
        Err(page) => return page,
    };
    let redirect = match q.get("redirect_uri") {
        Some(r) if redirect_matches(r, &client.redirect_uris) => r.to_owned(),
        None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
        _ => return refused("The redirect_uri is not one this client registered."),
    };
    let state = q.get("state");
    let unattended = redirects_unattended(&redirect);
    let deny = |code: &str, what: &str| match unattended {
        true => back(
            login,
            &redirect,
            state,
            &[("error", code), ("error_description", what)],
        ),
        false => refused(&format!(
            "The client's request is not valid ({code}): {what}."
        )),
    };
    if q.get("response_type") != Some("code") {
        return deny(
            "unsupported_response_type",
            "only response_type=code is offered",
        );
    }
    let challenge = match challenge_ok(q.get("code_challenge"), q.get("code_challenge_method")) {
        Ok(c) => c,
        Err(e) => return deny("invalid_request", e),
    };
    if q.repeated("resource") || q.get("resource").is_some_and(|r| r != login.resource) {
        return deny(
            "invalid_target",
            "resource must be this gateway's MCP endpoint URL",
        );
    }
    let asked: Vec<&str> = q
        .get("scope")
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let scope: Vec<&str> = asked
        .into_iter()
        .filter(|s| login.grantable.iter().any(|g| g == s))
        .collect();
    let (id, browser) = (secret(), secret());
    let pending = Pending {
        client_id: client.client_id.clone(),
        client_name: client.client_name.clone(),
        redirect_uri: redirect.clone(),
        state: state.map(str::to_owned),
        code_challenge: challenge,
        scope: scope.join(" "),
        browser: hashed(&browser),
        consented: false,
    };
    if !login.store.put_pending(hashed(&id), pending).await {
        return deny(
            "temporarily_unavailable",
            "too many sign-ins are under way: try again in a few minutes",
        );
    }
    consent_page(login, &client.client_name, &redirect, &id, &browser)
}

fn consent_page(
    login: &Login,
    name: &Option<String>,
    redirect: &str,
    id: &str,
    browser: &str,
) -> Response<Body> {
    let name = name.as_deref().unwrap_or("An MCP client");
    let host = redirect
        .parse::<http::Uri>()
        .ok()
        .and_then(|u| u.host().map(str::to_owned))
        .unwrap_or_default();
    let asks = format!("{name} (returning to {host}) asks to use this MCP gateway as you.");
    let form = web::form(
        CONSENT,
        &[("pending", id)],
        &[
            ("decision", "allow", "Continue to sign in"),
            ("decision", "deny", "Cancel"),
        ],
    );
    let mut page = web::page(StatusCode::OK, "Sign in to the MCP gateway", &[&asks, "Continue only if you started this from your MCP client. You will sign in with your company account."], Some(form));
    let cookie = web::set_cookie(&web::cookie_name(id), browser, login.secure(), "/login");
    if let Ok(v) = http::HeaderValue::from_str(&cookie) {
        page.headers_mut().insert(http::header::SET_COOKIE, v);
    }
    page
}

/// The pending sign-in `id` names, when this browser holds its cookie (checked before it is
/// taken with `take`: another browser cannot spend it).
async fn bound(
    login: &Login,
    headers: &HeaderMap,
    id: Option<&str>,
    take: bool,
) -> Result<Pending, Response<Body>> {
    let id = id.ok_or_else(|| refused("This sign-in carries no state."))?;
    let key = hashed(id);
    let gone = || refused("This sign-in was finished already or has expired.");
    let p = login.store.pending(&key).await.ok_or_else(gone)?;
    let cookie = web::cookie(headers, &web::cookie_name(id))
        .map(hashed)
        .unwrap_or([0; 32]);
    if !bool::from(cookie.ct_eq(&p.browser)) {
        return Err(refused(
            "This sign-in was started in another browser (or cookies are off for this site).",
        ));
    }
    match take {
        true => login.store.take_pending(&key).await.ok_or_else(gone),
        false => Ok(p),
    }
}

/// The PKCE verifier and the nonce of sign-in `id` toward the IdP: derived, never stored.
fn idp_secrets(login: &Login, id: &str) -> (String, String) {
    let verifier = login.issued.derive("idp-pkce-verifier", id);
    (verifier, login.issued.derive("idp-nonce", id))
}

/// `POST /login/consent`.
pub async fn consent(login: &Login, headers: &HeaderMap, form: &Params) -> Response<Body> {
    let id = form.get("pending");
    if form.get("decision") != Some("allow") {
        return match bound(login, headers, id, true).await {
            Ok(p) => back(
                login,
                &p.redirect_uri,
                p.state.as_deref(),
                &[
                    ("error", "access_denied"),
                    ("error_description", "the user declined"),
                ],
            ),
            Err(page) => page,
        };
    }
    let mut p = match bound(login, headers, id, false).await {
        Ok(p) => p,
        Err(page) => return page,
    };
    let id = id.unwrap_or_default();
    let (verifier, nonce) = idp_secrets(login, id);
    let url = match login
        .idp
        .authorize_url(&login.http, id, &nonce, &verifier)
        .await
    {
        Ok(u) => u,
        Err(e) => {
            tracing::warn!(error = %e, "auth.login: the IdP cannot be used");
            return web::page(StatusCode::BAD_GATEWAY, "Sign-in unavailable", &["The company sign-in service cannot be reached now. Try again in a few minutes; if it persists, tell the gateway's operator (the log says why)."], None);
        }
    };
    p.consented = true;
    login.store.update_pending(&hashed(id), p).await;
    let mut r = web::redirect(&url, None);
    *r.status_mut() = StatusCode::SEE_OTHER;
    r
}

/// `GET /login/callback`.
pub async fn callback(login: &Login, headers: &HeaderMap, q: &Params) -> Response<Body> {
    let p = match bound(login, headers, q.get("state"), true).await {
        Ok(p) if p.consented => p,
        Ok(_) => return refused("This sign-in was not consented to."),
        Err(page) => return page,
    };
    let to_client = |code: &str, what: &str| {
        back(
            login,
            &p.redirect_uri,
            p.state.as_deref(),
            &[("error", code), ("error_description", what)],
        )
    };
    if q.get("error").is_some() {
        return to_client("access_denied", "the company sign-in did not complete");
    }
    let Some(code) = q.get("code") else {
        return to_client("server_error", "the company sign-in sent no code");
    };
    let (verifier, nonce) = idp_secrets(login, q.get("state").unwrap_or_default());
    let user = match login.idp.iss_ok(&login.http, q.get("iss")).await {
        Ok(()) => login.idp.finish(&login.http, code, &verifier, &nonce).await,
        Err(e) => Err(e),
    };
    let user = match user {
        Ok(u) => u,
        Err(e) => {
            tracing::warn!(error = %e, "auth.login: a sign-in at the IdP failed");
            return refused(&format!("The company sign-in could not be verified: {e}."));
        }
    };
    let ours = secret();
    let grant = Code {
        redirect_uri: p.redirect_uri.clone(),
        code_challenge: p.code_challenge.clone(),
        grant: Grant {
            client_id: p.client_id.clone(),
            principal: user.principal,
            groups: user.groups,
            scope: p.scope.clone(),
        },
    };
    if !login.store.put_code(hashed(&ours), grant).await {
        return to_client(
            "temporarily_unavailable",
            "too many sign-ins are finishing: try again",
        );
    }
    tracing::info!(client = %super::checks::shown(&p.client_id), "auth.login: a user signed in");
    back(
        login,
        &p.redirect_uri,
        p.state.as_deref(),
        &[("code", &ours)],
    )
}
