//! `[limits]` and `[timeouts]`: every size and every wait Sluice bounds.
//!
//! Takes the raw tables; gives [`Limits`] and [`Timeouts`] with each absent value at its default
//! (and a few raised to a floor: a request head of at least 8 KiB, at least one stream), the
//! shares per principal and per source at their defaults (a quarter of their pool, at least 1,
//! for principals; a sixty-fourth, at least 8, for sources; the whole pool where there is only
//! one principal or one source). Refuses `max_json_depth`
//! outside 8 to 128, and a share of 0 or over its pool. Also holds the `ms` serializer the other sections use to
//! print a [`Duration`] back as the `*_ms` key it was read from.

use std::time::Duration;

use serde::Serialize;

use super::raw::{RawLimits, RawTimeouts};
use super::Invalid;

/// Limits on sizes; every one has a default and can be set in `[limits]`.
#[derive(Debug, Clone, Serialize)]
pub struct Limits {
    /// Connections held at once; past it a new connection takes the place of an idle one that
    /// served no authenticated request, else it is closed at once (default 10000).
    pub max_connections: usize,
    /// Requests in progress at once, each counted once its body is read; past it Sluice
    /// answers 503 with Retry-After, code -31020 (default 1024).
    pub max_in_flight: usize,
    /// Requests of one principal in progress at once, counted from its authentication (its
    /// body being read included); past it 503 with Retry-After, code -31020. Default a quarter
    /// of `max_in_flight` (at least 1); all of it when `[auth]` configures no credentials.
    pub max_in_flight_per_principal: usize,
    /// Connections from one source address (an IPv4 address, an IPv6 /64) held at once; past
    /// it a new connection from that source is closed at once. Default a sixty-fourth of
    /// `max_connections`, at least 8 (at most all of them); all of them on a loopback listener
    /// (every client is one source there).
    pub max_connections_per_source: usize,
    /// Largest request head (431 past it, default 64 KiB).
    pub max_header_bytes: usize,
    /// Largest request body accepted from a client (413 past it). Default 4 MiB.
    pub max_body_bytes: usize,
    /// Largest upstream answer read (JSON body or one SSE event). Default 16 MiB.
    pub max_response_bytes: usize,
    /// Largest single SSE event read from an upstream. Default 4 MiB.
    pub max_sse_event_bytes: usize,
    /// Upstream list pages followed per list. Default 50.
    pub max_list_pages: u32,
    /// Items kept per upstream per list (the rest dropped with a warning). Default 10000.
    pub max_list_items: usize,
    /// Deepest nesting of arrays and objects in a client's request body (-32600 past it).
    /// Default 64, at most 128.
    pub max_json_depth: usize,
    /// SSE streams open to clients at once (listen and GET streams, streamed answers); past it
    /// 503 with Retry-After. Default 10000.
    pub max_streams: usize,
    /// The same per principal (429 with Retry-After past it). Default 100.
    pub max_streams_per_principal: usize,
    /// Resource URIs one listen or one 2025-11-25 session may subscribe to (-32602 past it).
    /// Default 256.
    pub max_resource_subscriptions: usize,
}

/// Every wait Sluice makes; each can be set in `[timeouts]` down to milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Timeouts {
    /// A client must send a request head within this (slowloris). Default 10 s.
    #[serde(with = "ms", rename = "header_read_ms")]
    pub header_read: Duration,
    /// A request's body must arrive whole within this, counted from its head (408 past it).
    /// Default 30 s.
    #[serde(with = "ms", rename = "body_read_ms")]
    pub body_read: Duration,
    /// A client connection with no request in progress is closed once idle this long since its
    /// last request ended (HTTP/2 PINGs and HTTP/1.1 keep-alive do not count; before its first
    /// request `header_read` applies, if shorter). Default 60 s.
    #[serde(with = "ms", rename = "idle_connection_ms")]
    pub idle_connection: Duration,
    /// Time from a request's arrival to its response head (504 past it). Default 120 s.
    #[serde(with = "ms", rename = "request_ms")]
    pub request: Duration,
    /// TCP connect to an upstream. Default 2 s.
    #[serde(with = "ms", rename = "connect_ms")]
    pub connect: Duration,
    /// Time for an upstream to answer a request (headers and each streamed message). Default 60 s.
    #[serde(with = "ms", rename = "response_ms")]
    pub response: Duration,
    /// Background refresh of upstream discovery and tables. Default 30 s.
    #[serde(with = "ms", rename = "refresh_ms")]
    pub refresh: Duration,
    /// Graceful shutdown deadline for in-flight requests. Default 10 s.
    #[serde(with = "ms", rename = "shutdown_ms")]
    pub shutdown: Duration,
    /// Pause before re-opening an upstream listen stream that ended. Default 1 s.
    #[serde(with = "ms", rename = "listen_retry_ms")]
    pub listen_retry: Duration,
    /// An upstream listen or GET stream that sends nothing (not even a keep-alive) this long is
    /// closed and reopened. Default 5 min.
    #[serde(with = "ms", rename = "stream_idle_ms")]
    pub stream_idle: Duration,
}

/// Prints a [`Duration`] as whole milliseconds (the `*_ms` keys).
pub(super) mod ms {
    pub(in crate::config) fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }
}

/// A `*_ms` value, or `default` milliseconds when absent.
pub(super) fn millis(v: Option<u64>, default: u64) -> Duration {
    Duration::from_millis(v.unwrap_or(default))
}

