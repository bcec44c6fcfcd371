//! The upstream abstraction: the ways an upstream is spoken to, each with the same operations.
//! This is the one module that matches an upstream's [`Client`] arm (one per wire: Streamable
//! HTTP 2026-07-28, 2025-11-25 sessions, 2024-11-05 HTTP+SSE, stdio with its era); the stages
//! ask it instead of switching on the wire themselves (`tests/architecture.rs` holds that), and
//! every operation names each arm with no catch-all, so a new way to speak to an upstream does
//! not compile until each operation here says what it does on it. Every arm's messages are
//! read as one typed stream (`upstream::client::Messages`, of decoded messages).
//!
//! The table by era (`Client::Streamable` and `Client::Stdio(Wire::Modern)` are the first
//! column; `Client::Sessions`, `Client::Sse` and `Client::Stdio(Wire::Legacy)` the second):
//!
//! | operation | 2026-07-28, stateless | 2025-11-25 sessions |
//! |---|---|---|
//! | probe | `server/discover` (`upstream::discover::probe`) | `initialize` on a pooled session (`link::legacy::probe`) |
//! | request (Sluice's own: list pages) | one POST (`upstream::discover::call`) | on Sluice's own session (`link::legacy::internal_call`) |
//! | call (a client's): the [`Way`] dispatch takes | bytes forwarded, rounds sealed (`dispatch::route::forward`) | parked and resumed, asks as rounds (`bridge::call`, bridge A) |
//! | cache hints | the upstream's own `ttlMs`/`cacheScope` | the configured `cache_ttl_ms`/`cache_scope` |
//! | a 2025-11-25 client's call | on the 2025-11-25 wire when the probe found both and that wire keeps sessions (`Status::legacy`); else as above, its rounds made requests by bridge B | as any call |
//! | list changes | one `subscriptions/listen` stream (`listen::upstream_listen`) | each session's GET stream (`upstream::legacy::changes`, to `catalog::changes::report_changes`) |
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
//! Takes an upstream and a [`Link`] (the client, bridge A's session pool, where sessions report
//! list changes, the response timeout, the configured cache hints); gives the operation's result
//! as its era does it, and for a client's call the [`Way`] it goes (the stage that serves it is
//! dispatch's: this module is below every stage and calls none). Refuses nothing itself: each
//! arm's module refuses what it refuses.

mod legacy;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::upstream::client::HttpClient;
use crate::upstream::legacy::changes::ListChanged;
use crate::upstream::legacy::Pool;
use crate::upstream::{discover, Client, LegacySide, Status, Upstream, Wire};

/// How Sluice speaks to its upstreams, the same for every stage that asks.
#[derive(Clone)]
pub struct Link {
    /// The pooled upstream client.
    pub client: HttpClient,
    /// Bridge A's 2025-11-25 sessions (Sluice's own probes and list pages use them too).
    pub pool: Arc<Pool>,
    /// Where 2025-11-25 sessions report their upstreams' list changes.
    pub changes: ListChanged,
    /// `timeouts.response_ms`: Sluice's own requests on a 2025-11-25 session.
    pub response: Duration,
    /// Each upstream's configured cache hints (`cache_ttl_ms`, `cache_scope`), by name: what a
    /// 2025-11-25 server, which gives none, is taken to say.
    pub cache: HashMap<String, Hints>,
}

/// The cache hints configured for an upstream.
#[derive(Clone, Copy, Debug)]
pub struct Hints {
    /// `cache_ttl_ms`.
    pub ttl_ms: u64,
    /// `cache_scope = "public"`.
    pub public: bool,
}

impl Hints {
    /// Every configured upstream's hints, by name.
    pub fn of(cfg: &crate::config::Config) -> HashMap<String, Hints> {
        cfg.upstreams
            .iter()
            .map(|u| {
                let public = u.cache_scope == crate::config::CacheScope::Public;
                (
                    u.name.clone(),
                    Hints {
                        ttl_ms: u.cache_ttl_ms,
                        public,
                    },
                )
            })
            .collect()
    }
}

/// The way a client's routed call goes, decided on the target's probed era.
#[derive(Clone)]
pub enum Way {
    /// Bytes forwarded to the 2026-07-28 wire, rounds sealed (`dispatch::route::forward`).
    Forward,
    /// On a 2025-11-25 session, parked and resumed (`bridge::call`, bridge A); its session
    /// reports list changes to the sender (nowhere when a listen stream already reports them).
    Sessions(ListChanged),
}

