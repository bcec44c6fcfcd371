//! Per-tool call quotas (`[[quota]]`): calls per window and principal, on the routed tool.
//!
//! Takes a tool call's principal, groups, upstream and the upstream's own tool name (the name
//! the body named and routing resolved, never a header alone); gives `Ok` and counts the call
//! against the first quota whose match holds, or a [`Refusal::Quota`] naming the quota and when
//! to retry. Counted per process (GCRA, `governor`, keyed by principal), or with `[cluster]` across
//! replicas (`Governor::charge_quota`, the same GCRA in Redis); principals idle for a
//! whole window are forgotten on the budgets' timer. The clock is a type parameter so tests
//! drive time without sleeping.

use std::num::NonZeroU32;

use governor::clock::{Clock, DefaultClock, QuantaClock};
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota as Gcra, RateLimiter};

use super::refusal::Refusal;
use super::rules::glob;
use crate::config::Quota;

type Limiter<C> = RateLimiter<
    String,
    DefaultKeyedStateStore<String>,
    C,
    governor::middleware::NoOpMiddleware<<C as Clock>::Instant>,
>;

/// The quotas, in config order.
pub struct Quotas<C: Clock = DefaultClock> {
    entries: Vec<(Quota, Limiter<C>)>,
}

/// Who calls what: the subject of a quota.
pub struct Call<'a> {
    /// The principal's id.
    pub principal: &'a str,
    /// Its groups.
    pub groups: &'a [String],
    /// The upstream's name.
    pub upstream: &'a str,
    /// The upstream's own tool name.
    pub tool: &'a str,
}

impl Quotas<QuantaClock> {
    /// Quotas on the real clock.
    pub fn new(quotas: &[Quota]) -> Self {
        Quotas::with_clock(quotas, QuantaClock::default())
    }
}

impl<C: Clock + Clone> Quotas<C> {
    /// Quotas on a given clock (tests pass a `FakeRelativeClock`).
    pub fn with_clock(quotas: &[Quota], clock: C) -> Self {
        let entries = quotas
            .iter()
            .map(|q| {
                let per = NonZeroU32::new(q.calls_per_window).unwrap_or(NonZeroU32::MIN);
                let period = (q.window / per.get()).max(std::time::Duration::from_nanos(1));
                let burst = NonZeroU32::new(q.burst).unwrap_or(NonZeroU32::MIN);
                let gcra = Gcra::with_period(period)
                    .unwrap_or_else(|| Gcra::per_second(per))
                    .allow_burst(burst);
                (
                    q.clone(),
                    RateLimiter::new(gcra, DefaultKeyedStateStore::default(), clock.clone()),
                )
            })
            .collect();
        Quotas { entries }
    }

    /// Whether any quota is configured (none: every call goes without a lookup).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The first quota whose match holds.
    pub fn matching(&self, c: &Call<'_>) -> Option<&Quota> {
        self.entries.iter().map(|(q, _)| q).find(|q| applies(q, c))
    }

    /// Counts one call against the first quota whose match holds (none: not counted).
    pub fn charge(&self, c: &Call<'_>) -> Result<(), Refusal> {
        let Some((q, limiter)) = self.entries.iter().find(|(q, _)| applies(q, c)) else {
            return Ok(());
        };
        limiter
            .check_key(&c.principal.to_owned())
            .map_err(|not_until| {
                let wait = not_until.wait_time_from(limiter.clock().now());
                Refusal::Quota {
                    name: q.name.clone(),
                    limit: q.calls_per_window,
                    retry_after_ms: wait.as_millis().max(1) as u64,
                }
            })
    }

    /// Forgets principals idle for a whole window (run on a timer).
    pub fn retain_recent(&self) {
        for (_, l) in &self.entries {
            l.retain_recent();
        }
    }
}

fn applies(q: &Quota, c: &Call<'_>) -> bool {
    (q.principal.is_empty() || q.principal.iter().any(|p| p == c.principal))
        && (q.group.is_empty() || q.group.iter().any(|g| c.groups.contains(g)))
        && (q.upstream.is_empty() || q.upstream.iter().any(|u| u == c.upstream))
        && (q.tool.is_empty() || q.tool.iter().any(|g| glob(g, c.tool)))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use governor::clock::FakeRelativeClock;

    use super::*;

    fn quota(name: &str, tool: &[&str], calls: u32) -> Quota {
        Quota {
            name: name.into(),
            principal: Vec::new(),
            group: vec!["team".into()],
            upstream: vec!["alpha".into()],
            tool: tool.iter().map(|t| t.to_string()).collect(),
            calls_per_window: calls,
            window: Duration::from_secs(60),
            burst: calls,
        }
    }

    fn call<'a>(principal: &'a str, groups: &'a [String], tool: &'a str) -> Call<'a> {
        Call {
            principal,
            groups,
            upstream: "alpha",
            tool,
        }
    }

    #[test]
    fn a_quota_holds_exactly_per_principal_and_refills_with_the_window() {
        let clock = FakeRelativeClock::default();
        let q = Quotas::with_clock(&[quota("search", &["search*"], 3)], clock.clone());
        let team = vec!["team".to_owned()];
        for _ in 0..3 {
            assert_eq!(q.charge(&call("alice", &team, "search_docs")), Ok(()));
        }
        let Err(Refusal::Quota {
            name,
            limit,
            retry_after_ms,
        }) = q.charge(&call("alice", &team, "search_docs"))
        else {
            panic!("the fourth call in the window must be refused")
        };
        assert_eq!((name.as_str(), limit), ("search", 3));
        assert!(
            (1..=20_000).contains(&retry_after_ms),
            "retry after one period (20 s), got {retry_after_ms}"
        );
        // Another principal has its own count; another tool and another group are not counted.
        assert_eq!(q.charge(&call("bob", &team, "search_docs")), Ok(()));
        assert_eq!(q.charge(&call("alice", &team, "delete")), Ok(()));
        assert_eq!(q.charge(&call("alice", &[], "search_docs")), Ok(()));
        clock.advance(Duration::from_secs(20));
        assert_eq!(q.charge(&call("alice", &team, "search_docs")), Ok(()));
        assert!(q.charge(&call("alice", &team, "search_docs")).is_err());
    }

    #[test]
    fn the_first_quota_that_matches_counts_the_call() {
        let clock = FakeRelativeClock::default();
        let q = Quotas::with_clock(
            &[quota("one", &["a"], 1), quota("many", &["*"], 100)],
            clock,
        );
        let team = vec!["team".to_owned()];
        assert_eq!(q.charge(&call("alice", &team, "a")), Ok(()));
        assert!(
            matches!(q.charge(&call("alice", &team, "a")), Err(Refusal::Quota { name, .. }) if name == "one")
        );
        assert_eq!(q.charge(&call("alice", &team, "b")), Ok(()));
    }
}
