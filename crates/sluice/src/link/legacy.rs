//! 2025-11-25 upstreams as Sluice speaks to them for itself: the probe (`initialize` on its own
//! session), the check of a modern upstream's 2025-11-25 side, and its own requests (list
//! pages) on that session.
//!
//! Takes a [`Link`] (the client, the session pool, where sessions report list changes) and an
//! upstream; gives its status and the results of Sluice's own requests. Refuses nothing; a
//! failed handshake marks the upstream unhealthy with a reason naming it.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::Link;
use crate::mcp::method::Method;
use crate::upstream::client::UpstreamError;
use crate::upstream::legacy;
use crate::upstream::legacy::changes::ListChanged;
use crate::upstream::{Discovered, LegacySide, Status, Upstream, Wire};

/// The principal of Sluice's own sessions (lists, probes); never a client's.
const INTERNAL: &str = crate::auth::INTERNAL_PRINCIPAL;

/// A lease of Sluice's own session with `up`, whose list changes go to the catalog. It serves no
/// call: asks on its GET stream are refused there.
async fn own_session(link: &Link, up: &Arc<Upstream>) -> Result<legacy::Lease, UpstreamError> {
    let caps = legacy::all_capabilities();
    let lease = link
        .pool
        .lease(up, INTERNAL, &caps, link.changes.clone())
        .await?;
    lease.session.set_leased(false);
    Ok(lease)
}

/// Probes a handshake-era upstream with `initialize` on Sluice's own session.
pub(super) async fn probe(link: &Link, up: &Arc<Upstream>) -> Status {
    match own_session(link, up).await {
        Ok(lease) => {
            let init = &lease.session.init;
            let mut caps = init
                .get("capabilities")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            caps.retain(|k, _| {
                matches!(
                    k.as_str(),
                    "tools" | "prompts" | "resources" | "completions" | "logging"
                )
            });
            let cache = link.cache.get(&up.name);
            let discovered = Discovered {
                capabilities: caps,
                instructions: init
                    .get("instructions")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                ttl_ms: cache.map_or(0, |c| c.ttl_ms),
                public: cache.is_some_and(|c| c.public),
            };
            let s = Status {
                probed: true,
                healthy: true,
                discovered: Some(discovered),
                error: None,
                wire: Wire::Legacy,
                legacy: LegacySide::None,
                legacy_checked: None,
            };
            up.set_status(s.clone());
            s
        }
        // Every process or session is in use by calls: the server is busy, not down. What the
        // last probe found stands.
        Err(UpstreamError::Full(_)) if up.status().probed && up.status().healthy => {
            tracing::debug!(upstream = %up.name, "probe skipped: every process of the upstream is in use");
            up.status().as_ref().clone()
        }
        Err(e) => {
            let why = format!(
                "{e} (tried 2025-11-25 initialize after a non-modern server/discover answer)"
            );
            // Told once, as a change of health, when the whole probe ended (a 2024-11-05 stream
            // may yet be found at the URL): `Upstream::report_health`.
            tracing::debug!(upstream = %up.name, reason = %crate::escape::Escaped(&why), "2025-11-25 handshake failed");
            let s = Status {
                probed: true,
                healthy: false,
                discovered: None,
                error: Some(why),
                wire: Wire::Legacy,
                legacy: LegacySide::None,
                legacy_checked: None,
            };
            up.set_status(s.clone());
            s
        }
    }
}

/// Whether a modern upstream also completes a 2025-11-25 `initialize` (a dual-era server), and
/// whether that side keeps sessions: an answer with an `Mcp-Session-Id` (or, over stdio, the
/// process itself) is [`LegacySide::Sessions`]; one without is [`LegacySide::Stateless`]. The
/// session is closed at once: Sluice keeps no legacy session of its own to a modern upstream.
/// `was`: the last answer (a line is logged only when the answer changes, not on each recheck).
pub(super) async fn handshakes(link: &Link, up: &Arc<Upstream>, was: LegacySide) -> LegacySide {
    let quiet = ListChanged::nowhere();
    match link
        .pool
        .lease(up, INTERNAL, &legacy::all_capabilities(), quiet)
        .await
    {
        Ok(lease) => {
            lease.session.set_leased(false);
            lease
                .session
                .broken
                .store(true, std::sync::atomic::Ordering::Release);
            // The handshake must have settled on a 2025-11-25 (or older) version, said in its
            // answer (an answer without one is not taken for a handshake).
            let said = lease
                .session
                .init
                .get("protocolVersion")
                .and_then(Value::as_str);
            if !said.is_some_and(crate::mcp::version::is_legacy) {
                return LegacySide::None;
            }
            let side = if lease.session.sid.is_some() || up.stdio.is_some() {
                LegacySide::Sessions
            } else {
                LegacySide::Stateless
            };
            if side != was {
                match side {
                    LegacySide::Sessions => {
                        tracing::info!(upstream = %up.name, "the upstream speaks 2025-11-25 too: 2025-11-25 clients are served on that wire")
                    }
                    _ => tracing::info!(
                        upstream = %up.name,
                        "the upstream speaks 2025-11-25 too, but gives no Mcp-Session-Id (stateless: it cannot ask a 2025-11-25 client anything): 2025-11-25 clients are served on its 2026-07-28 wire"
                    ),
                }
            }
            side
        }
        // Every process in use: no news of its 2025-11-25 side; the last answer stands.
        Err(UpstreamError::Full(_)) => was,
        Err(_) => LegacySide::None,
    }
}

/// One request on Sluice's own session with a legacy upstream (lists); gives its `result`.
pub(super) async fn internal_call(
    link: &Link,
    up: &Arc<Upstream>,
    method: &Method,
    extra: Map<String, Value>,
) -> Result<Box<serde_json::value::RawValue>, String> {
    let lease = own_session(link, up).await.map_err(|e| e.to_string())?;
    let id = lease.session.next_id();
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method.as_str(), "params": extra});
    let bytes = lease
        .session
        .request(
            &link.client,
            id,
            Bytes::from(body.to_string()),
            link.response,
        )
        .await
        .map_err(|e| e.to_string())?;
    crate::upstream::discover::result_of(&bytes, &up.name, method)
}
