//! Sluice: an MCP gateway. One stateless 2026-07-28 front door that validates every request
//! exactly as the spec says and federates many upstream MCP servers behind one endpoint.
//!
//! ```text
//! accept ─ edge        (edge.rs: Origin/Host, POST only, Accept, body bound)
//!        ─ parse once  (mcp/jsonrpc.rs: Envelope keeps the bytes)
//!        ─ validate    (validate/: _meta -32602, headers -32020, version -32022, method -32601)
//!        ─ route       (dispatch/route.rs + route/: prefixed names, URIs, x-mcp-header)
//!        ─ dispatch    (dispatch/: discover, federated lists, listen, forward)
//!        ─ respond     (respond.rs: resultType, serverInfo, cache hints, error mapping)
//! ```
//!
//! `pipeline.rs` is the only place that orders the stages.

pub mod admin;
pub mod approvals;
pub mod audit;
pub mod auth;
pub mod background;
pub mod bridge;
pub mod bridge_b;
pub mod catalog;
pub mod client_sessions;
pub mod cluster;
pub mod config;
pub mod connections;
pub mod ctx;
pub mod dispatch;
pub mod edge;
pub mod error;
pub mod escape;
pub mod events;
pub mod forward;
pub mod gateway;
pub mod handoff;
pub mod inspect;
pub mod internal;
pub mod link;
pub mod listen;
pub mod login;
/// The protocol model, a crate of its own (`crates/sluice-mcp`): named here as `crate::mcp`.
pub use sluice_mcp as mcp;
pub mod metrics;
pub mod pins;
pub mod pipeline;
pub mod policy;
pub mod quiet;
pub mod reload;
pub mod respond;
pub mod route;
pub mod server;
pub mod service;
pub mod shares;
pub mod shutdown;
pub mod stages;
pub mod state;
pub mod streams;
pub mod telemetry;
pub mod tokens;
pub mod upstream;
pub mod validate;

use std::net::SocketAddr;
use std::sync::Arc;

/// A Sluice started in this process (tests, the demo): its address and a way to stop it.
pub struct Running {
    /// The bound address.
    pub addr: SocketAddr,
    /// The admin listener's bound address, with `[admin]`.
    pub admin: Option<SocketAddr>,
    /// The first generation's state, for inspection ([`Running::current`] after a reload).
    pub gateway: Arc<gateway::Generation>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    join: Option<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// The MCP endpoint URL.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.addr, self.gateway.cfg.path)
    }

    /// Waits until every upstream has been probed once.
    pub async fn ready(&self) {
        let _ = self
            .gateway
            .rt
            .ready
            .subscribe()
            .wait_for(|ready| *ready)
            .await;
    }

    /// The generation serving now.
    pub fn current(&self) -> Arc<gateway::Generation> {
        self.gateway.latest()
    }

    /// Reloads to `cfg` as SIGHUP reloads the config file (see `reload.rs`).
    pub async fn reload(&self, cfg: config::Config) -> Result<reload::Applied, String> {
        reload::apply(&self.gateway, cfg).await
    }

    /// Stops gracefully and waits for the server to end.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(j) = self.join.take() {
            let _ = j.await;
        }
    }
}

/// Binds `cfg.listen` and serves in the background.
pub async fn start(cfg: config::Config) -> Result<Running, String> {
    let listener =
        server::bind(cfg.listen).map_err(|e| format!("cannot listen on {}: {e}", cfg.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let mut cfg = cfg;
    cfg.listen = addr;
    let gw = gateway::Generation::new(cfg)?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let admin = admin::start(&gw)?;
    let join = tokio::spawn(server::run(listener, gw.clone(), async move {
        let _ = rx.await;
    }));
    Ok(Running {
        addr,
        admin,
        gateway: gw,
        stop: Some(tx),
        join: Some(join),
    })
}
