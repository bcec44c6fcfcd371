//! Upstreams: the servers behind Sluice and the clients that speak to them, below every
//! stage (this module names no stage: not the gateway, policy, dispatch or the bridges).
//!
//! Takes the configured upstreams; gives, per upstream, its probed [`Status`] (health,
//! discovery and its [`Wire`]), its federation tables and the pooled clients to reach it: the
//! HTTP client (`client`), the modern probe (`discover`), the legacy session pool (`legacy`)
//! and the bytes-bounded queue of a parked exchange (`queue`). Refuses nothing here: failures
//! are recorded in [`Status`] and surfaced by the callers with the upstream's name.
//!
//! The operations on an upstream differ by its [`Client`] arm (one per wire: Streamable HTTP
//! 2026-07-28, 2025-11-25 sessions, 2024-11-05 HTTP+SSE, stdio); `link/` is the one place that
//! matches on it and tabulates each operation's module per arm. Every arm's messages come as
//! one typed stream (`client::Messages`, of decoded [`message::Message`]s).

pub mod authorized;
pub mod balance;
pub mod challenges;
pub mod client;
pub mod discover;
pub mod endpoints;
pub mod error;
pub mod exchanged;
pub mod health;
pub mod legacy;
pub mod lines;
pub mod message;
pub mod oauth;
pub mod pending;
pub mod per_user;
pub mod queue;
pub mod stdio;
pub mod stream;
pub mod tls;
pub mod wire;

pub use wire::{Client, LegacySide, Wire, LEGACY_RECHECK};

use std::sync::{Arc, RwLock};

use http::{HeaderMap, HeaderName, HeaderValue, Uri};
use serde_json::{Map, Value};

use crate::config::{Era, UpstreamConfig};
use crate::route::table::{ListKind, ListTable};

/// What Sluice learned from an upstream's `server/discover`.
#[derive(Debug, Clone, Default)]
pub struct Discovered {
    /// Its server capabilities.
    pub capabilities: Map<String, Value>,
    /// Its instructions, if any.
    pub instructions: Option<String>,
    /// Its discovery `ttlMs`.
    pub ttl_ms: u64,
    /// Whether it said `cacheScope: "public"`.
    pub public: bool,
}

/// Health and discovery of one upstream.
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// Whether a probe has completed (successfully or not).
    pub probed: bool,
    /// Whether the last probe or call succeeded.
    pub healthy: bool,
    /// The last discovery, when healthy once.
    pub discovered: Option<Discovered>,
    /// Why it is unhealthy (content-free: names and error kinds only).
    pub error: Option<String>,
    /// What it speaks, as probed.
    pub wire: Wire,
    /// What a `Wire::Modern` upstream's 2025-11-25 side is (a dual-era server, such as the
    /// Python or TypeScript SDK 2.x's), as its `initialize` answered: `link/` serves
    /// 2025-11-25 clients on that wire only when it keeps sessions.
    pub legacy: LegacySide,
    /// When `legacy` was last asked (it is asked again after [`LEGACY_RECHECK`]).
    pub legacy_checked: Option<std::time::Instant>,
}

impl Status {
    /// Whether the upstream completed a 2025-11-25 `initialize` too (statelessly or not).
    pub fn legacy_too(&self) -> bool {
        self.legacy != LegacySide::None
    }
}

/// What obtains `cfg`'s `Authorization` header, by its `[upstream.auth]` mode: Sluice's own
/// token (`client_credentials`), its users' (`oauth`), or its principals' exchanged ones
/// (`token_exchange`).
fn credentials(
    cfg: &UpstreamConfig,
    uri: &Uri,
) -> (
    Option<oauth::Auth>,
    Option<Arc<per_user::PerUser>>,
    Option<Arc<exchanged::PerPrincipal>>,
) {
    let mode = cfg.auth.as_ref().map(|a| a.mode);
    let auth = cfg
        .auth
        .clone()
        .filter(|_| mode == Some(crate::config::AuthMode::ClientCredentials))
        .map(|a| oauth::Auth::new(&cfg.name, uri.clone(), a));
    let per_user = cfg
        .auth
        .clone()
        .filter(|_| mode == Some(crate::config::AuthMode::Oauth))
        .map(|a| {
            let redirect = a.redirect_uri.clone().unwrap_or_default();
            let users = oauth::user::Users::new(&cfg.name, uri.clone(), a, redirect);
            Arc::new(per_user::PerUser::new(users))
        });
    let exchange = cfg
        .auth
        .clone()
        .filter(|_| mode == Some(crate::config::AuthMode::TokenExchange))
        .map(|a| oauth::exchange::Exchange::new(&cfg.name, uri.clone(), a))
        .map(|x| Arc::new(exchanged::PerPrincipal::new(x)));
    (auth, per_user, exchange)
}

