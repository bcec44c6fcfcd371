//! Bridge A's handle: everything bridge A uses, and nothing else of the gateway.
//!
//! Takes, from the composition root (`gateway/`), the config, the upstream client, the
//! keys, the governor and Sluice's `serverInfo`; gives the [`Bridge`] every request to a legacy
//! upstream borrows: the legacy session pool, the parked exchanges, the sealing keys, the
//! governor's budgets and rules, and the timings bridge A keeps. Refuses nothing.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::park::ParkTable;
use crate::policy::Governor;
use crate::state::Keys;
use crate::upstream::client::HttpClient;
use crate::upstream::legacy::Pool;

/// Bridge A's handle, shared by every request to a legacy upstream.
pub struct Bridge {
    /// Legacy sessions.
    pub pool: Arc<Pool>,
    /// Parked exchanges.
    pub parked: Arc<ParkTable>,
    /// Sealing keys.
    pub keys: Keys,
    /// The pooled upstream client.
    pub client: HttpClient,
    /// Approval rules, ask policy and budgets.
    pub governor: Arc<Governor>,
    /// The timings and bounds bridge A keeps.
    pub limits: Limits,
    /// Sluice's `serverInfo`.
    pub server_info: Value,
    /// The same, as JSON text.
    pub server_info_json: String,
}

/// The part of the config bridge A reads.
#[derive(Debug, Clone)]
pub struct Limits {
    /// `[bridge]`: gather, park and session idle times.
    pub bridge: crate::config::Bridge,
    /// `timeouts.response_ms`: each upstream answer.
    pub response: Duration,
    /// `limits.max_sse_event_bytes`: one event of a legacy session's stream.
    pub max_sse_event_bytes: usize,
    /// `state.replica`: written into every sealed state.
    pub replica: String,
}

impl Bridge {
    /// Builds the bridge from the config and the parts the gateway built.
    pub fn new(
        cfg: &crate::config::Config,
        client: HttpClient,
        keys: Keys,
        governor: Arc<Governor>,
        server_info: Value,
    ) -> Bridge {
        let limits = Limits {
            bridge: cfg.bridge.clone(),
            response: cfg.timeouts.response,
            max_sse_event_bytes: cfg.limits.max_sse_event_bytes,
            replica: cfg.state.replica.clone(),
        };
        Bridge {
            pool: Pool::new(
                client.clone(),
                &cfg.bridge,
                crate::auth::INTERNAL_PRINCIPAL,
                cfg.timeouts.shutdown,
            ),
            parked: Arc::new(ParkTable::new(cfg.bridge.max_parked)),
            keys,
            client,
            governor,
            limits,
            server_info_json: server_info.to_string(),
            server_info,
        }
    }

    /// Gives back, with `[cluster]`, the place a parked exchange took among its principal's
    /// across replicas (off the request path; a failure leaves it to expire with its state).
    pub fn release(&self, principal: &str, handle: &str) {
        let Some(c) = self.governor.cluster.clone() else {
            return;
        };
        let (principal, handle) = (principal.to_owned(), handle.to_owned());
        tokio::spawn(async move {
            let _ = c.shared.unpark(&principal, &handle).await;
        });
    }

    /// The bridge of a reloaded config: the same sessions and parked exchanges (a round parked
    /// before the reload is resumed after it), the next generation's governor.
    pub fn next(&self, governor: Arc<Governor>) -> Bridge {
        Bridge {
            pool: self.pool.clone(),
            parked: self.parked.clone(),
            keys: self.keys.clone(),
            client: self.client.clone(),
            governor,
            limits: self.limits.clone(),
            server_info: self.server_info.clone(),
            server_info_json: self.server_info_json.clone(),
        }
    }
}
