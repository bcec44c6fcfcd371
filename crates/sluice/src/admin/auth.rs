//! Who may use the admin plane, and CSRF.
//!
//! Takes a request's head and the current `[admin]`; gives the [`Operator`] it acts as: an
//! admin key's name (`Authorization: Bearer <key>`, its SHA-256 compared in constant time), a
//! JWT of `[auth.jwt]` whose groups hold `jwt_role`, a console sign-in (the `sluice_admin`
//! cookie, HttpOnly and SameSite=Strict), or `local` on a loopback listener without
//! credentials. Refuses (401 `unauthenticated`) anything else; an MCP principal's key is never
//! an admin key (`config/admin.rs` refuses one listed as both). A request that changes
//! something and is not carried by a bearer credential must carry the sign-in's
//! `X-CSRF-Token` (403 `csrf`): a browser never attaches a bearer on its own, but it does
//! attach a cookie. An `Origin` other than the listener's own is refused (403 `origin`), and on
//! an open loopback listener a `Host` that is not a loopback name (DNS rebinding: 403 `host`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::{header, HeaderMap, Method, StatusCode};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::Operator;
use crate::config::Admin;

/// The console sign-in cookie.
pub const COOKIE: &str = "sluice_admin";
/// The CSRF header.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// Why a request was refused: status, stable code, message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied(pub StatusCode, pub &'static str, pub &'static str);

impl Denied {
    /// The answer to the refused request.
    pub fn answer(self) -> super::Answer {
        super::error(self.0, self.1, self.2)
    }
}

/// What a sign-in was made with: it holds only while that still opens the admin plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// An admin key (its SHA-256): while `[admin]` still lists it.
    Key([u8; 32]),
    /// An operator's JWT: while `jwt_role` is set (and at most [`JWT_SIGN_IN`]).
    Jwt,
    /// An open loopback listener: while it stays open.
    Open,
}

/// The longest a sign-in made with a JWT lasts (the token's own expiry is the IdP's).
pub const JWT_SIGN_IN: Duration = Duration::from_secs(15 * 60);

/// One console sign-in.
struct Session {
    operator: Operator,
    basis: Basis,
    csrf: String,
    until: Instant,
    made: Instant,
}

/// Console sign-ins, keyed by the SHA-256 of the cookie's value (the value itself is not kept).
pub struct Sessions {
    held: Mutex<HashMap<[u8; 32], Session>>,
}

/// A new sign-in: the cookie's value and the CSRF token.
pub struct SignedIn {
    /// The cookie's value.
    pub cookie: String,
    /// The CSRF token.
    pub csrf: String,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            held: Mutex::new(HashMap::new()),
        }
    }
}

impl Sessions {
    /// Signs `operator` in on `basis` for `ttl`; past `max` sign-ins the oldest ends.
    pub fn open(&self, operator: Operator, basis: Basis, ttl: Duration, max: usize) -> SignedIn {
        let ttl = match basis {
            Basis::Jwt => ttl.min(JWT_SIGN_IN),
            Basis::Key(_) | Basis::Open => ttl,
        };
        let (cookie, csrf) = (token(), token());
        let now = Instant::now();
        if let Ok(mut held) = self.held.lock() {
            held.retain(|_, s| s.until > now);
            while held.len() >= max.max(1) {
                let Some(oldest) = held.iter().min_by_key(|(_, s)| s.made).map(|(k, _)| *k) else {
                    break;
                };
                held.remove(&oldest);
            }
            held.insert(
                digest(&cookie),
                Session {
                    operator,
                    basis,
                    csrf: csrf.clone(),
                    until: now + ttl,
                    made: now,
                },
            );
        }
        SignedIn { cookie, csrf }
    }

    /// The operator and CSRF token of the sign-in `cookie`, while it lasts and what it was made
    /// with still opens `admin` (a key removed, a role dropped or credentials added by a reload
    /// end the sign-ins they made).
    pub fn find(&self, cookie: &str, admin: &Admin) -> Option<(Operator, String)> {
        let held = self.held.lock().ok()?;
        let s = held.get(&digest(cookie))?;
        let holds = match s.basis {
            Basis::Key(h) => admin.keys.iter().any(|k| {
                let mut want = [0u8; 32];
                hex_into(&k.sha256, &mut want) && bool::from(want.ct_eq(&h))
            }),
            Basis::Jwt => admin.jwt_role.is_some(),
            Basis::Open => admin.open(),
        };
        (holds && s.until > Instant::now()).then(|| (s.operator.clone(), s.csrf.clone()))
    }

    /// Ends the sign-in `cookie`.
    pub fn close(&self, cookie: &str) {
        if let Ok(mut held) = self.held.lock() {
            held.remove(&digest(cookie));
        }
    }

