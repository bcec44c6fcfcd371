//! Bridge A's shared state: the legacy session pool, the parked exchanges and the sealing keys.
//!
//! Takes the config, the upstream client and the keys; gives the [`Bridge`] every request to a
//! legacy upstream borrows. Refuses nothing.

use std::sync::Arc;

use super::park::ParkTable;
use crate::state::Keys;
use crate::upstream::legacy::Pool;

/// Bridge A's shared state.
pub struct Bridge {
    /// Legacy sessions.
    pub pool: Arc<Pool>,
    /// Parked exchanges.
    pub parked: ParkTable,
    /// Sealing keys.
    pub keys: Keys,
}

impl Bridge {
    /// Builds the bridge from config.
    pub fn new(cfg: &crate::config::Config, client: crate::upstream::client::HttpClient, keys: Keys) -> Bridge {
        Bridge {
            pool: Pool::new(client, &cfg.bridge, crate::auth::INTERNAL_PRINCIPAL),
            parked: ParkTable::new(cfg.bridge.max_parked),
            keys,
        }
    }
}
