//! One connection served, HTTP/1.1 or HTTP/2, until it ends, sits idle past its deadline,
//! makes room for another, or its listener drains.
//!
//! Takes an accepted stream, its [`Held`] place, the listener's builder and service, the
//! [`Deadlines`] and the listener's drain token; returns once the connection is closed (its
//! place and its source's share are given back then). Each request is in progress from the
//! moment hyper hands it over until its response body ended or was dropped (an SSE stream is a
//! request in progress however long it lasts). A connection with no request in progress is
//! closed once idle for `first` (before its first request: it sent its first bytes, the HTTP/2
//! preface and SETTINGS included, and no request) or `idle` (since its last request ended):
//! HTTP/2 PINGs, which any client answers, and HTTP/1.1 keep-alive do not keep it. It is closed
//! gracefully (HTTP/2: a GOAWAY), and cut if that takes longer than `closing`. A connection whose
//! place was taken to make room ([`super::Table::admit`]) is closed at once: it was idle.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::{Body, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt as _;

use std::sync::Arc;

use super::{Activity, Held, Tracked};

/// What told a connection to close.
#[derive(Clone, Copy)]
enum Stop {
    /// Its place was taken to make room: close at once.
    Evicted,
    /// The listener drains: close once the requests in progress are answered.
    Drain,
    /// Idle past its deadline: close gracefully.
    Idle,
    /// Closing took longer than `closing`.
    Cut,
}

type Watch = std::pin::Pin<Box<dyn Future<Output = Stop> + Send>>;

/// How long a connection may sit with no request in progress.
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    /// Before its first request: its first bytes, then (after the HTTP/2 preface) its first
    /// request (`timeouts.header_read_ms`, at most `idle`).
    pub first: Duration,
    /// Since its last request ended (`timeouts.idle_connection_ms`).
    pub idle: Duration,
    /// How long closing it gracefully may take before it is cut (`timeouts.header_read_ms`).
    pub closing: Duration,
}

/// Serves `stream` with `handle` until it is closed (see the module's head).
pub async fn serve<S, F, B>(
    stream: TcpStream,
    held: Held,
    builder: auto::Builder<TokioExecutor>,
    deadlines: Deadlines,
    drain: CancellationToken,
    handle: S,
) where
    S: Fn(Request<Incoming>) -> F + Send + 'static,
    F: Future<Output = Result<Response<B>, Infallible>> + Send + 'static,
    B: Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let activity = held.activity().clone();
    let sniffed = tokio::select! {
        ok = first_bytes_within(&stream, deadlines.first) => ok,
        _ = activity.evicted() => false,
        _ = drain.cancelled() => false,
    };
    if !sniffed {
        return; // closes the connection and gives its place back
    }
    let since = tokio::time::Instant::now();
    let a = activity.clone();
    let svc = service_fn(move |mut req: Request<Incoming>| {
        let busy = a.begin();
        if let Some(unproven) = a.unproven() {
            req.extensions_mut().insert(unproven);
        }
        // `map`, not an async block: the request's future is moved once, not twice.
        handle(req).map(move |answer| answer.map(|resp| resp.map(|body| Tracked::new(body, busy))))
    });
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    // What may end the connection other than itself, in a set polled only when one of them
    // woke it: the connection's own wake-ups (each request's bytes) poll hyper alone.
    let mut watch: FuturesUnordered<Watch> = FuturesUnordered::new();
    watch.push(serving(activity.clone(), drain, since, deadlines));
    loop {
        let stop = tokio::select! {
            biased;
            _ = conn.as_mut() => break,
            Some(stop) = watch.next() => stop,
        };
        match stop {
            Stop::Evicted => break,
            // Shutdown: requests in progress finish (`server::run` bounds the wait).
            Stop::Drain => conn.as_mut().graceful_shutdown(),
            Stop::Idle => conn.as_mut().graceful_shutdown(),
            // A request that came in meanwhile finishes; the connection closes after it.
            Stop::Cut if activity.in_progress() => {}
            Stop::Cut => break,
        }
        // Once told to close: an eviction still ends it at once, and after an idle close, the
        // deadline by which it must have closed (`closing`).
        let cut =
            matches!(stop, Stop::Idle).then(|| tokio::time::Instant::now() + deadlines.closing);
        watch.push(closing(activity.clone(), cut));
    }
    drop(held);
}

/// While the connection serves: its eviction, the listener's drain, its idle deadline.
fn serving(
    a: Arc<Activity>,
    drain: CancellationToken,
    since: tokio::time::Instant,
    d: Deadlines,
) -> Watch {
    Box::pin(async move {
        tokio::select! {
            biased;
            _ = a.evicted() => Stop::Evicted,
            _ = drain.cancelled() => Stop::Drain,
            _ = a.idle(since, d.first, d.idle) => Stop::Idle,
        }
    })
}

/// Once it was told to close: its eviction, and `cut`, by when it must have closed.
fn closing(a: Arc<Activity>, cut: Option<tokio::time::Instant>) -> Watch {
    Box::pin(async move {
        match cut {
            Some(at) => tokio::select! {
                biased;
                _ = a.evicted() => Stop::Evicted,
                _ = tokio::time::sleep_until(at) => Stop::Cut,
            },
            None => {
                a.evicted().await;
                Stop::Evicted
            }
        }
    })
}

/// Waits, at most `limit`, until the client's first bytes tell HTTP/1 from the HTTP/2 preface.
/// hyper-util's version sniffing has no timer of its own and hyper's `header_read_timeout`
/// starts only after it, so without this a client that sends nothing (or part of the preface)
/// would hold its connection forever. `false`: the client was too slow or went away.
async fn first_bytes_within(stream: &tokio::net::TcpStream, limit: std::time::Duration) -> bool {
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let sniff = async {
        let mut buf = [0u8; 24];
        loop {
            match stream.peek(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) if n == PREFACE.len() || buf[..n] != PREFACE[..n] => return true,
                // Part of the preface so far; peek would return the same bytes at once.
                Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            }
        }
    };
    tokio::time::timeout(limit, sniff).await.unwrap_or(false)
}
