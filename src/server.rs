//! The accept loop: connections in, the service per request, graceful shutdown.
//!
//! Takes a bound listener, the gateway and a shutdown future; serves HTTP/1.1 and HTTP/2 until
//! the future resolves, then stops accepting, lets in-flight requests finish up to
//! `timeouts.shutdown_ms`, and drops the rest. A connection with no request in progress for
//! `timeouts.header_read_ms` (before its first request or since its last one ended) is closed:
//! HTTP/2 keep-alive PINGs, which any client answers, do not keep it. Refuses (closes at once)
//! a connection past `limits.max_connections_per_source` from its source (an IPv4 address, an
//! IPv6 /64: connections come before any principal is known, so the share is the source's), and
//! past `limits.max_connections` unless an idle connection that served no authenticated request
//! makes room (`connections.rs`); accept errors are logged and retried after a short pause.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::gateway::Gateway;

/// Binds `addr` with a listen backlog of 4096 (the kernel caps it at its `somaxconn`): a burst of
/// new connections waits in the queue instead of overflowing the default 128, where each dropped
/// SYN costs its client a one-second retransmit.
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(4096)
}

/// Serves until `shutdown` resolves. Each request is served by the generation current when it
/// arrives (a reload swaps it); the listener's own settings are the first generation's
/// (`reload.rs` refuses to change them).
pub async fn run(listener: TcpListener, gw: Arc<Gateway>, shutdown: impl Future<Output = ()>) {
    let builder = connection_builder(&gw);
    let (header_read, grace) = (gw.cfg.timeouts.header_read, gw.cfg.timeouts.shutdown);
    let connections = crate::connections::Table::new(gw.cfg.limits.max_connections, gw.cfg.limits.max_connections_per_source);
    let (tracker, drain) = (tokio_util::task::TaskTracker::new(), CancellationToken::new());
    let endpoint = crate::service::stack::endpoint(&gw);
    let background = crate::background::spawn(&gw);
    let (live, stop) = (gw.live.clone(), gw.shutdown.clone());
    // Holding the first generation would keep its upstreams alive past a reload's drain.
    drop(gw);
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            _ = &mut shutdown => break,
            s = accept(&listener, "MCP") => s,
        };
        // Past its source's share a new connection is closed at once; when every place is
        // taken, it takes the place of an idle one that served no authenticated request, else
        // it is closed at once (held ones keep working).
        let source = stream.peer_addr().map(|a| source_of(a.ip())).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
        let held = match connections.admit(source) {
            Ok(h) => h,
            Err(crate::shares::Refused::Pool(n)) => {
                tracing::warn!(limit = n, "connection refused: limits.max_connections reached (each one busy or authenticated)");
                continue;
            }
            Err(crate::shares::Refused::Share(n)) => {
                tracing::warn!(limit = n, %source, "connection refused: this source holds limits.max_connections_per_source");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let serving = Serving { live: live.clone(), endpoint: endpoint.clone(), builder: builder.clone(), header_read, drain: drain.clone() };
        tracker.spawn(serving.serve(stream, held));
    }
    drop(listener);
    stop.cancel();
    background.abort();
    drain.cancel();
    tracker.close();
    if tokio::time::timeout(grace, tracker.wait()).await.is_err() {
        tracing::warn!("shutdown deadline passed with requests still in flight; closing them");
    }
    // Parked exchanges are cancelled upstream, legacy sessions ended (DELETE), stdio processes
    // ended; then the audit log writes the records of everything that finished.
    if let Some(gw) = live.get() {
        gw.close_upstreams().await;
        gw.audit.close(std::time::Duration::from_secs(2)).await;
    }
    live.clear();
}

/// What one connection's task needs.
struct Serving {
    live: Arc<crate::gateway::Live>,
    endpoint: crate::service::stack::Endpoint,
    builder: auto::Builder<TokioExecutor>,
    header_read: Duration,
    drain: CancellationToken,
}