/// The next [`Upstream::instance`].
static NEXT_INSTANCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// One upstream MCP server as Sluice speaks to it.
pub struct Upstream {
    /// Its configured name.
    pub name: String,
    /// Its endpoint (its first, with several `urls`: a 2025-11-25 upstream's sessions all go
    /// there).
    pub uri: Uri,
    /// Its own `Host` header value.
    pub host: HeaderValue,
    /// Its endpoints with their breakers, its `max_in_flight` and retry budget (2026-07-28
    /// requests go through it; empty for a stdio upstream).
    pub balancer: balance::Balancer,
    /// Headers it is configured to receive (its credentials).
    pub extra: HeaderMap,
    /// Sluice's own token for it (`[upstream.auth] mode = "client_credentials"`).
    pub auth: Option<oauth::Auth>,
    /// Its users and their own upstreams (`mode = "oauth"`: this one is their placeholder).
    pub per_user: Option<Arc<per_user::PerUser>>,
    /// The principal this upstream speaks for, and where their token is (one of a
    /// `mode = "oauth"` upstream's per-user upstreams).
    pub signed_in: Option<(Arc<oauth::user::Users>, String)>,
    /// Its principals and their own upstreams (`mode = "token_exchange"`: this one is their
    /// placeholder).
    pub exchange: Option<Arc<exchanged::PerPrincipal>>,
    /// The principal this upstream speaks for, and where their exchanged token is (one of a
    /// `mode = "token_exchange"` upstream's per-principal upstreams).
    pub exchanged_for: Option<(Arc<oauth::exchange::Exchange>, String)>,
    /// Every modern request's headers but its own two (`client::modern_base`), built once.
    pub modern_base: HeaderMap,
    /// Its configured era.
    pub era: Era,
    /// How to start it, when it is a stdio server (its `uri` is then a placeholder no request
    /// is sent to: `link/` speaks to it through its processes).
    pub stdio: Option<Arc<stdio::Spec>>,
    /// Whether it is a 2024-11-05 HTTP+SSE server (`transport = "sse"`, or found so by
    /// `transport = "auto"`): each session its own GET stream.
    sse: std::sync::atomic::AtomicBool,
    /// Whether a failed probe may find it is a 2024-11-05 HTTP+SSE server (`transport = "auto"`).
    pub detects_sse: bool,
    status: RwLock<Arc<Status>>,
    lists: [RwLock<Arc<ListTable>>; 4],
    /// Serializes refreshes of each list so a burst of misses costs one fetch.
    pub(crate) refresh_lock: [tokio::sync::Mutex<()>; 4],
    /// Refreshes a lookup miss may cause, per table: a burst of 5, then 1 per second, so
    /// clients asking for names that do not exist cannot make Sluice refetch lists at will.
    pub(crate) miss_refresh: [governor::DefaultDirectRateLimiter; 4],
    /// What it was built from: a reload keeps this upstream (its sessions, tables and breakers)
    /// when the new config says the same, and builds a new one otherwise.
    config: UpstreamConfig,
    /// A number no other upstream built by this process has: pooled sessions are keyed on it,
    /// so a session of a replaced upstream is never leased for its successor.
    pub instance: u64,
    /// Cancelled when a reload removes or replaces it: its listen stream ends, its idle
    /// sessions close, and a session given back is closed instead of pooled.
    pub retired: tokio_util::sync::CancellationToken,
    /// Sessions of it leased now (calls and parked exchanges in progress): a drain waits for 0.
    pub leases: std::sync::atomic::AtomicUsize,
    /// When the last round state sealed for it expires (ms since the epoch): a drain keeps it
    /// reachable until then, so a round handed to a client can still be answered.
    held_until_ms: std::sync::atomic::AtomicU64,
    /// Its health as told to operators, and its re-prober's wake-up.
    pub health: health::Health,
}

impl Upstream {
    /// Whether it is spoken to as a 2024-11-05 HTTP+SSE server.
    pub fn is_sse(&self) -> bool {
        self.sse.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The wire it is spoken to on, for a probed `status` (its own: [`Upstream::status`]).
    pub fn client(&self, status: &Status) -> Client {
        Client::of(self.stdio.is_some(), self.is_sse(), status.wire)
    }

    /// The name of the transport it is spoken to on now (`streamable-http`, `sessions`,
    /// `sse-2024-11-05`, `stdio`), for operators.
    pub fn transport_name(&self) -> &'static str {
        self.client(&self.status()).name()
    }

