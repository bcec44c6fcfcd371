//! The accept loop: connections in, the service per request, graceful shutdown.
//!
//! Takes a bound listener, the gateway and a shutdown future; serves HTTP/1.1 and HTTP/2 until
//! the future resolves, then stops accepting, lets in-flight requests finish up to
//! `timeouts.shutdown_ms`, and drops the rest. A connection with no request in progress is
//! closed once idle past `timeouts.header_read_ms` before its first request, or
//! `timeouts.idle_connection_ms` since its last one ended (`connections::serve`): HTTP/2 PINGs,
//! which any client answers, and HTTP/1.1 keep-alive do not keep it. Refuses (closes at once)
//! a connection past `limits.max_connections_per_source` from its source (an IPv4 address, an
//! IPv6 /64: connections come before any principal is known, so the share is the source's), and
//! past `limits.max_connections` unless an idle connection that served no authenticated request
//! makes room (`connections.rs`); accept errors are logged and retried after a short pause.

use std::future::Future;
use std::sync::Arc;

use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::gateway::Generation;

/// Binds `addr` with a listen backlog of 4096 (the kernel caps it at its `somaxconn`): a burst of
/// new connections waits in the queue instead of overflowing the default 128, where each dropped
/// SYN costs its client a one-second retransmit.
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(4096)
}

/// Serves until `shutdown` resolves. Each request is served by the generation current when it
/// arrives (a reload swaps it); the listener's own settings are the first generation's
/// (`reload.rs` refuses to change them).
pub async fn run(listener: TcpListener, gw: Arc<Generation>, shutdown: impl Future<Output = ()>) {
    let builder = connection_builder(&gw);
    let (deadlines, grace) = (deadlines(&gw.cfg.timeouts), gw.cfg.timeouts.shutdown);
    let connections = crate::connections::Table::new(
        gw.cfg.limits.max_connections,
        gw.cfg.limits.max_connections_per_source,
    );
    let (tracker, drain) = (
        tokio_util::task::TaskTracker::new(),
        CancellationToken::new(),
    );
    let endpoint = crate::service::stack::endpoint(&gw);
    let background = crate::background::spawn(&gw);
    let (live, stop) = (gw.rt.live.clone(), gw.rt.shutdown.clone());
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
        let source = peer_source(&stream);
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
        let (live, endpoint) = (live.clone(), endpoint.clone());
        let peer = crate::login::Source(source);
        let handle = move |mut req: http::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(peer);
            crate::service::handle(live.clone(), endpoint.clone(), req)
        };
        tracker.spawn(crate::connections::serve(
            stream,
            held,
            builder.clone(),
            deadlines,
            drain.clone(),
            handle,
        ));
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
        gw.rt.audit.close(std::time::Duration::from_secs(2)).await;
    }
    live.clear();
}

/// How long a client connection may sit idle, from `timeouts` (`connections::serve`).
pub(crate) fn deadlines(t: &crate::config::Timeouts) -> crate::connections::Deadlines {
    crate::connections::Deadlines {
        first: t.header_read.min(t.idle_connection),
        idle: t.idle_connection,
        closing: t.header_read,
    }
}

/// The source a connection is counted under ([`source_of`] its peer's address; unspecified when
/// the peer's address cannot be read).
pub(crate) fn peer_source(stream: &tokio::net::TcpStream) -> std::net::IpAddr {
    stream
        .peer_addr()
        .map(|a| source_of(a.ip()))
        .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into())
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
pub(crate) fn connection_builder(gw: &Generation) -> auto::Builder<TokioExecutor> {
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
    // closed by its idle deadline (`connections::serve`), so idle connections cannot hold the connection budget.
    builder
        .http2()
        .timer(hyper_util::rt::TokioTimer::new())
        .max_header_list_size(gw.cfg.limits.max_header_bytes as u32)
        .keep_alive_interval(Some(gw.cfg.timeouts.header_read))
        .keep_alive_timeout(gw.cfg.timeouts.header_read);
    builder
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_an_ipv4_address_or_an_ipv6_64() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert_eq!(source_of(ip("203.0.113.7")), ip("203.0.113.7"));
        assert_eq!(
            source_of(ip("::ffff:203.0.113.7")),
            ip("203.0.113.7"),
            "IPv4-mapped is the IPv4 address"
        );
        assert_eq!(
            source_of(ip("2001:db8:1:2:aaaa:bbbb:cccc:dddd")),
            ip("2001:db8:1:2::")
        );
        assert_eq!(
            source_of(ip("2001:db8:1:2::1")),
            source_of(ip("2001:db8:1:2:ffff::9")),
            "one /64, one source"
        );
        assert_ne!(
            source_of(ip("2001:db8:1:2::1")),
            source_of(ip("2001:db8:1:3::1"))
        );
    }
}
