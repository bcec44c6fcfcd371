//! Background work tied to the gateway's shutdown: the first probe and the periodic re-probe
//! and refresh of the healthy upstreams (a down one has its own re-prober, `catalog::reprobe`), one listen stream per modern upstream, the
//! list changes 2025-11-25 sessions announce (`catalog::changes::report_changes`), the sweepers of parked exchanges and
//! idle sessions, budget upkeep, and the config reload on SIGHUP.
//!
//! Takes the gateway; gives the task handles. Each task works on the generation current when
//! it looks (`Generation::latest`), so a reload needs none of them restarted. Refuses nothing: a
//! config that fails to reload keeps the previous one serving and says why.

use std::sync::Arc;

use crate::gateway::{Generation, Live};

/// Starts the background work: the first probe, periodic refresh, upstream listen streams.
pub fn spawn(gw: &Arc<Generation>) -> tokio::task::JoinHandle<()> {
    let gw = gw.clone();
    if let Some(rx) = gw.rt.live.take_changes() {
        let live: Arc<dyn crate::catalog::Current> = gw.rt.live.clone();
        tokio::spawn(crate::catalog::changes::report_changes(
            Arc::downgrade(&live),
            rx,
        ));
    }
    // Operators' revocations of sign-ins made through other replicas.
    if let (Some(c), Some(_)) = (gw.governor.cluster.clone(), gw.cfg.auth.login.as_ref()) {
        tokio::spawn(crate::login::revocations::follow(
            c,
            gw.rt.revoked.clone(),
            gw.rt.shutdown.clone(),
        ));
    }
    // The sweepers first: parked exchanges and sessions expire even while a slow first probe runs.
    tokio::spawn(crate::bridge::sweep_sessions(
        gw.bridge.clone(),
        gw.rt.shutdown.clone(),
    ));
    tokio::spawn(crate::bridge::sweep_parked(
        gw.bridge.clone(),
        gw.rt.shutdown.clone(),
    ));
    tokio::spawn(async move {
        gw.catalog.probe_all().await;
        // An `oauth` or `token_exchange` upstream's placeholder has no stream (its users' upstreams
        // have none yet).
        for up in gw
            .catalog
            .upstreams
            .iter()
            .filter(|u| u.per_user.is_none() && u.exchange.is_none())
        {
            tokio::spawn(crate::listen::upstream_listen(gw.reach.clone(), up.clone()));
        }
        let (live, shutdown) = (gw.rt.live.clone(), gw.rt.shutdown.clone());
        drop(gw);
        tokio::spawn(reload_on_sighup(live.clone(), shutdown.clone()));
        tokio::spawn(sweep_budgets(live.clone(), shutdown.clone()));
        tokio::spawn(crate::bridge_b::shared::rewrite_on_recovery(
            live.clone(),
            shutdown.clone(),
        ));
        loop {
            let Some(pause) = live.get().map(|gw| gw.cfg.timeouts.refresh) else {
                return;
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(pause) => {}
            }
            // The generation current after the pause: one a reload made meanwhile included.
            let Some(gw) = live.get() else { return };
            // A down upstream is its re-prober's (catalog/reprobe.rs): probed sooner than this.
            for up in gw.catalog.upstreams.iter().filter(|u| u.status().healthy) {
                gw.catalog.check(up).await;
            }
        }
    })
}

/// Reloads the config on every SIGHUP until shutdown (see `reload.rs`).
pub async fn reload_on_sighup(live: Arc<Live>, shutdown: tokio_util::sync::CancellationToken) {
    #[cfg(unix)]
    {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            return;
        };
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = hup.recv() => {}
            }
            let Some(gw) = live.get() else { return };
            match crate::reload::from_source(&gw).await {
                Ok(a) => tracing::info!(
                    generation = a.generation,
                    added = ?a.added,
                    removed = ?a.removed,
                    replaced = ?a.replaced,
                    budgets_restarted = a.budgets_restarted,
                    "config reloaded"
                ),
                // The reason passes through the one redaction `sluice check` uses (config errors
                // already do; a preflight error may quote a URL).
                Err(why) => {
                    tracing::warn!(reason = %crate::config::redact_text(&why), "config reload failed; the previous config keeps serving")
                }
            }
        }
    }
}

/// Forgets idle principals' budget state once per window, until shutdown.
pub async fn sweep_budgets(live: Arc<Live>, shutdown: tokio_util::sync::CancellationToken) {
    loop {
        let Some(window) = live.get().map(|gw| gw.cfg.budget.window) else {
            return;
        };
        let every = window.max(std::time::Duration::from_millis(100));
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let Some(gw) = live.get() else { return };
        gw.governor.budgets.retain_recent();
        gw.governor.quotas.retain_recent();
        gw.governor.loops.retain_recent();
        let longest = gw
            .cfg
            .quotas
            .iter()
            .map(|q| q.window)
            .chain(std::iter::once(gw.cfg.budget.window))
            .max()
            .unwrap_or(window);
        gw.governor
            .usage
            .retain_recent(2 * longest.as_millis() as u64);
    }
}
