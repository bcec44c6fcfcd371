//! `[admin]`: the operator plane's listener, off unless the table is present.
//!
//! Takes the raw table and the MCP listener's address and auth; gives an [`Admin`]: where the
//! admin listener binds (default `127.0.0.1:9090`), its own API keys (hashes), the JWT role
//! that makes a principal an operator, and the console's sign-in bounds. Refuses a listener off
//! loopback without admin credentials, an admin key that is also an MCP principal's key (an
//! MCP client's key must never open the admin plane), a `jwt_role` without `[auth.jwt]`, a key
//! hash that is not 64 hex digits, duplicate or empty key names, the MCP listener's own address,
//! and bounds out of range.

use std::net::SocketAddr;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::limits::ms;
use super::{AuthConfig, Invalid};

/// `[admin]` as written.
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdmin {
    /// Address of the admin listener (default `127.0.0.1:9090`). Off loopback, `keys` or
    /// `jwt_role` is required; on loopback without them, every local caller is the operator
    /// `local`.
    pub(super) listen: Option<String>,
    /// Admin API keys: `[[admin.keys]] name = "alice", sha256 = "…"` (`sluice hash-key KEY`).
    /// Never the same as an `[[auth.api_keys]]` key.
    #[serde(default)]
    pub(super) keys: Vec<RawAdminKey>,
    /// A JWT accepted by `[auth.jwt]` whose groups claim holds this value is an operator
    /// (named by its principal claim).
    pub(super) jwt_role: Option<String>,
    /// How long a console sign-in lasts (default 28800000 = 8 h; 60000 to 86400000).
    pub(super) session_ms: Option<u64>,
    /// Console sign-ins held at once (default 64, 1 to 4096); the oldest ends past it.
    pub(super) max_sessions: Option<usize>,
    /// Audit records kept for `GET /admin/v1/audit` (default 200, 0 to 10000).
    pub(super) recent_audit: Option<usize>,
}

/// `[[admin.keys]]`.
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdminKey {
    /// The operator this key names (audit records and decisions carry it).
    pub(super) name: String,
    /// Hex SHA-256 of the key (`sluice hash-key KEY` prints it).
    pub(super) sha256: String,
}

/// One admin key: the operator's name and the key's SHA-256.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AdminKey {
    /// The operator.
    pub name: String,
    /// Hex SHA-256 of the key.
    pub sha256: String,
}

/// The admin listener, as configured.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Admin {
    /// Where it listens.
    pub listen: SocketAddr,
    /// Its API keys.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<AdminKey>,
    /// The JWT group that makes a principal an operator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwt_role: Option<String>,
    /// A console sign-in's lifetime.
    #[serde(with = "ms", rename = "session_ms")]
    pub session: Duration,
    /// Console sign-ins at once.
    pub max_sessions: usize,
    /// Audit records kept for the API.
    pub recent_audit: usize,
}

impl Admin {
    /// Whether callers need no credentials (a loopback listener with no keys and no role).
    pub fn open(&self) -> bool {
        self.keys.is_empty() && self.jwt_role.is_none()
    }
}

/// Converts `[admin]` (`mcp`: the MCP listener's address, `auth`: its `[auth]`).
pub(super) fn admin(
    raw: Option<RawAdmin>,
    mcp: SocketAddr,
    auth: &AuthConfig,
) -> Result<Option<Admin>, Invalid> {
    let Some(raw) = raw else { return Ok(None) };
    let listen: SocketAddr = match raw.listen.as_deref() {
        None => SocketAddr::from(([127, 0, 0, 1], 9090)),
        Some(s) => s.parse().map_err(|_| {
            Invalid(
                "[admin]: listen is not an address (expected host:port, such as 127.0.0.1:9090)"
                    .into(),
            )
        })?,
    };
    if clash(listen, mcp) {
        return Err(Invalid(format!(
            "[admin]: listen = {listen} is the MCP listener's address; give the admin listener its own port"
        )));
    }
    let keys = keys(raw.keys, auth)?;
    if raw.jwt_role.as_deref().is_some_and(str::is_empty) {
        return Err(Invalid(
            "[admin]: jwt_role is empty; name a group, or drop it".into(),
        ));
    }
    if raw.jwt_role.is_some() && auth.jwt.is_none() {
        return Err(Invalid(
            "[admin]: jwt_role needs [auth.jwt] to verify the tokens; add it or drop jwt_role"
                .into(),
        ));
    }
    if keys.is_empty() && raw.jwt_role.is_none() && !listen.ip().is_loopback() {
        return Err(Invalid(format!(
            "[admin]: listen = {listen} is not loopback but no admin credentials are set: anyone reaching it could approve calls; add [[admin.keys]] or jwt_role, or listen on 127.0.0.1"
        )));
    }
    let session_ms = raw.session_ms.unwrap_or(28_800_000);
    if !(60_000..=86_400_000).contains(&session_ms) {
        return Err(Invalid(format!(
            "[admin]: session_ms = {session_ms} is out of range (60000 to 86400000)"
        )));
    }
    let max_sessions = raw.max_sessions.unwrap_or(64);
    if !(1..=4096).contains(&max_sessions) {
        return Err(Invalid(format!(
            "[admin]: max_sessions = {max_sessions} is out of range (1 to 4096)"
        )));
    }
    let recent_audit = raw.recent_audit.unwrap_or(200);
    if recent_audit > 10_000 {
        return Err(Invalid(format!(
            "[admin]: recent_audit = {recent_audit} is out of range (0 to 10000)"
        )));
    }
    Ok(Some(Admin {
        listen,
        keys,
        jwt_role: raw.jwt_role,
        session: Duration::from_millis(session_ms),
        max_sessions,
        recent_audit,
    }))
}

/// Whether two listeners would take the same port (one of them on every address, or both on
/// the same one).
pub(super) fn clash(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port()
        && a.port() != 0
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

fn keys(raw: Vec<RawAdminKey>, auth: &AuthConfig) -> Result<Vec<AdminKey>, Invalid> {
    let mut out: Vec<AdminKey> = Vec::with_capacity(raw.len());
    for (i, k) in raw.into_iter().enumerate() {
        let at = format!("[[admin.keys]] #{}", i + 1);
        if k.name.trim().is_empty() {
            return Err(Invalid(format!("{at}: name is empty; name the operator")));
        }
        let sha = k.sha256.to_ascii_lowercase();
        if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Invalid(format!(
                "{at}: sha256 is not 64 hex digits (`sluice hash-key KEY` prints it)"
            )));
        }
        if out.iter().any(|o| o.name == k.name) {
            return Err(Invalid(format!(
                "{at}: the name {:?} is taken by another key",
                k.name
            )));
        }
        if out.iter().any(|o| o.sha256 == sha) {
            return Err(Invalid(format!("{at}: the same key is listed twice")));
        }
        if auth
            .api_keys
            .iter()
            .any(|a| a.sha256.eq_ignore_ascii_case(&sha))
        {
            return Err(Invalid(format!(
                "{at}: this key is also an [[auth.api_keys]] key: an MCP client's key must not open the admin plane; make a key of its own"
            )));
        }
        out.push(AdminKey {
            name: k.name,
            sha256: sha,
        });
    }
    Ok(out)
}
