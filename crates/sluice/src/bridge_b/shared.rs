//! A 2025-11-25 client's session across replicas (`[cluster]`).
//!
//! Takes the session id of a request and the principal; gives the session on whichever replica
//! the request landed: the replica that answered `initialize` writes the session's record
//! (principal, version, capabilities: at most [`MAX_RECORD`] bytes, clientInfo cut to its name
//! and version) to Redis for `bridge.client_session_idle_ms`, with at most
//! `bridge.max_client_sessions_per_principal` records per principal across replicas (one more
//! ends the principal's oldest); every request renews it, and a replica that does not hold the
//! session adopts it from the record. DELETE leaves a tombstone for the idle time, so a replica
//! that still holds the session ends it; a record lost otherwise (Redis restarted, or written
//! while it was down) is written again by a replica that holds the session. Gives the ids of Sluice's requests to the client with the replica that
//! waits for the answer in them (`sluice-<replica>-<n>`), so an answer POSTed elsewhere is
//! forwarded to that replica. Refuses (`None`, answered 404) an id that is not genuine, another
//! principal's, or whose record is gone (DELETE on any replica ends the session on all);
//! while Redis is unreachable a replica serves the sessions it holds and adopts none.
//! Not shared: a 2024-11-05 HTTP+SSE session (its stream is on one replica: `sse.rs`); the log
//! level and resource subscriptions stay with the replica that was told.

use std::sync::Arc;

use http::HeaderMap;
use serde_json::{json, Map, Value};

use super::LegacySession;

/// The most bytes of a session's record: capabilities past it keep only the three asks'.
pub const MAX_RECORD: usize = 4096;
/// What a record becomes when its session ends (DELETE, or evicted by the principal's cap).
const ENDED: &str = "ended";

/// A session's record, every string in it bounded.
fn record(s: &LegacySession) -> String {
    let cut = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(|t| t.chars().take(128).collect::<String>())
    };
    let info = json!({"name": cut(s.client_info().get("name")), "version": cut(s.client_info().get("version"))});
    let full = json!({"p": s.principal, "v": s.version(), "c": s.caps(), "i": info}).to_string();
    if full.len() <= MAX_RECORD {
        return full;
    }
    let caps: Map<String, Value> = s
        .caps()
        .iter()
        .filter(|(k, _)| matches!(k.as_str(), "sampling" | "elicitation" | "roots"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let kept = json!({"p": s.principal, "v": s.version(), "c": caps, "i": info}).to_string();
    if kept.len() <= MAX_RECORD {
        kept
    } else {
        json!({"p": s.principal, "v": s.version(), "c": {}, "i": info}).to_string()
    }
}
use crate::auth::Principal;
use crate::gateway::Generation;
use crate::mcp::headers as mh;

fn key(sid: &str) -> String {
    format!("sluice:s:{sid}")
}

/// Writes a new session's record (with `[cluster]`).
pub async fn created(gw: &Generation, s: &LegacySession) {
    let Some(c) = &gw.governor.cluster else {
        return;
    };
    let (idle, cap) = (
        gw.cfg.bridge.client_session_idle,
        gw.cfg.bridge.max_client_sessions_per_principal,
    );
    if c.shared
        .open_session(&s.id, &s.principal, &record(s), idle, cap)
        .await
        .is_err()
    {
        c.unavailable("legacy session");
    }
}

/// Writes back the record of a session this replica holds, when Redis lost it; never over a
/// tombstone (a session ended elsewhere stays ended).
async fn restore(gw: &Generation, s: &LegacySession) {
    let Some(c) = &gw.governor.cluster else {
        return;
    };
    if c.shared
        .restore_session(
            &s.id,
            &s.principal,
            &record(s),
            gw.cfg.bridge.client_session_idle,
        )
        .await
        .is_err()
    {
        c.unavailable("legacy session");
    }
}

/// Removes a session's record: it ends on every replica.
pub async fn ended(gw: &Generation, sid: &str) {
    let Some(c) = &gw.governor.cluster else {
        return;
    };
    if c.shared
        .put(&key(sid), ENDED, gw.cfg.bridge.client_session_idle)
        .await
        .is_err()
    {
        c.unavailable("legacy session");
    }
}

/// The session a request names, held here or adopted from its record.
pub async fn session(
    gw: &Generation,
    headers: &HeaderMap,
    principal: &Principal,
) -> Option<Arc<LegacySession>> {
    let sid = headers.get(mh::SESSION_ID)?.to_str().ok()?.trim();
    let sessions = &gw.rt.legacy_sessions;
    // A 2024-11-05 HTTP+SSE session is reached only through its own transport (`sse.rs`): its
    // answers go on its stream, which a Streamable HTTP request does not read.
    let Some(c) = &gw.governor.cluster else {
        return sessions.get(sid, principal.id()).filter(|s| !s.is_sse());
    };
    if !sessions.is_genuine(sid, principal.id()) {
        return None;
    }
    let idle = gw.cfg.bridge.client_session_idle;
    if let Some(local) = sessions.get(sid, principal.id()) {
        if local.is_sse() {
            return None;
        }
        // Held here: renewed without reading the record back.
        return match c.shared.renew(sid, principal.id(), ENDED, idle).await {
            Ok(crate::cluster::shared::Renewed::Live) => Some(local),
            Ok(crate::cluster::shared::Renewed::Ended) => {
                sessions.remove(sid); // ended on another replica
                None
            }
            Ok(crate::cluster::shared::Renewed::Missing) => {
                restore(gw, &local).await; // Redis lost it (restarted, or down at initialize)
                Some(local)
            }
            Err(_) => {
                c.unavailable("legacy session");
                Some(local)
            }
        };
    }
    let rec = match c.shared.get_renewing(&key(sid), idle).await {
        Ok(Some(rec)) if rec != ENDED => rec,
        Ok(_) => return None,
        Err(_) => {
            c.unavailable("legacy session");
            return None;
        }
    };
    let rec: Value = serde_json::from_str(&rec).ok()?;
    if rec.get("p").and_then(Value::as_str) != Some(principal.id()) {
        return None;
    }
    let version = rec
        .get("v")
        .and_then(Value::as_str)
        .unwrap_or(crate::mcp::version::LEGACY[0]);
    let caps: Map<String, Value> = rec
        .get("c")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    sessions.adopt(
        sid,
        principal.id(),
        version,
        caps,
        rec.get("i").cloned().unwrap_or(Value::Null),
    )
}

/// Writes again the record of every session this replica holds whenever Redis comes back or
/// started again empty (`Cluster::recovered`), until `stop`: a session opened while Redis was
/// away, or whose record a restart lost, is served by every replica again.
pub async fn rewrite_on_recovery(
    live: Arc<crate::gateway::Live>,
    stop: tokio_util::sync::CancellationToken,
) {
    let Some(c) = live.get().and_then(|gw| gw.governor.cluster.clone()) else {
        return;
    };
    let mut rx = c.recovered.subscribe();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            changed = rx.changed() => if changed.is_err() { return },
        }
        let Some(gw) = live.get() else { return };
        // A 2024-11-05 HTTP+SSE session lives with its stream on this replica: it has no record.
        for s in gw
            .rt
            .legacy_sessions
            .all()
            .into_iter()
            .filter(|s| !s.is_sse())
        {
            restore(&gw, &s).await;
        }
    }
}