    /// Notes that its URL is a 2024-11-05 HTTP+SSE endpoint (found by a probe; kept).
    pub fn found_sse(&self) {
        self.sse.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Builds an upstream from its config; reads its bearer token from the environment. A
    /// stdio upstream's stdout lines are bounded by `max_line` bytes, each write to it by
    /// `write_timeout`, the end of each of its processes by `grace`.
    pub fn new(
        cfg: &UpstreamConfig,
        max_line: usize,
        write_timeout: std::time::Duration,
        grace: std::time::Duration,
    ) -> Result<Self, String> {
        if let Some(s) = &cfg.stdio {
            stdio::preflight(&cfg.name, s)?;
        }
        let stdio = cfg.stdio.as_ref().map(|s| {
            Arc::new(stdio::Spec::new(
                &cfg.name,
                s.clone(),
                max_line,
                write_timeout,
                grace,
            ))
        });
        let uri: Uri = match stdio {
            Some(_) => Uri::from_static("http://stdio.invalid/"),
            None => cfg
                .url
                .parse()
                .map_err(|e| format!("upstream '{}': bad url: {e}", cfg.name))?,
        };
        let host = host_of(&cfg.name, &uri)?;
        let extra = extra_headers(cfg)?;
        let endpoints = endpoints_of(cfg, &extra)?;
        let balancer =
            balance::Balancer::new(endpoints::Endpoints::new(endpoints, &cfg.resilience));
        let modern_base = client::modern_base(&host, &extra);
        let (auth, per_user, exchange) = credentials(cfg, &uri);
        Ok(Upstream {
            name: cfg.name.clone(),
            uri,
            host,
            balancer,
            extra,
            auth,
            per_user,
            signed_in: None,
            exchange,
            exchanged_for: None,
            modern_base,
            era: cfg.era,
            stdio,
            sse: (cfg.transport == crate::config::Transport::Sse).into(),
            detects_sse: cfg.transport == crate::config::Transport::Auto
                && cfg.era != Era::Modern
                && cfg.stdio.is_none(),
            status: RwLock::new(Arc::new(Status::default())),
            lists: std::array::from_fn(|_| RwLock::new(Arc::new(ListTable::empty()))),
            refresh_lock: std::array::from_fn(|_| tokio::sync::Mutex::new(())),
            miss_refresh: std::array::from_fn(|_| {
                let quota = governor::Quota::per_second(std::num::NonZeroU32::MIN)
                    .allow_burst(std::num::NonZeroU32::new(5).unwrap_or(std::num::NonZeroU32::MIN));
                governor::RateLimiter::direct(quota)
            }),
            config: cfg.clone(),
            instance: NEXT_INSTANCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            retired: tokio_util::sync::CancellationToken::new(),
            leases: std::sync::atomic::AtomicUsize::new(0),
            held_until_ms: std::sync::atomic::AtomicU64::new(0),
            health: health::Health::default(),
        })
    }

    /// Notes a round state sealed for it, valid until `expires_ms`.
    pub fn hold_until(&self, expires_ms: u64) {
        self.held_until_ms
            .fetch_max(expires_ms, std::sync::atomic::Ordering::AcqRel);
    }

    /// Whether a call or a round of it may still come back: a session leased, or a round state
    /// sealed for it not yet expired at `now_ms`.
    pub fn in_use(&self, now_ms: u64) -> bool {
        use std::sync::atomic::Ordering::Acquire;
        self.leases.load(Acquire) > 0 || self.held_until_ms.load(Acquire) >= now_ms
    }

    /// Whether `other` (built from a reloaded config) would speak to the same server the same
    /// way: the same settings and the same credentials (a token variable's value included).
    pub fn same_as(&self, other: &Upstream) -> bool {
        self.config == other.config && self.extra == other.extra
    }

    /// The current status.
    pub fn status(&self) -> Arc<Status> {
        self.status.read().map(|s| s.clone()).unwrap_or_default()
    }

    /// Replaces the status.
    pub fn set_status(&self, s: Status) {
        if let Ok(mut g) = self.status.write() {
            *g = Arc::new(s);
        }
    }

    /// Marks the upstream unhealthy after a failed call, keeping what discovery knew; a change
    /// is told at once (and its re-prober woken).
    pub fn mark_failed(&self, why: &str) {
        let mut s = (*self.status()).clone();
        s.healthy = false;
        s.error = Some(why.to_owned());
        self.set_status(s);
        self.report_health();
    }

    /// Tells a change of its health since last told (one log line; see `health.rs`). Called
    /// when a whole probe ended and when a call marked it failed, not by each step of a probe
    /// (a 2025-11-25 handshake that fails before a 2024-11-05 stream is found is no change).
    pub fn report_health(&self) {
        self.health
            .report(&self.name, &self.status(), self.stdio.is_some());
    }

    /// Whether it is healthy and advertises the capability `cap`.
    pub fn serves(&self, cap: &str) -> bool {
        let s = self.status();
        s.healthy
            && s.discovered
                .as_ref()
                .is_some_and(|d| d.capabilities.contains_key(cap))
    }

    /// Whether, down now, it could serve the capability `cap` once back: it advertised `cap`
    /// when last discovered, or was never discovered (nothing says it does not).
    pub fn could_serve(&self, cap: &str) -> bool {
        let s = self.status();
        !s.healthy
            && s.discovered
                .as_ref()
                .is_none_or(|d| d.capabilities.contains_key(cap))
    }

    /// The current table of one kind.
    pub fn list(&self, kind: ListKind) -> Arc<ListTable> {
        self.lists[kind.index()]
            .read()
            .map(|t| t.clone())
            .unwrap_or_else(|_| Arc::new(ListTable::empty()))
    }

    /// Replaces the table of one kind.
    pub fn set_list(&self, kind: ListKind, table: ListTable) {
        if let Ok(mut g) = self.lists[kind.index()].write() {
            *g = Arc::new(table);
        }
    }
}

/// The `Host` header value for `uri`.
/// `Host`: the URL's host and port, never its userinfo (credentials are not a host).
fn host_of(name: &str, uri: &Uri) -> Result<HeaderValue, String> {
    let host = match (uri.host(), uri.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_owned(),
        (None, _) => String::new(),
    };
    HeaderValue::from_str(&host).map_err(|_| format!("upstream '{name}': bad host"))
}

/// The headers of an upstream's config (`headers`, and `bearer_token_env`'s token as
/// `Authorization`), each marked sensitive.
fn extra_headers(cfg: &UpstreamConfig) -> Result<HeaderMap, String> {
    let mut extra = HeaderMap::new();
    for (k, v) in &cfg.headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("upstream '{}': bad header name {k:?}", cfg.name))?;
        let mut value = HeaderValue::from_str(v)
            .map_err(|_| format!("upstream '{}': bad value for header {k:?}", cfg.name))?;
        value.set_sensitive(true);
        extra.insert(name, value);
    }
    if let Some(var) = &cfg.bearer_token_env {
        let token = std::env::var(var).map_err(|_| {
            format!(
                "upstream '{}': environment variable {} is not set",
                cfg.name,
                crate::escape::shown_var(var)
            )
        })?;
        if token.trim().is_empty() {
            return Err(format!(
                "upstream '{}': environment variable {var} (bearer_token_env) is empty",
                cfg.name
            ));
        }
        let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| format!("upstream '{}': {var} is not a valid token", cfg.name))?;
        value.set_sensitive(true);
        extra.insert(http::header::AUTHORIZATION, value);
    }
    Ok(extra)
}

/// Each of an upstream's URLs with its `Host` (none when the config sets one for all) and its
/// redacted form, for its balancer.
fn endpoints_of(
    cfg: &UpstreamConfig,
    extra: &HeaderMap,
) -> Result<Vec<(Uri, Option<HeaderValue>, String)>, String> {
    let mut endpoints = Vec::new();
    for url in &cfg.resilience.urls {
        let u: Uri = url
            .parse()
            .map_err(|e| format!("upstream '{}': bad url: {e}", cfg.name))?;
        // A configured Host header is the upstream's own, for every URL.
        let host = if extra.contains_key(http::header::HOST) {
            None
        } else {
            Some(host_of(&cfg.name, &u)?)
        };
        endpoints.push((u.clone(), host, crate::config::redact_url(url)));
    }
    Ok(endpoints)
}

#[cfg(test)]
#[test]
fn host_leaves_userinfo_out() {
    let h = |u: &str| host_of("a", &u.parse().unwrap()).unwrap();
    assert_eq!(h("http://u:pw@h.example:8080/mcp"), "h.example:8080");
    assert_eq!(h("http://h.example/mcp"), "h.example");
    assert_eq!(h("http://[::1]:9/mcp"), "[::1]:9");
}
