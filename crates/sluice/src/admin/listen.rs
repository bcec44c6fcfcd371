//! The admin listener: connections in, one admin answer per request.
//!
//! Takes `[admin] listen` and the live generation; gives each request to the router after the
//! edge checks, with the public listener's connection bounds (a small pool: [`MAX_CONNECTIONS`],
//! [`MAX_PER_SOURCE`] from one source) and deadlines, HTTP/1.1 only. Refuses a body over
//! [`MAX_BODY`](super::body::MAX_BODY) (413) or slower than `timeouts.body_read_ms` (408); a body is read only once
//! its request is authenticated (but a console sign-in's, which is its credential).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http::{Request, StatusCode};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{error, Answer};
use crate::gateway::{Generation, Live};

/// Connections the admin listener holds at once.
pub const MAX_CONNECTIONS: usize = 64;
/// Connections from one source.
pub const MAX_PER_SOURCE: usize = 32;

/// Binds `[admin] listen` (when configured) and serves it until shutdown; gives the bound
/// address.
pub fn start(gw: &Arc<Generation>) -> Result<Option<SocketAddr>, String> {
    let Some(admin) = gw.cfg.admin.as_ref() else {
        return Ok(None);
    };
    let listener = crate::server::bind(admin.listen)
        .map_err(|e| format!("cannot bind [admin] listen {}: {e}", admin.listen))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("[admin] listen: {e}"))?;
    let state = Arc::new(super::State::new(gw));
    if let Some(c) = gw.governor.cluster.clone() {
        tokio::spawn(super::publish::publish(
            gw.rt.live.clone(),
            c,
            gw.rt.shutdown.clone(),
        ));
    }
    tracing::info!(admin = %addr, open = admin.open(), "admin listener up");
    tokio::spawn(serve(
        listener,
        gw.rt.live.clone(),
        state,
        gw.rt.shutdown.clone(),
    ));
    Ok(Some(addr))
}

async fn serve(
    listener: TcpListener,
    live: Arc<Live>,
    state: Arc<super::State>,
    stop: CancellationToken,
) {
    let Some(gw) = live.get() else { return };
    // HTTP/1.1 only: a browser speaks it to a plain-HTTP listener, and one connection cannot
    // hold many streams' bodies at once.
    let mut builder = crate::server::connection_builder(&gw);
    builder = builder.http1_only();
    let deadlines = crate::server::deadlines(&gw.cfg.timeouts);
    drop(gw);
    let connections = crate::connections::Table::new(MAX_CONNECTIONS, MAX_PER_SOURCE);
    loop {
        let stream = tokio::select! {
            _ = stop.cancelled() => return,
            s = crate::server::accept(&listener, "admin") => s,
        };
        let source = crate::server::peer_source(&stream);
        let Ok(held) = connections.admit(source) else {
            tracing::warn!(%source, "admin connection refused: the admin listener's connections are all taken");
            continue;
        };
        let (live, state) = (live.clone(), state.clone());
        let from = super::Source(source);
        let handle = move |mut req: Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(from);
            handle(live.clone(), state.clone(), req)
        };
        tokio::spawn(crate::connections::serve(
            stream,
            held,
            builder.clone(),
            deadlines,
            stop.clone(),
            handle,
        ));
    }
}

async fn handle(
    live: Arc<Live>,
    state: Arc<super::State>,
    req: Request<hyper::body::Incoming>,
) -> Result<Answer, Infallible> {
    let Some(gw) = live.get() else {
        return Ok(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "this Sluice is shutting down",
        ));
    };
    let (parts, body) = req.into_parts();
    let answer = super::routes::route(&state, gw, &parts, body).await;
    Ok(super::secured(answer))
}
