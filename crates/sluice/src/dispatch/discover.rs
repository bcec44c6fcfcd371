//! `server/discover`, answered by Sluice from its upstreams' discoveries.
//!
//! Takes the healthy upstreams' capabilities, instructions and hints; gives a `DiscoverResult`
//! whose capabilities are exactly the families Sluice serves (with `listChanged` and
//! `subscribe` because Sluice's listen streams serve them), less the families `hide` rules
//! emptied for the principal; [`first_probes`] waits for the upstreams not probed yet.
//! Refuses nothing.

use serde_json::{json, Map, Value};

use crate::catalog::Reach;
use crate::mcp::version;

/// Waits for the first probe of every upstream `principal` may reach that was never probed
/// (at most `timeouts.connect_ms` in all: a server still starting is then reported as it is),
/// so a client's first `server/discover` or `initialize` right after Sluice starts sees the
/// families its upstreams serve, not an empty set. Costs nothing once they all were probed.
pub async fn first_probes(reach: &Reach, principal: &crate::auth::Principal) {
    let fresh: Vec<_> = reach
        .reachable(principal)
        .filter(|u| !u.status().probed)
        .collect();
    if !fresh.is_empty() {
        let within = reach.catalog.timeouts.connect;
        futures_util::future::join_all(
            fresh
                .iter()
                .map(|up| crate::catalog::reprobe::revive(up, within)),
        )
        .await;
    }
}

/// The discover result JSON.
pub fn result(reach: &Reach, server_info: &Value, principal: &crate::auth::Principal) -> String {
    let mut caps = Map::new();
    let mut ttl: Option<u64> = None;
    let mut public = true;
    let mut instructions = Vec::new();
    let healthy: Vec<_> = reach
        .reachable(principal)
        .filter(|u| u.status().healthy)
        .collect();
    for up in &healthy {
        let status = up.status();
        let Some(d) = status.discovered.as_ref() else {
            continue;
        };
        ttl = Some(ttl.map_or(d.ttl_ms, |t| t.min(d.ttl_ms)));
        public &= d.public;
        if let Some(i) = d
            .instructions
            .as_ref()
            .filter(|_| !all_hidden(reach, principal, up))
        {
            instructions.push(if healthy.len() > 1 {
                format!("[{}] {i}", up.name)
            } else {
                i.clone()
            });
        }
        for (cap, value) in &d.capabilities {
            match cap.as_str() {
                "tools" | "prompts" => {
                    caps.insert(cap.clone(), json!({"listChanged": true}));
                }
                "resources" => {
                    let sub = value
                        .get("subscribe")
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
                        || caps
                            .get("resources")
                            .and_then(|r| r.get("subscribe"))
                            .and_then(Value::as_bool)
                            .unwrap_or(false);
                    let mut r = json!({"listChanged": true});
                    if sub {
                        r["subscribe"] = true.into();
                    }
                    caps.insert(cap.clone(), r);
                }
                "completions" | "logging" => {
                    caps.insert(cap.clone(), json!({}));
                }
                _ => {} // extensions and experimental features are not federated
            }
        }
    }
    if reach.governor.has_visibility() {
        drop_hidden_families(reach, principal, &healthy, &mut caps);
    }
    let mut out = json!({
        "resultType": "complete",
        "supportedVersions": version::SUPPORTED_MODERN,
        "capabilities": caps,
        "ttlMs": ttl.unwrap_or(0),
        "cacheScope": if public && !healthy.is_empty() && !reach.auth.scoped() && !reach.governor.has_visibility() { "public" } else { "private" },
        "_meta": {crate::mcp::META_SERVER_INFO: server_info},
    });
    if !instructions.is_empty() {
        out["instructions"] = instructions.join("\n\n").into();
    }
    out.to_string()
}

/// With visibility rules loaded, leaves out every family of which the principal sees no item
/// (whether hiding emptied it or it was empty: the two must look the same).
fn drop_hidden_families(
    reach: &Reach,
    principal: &crate::auth::Principal,
    healthy: &[&std::sync::Arc<crate::upstream::Upstream>],
    caps: &mut Map<String, Value>,
) {
    use crate::route::table::ListKind;
    for (family, kinds) in [
        ("tools", &[ListKind::Tools][..]),
        ("prompts", &[ListKind::Prompts]),
        ("resources", &[ListKind::Resources, ListKind::Templates]),
    ] {
        if !healthy
            .iter()
            .any(|up| sees_any(reach, principal, up, kinds))
        {
            caps.remove(family);
        }
    }
}

/// Whether the principal sees any item of `up`'s `kinds` lists.
fn sees_any(
    reach: &Reach,
    principal: &crate::auth::Principal,
    up: &crate::upstream::Upstream,
    kinds: &[crate::route::table::ListKind],
) -> bool {
    let viewer = crate::policy::visibility::Viewer::of(principal);
    kinds.iter().any(|kind| {
        let table = up.list(*kind);
        reach
            .governor
            .shown(&viewer, &up.name, *kind, &table)
            .map_or(!table.items.is_empty(), |s| s.iter().any(|v| *v))
    })
}

/// Whether `hide` rules hide every item the upstream lists from the principal (then its
/// instructions, which may name them, are left out too).
fn all_hidden(
    reach: &Reach,
    principal: &crate::auth::Principal,
    up: &crate::upstream::Upstream,
) -> bool {
    use crate::route::table::ListKind;
    let listed = ListKind::ALL.iter().any(|k| !up.list(*k).items.is_empty());
    reach.governor.has_visibility() && listed && !sees_any(reach, principal, up, &ListKind::ALL)
}
