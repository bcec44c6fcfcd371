//! The admin API's read-only views: upstreams, principals, recent audit records, config.
//!
//! Takes the current generation (and, under `[cluster]`, the other replicas' published views:
//! `cluster.rs`); gives JSON of names, states and counts. Refuses nothing; never shows a
//! token, a key, an argument value, a prompt or a result (tool descriptions are the upstream's
//! own public definitions, shown as the console's list of tools).

use std::collections::BTreeMap;
use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Value};

use super::{Answer, Cx};
use crate::route::table::ListKind;
use crate::upstream::Upstream;

/// `GET /admin/v1/upstreams`: this replica's upstreams (and the cluster's, labelled).
pub async fn upstreams(cx: &Cx) -> Answer {
    let mut v = upstreams_of(cx);
    match super::cluster::others(&cx.gw, "upstreams").await {
        Some(Ok(others)) => v["cluster"] = others,
        Some(Err(e)) => v["cluster_error"] = json!(e),
        None => {}
    }
    super::json(StatusCode::OK, &v)
}

/// This replica's upstreams view.
pub fn upstreams_of(cx: &Cx) -> Value {
    let ups: Vec<Value> = cx
        .gw
        .catalog
        .upstreams
        .iter()
        .map(|u| upstream(u))
        .collect();
    json!({"replica": cx.gw.cfg.state.replica, "generation": cx.gw.generation,
        "as_of_ms": crate::state::now_ms(), "upstreams": ups})
}

fn upstream(up: &Arc<Upstream>) -> Value {
    let status = up.status();
    let breakers: Vec<Value> = up
        .balancer
        .endpoints
        .states()
        .into_iter()
        .map(|(url, state)| json!({"url": url, "state": state}))
        .collect();
    let breaker = match breakers.iter().any(|b| b["state"] != "closed") {
        true => "open",
        false => "closed",
    };
    let tools: Vec<Value> = up
        .list(ListKind::Tools)
        .items
        .iter()
        .map(|i| {
            let d: Value = serde_json::from_str(i.raw.get()).unwrap_or(Value::Null);
            json!({"name": i.public, "title": d.get("title"), "description": d.get("description")})
        })
        .collect();
    json!({
        "name": up.name,
        "era": status.wire.name(),
        "transport": up.transport_name(),
        "healthy": status.healthy,
        "probed": status.probed,
        "error": status.error,
        "breaker": breaker,
        "endpoints": breakers,
        "history": up.health.history(),
        "processes": up.stdio.as_ref().map(|s| json!({"running": s.running()})),
        "leases": up.leases.load(std::sync::atomic::Ordering::Relaxed),
        "tools": tools,
    })
}

/// `GET /admin/v1/principals`: each principal Sluice holds something for, by name, with the
/// tokens held for it at `oauth` upstreams (upstream names and expiry, never a token).
pub async fn principals(cx: &Cx) -> Answer {
    let mut v = principals_of(cx);
    if let Ok(held) = cx.gw.rt.vault.list(None, None).await {
        let mut by: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for t in held {
            by.entry(t.principal)
                .or_default()
                .push(json!({"upstream": t.upstream, "expires_ms": t.expires_ms}));
        }
        v["tokens"] = json!(by);
    }
    match super::cluster::others(&cx.gw, "principals").await {
        Some(Ok(others)) => v["cluster"] = others,
        Some(Err(e)) => v["cluster_error"] = json!(e),
        None => {}
    }
    super::json(StatusCode::OK, &v)
}

/// This replica's principals view: parked exchanges and 2025-11-25 sessions per principal,
/// the principals API keys name, and the quotas and loop limits that apply.
pub fn principals_of(cx: &Cx) -> Value {
    let mut by: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for p in cx.gw.auth.key_principals() {
        by.entry(p.id.clone()).or_default();
    }
    for (p, n) in cx.gw.bridge.parked.principals() {
        by.entry(p).or_default().0 = n;
    }
    for s in cx.gw.rt.legacy_sessions.all() {
        by.entry(s.principal.clone()).or_default().1 += 1;
    }
    let mut used: BTreeMap<String, crate::policy::usage::Used> =
        cx.gw.governor.usage.snapshot().into_iter().collect();
    for p in used.keys() {
        by.entry(p.clone()).or_default();
    }
    let list: Vec<Value> = by
        .into_iter()
        .map(|(p, (parked, sessions))| {
            let u = used.remove(&p).unwrap_or_default();
            let left = |c: &crate::policy::usage::Count| c.limit.saturating_sub(c.used);
            let quotas: Vec<Value> = u
                .quotas
                .iter()
                .map(|(name, c)| {
                    json!({"quota": name, "used": c.used, "limit": c.limit,
                    "left": left(c), "window_start_ms": c.window_start_ms})
                })
                .collect();
            let budget = u.sampling.map(|s| {
                let t = u.tokens.unwrap_or_default();
                json!({"sampling": {"used": s.used, "limit": s.limit, "left": left(&s)},
                    "tokens": {"used": t.used, "limit": t.limit, "left": left(&t)},
                    "window_start_ms": s.window_start_ms})
            });
            json!({"principal": p, "parked": parked, "sessions": sessions,
                "quotas": quotas, "budget": budget, "last_ms": u.last_ms})
        })
        .collect();
    let quotas: Vec<Value> = cx
        .gw
        .cfg
        .quotas
        .iter()
        .map(|q| {
            json!({"name": q.name, "calls_per_window": q.calls_per_window,
            "window_ms": q.window.as_millis() as u64})
        })
        .collect();
    json!({"replica": cx.gw.cfg.state.replica, "as_of_ms": crate::state::now_ms(),
        "principals": list, "quotas": quotas,
        "untracked": cx.gw.governor.usage.untracked(),
        "loop_breaker": {"max_identical_calls": cx.gw.cfg.loop_breaker.max_identical_calls,
            "window_ms": cx.gw.cfg.loop_breaker.window.as_millis() as u64}})
}

/// `GET /admin/v1/audit?limit=N`: the last N records (default 50, at most `recent_audit`).
pub fn audit(cx: &Cx, query: Option<&str>) -> Answer {
    let limit = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|kv| kv.strip_prefix("limit="))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(50);
    let records: Vec<Value> = cx
        .gw
        .rt
        .audit
        .recent(limit)
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    super::json(
        StatusCode::OK,
        &json!({"replica": cx.gw.cfg.state.replica, "records": records}),
    )
}

/// `GET /admin/v1/config`: the generation serving and where its config came from.
pub fn config(cx: &Cx) -> Answer {
    let source = cx
        .gw
        .rt
        .live
        .source
        .get()
        .and_then(|s| s.path.as_ref())
        .map(|p| p.display().to_string());
    super::json(
        StatusCode::OK,
        &json!({"replica": cx.gw.cfg.state.replica, "generation": cx.gw.generation,
            "loaded_at_ms": cx.gw.loaded_at_ms, "source": source,
            "upstreams": cx.gw.cfg.upstreams.len(), "policies": cx.gw.cfg.policies}),
    )
}
