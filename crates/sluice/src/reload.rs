//! Reloading the whole config without a restart: on SIGHUP (`background.rs`), or
//! [`Running::reload`](crate::Running::reload) in tests.
//!
//! Takes a freshly loaded config; gives the next generation serving, or an error that names
//! what was wrong while the previous config keeps serving (counted in
//! `sluice_config_reloads_total{result="failed"}`). The new config is checked as `sluice check`
//! checks one ([`preflight`](crate::gateway::preflight)), then against the serving one: a
//! setting that only takes effect at a restart ([`RESTART_ONLY`]) must not have changed.
//! Upstreams added or changed are probed before the swap, so they take traffic with their
//! tables fetched; upstreams removed or replaced are drained (see [`drain`]). Requests in
//! flight finish on the generation they started on; new ones take the new one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::config::Config;
use crate::gateway::Generation;
use crate::listen::Change;
use crate::upstream::Upstream;

/// Settings read once, at startup (the listener, the sealing keys, the stores and channels
/// sized by them); a reload that changes one is refused, naming it.
pub const RESTART_ONLY: &[&str] = &[
    "listen",
    "path",
    "state",
    "bridge",
    "audit",
    "telemetry",
    "cluster",
    "admin.listen",
    "admin.max_sessions",
    "admin.recent_audit",
    "limits.max_connections",
    "limits.max_connections_per_source",
    "limits.max_in_flight",
    "limits.max_header_bytes",
    "limits.max_response_bytes",
    "limits.max_sse_event_bytes",
    "limits.max_streams",
    "limits.max_streams_per_principal",
    "limits.max_resource_subscriptions",
    "timeouts.header_read_ms",
    "timeouts.idle_connection_ms",
    "timeouts.request_ms",
    "timeouts.connect_ms",
    "timeouts.response_ms",
    "timeouts.stream_idle_ms",
    "timeouts.shutdown_ms",
];

/// What a reload changed.
#[derive(Debug, Default)]
pub struct Applied {
    /// The generation now serving.
    pub generation: u64,
    /// Upstreams new in this config.
    pub added: Vec<String>,
    /// Upstreams no longer configured (drained).
    pub removed: Vec<String>,
    /// Upstreams whose settings changed (a new one took over; the old one drained).
    pub replaced: Vec<String>,
    /// Whether budget and quota bookkeeping started again (their settings changed).
    pub budgets_restarted: bool,
    /// Whether `[auth]` changed (or reads secrets from outside the file): client streams opened
    /// before the reload were ended.
    pub auth_changed: bool,
}

/// Reads the config again from where `sluice serve` read it and applies it.
pub async fn from_source(gw: &Arc<Generation>) -> Result<Applied, String> {
    let Some(src) = gw.rt.live.source.get() else {
        return Err(
            "this gateway was not started from a config source (`sluice serve`): nothing to reload"
                .into(),
        );
    };
    match src.load() {
        Ok(cfg) => apply(gw, cfg).await,
        Err(e) => {
            gw.rt.metrics.reloaded(None);
            let data =
                json!({"ok": false, "generation": gw.latest().generation, "error": e.to_string()});
            gw.rt.events.publish(crate::events::Kind::Reload, data);
            Err(e.to_string())
        }
    }
}

/// Applies `cfg` as the next generation, or changes nothing and says why.
pub async fn apply(gw: &Arc<Generation>, cfg: Config) -> Result<Applied, String> {
    let _one = gw.rt.live.reloading.lock().await;
    let old = gw.latest();
    let result = swap(&old, cfg).await;
    old.rt
        .metrics
        .reloaded(result.as_ref().ok().map(|a| a.generation));
    let data = match &result {
        Ok(a) => json!({"ok": true, "generation": a.generation, "added": a.added,
            "removed": a.removed, "replaced": a.replaced}),
        Err(e) => json!({"ok": false, "generation": old.generation, "error": e}),
    };
    old.rt.events.publish(crate::events::Kind::Reload, data);
    result
}

/// What `sluice check` and a reload both refuse of a config on its own: an empty upstream list,
/// and everything [`preflight`](crate::gateway::preflight) refuses. (A reload also compares it
/// with the config serving: [`restart_only_changes`].)
pub fn check(cfg: &Config) -> Result<(), String> {
    not_empty(cfg)?;
    crate::gateway::preflight(cfg).map(drop)
}