    /// Sign-ins held now.
    pub fn len(&self) -> usize {
        self.held.lock().map(|h| h.len()).unwrap_or(0)
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn token() -> String {
    let bytes: [u8; 32] = rand::random();
    crate::state::hex(&bytes)
}

fn digest(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

/// How a request proved who it is.
pub enum Proof {
    /// A bearer credential (an admin key or a JWT): no CSRF check needed.
    Bearer(Operator),
    /// A console sign-in: its CSRF token guards every change.
    Session(Operator, String),
    /// An open loopback listener, no sign-in.
    Open,
}

/// Checks `Origin` (and, on an open listener, `Host`) before anything else.
pub fn origin_and_host(admin: &Admin, headers: &HeaderMap) -> Result<(), Denied> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let forwarded = [
        "forwarded",
        "x-forwarded-for",
        "x-forwarded-host",
        "x-real-ip",
    ]
    .iter()
    .any(|h| headers.contains_key(*h));
    if admin.open() && forwarded {
        return Err(Denied(
            StatusCode::FORBIDDEN,
            "host",
            "this admin listener has no credentials and a proxy forwarded this request: behind a proxy, set [[admin.keys]] or jwt_role",
        ));
    }
    if admin.open() && !loopback_host(host) {
        return Err(Denied(
            StatusCode::FORBIDDEN,
            "host",
            "this admin listener has no credentials and answers only loopback host names (localhost, 127.0.0.1, [::1])",
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let own = format!("http://{host}");
        if origin.as_bytes() != own.as_bytes() {
            return Err(Denied(
                StatusCode::FORBIDDEN,
                "origin",
                "requests from another site's pages are refused: use the console served by this listener",
            ));
        }
    }
    Ok(())
}

fn loopback_host(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The operator a bearer credential names, if any is sent.
pub fn bearer(
    admin: &Admin,
    auth: &crate::auth::Authenticator,
    headers: &HeaderMap,
) -> Option<Result<Operator, Denied>> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok();
    let token = value.and_then(|v| {
        let (scheme, rest) = v.split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
    });
    Some(match token {
        Some(t) if !t.is_empty() => credential(admin, auth, t),
        _ => Err(unauthenticated()),
    })
}

/// The operator an admin key or an operator's JWT names.
pub fn credential(
    admin: &Admin,
    auth: &crate::auth::Authenticator,
    token: &str,
) -> Result<Operator, Denied> {
    credential_on(admin, auth, token).map(|(op, _)| op)
}

/// [`credential`], with what the operator proved it with.
pub fn credential_on(
    admin: &Admin,
    auth: &crate::auth::Authenticator,
    token: &str,
) -> Result<(Operator, Basis), Denied> {
    let d = digest(token);
    let mut found = None;
    for k in &admin.keys {
        let mut want = [0u8; 32];
        if hex_into(&k.sha256, &mut want) && bool::from(want.ct_eq(&d)) && found.is_none() {
            found = Some(k.name.clone());
        }
    }
    if let Some(name) = found {
        return Ok((Operator { name, via: "key" }, Basis::Key(d)));
    }
    if let (Some(role), Some(Ok(p))) = (&admin.jwt_role, auth.verify_idp_jwt(token)) {
        if p.groups.iter().any(|g| g == role) {
            let op = Operator {
                name: p.id,
                via: "jwt",
            };
            return Ok((op, Basis::Jwt));
        }
        return Err(Denied(
            StatusCode::FORBIDDEN,
            "not_an_operator",
            "this token is valid but its groups do not hold the admin role ([admin] jwt_role)",
        ));
    }
    Err(unauthenticated())
}

fn hex_into(s: &str, out: &mut [u8; 32]) -> bool {
    if s.len() != 64 {
        return false;
    }
    for (i, o) in out.iter_mut().enumerate() {
        match u8::from_str_radix(&s[2 * i..2 * i + 2], 16) {
            Ok(b) => *o = b,
            Err(_) => return false,
        }
    }
    true
}

/// `401 unauthenticated`.
pub fn unauthenticated() -> Denied {
    Denied(
        StatusCode::UNAUTHORIZED,
        "unauthenticated",
        "send Authorization: Bearer <admin key>, or sign in to the console",
    )
}

/// The sign-in cookie's values sent (another site on this host may have set one of its own
/// under the same name: each is tried), at most 8.
pub fn cookies(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| {
            let (k, v) = kv.trim().split_once('=')?;
            (k == COOKIE && !v.is_empty()).then_some(v)
        })
        .take(8)
}

/// The first sign-in cookie sent that names a live sign-in, with its operator and CSRF token.
pub fn signed_in<'h>(
    sessions: &Sessions,
    admin: &Admin,
    headers: &'h HeaderMap,
) -> Option<(&'h str, Operator, String)> {
    cookies(headers).find_map(|c| sessions.find(c, admin).map(|(op, csrf)| (c, op, csrf)))
}

/// Who the request is from: a bearer credential first, then a sign-in, then an open listener.
pub fn prove(
    admin: &Admin,
    auth: &crate::auth::Authenticator,
    sessions: &Sessions,
    headers: &HeaderMap,
) -> Result<Proof, Denied> {
    if let Some(b) = bearer(admin, auth, headers) {
        return b.map(Proof::Bearer);
    }
    if let Some((_, op, csrf)) = signed_in(sessions, admin, headers) {
        return Ok(Proof::Session(op, csrf));
    }
    match admin.open() {
        true => Ok(Proof::Open),
        false => Err(unauthenticated()),
    }
}

/// The operator a request acts as, with the CSRF check for one that changes something.
pub fn operator(proof: Proof, method: &Method, headers: &HeaderMap) -> Result<Operator, Denied> {
    let changes = !matches!(*method, Method::GET | Method::HEAD);
    match proof {
        Proof::Bearer(op) => Ok(op),
        Proof::Session(op, csrf) => {
            let sent = headers.get(CSRF_HEADER).map(|v| v.as_bytes());
            match !changes || sent.is_some_and(|s| bool::from(s.ct_eq(csrf.as_bytes()))) {
                true => Ok(op),
                false => Err(csrf_refused()),
            }
        }
        Proof::Open if changes => Err(csrf_refused()),
        Proof::Open => Ok(local()),
    }
}

fn csrf_refused() -> Denied {
    Denied(
        StatusCode::FORBIDDEN,
        "csrf",
        "a change needs the X-CSRF-Token of your sign-in (GET /admin/v1/session gives it), or a bearer admin key",
    )
}

/// The operator of an open loopback listener.
pub fn local() -> Operator {
    Operator {
        name: "local".into(),
        via: "loopback",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_host_is_a_loopback_name_or_address_with_or_without_a_port() {
        for h in [
            "localhost:9090",
            "127.0.0.1:1",
            "[::1]:80",
            "127.8.0.1",
            "LOCALHOST",
        ] {
            assert!(loopback_host(h), "{h}");
        }
        for h in ["evil.example:9090", "10.0.0.1:80", "", "localhost.evil:1"] {
            assert!(!loopback_host(h), "{h}");
        }
    }

    fn open_admin() -> Admin {
        Admin {
            listen: "127.0.0.1:9090".parse().expect("addr"),
            keys: Vec::new(),
            jwt_role: None,
            session: Duration::from_secs(60),
            max_sessions: 2,
            recent_audit: 0,
        }
    }

    #[test]
    fn sign_ins_are_bounded_and_the_oldest_ends_first() {
        let (s, a) = (Sessions::default(), open_admin());
        let t = Duration::from_secs(60);
        let first = s.open(local(), Basis::Open, t, 2);
        let b = s.open(local(), Basis::Open, t, 2);
        let c = s.open(local(), Basis::Open, t, 2);
        assert!(s.find(&first.cookie, &a).is_none());
        assert_eq!(s.find(&b.cookie, &a).map(|f| f.1), Some(b.csrf));
        assert!(s.find(&c.cookie, &a).is_some());
        assert_eq!(s.len(), 2);
        s.close(&c.cookie);
        assert!(s.find(&c.cookie, &a).is_none());
    }

    #[test]
    fn a_sign_in_ends_when_what_made_it_no_longer_opens_the_admin_plane() {
        let (s, open) = (Sessions::default(), open_admin());
        let t = Duration::from_secs(60);
        let by_open = s.open(local(), Basis::Open, t, 8);
        let key = crate::config::AdminKey {
            name: "ops".into(),
            sha256: crate::auth::api_keys::hash_key("k1"),
        };
        let keyed = Admin {
            keys: vec![key],
            ..open.clone()
        };
        let by_key = s.open(local(), Basis::Key(digest("k1")), t, 8);
        let by_jwt = s.open(local(), Basis::Jwt, t, 8);
        assert!(s.find(&by_open.cookie, &open).is_some());
        // Credentials added: the open sign-in ends; the key's holds while the key is listed.
        assert!(s.find(&by_open.cookie, &keyed).is_none());
        assert!(s.find(&by_key.cookie, &keyed).is_some());
        assert!(s.find(&by_key.cookie, &open).is_none());
        // A JWT's holds while jwt_role is set.
        assert!(s.find(&by_jwt.cookie, &keyed).is_none());
        let role = Admin {
            jwt_role: Some("ops".into()),
            ..keyed
        };
        assert!(s.find(&by_jwt.cookie, &role).is_some());
    }
}