/// The id of Sluice's `n`th request to a client: with `[cluster]` it names this replica.
pub fn request_id(gw: &Generation, n: u64) -> String {
    match &gw.governor.cluster {
        Some(c) => format!("sluice-{}-{n}", c.id()),
        None => format!("sluice-{n}"),
    }
}

/// The replica named in the id (JSON text) of a client's answer to one of Sluice's requests
/// (`"sluice-<replica>-<n>"`), when the id is Sluice's: a JSON string, `<n>` a number and
/// `<replica>` meeting `cluster.id`'s grammar. Anything else a client sent is not Sluice's id
/// and names no replica (never a Redis key, a lookup or a log field).
pub fn answer_replica(id_json: &str) -> Option<crate::cluster::replica::ReplicaId> {
    let id: String = serde_json::from_str(id_json).ok()?;
    let (replica, n) = id.strip_prefix("sluice-")?.rsplit_once('-')?;
    n.parse::<u64>().ok()?;
    crate::cluster::replica::ReplicaId::parse(replica)
}

/// The replica, other than this one, that waits for the answer with this id (JSON text).
pub fn waiting_elsewhere(
    gw: &Generation,
    id_json: &str,
) -> Option<crate::cluster::replica::ReplicaId> {
    let c = gw.governor.cluster.as_ref()?;
    answer_replica(id_json).filter(|r| r.as_str() != c.id())
}

#[cfg(test)]
mod tests {
    use super::answer_replica;

    #[test]
    fn an_answer_id_names_a_replica_only_when_it_is_sluices() {
        let named = |id: &str| {
            answer_replica(&serde_json::Value::String(id.into()).to_string())
                .map(|r| r.as_str().to_owned())
        };
        assert_eq!(named("sluice-r1-7").as_deref(), Some("r1"));
        assert_eq!(
            named("sluice-sluice-2-15").as_deref(),
            Some("sluice-2"),
            "an id with dashes"
        );
        for bad in [
            "sluice-r9\nERROR sluice: principal=admin granted root-1",
            "sluice-r9\n-1",
            "sluice-r9\r\u{1b}[2K-1",
            "sluice-r 9-1",
            "sluice--1",
            "sluice-r1-x",
            "sluice-r1-",
            "r1-1",
            "sluice-1",
            &format!("sluice-{}-1", "a".repeat(65)),
        ] {
            assert_eq!(named(bad), None, "{bad:?}");
        }
        assert_eq!(answer_replica("7"), None, "a number is not Sluice's id");
        assert_eq!(answer_replica("\"sluice-r1-7"), None, "not JSON");
    }
}