// === impl Limits ===

/// The most permits a semaphore (connections, requests in flight) holds: 1,000,000,000, far
/// past any machine's sockets, and within tokio's own bound.
pub(super) const MAX_PERMITS: usize = 1_000_000_000;

/// A share of a pool of `max`: as given (1 to `max`), else a quarter of it (at least 1), or
/// all of it when `whole`.
fn share(
    key: &str,
    given: Option<usize>,
    max: usize,
    whole: bool,
    pool: &str,
) -> Result<usize, Invalid> {
    let n = given.unwrap_or(if whole { max } else { (max / 4).max(1) });
    if (1..=max).contains(&n) {
        Ok(n)
    } else {
        Err(Invalid(format!(
            "limits.{key} = {n}: expected 1 to limits.{pool} = {max}"
        )))
    }
}

/// The default share of one source of `max_connections`: a sixty-fourth of them (156 of the
/// default 10000), at least 8 (a client's few connections; a small pool), at most all of them.
/// A quarter let four sources hold every connection; this takes 64 (and past it, the idle
/// connections they hold make room for an authenticated client: `connections.rs`).
pub(super) fn per_source(max_connections: usize) -> usize {
    (max_connections / 64).max(8).min(max_connections)
}

impl Limits {
    /// The `[limits]` table; `one_principal`: `[auth]` configures no credentials (every caller
    /// is `local`); `loopback`: the listener is on loopback (every client is one source).
    pub(super) fn from_raw(
        l: RawLimits,
        one_principal: bool,
        loopback: bool,
    ) -> Result<Limits, Invalid> {
        let max_json_depth = l.max_json_depth.unwrap_or(64);
        if !(8..=128).contains(&max_json_depth) {
            return Err(Invalid(format!(
                "limits.max_json_depth = {max_json_depth}: expected 8 to 128"
            )));
        }
        // Each is a semaphore's permit count: at least one, at most what a semaphore holds.
        let permits = |key: &str, v: usize| {
            if (1..=MAX_PERMITS).contains(&v) {
                Ok(v)
            } else {
                Err(Invalid(format!(
                    "limits.{key} = {v}: expected 1 to {MAX_PERMITS}"
                )))
            }
        };
        let max_connections = permits("max_connections", l.max_connections.unwrap_or(10_000))?;
        let max_in_flight = permits("max_in_flight", l.max_in_flight.unwrap_or(1024))?;
        Ok(Limits {
            max_connections,
            max_in_flight,
            max_in_flight_per_principal: share(
                "max_in_flight_per_principal",
                l.max_in_flight_per_principal,
                max_in_flight,
                one_principal,
                "max_in_flight",
            )?,
            max_connections_per_source: share(
                "max_connections_per_source",
                l.max_connections_per_source
                    .or((!loopback).then(|| per_source(max_connections))),
                max_connections,
                loopback,
                "max_connections",
            )?,
            max_header_bytes: l.max_header_bytes.unwrap_or(64 << 10).max(8192),
            max_body_bytes: l.max_body_bytes.unwrap_or(4 << 20),
            max_response_bytes: l.max_response_bytes.unwrap_or(16 << 20),
            max_sse_event_bytes: l.max_sse_event_bytes.unwrap_or(4 << 20),
            max_list_pages: l.max_list_pages.unwrap_or(50),
            max_list_items: l.max_list_items.unwrap_or(10_000),
            max_json_depth,
            max_streams: l.max_streams.unwrap_or(10_000).max(1),
            max_streams_per_principal: l.max_streams_per_principal.unwrap_or(100).max(1),
            max_resource_subscriptions: l.max_resource_subscriptions.unwrap_or(256),
        })
    }
}

// === impl Timeouts ===

impl From<RawTimeouts> for Timeouts {
    fn from(t: RawTimeouts) -> Timeouts {
        Timeouts {
            header_read: millis(t.header_read_ms, 10_000),
            body_read: millis(t.body_read_ms, 30_000).max(Duration::from_millis(1)),
            idle_connection: millis(t.idle_connection_ms, 60_000).max(Duration::from_millis(1)),
            request: millis(t.request_ms, 120_000),
            connect: millis(t.connect_ms, 2_000),
            response: millis(t.response_ms, 60_000),
            refresh: millis(t.refresh_ms, 30_000),
            shutdown: millis(t.shutdown_ms, 10_000),
            listen_retry: millis(t.listen_retry_ms, 1_000),
            stream_idle: millis(t.stream_idle_ms, 300_000),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sources_default_share_is_a_sixty_fourth_of_the_connections_at_least_8_and_all_on_loopback()
    {
        let limits = |max: usize, loopback: bool| {
            let raw = RawLimits {
                max_connections: Some(max),
                ..RawLimits::default()
            };
            Limits::from_raw(raw, false, loopback)
                .expect("valid")
                .max_connections_per_source
        };
        assert_eq!(
            limits(10_000, false),
            156,
            "so 64 sources, not 4, hold them all"
        );
        assert_eq!(limits(40, false), 8);
        assert_eq!(limits(5, false), 5, "never over the pool");
        assert_eq!(limits(40, true), 40, "one source on loopback");
        let given = RawLimits {
            max_connections: Some(40),
            max_connections_per_source: Some(20),
            ..RawLimits::default()
        };
        assert_eq!(
            Limits::from_raw(given, false, false)
                .expect("valid")
                .max_connections_per_source,
            20
        );
    }
}