impl Serving {
    /// Serves one connection until it ends, the client is idle past `header_read` (no request
    /// in progress: closed gracefully, a GOAWAY for HTTP/2, and at once if that takes another
    /// `header_read`), its place is taken to make room (closed at once: it was idle), or
    /// shutdown (closed gracefully; `run` bounds the wait).
    async fn serve(self, stream: tokio::net::TcpStream, held: crate::connections::Held) {
        let sniffed = tokio::select! {
            ok = first_bytes_within(&stream, self.header_read) => ok,
            _ = self.drain.cancelled() => false,
        };
        if !sniffed {
            return; // closes the connection and frees its place
        }
        let activity = held.activity().clone();
        let (live, endpoint, a) = (self.live, self.endpoint, activity.clone());
        let svc = service_fn(move |mut req: http::Request<hyper::body::Incoming>| {
            let busy = a.begin();
            if let Some(unproven) = a.unproven() {
                req.extensions_mut().insert(unproven);
            }
            let answer = crate::service::handle(live.clone(), endpoint.clone(), req);
            async move { answer.await.map(|resp| resp.map(|body| crate::connections::Tracked::new(body, busy))) }
        });
        let conn = self.builder.serve_connection_with_upgrades(TokioIo::new(stream), svc);
        tokio::pin!(conn);
        // Set once the connection is told to close (idle or shutdown); `deadline`: by when an
        // idle one must have closed (a peer that does not let a GOAWAY finish is cut then).
        let (mut closing, mut deadline) = (false, None);
        loop {
            tokio::select! {
                _ = conn.as_mut() => break,
                _ = activity.evicted() => break,
                _ = self.drain.cancelled(), if !closing => {
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
                _ = activity.idle(self.header_read, self.header_read), if !closing => {
                    conn.as_mut().graceful_shutdown();
                    (closing, deadline) = (true, Some(tokio::time::Instant::now() + self.header_read));
                }
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => break,
            }
        }
        drop(held);
    }
}

/// The source a connection's share is counted under: an IPv4 address (an IPv4-mapped IPv6 one
/// included), or the /64 an IPv6 address is in (one host usually holds a whole /64).
pub(crate) fn source_of(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip {
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.into(),
            None => std::net::Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1)).into(),
        },
        v4 => v4,
    }
}

/// The next connection of `listener`; an accept error (out of file descriptors, say) is logged
/// and retried after a short pause.
pub(crate) async fn accept(listener: &TcpListener, which: &'static str) -> tokio::net::TcpStream {
    loop {
        match listener.accept().await {
            Ok((s, _)) => return s,
            Err(e) => {
                tracing::warn!(listener = which, error = %e, "accept failed; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

/// HTTP/1 and HTTP/2 with the request-head bounds.
pub(crate) fn connection_builder(gw: &Gateway) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // Slowloris: a request head must arrive within header_read_ms; a head over
    // max_header_bytes is refused (431) by hyper.
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(gw.cfg.timeouts.header_read)
        .max_buf_size(gw.cfg.limits.max_header_bytes);
    // HTTP/2 keeps a connection open between streams: a peer that stops answering PINGs within
    // header_read_ms is closed (a dead peer). One that answers them but sends no request is
    // closed by `run`'s idle deadline, so idle connections cannot hold the connection budget.
    builder
        .http2()
        .timer(hyper_util::rt::TokioTimer::new())
        .max_header_list_size(gw.cfg.limits.max_header_bytes as u32)
        .keep_alive_interval(Some(gw.cfg.timeouts.header_read))
        .keep_alive_timeout(gw.cfg.timeouts.header_read);
    builder
}

/// Waits, at most `limit`, until the client's first bytes tell HTTP/1 from the HTTP/2 preface.
/// hyper-util's version sniffing has no timer of its own and hyper's `header_read_timeout`
/// starts only after it, so without this a client that sends nothing (or part of the preface)
/// would hold its connection forever. `false`: the client was too slow or went away.
pub(crate) async fn first_bytes_within(stream: &tokio::net::TcpStream, limit: std::time::Duration) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_an_ipv4_address_or_an_ipv6_64() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert_eq!(source_of(ip("203.0.113.7")), ip("203.0.113.7"));
        assert_eq!(source_of(ip("::ffff:203.0.113.7")), ip("203.0.113.7"), "IPv4-mapped is the IPv4 address");
        assert_eq!(source_of(ip("2001:db8:1:2:aaaa:bbbb:cccc:dddd")), ip("2001:db8:1:2::"));
        assert_eq!(source_of(ip("2001:db8:1:2::1")), source_of(ip("2001:db8:1:2:ffff::9")), "one /64, one source");
        assert_ne!(source_of(ip("2001:db8:1:2::1")), source_of(ip("2001:db8:1:3::1")));
    }
}
