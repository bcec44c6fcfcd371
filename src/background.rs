//! Background work tied to the gateway's shutdown: the first probe and the periodic re-probe
//! and refresh, one listen stream per modern upstream, the sweepers of parked exchanges and
//! idle sessions, budget upkeep, and policy reload on SIGHUP.
//!
//! Takes the gateway; gives the task handles. Refuses nothing: a policy file that fails to
//! reload keeps the previous rules and says why.

use std::sync::Arc;

use crate::gateway::Gateway;
use crate::route::table::ListKind;

/// Starts the background work: the first probe, periodic refresh, upstream listen streams.
pub fn spawn(gw: &Arc<Gateway>) -> tokio::task::JoinHandle<()> {
    let gw = gw.clone();
    // The sweepers first: parked exchanges and sessions expire even while a slow first probe runs.
    tokio::spawn(crate::bridge::sweep_sessions(gw.bridge.clone(), gw.shutdown.clone()));
    tokio::spawn(crate::bridge::sweep_parked(gw.bridge.clone(), gw.shutdown.clone()));
    tokio::spawn(async move {
        gw.probe_all().await;
        for up in &gw.upstreams {
            tokio::spawn(crate::listen::upstream_listen(gw.clone(), up.clone()));
        }
        tokio::spawn(reload_on_sighup(gw.clone()));
        tokio::spawn(sweep_budgets(gw.clone()));
        loop {
            tokio::select! {
                _ = gw.shutdown.cancelled() => return,
                _ = tokio::time::sleep(gw.cfg.timeouts.refresh) => {}
            }
            for up in &gw.upstreams {
                let status = gw.probe(up).await;
                if status.healthy {
                    for kind in ListKind::ALL {
                        gw.refresh(up, kind).await;
                    }
                }
            }
        }
    })
}

/// Reloads the rules on every SIGHUP until shutdown.
pub async fn reload_on_sighup(gw: Arc<Gateway>) {
    #[cfg(unix)]
    {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else { return };
        loop {
            tokio::select! {
                _ = gw.shutdown.cancelled() => return,
                _ = hup.recv() => match gw.governor.reload() {
                    Ok(n) => tracing::info!(rules = n, "policies reloaded"),
                    Err(why) => tracing::warn!(reason = %why, "policy reload failed; keeping the previous rules"),
                },
            }
        }
    }
}

/// Forgets idle principals' budget state once per window, until shutdown.
pub async fn sweep_budgets(gw: Arc<Gateway>) {
    let every = gw.cfg.budget.window.max(std::time::Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = gw.shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {
                gw.governor.budgets.retain_recent();
                gw.governor.quotas.retain_recent();
            }
        }
    }
}
