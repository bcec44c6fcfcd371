//! Sluice in-process in front of legacy upstreams ([`Gateway::bridge`] with the bridge A key),
//! with the `[bridge]` timeouts a test chooses.

use crate::support::gateway::{keys, Gateway};

pub(crate) use crate::support::call::{http, retry, sample, Call};
pub(crate) use crate::support::eventually;

/// The `[bridge]` settings a test runs with.
#[derive(Clone, Copy)]
pub(crate) struct Bridge {
    pub(crate) gather_ms: i64,
    pub(crate) park_ms: i64,
    pub(crate) session_idle_ms: i64,
}

impl Default for Bridge {
    fn default() -> Self {
        // Parked exchanges live 10 s (the Python client answers in well under a second); idle
        // sessions 60 s, so a test can count the sessions a call leaves behind.
        Bridge {
            gather_ms: 20,
            park_ms: 10_000,
            session_idle_ms: 60_000,
        }
    }
}

/// Starts Sluice in front of `upstreams` (name, url) with `bridge`; waits until each was probed
/// and fails the test if one is not healthy or not seen as a legacy upstream.
pub(crate) async fn start(upstreams: &[(&str, &str)], bridge: Bridge) -> sluice::Running {
    start_with(upstreams, bridge, |g| g).await
}

/// [`start`] with more config (`[auth]`…).
pub(crate) async fn start_with(
    upstreams: &[(&str, &str)],
    bridge: Bridge,
    more: impl FnOnce(Gateway) -> Gateway,
) -> sluice::Running {
    config(upstreams, bridge, more).start().await
}

/// The config [`start_with`] starts (a reload test builds the next one the same way).
pub(crate) fn config(
    upstreams: &[(&str, &str)],
    bridge: Bridge,
    more: impl FnOnce(Gateway) -> Gateway,
) -> Gateway {
    let Bridge {
        gather_ms,
        park_ms,
        session_idle_ms,
    } = bridge;
    let mut g = Gateway::bridge(keys::BRIDGE_A)
        .named("bridge_a.toml")
        .bridge_key("gather_ms", gather_ms)
        .bridge_key("park_ms", park_ms)
        .bridge_key("session_idle_ms", session_idle_ms)
        .all_legacy();
    g = more(g);
    for (name, url) in upstreams {
        g = g.upstream(name, url);
    }
    g
}