impl Link {
    /// The way a client's routed call (`tools/call`, `prompts/get`, `resources/read`,
    /// `completion/complete`) goes; `legacy_client`: the client speaks 2025-11-25.
    pub fn way(&self, up: &Upstream, status: &Status, legacy_client: bool) -> Way {
        // A dual-era upstream that keeps 2025-11-25 sessions serves a 2025-11-25 client on
        // that wire: its tools that ask mid-call (the 2025 way) work as they would direct.
        // One whose 2025-11-25 side is stateless could ask that client nothing there: the
        // client stays on the modern wire, where bridge B turns its rounds into requests.
        let dual = legacy_client && status.legacy == LegacySide::Sessions;
        match up.client(status) {
            Client::Streamable | Client::Stdio(Wire::Modern) if dual => {
                crate::audit::note(|r| r.upstream_era = Some(Wire::Legacy.name()));
                // Its listen stream already reports its list changes: the GET streams need not.
                Way::Sessions(ListChanged::nowhere())
            }
            Client::Streamable | Client::Stdio(Wire::Modern) => Way::Forward,
            Client::Sessions | Client::Sse | Client::Stdio(Wire::Legacy) => {
                Way::Sessions(self.changes.clone())
            }
        }
    }
}

/// Whether the upstream's list pages carry its own cache hints (a 2025-11-25 server gives
/// none: the configured ones stand in).
pub fn gives_cache_hints(up: &Upstream, status: &Status) -> bool {
    match up.client(status) {
        Client::Streamable | Client::Stdio(Wire::Modern) => true,
        Client::Sessions | Client::Sse | Client::Stdio(Wire::Legacy) => false,
    }
}

/// Whether Sluice keeps a `subscriptions/listen` stream open to it (a 2025-11-25 server
/// reports list changes on its sessions' GET streams, or its one stream, instead).
pub fn listens(up: &Upstream, status: &Status) -> bool {
    match up.client(status) {
        Client::Streamable | Client::Stdio(Wire::Modern) => true,
        Client::Sessions | Client::Sse | Client::Stdio(Wire::Legacy) => false,
    }
}

impl Link {
    /// One request Sluice makes for itself (a list page) in the upstream's own era.
    pub async fn request(
        &self,
        up: &Arc<Upstream>,
        method: &crate::mcp::method::Method,
        extra: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Box<serde_json::value::RawValue>, String> {
        match up.client(&up.status()) {
            Client::Streamable | Client::Stdio(Wire::Modern) => {
                discover::call(&self.client, up, method, extra).await
            }
            Client::Sessions | Client::Sse | Client::Stdio(Wire::Legacy) => {
                legacy::internal_call(self, up, method, extra).await
            }
        }
    }

    /// The 2025-11-25 probe; with `transport = "auto"`, when it fails, whether the URL is a
    /// 2024-11-05 HTTP+SSE endpoint (a `GET` there opens an event stream whose first event names
    /// an endpoint on its origin), and if so the probe again, on that transport.
    async fn legacy_or_sse(&self, up: &Arc<Upstream>) -> Status {
        let s = legacy::probe(self, up).await;
        if s.healthy || !up.detects_sse {
            return s;
        }
        match crate::upstream::legacy::sse::connect(&self.client, up).await {
            Ok(_) => {
                // The probe's own stream is dropped here: its session is the next probe's.
                tracing::info!(upstream = %up.name, "a 2024-11-05 HTTP+SSE server: its GET stream named an endpoint");
                up.found_sse();
                legacy::probe(self, up).await
            }
            Err(_) => s,
        }
    }

    /// Probes one upstream: `server/discover`, and `initialize` when the answer is not modern
    /// (or the upstream is configured as 2025-11-25). The probe decides the [`Wire`].
    pub async fn probe(&self, up: &Arc<Upstream>) -> Status {
        // A 2024-11-05 HTTP+SSE server is spoken to on the 2025-11-25 wire, one session per GET
        // stream; a stdio server found 2025-11-25 once stays so (the verdict is the command's).
        let before = up.status();
        // (found so by a handshake that succeeded: a failed one proves nothing).
        let known = before.discovered.is_some();
        let configured_legacy = up.era == crate::config::Era::Legacy;
        let stdio_modern = match up.client(&before) {
            Client::Sse => return legacy::probe(self, up).await,
            Client::Stdio(Wire::Legacy) if known || configured_legacy => {
                return legacy::probe(self, up).await
            }
            Client::Stdio(_) if configured_legacy => return legacy::probe(self, up).await,
            Client::Stdio(wire) => known && wire == Wire::Modern,
            Client::Streamable | Client::Sessions => false,
        };
        if up.era == crate::config::Era::Legacy {
            return self.legacy_or_sse(up).await;
        }
        let carried = match before.wire {
            Wire::Modern => (before.legacy, before.legacy_checked),
            Wire::Legacy => (LegacySide::None, None),
        };
        match discover::probe(&self.client, up, carried).await {
            discover::Probe::Modern(mut s) if s.healthy && up.era == crate::config::Era::Auto => {
                // Does it speak 2025-11-25 too? Asked again every LEGACY_RECHECK: a redeploy can
                // change it; meanwhile the last answer stands (discover::probe keeps it).
                let due = s
                    .legacy_checked
                    .is_none_or(|t| t.elapsed() >= crate::upstream::LEGACY_RECHECK);
                if due {
                    s.legacy = legacy::handshakes(self, up, s.legacy).await;
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
                    return legacy::probe(self, up).await;
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
