//! The upstream abstraction: the ways an upstream is spoken to, each with the same operations.
//! This is the one module that reads an upstream's probed [`Wire`]; the stages ask it instead
//! of switching on the era themselves (`tests/architecture.rs` holds that), so a new way to
//! speak to an upstream is a new arm here and in the modules it names, not a hunt through
//! the stages.
//!
//! | operation | `Wire::Modern` (2026-07-28, stateless) | `Wire::Legacy` (2025-11-25 sessions) |
//! |---|---|---|
//! | probe | `server/discover` (`upstream::discover::probe`) | `initialize` on a pooled session (`catalog::legacy::probe`) |
//! | request (Sluice's own: list pages) | one POST (`upstream::discover::call`) | on Sluice's own session (`catalog::legacy::internal_call`) |
//! | call (a client's) | bytes forwarded, rounds sealed (`dispatch::route::forward`) | parked and resumed, asks as rounds (`bridge::call`, bridge A) |
//! | cache hints | the upstream's own `ttlMs`/`cacheScope` | the configured `cache_ttl_ms`/`cache_scope` |
//! | a 2025-11-25 client's call | on the 2025-11-25 wire when the probe found both and that wire keeps sessions (`Status::legacy`); else as above, its rounds made requests by bridge B | as any call |
//! | list changes | one `subscriptions/listen` stream (`listen::upstream_listen`) | each session's GET stream (`upstream::legacy::changes`, to `catalog::legacy::report_changes`) |
//! | cancel | the connection closed | `notifications/cancelled` on the session (`bridge::exchange`) |
//! | shut down | nothing held | idle sessions ended with DELETE (`bridge::shutdown`) |
//!
//! A 2025-11-25 stdio upstream (`upstream::stdio`) is `Wire::Legacy` with a process for each
//! session in place of an `Mcp-Session-Id`, and a 2024-11-05 HTTP+SSE one (`transport = "sse"`)
//! with a GET stream for each: `upstream::legacy::session` hides the difference from every
//! operation above (the one stream stands in for both the POST's answer and the GET stream). A
//! 2026-07-28 stdio upstream is `Wire::Modern` on one process for every request
//! (`upstream::stdio::shared`, behind `Upstream::post_modern`): the probe asks it
//! `server/discover` first, and a verdict of 2025-11-25 ends the process it asked.
//!
//! Takes an upstream (and, for a call, the request context and its target); gives the
//! operation's result as its era does it. Refuses nothing itself: each arm's module refuses
//! what it refuses.

use std::sync::Arc;

use crate::ctx::target::Target;
use crate::ctx::RequestCtx;
use crate::error::GatewayError;
use crate::gateway::Generation;
use crate::respond::Reply;
use crate::upstream::legacy::changes::ListChanged;
use crate::upstream::{discover, LegacySide, Status, Upstream, Wire};

/// A client's routed call (`tools/call`, `prompts/get`, `resources/read`,
/// `completion/complete`), served as the target's era serves it.
pub async fn call(
    gw: &Arc<Generation>,
    ctx: &RequestCtx<'_>,
    t: &Target,
) -> Result<Reply, GatewayError> {
    let status = t.up.status();
    match status.wire {
        // A dual-era upstream that keeps 2025-11-25 sessions serves a 2025-11-25 client on that
        // wire: its tools that ask mid-call (the 2025 way) work as they would direct. One whose
        // 2025-11-25 side is stateless could ask that client nothing there: the client stays on
        // the modern wire below, where bridge B turns its rounds into real requests.
        Wire::Modern if ctx.legacy_client && status.legacy == LegacySide::Sessions => {
            crate::audit::note(|r| r.upstream_era = Some(Wire::Legacy.name()));
            // Its listen stream already reports its list changes: the sessions' GET streams need not.
            Box::pin(crate::bridge::call(
                &gw.bridge,
                ctx,
                t,
                ListChanged::nowhere(),
            ))
            .await
        }
        Wire::Modern => crate::dispatch::route::forward(gw, ctx, t).await,
        Wire::Legacy => {
            Box::pin(crate::bridge::call(
                &gw.bridge,
                ctx,
                t,
                gw.rt.changes.clone(),
            ))
            .await
        }
    }
}

/// Whether the upstream's list pages carry its own cache hints (a 2025-11-25 server gives
/// none: the configured ones stand in).
pub fn gives_cache_hints(status: &Status) -> bool {
    match status.wire {
        Wire::Modern => true,
        Wire::Legacy => false,
    }
}

/// Whether Sluice keeps a `subscriptions/listen` stream open to it (a 2025-11-25 server
/// reports list changes on its sessions' GET streams instead).
pub fn listens(status: &Status) -> bool {
    match status.wire {
        Wire::Modern => true,
        Wire::Legacy => false,
    }
}

