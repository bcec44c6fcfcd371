//! A 2025-11-25 client's session across replicas (`[cluster]`).
//!
//! Takes the session id of a request and the principal; gives the session on whichever replica
//! the request landed: the replica that answered `initialize` writes the session's record
//! (principal, version, capabilities, clientInfo) to Redis for `bridge.client_session_idle_ms`,
//! every request renews it (`GETEX`), and a replica that does not hold the session adopts it
//! from the record. Gives the ids of Sluice's requests to the client with the replica that
//! waits for the answer in them (`sluice-<replica>-<n>`), so an answer POSTed elsewhere is
//! forwarded to that replica. Refuses (`None`, answered 404) an id that is not genuine, another
//! principal's, or whose record is gone (DELETE on any replica ends the session on all);
//! while Redis is unreachable a replica serves the sessions it holds and adopts none.
//! Not shared: the log level and resource subscriptions stay with the replica that was told.

use std::sync::Arc;

use http::HeaderMap;
use serde_json::{json, Map, Value};

use super::LegacySession;
use crate::auth::Principal;
use crate::gateway::Gateway;
use crate::mcp::headers as mh;

fn key(sid: &str) -> String {
    format!("sluice:s:{sid}")
}

/// Writes a new session's record (with `[cluster]`).
pub async fn created(gw: &Gateway, s: &LegacySession) {
    let Some(c) = &gw.governor.cluster else { return };
    let rec = json!({"p": s.principal, "v": s.version, "c": s.caps, "i": s.client_info}).to_string();
    if c.shared.put(&key(&s.id), &rec, gw.cfg.bridge.client_session_idle).await.is_err() {
        c.unavailable("legacy session");
    }
}

/// Removes a session's record: it ends on every replica.
pub async fn ended(gw: &Gateway, sid: &str) {
    let Some(c) = &gw.governor.cluster else { return };
    if c.shared.del(&key(sid)).await.is_err() {
        c.unavailable("legacy session");
    }
}

/// The session a request names, held here or adopted from its record.
pub async fn session(gw: &Gateway, headers: &HeaderMap, principal: &Principal) -> Option<Arc<LegacySession>> {
    let sid = headers.get(mh::SESSION_ID)?.to_str().ok()?.trim();
    let sessions = &gw.legacy_sessions;
    let Some(c) = &gw.governor.cluster else { return sessions.get(sid, principal.id()) };
    if !sessions.is_genuine(sid, principal.id()) {
        return None;
    }
    let local = sessions.get(sid, principal.id());
    let rec = match c.shared.get_renewing(&key(sid), gw.cfg.bridge.client_session_idle).await {
        Ok(Some(rec)) => rec,
        Ok(None) => {
            // Ended on another replica (DELETE), or idle past its time everywhere.
            if local.is_some() {
                sessions.remove(sid);
            }
            return None;
        }
        Err(_) => {
            c.unavailable("legacy session");
            return local;
        }
    };
    if local.is_some() {
        return local;
    }
    let rec: Value = serde_json::from_str(&rec).ok()?;
    if rec.get("p").and_then(Value::as_str) != Some(principal.id()) {
        return None;
    }
    let version = rec.get("v").and_then(Value::as_str).unwrap_or(crate::mcp::version::LEGACY[0]);
    let caps: Map<String, Value> = rec.get("c").and_then(Value::as_object).cloned().unwrap_or_default();
    sessions.adopt(sid, principal.id(), version, caps, rec.get("i").cloned().unwrap_or(Value::Null))
}

/// The id of Sluice's `n`th request to a client: with `[cluster]` it names this replica.
pub fn request_id(gw: &Gateway, n: u64) -> String {
    match &gw.governor.cluster {
        Some(c) => format!("sluice-{}-{n}", c.id()),
        None => format!("sluice-{n}"),
    }
}

/// The replica, other than this one, that waits for the answer with this id (JSON text).
pub fn waiting_elsewhere(gw: &Gateway, id_json: &str) -> Option<String> {
    let c = gw.governor.cluster.as_ref()?;
    let id: String = serde_json::from_str(id_json).ok()?;
    let (replica, n) = id.strip_prefix("sluice-")?.rsplit_once('-')?;
    (n.parse::<u64>().is_ok() && replica != c.id()).then(|| replica.to_owned())
}
