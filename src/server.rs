//! The accept loop: connections in, the service per request, graceful shutdown.
//!
//! Takes a bound listener, the gateway and a shutdown future; serves HTTP/1.1 and HTTP/2 until
//! the future resolves, then stops accepting, lets in-flight requests finish up to
//! `timeouts.shutdown_ms`, and drops the rest. Refuses nothing; accept errors are logged and
//! retried after a short pause.

use std::future::Future;
use std::sync::Arc;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::gateway::Gateway;

/// Serves until `shutdown` resolves.
pub async fn run(listener: TcpListener, gw: Arc<Gateway>, shutdown: impl Future<Output = ()>) {
    let builder = auto::Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
    let background = gw.spawn_background();
    tokio::pin!(shutdown);
    loop {
        let (stream, _peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let gw = gw.clone();
        let svc = service_fn(move |req| crate::service::handle(gw.clone(), req));
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), svc);
        let conn = graceful.watch(conn.into_owned());
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
    drop(listener);
    gw.shutdown.cancel();
    background.abort();
    if tokio::time::timeout(gw.cfg.timeouts.shutdown, graceful.shutdown()).await.is_err() {
        tracing::warn!("shutdown deadline passed with requests still in flight; closing them");
    }
    // Parked exchanges are cancelled upstream and legacy sessions ended (DELETE).
    crate::bridge::shutdown(&gw).await;
}