impl Generation {
    /// One request Sluice makes for itself (a list page) in the upstream's own era.
    pub async fn request(
        self: &Arc<Self>,
        up: &Arc<Upstream>,
        method: &crate::mcp::method::Method,
        extra: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Box<serde_json::value::RawValue>, String> {
        match up.status().wire {
            Wire::Modern => discover::call(&self.rt.client, up, method, extra).await,
            Wire::Legacy => crate::catalog::legacy::internal_call(self, up, method, extra).await,
        }
    }

    /// At shutdown: parked exchanges cancelled upstream, idle legacy sessions ended (DELETE),
    /// then every stdio process ended and waited for (stdin closed, SIGTERM, SIGKILL).
    pub async fn close_upstreams(&self) {
        // A reload's retired upstreams still draining end with the rest.
        let draining: Vec<Arc<Upstream>> = self
            .rt
            .live
            .retired()
            .iter()
            .flat_map(|g| {
                g.upstreams
                    .iter()
                    .filter(|u| u.retired.is_cancelled())
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .collect();
        let stdio: Vec<_> = self
            .upstreams
            .iter()
            .chain(&draining)
            .filter_map(|u| u.stdio.clone())
            .collect();
        // No process starts once shutdown began (a probe or a lease racing it included).
        for spec in &stdio {
            spec.end_all_now();
        }
        crate::bridge::shutdown(&self.bridge).await;
        // Every upstream's processes end together, not one upstream after another.
        for spec in &stdio {
            spec.end_all_now();
        }
        for spec in &stdio {
            spec.wait_ended().await;
        }
    }

    /// The 2025-11-25 probe; with `transport = "auto"`, when it fails, whether the URL is a
    /// 2024-11-05 HTTP+SSE endpoint (a `GET` there opens an event stream whose first event names
    /// an endpoint on its origin), and if so the probe again, on that transport.
    async fn legacy_or_sse(self: &Arc<Self>, up: &Arc<Upstream>) -> Status {
        let s = crate::catalog::legacy::probe(self, up).await;
        if s.healthy || !up.detects_sse {
            return s;
        }
        match crate::upstream::legacy::sse::connect(&self.rt.client, up).await {
            Ok(_) => {
                // The probe's own stream is dropped here: its session is the next probe's.
                tracing::info!(upstream = %up.name, "a 2024-11-05 HTTP+SSE server: its GET stream named an endpoint");
                up.found_sse();
                crate::catalog::legacy::probe(self, up).await
            }
            Err(_) => s,
        }
    }

    /// Probes one upstream: `server/discover`, and `initialize` when the answer is not modern
    /// (or the upstream is configured as 2025-11-25). The probe decides the [`Wire`].
    pub async fn probe(self: &Arc<Self>, up: &Arc<Upstream>) -> Status {
        // A 2024-11-05 HTTP+SSE server is spoken to on the 2025-11-25 wire, one session per GET
        // stream; a stdio server found 2025-11-25 once stays so (the verdict is the command's).
        let before = up.status();
        // (found so by a handshake that succeeded: a failed one proves nothing).
        let stdio_legacy =
            up.stdio.is_some() && before.wire == Wire::Legacy && before.discovered.is_some();
        let stdio_modern =
            up.stdio.is_some() && before.wire == Wire::Modern && before.discovered.is_some();
        if up.is_sse()
            || stdio_legacy
            || (up.stdio.is_some() && up.era == crate::config::Era::Legacy)
        {
            return crate::catalog::legacy::probe(self, up).await;
        }
        if up.era == crate::config::Era::Legacy {
            return self.legacy_or_sse(up).await;
        }
        let carried = match before.wire {
            Wire::Modern => (before.legacy, before.legacy_checked),
            Wire::Legacy => (LegacySide::None, None),
        };
        match discover::probe(&self.rt.client, up, carried).await {
            discover::Probe::Modern(mut s) if s.healthy && up.era == crate::config::Era::Auto => {
                // Does it speak 2025-11-25 too? Asked again every LEGACY_RECHECK: a redeploy can
                // change it; meanwhile the last answer stands (discover::probe keeps it).
                let due = s
                    .legacy_checked
                    .is_none_or(|t| t.elapsed() >= crate::upstream::LEGACY_RECHECK);
                if due {
                    s.legacy = crate::catalog::legacy::handshakes(self, up, s.legacy).await;
                    s.legacy_checked = Some(std::time::Instant::now());
                    up.set_status(s.clone());
                }
                s
            }
            discover::Probe::Modern(s) | discover::Probe::Failed(s) => s,
            discover::Probe::NotModern(why) if stdio_modern => {
                // Found 2026-07-28 before: an odd answer now is a failure, not another era.
                up.mark_failed(&why);
                up.status().as_ref().clone()
            }
            discover::Probe::NotModern(why) if up.era == crate::config::Era::Auto => {
                // At every probe of a 2025-11-25 server: not a line to repeat at info each refresh.
                tracing::debug!(upstream = %up.name, reason = %crate::escape::Escaped(&why), "not a 2026-07-28 server; trying 2025-11-25");
                if let Some(spec) = &up.stdio {
                    // It was sent a request before `initialize`: its sessions get fresh processes.
                    crate::upstream::stdio::shared::retire(
                        spec,
                        "it is a 2025-11-25 server: the process that was probed is ended",
                    )
                    .await;
                    return crate::catalog::legacy::probe(self, up).await;
                }
                self.legacy_or_sse(up).await
            }
            discover::Probe::NotModern(why) => {
                up.mark_failed(&format!("{why}; it is configured as era = \"2026-07-28\""));
                up.status().as_ref().clone()
            }
        }
    }
}