fn not_empty(cfg: &Config) -> Result<(), String> {
    match cfg.upstreams.is_empty() {
        true => {
            Err("no upstreams: add [[upstream]] to the config or pass --upstream NAME=URL".into())
        }
        false => Ok(()),
    }
}

async fn swap(old: &Arc<Generation>, mut cfg: Config) -> Result<Applied, String> {
    // The rest of `check` is `Generation::next`'s preflight.
    not_empty(&cfg)?;
    // Port 0 asks for any port: the one bound is that.
    if cfg.listen.port() == 0 && cfg.listen.ip() == old.cfg.listen.ip() {
        cfg.listen = old.cfg.listen;
    }
    if let Some(key) = restart_only_changes(&old.cfg, &cfg).first() {
        return Err(format!("{key} changed: it takes effect only at a restart; restore it (or restart Sluice) and reload again"));
    }
    if let Some(host) = http2_switched(old, &cfg) {
        return Err(format!("http2 changed for {host}: the HTTP version of a host and port is fixed from its first use to a restart (exchanges under way keep theirs); restore it (or restart Sluice) and reload again"));
    }
    // From here the client speaks HTTP/2 to the new config's `http2` hosts too (added only: a
    // host already spoken to keeps its version, so nothing here needs undoing).
    let next = old.next(cfg)?;
    let (fresh, gone) = (not_in(&next, old), not_in(old, &next));
    // Probed (and their lists fetched) before they take traffic; an unhealthy one is kept
    // unhealthy and probed again on the refresh, as at startup.
    next.catalog.probe_each(&fresh).await;
    if old.rt.shutdown.is_cancelled() {
        end_processes(&fresh).await;
        return Err("Sluice is shutting down: the reload was not applied".into());
    }
    // Draining before the swap: a round's retry just after it finds its upstream.
    old.rt.live.retiring(old);
    for up in &gone {
        up.retired.cancel();
    }
    if !next.rt.live.set(&next) {
        end_processes(&fresh).await;
        return Err("Sluice is shutting down: the reload was not applied".into());
    }
    // Streams opened under credentials that may no longer hold end (a no-op when `[auth]`
    // stayed the same: the token is shared).
    let auth_changed = !crate::gateway::same_auth(&old.cfg.auth, &next.cfg.auth);
    if auth_changed {
        old.revoked.cancel();
    }
    for up in fresh
        .iter()
        .filter(|u| u.per_user.is_none() && u.exchange.is_none())
    {
        tokio::spawn(crate::listen::upstream_listen(
            next.reach.clone(),
            up.clone(),
        ));
    }
    announce(old, &next, &fresh, &gone);
    let applied = Applied {
        generation: next.generation,
        added: fresh
            .iter()
            .filter(|u| old.upstream(&u.name).is_none())
            .map(|u| u.name.clone())
            .collect(),
        removed: gone
            .iter()
            .filter(|u| next.upstream(&u.name).is_none())
            .map(|u| u.name.clone())
            .collect(),
        replaced: fresh
            .iter()
            .filter(|u| old.upstream(&u.name).is_some())
            .map(|u| u.name.clone())
            .collect(),
        budgets_restarted: next.governor.restarted_budgets(&old.governor),
        auth_changed,
    };
    tokio::spawn(drain(old.clone(), gone));
    Ok(applied)
}

/// The upstreams of `a` that `b` does not hold (a new one of the same name included).
fn not_in(a: &Generation, b: &Generation) -> Vec<Arc<Upstream>> {
    let held = a.catalog.upstreams.iter();
    held.filter(|u| !kept(b, u)).cloned().collect()
}

/// Whether `gw` holds this very upstream (not only one of its name).
fn kept(gw: &Generation, up: &Arc<Upstream>) -> bool {
    gw.upstream(&up.name).is_some_and(|o| Arc::ptr_eq(o, up))
}

/// The restart-only settings that differ between the serving config and `new`.
/// A host and port (credentials left out) that `new` gives another HTTP version than the one
/// the process recorded for it (every host an upstream used since the start, removed ones too).
fn http2_switched(old: &Generation, new: &Config) -> Option<String> {
    new.http_versions()
        .into_iter()
        .find(|(a, h2)| old.rt.client.version_of(a).is_some_and(|was| was != *h2))
        .map(|(a, _)| format!("{}:{}", a.host(), a.port_u16().unwrap_or(80)))
}

pub fn restart_only_changes(old: &Config, new: &Config) -> Vec<&'static str> {
    let (a, b) = (flat(old), flat(new));
    let mut keys: Vec<&'static str> = RESTART_ONLY
        .iter()
        .copied()
        .filter(|k| a.pointer(&pointer(k)) != b.pointer(&pointer(k)))
        .collect();
    // Secrets print redacted: the sealing keys and the OTLP endpoint are compared as read.
    for (key, differs) in [
        ("state", old.state.keys != new.state.keys),
        ("telemetry", old.telemetry != new.telemetry),
        ("cluster", old.cluster != new.cluster),
    ] {
        if differs && !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

fn flat(cfg: &Config) -> serde_json::Value {
    json!({
        "listen": cfg.listen.to_string(),
        "path": cfg.path,
        "state": cfg.state,
        "bridge": cfg.bridge,
        "audit": cfg.audit,
        "telemetry": cfg.telemetry,
        "cluster": cfg.cluster,
        "admin": cfg.admin.as_ref().map(|a| json!({
            "listen": a.listen.to_string(), "max_sessions": a.max_sessions,
            "recent_audit": a.recent_audit})),
        "limits": cfg.limits,
        "timeouts": cfg.timeouts,
    })
}

fn pointer(key: &str) -> String {
    format!("/{}", key.replace('.', "/"))
}

/// Tells listen streams of the lists the reload changed: every list of an upstream added,
/// removed or replaced, and of every upstream when names are spelled differently now (the
/// prefix or separator changed) or visibility rules are loaded (each stream is then told only
/// if its own view changed). A stream that takes the change moves to the new generation.
fn announce(old: &Generation, next: &Generation, fresh: &[Arc<Upstream>], gone: &[Arc<Upstream>]) {
    let renamed =
        old.cfg.prefixed() != next.cfg.prefixed() || old.cfg.separator != next.cfg.separator;
    let everyone = renamed || next.governor.has_visibility() || old.governor.has_visibility();
    let mut names: Vec<&str> = fresh.iter().chain(gone).map(|u| u.name.as_str()).collect();
    if everyone {
        names.extend(next.catalog.upstreams.iter().map(|u| u.name.as_str()));
    }
    names.sort_unstable();
    names.dedup();
    let now = Instant::now();
    for name in names {
        for change in [Change::Tools, Change::Prompts, Change::Resources] {
            next.rt.hub.publish(name, change, now);
        }
    }
}

/// Ends upstreams a reload removed or replaced: at once, their stdio spares, their listen
/// streams, their idle sessions, and the pooling of the rest. The generation `old` that held them stays reachable
/// meanwhile (`Live::retired`: a retry of a round on one of them is still routed to it) for the
/// longest a call or a round handed to a client may last (`timeouts.request_ms`,
/// `bridge.park_ms`), and after that while one is in use (`Upstream::in_use`: a session leased,
/// or a round state sealed for it not yet expired; each round is bounded by `bridge.park_ms`
/// and the round cap); then their stdio processes end.
pub async fn drain(old: Arc<Generation>, gone: Vec<Arc<Upstream>>) {
    // Spares were started with the old settings and serve no one: they end first.
    for spare in gone.iter().filter_map(|u| u.stdio.as_ref()) {
        spare.retire_spares();
    }
    for up in &gone {
        old.bridge.pool.retire(up).await;
    }
    let shutdown = old.rt.shutdown.clone();
    let leased = || gone.iter().any(|u| u.in_use(crate::state::now_ms()));
    let mut wait = old.cfg.timeouts.request.max(old.cfg.bridge.park);
    loop {
        tokio::select! {
            // Left listed as draining: shutdown ends their processes with the rest.
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        if !leased() {
            break;
        }
        wait = Duration::from_millis(100);
    }
    old.rt.live.retired_done(&old);
    drop(old);
    end_processes(&gone).await;
}

/// Ends the stdio processes of `ups`.
async fn end_processes(ups: &[Arc<Upstream>]) {
    for up in ups {
        if let Some(spec) = &up.stdio {
            spec.end_all_now();
            spec.wait_ended().await;
        }
    }
}
