//! Budgets per principal: sampling asks and requested tokens per window (governor, keyed by
//! principal), with limits resolved globally, per upstream and per group.
//!
//! Takes a sampling ask (principal, upstream, groups, `maxTokens`); gives `Ok` and charges the
//! budgets, or a [`Refusal`] saying which limit was hit and when to retry. The clock is a type
//! parameter so tests drive time without sleeping.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock, QuantaClock};
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};

use crate::config::{BudgetLimits, BudgetProfile};

type Limiter<C> = RateLimiter<
    String,
    DefaultKeyedStateStore<String>,
    C,
    governor::middleware::NoOpMiddleware<<C as Clock>::Instant>,
>;

/// Why a budget refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Too many sampling asks in the window; retry after this long.
    Sampling(Duration),
    /// Too many tokens asked for in the window; retry after this long.
    Tokens(Duration),
    /// One ask wants more tokens than a whole window allows.
    TokensNever(u64),
    /// The shared budgets (Redis) are unreachable and the cluster fails closed.
    Unavailable,
}

struct Profile<C: Clock> {
    scope: (Option<String>, Option<String>),
    limits: BudgetLimits,
    sampling: Limiter<C>,
    tokens: Limiter<C>,
}

/// All budgets.
pub struct Budgets<C: Clock = DefaultClock> {
    profiles: Vec<Profile<C>>,
}

fn quota(per_window: u32, burst: u32, window: Duration) -> Quota {
    let per = NonZeroU32::new(per_window.max(1)).unwrap_or(NonZeroU32::MIN);
    let period = (window / per.get()).max(Duration::from_nanos(1));
    Quota::with_period(period)
        .unwrap_or_else(|| Quota::per_second(per))
        .allow_burst(NonZeroU32::new(burst.max(1)).unwrap_or(NonZeroU32::MIN))
}

impl Budgets<QuantaClock> {
    /// Budgets on the real clock.
    pub fn new(global: &BudgetLimits, overrides: &[BudgetProfile]) -> Self {
        Budgets::with_clock(global, overrides, QuantaClock::default())
    }
}

impl<C: Clock + Clone> Budgets<C> {
    /// Budgets on a given clock (tests pass a `FakeRelativeClock`).
    pub fn with_clock(global: &BudgetLimits, overrides: &[BudgetProfile], clock: C) -> Self {
        let make = |scope: (Option<String>, Option<String>), limits: &BudgetLimits| Profile {
            scope,
            sampling: RateLimiter::new(
                quota(
                    limits.sampling_per_window,
                    limits.sampling_burst,
                    limits.window,
                ),
                DefaultKeyedStateStore::default(),
                clock.clone(),
            ),
            tokens: RateLimiter::new(
                quota(
                    limits.tokens_per_window,
                    limits.tokens_per_window,
                    limits.window,
                ),
                DefaultKeyedStateStore::default(),
                clock.clone(),
            ),
            limits: limits.clone(),
        };
        let mut profiles: Vec<Profile<C>> = overrides
            .iter()
            .map(|o| make((o.upstream.clone(), o.group.clone()), &o.limits))
            .collect();
        // Most specific first: upstream and group, then upstream, then group; the global last.
        profiles.sort_by_key(|p| match (&p.scope.0, &p.scope.1) {
            (Some(_), Some(_)) => 0,
            (Some(_), None) => 1,
            _ => 2,
        });
        profiles.push(make((None, None), global));
        Budgets { profiles }
    }

    fn profile(&self, upstream: &str, groups: &[String]) -> &Profile<C> {
        let fits = |p: &&Profile<C>| {
            p.scope.0.as_deref().is_none_or(|u| u == upstream)
                && p.scope.1.as_ref().is_none_or(|g| groups.contains(g))
        };
        self.profiles
            .iter()
            .find(fits)
            .unwrap_or_else(|| &self.profiles[self.profiles.len() - 1])
    }

    /// The shared-budget key of the profile that applies (its scope), with its limits.
    pub fn shared_key(&self, upstream: &str, groups: &[String]) -> (String, &BudgetLimits) {
        let p = self.profile(upstream, groups);
        let scope = match &p.scope {
            (None, None) => "*".to_owned(),
            (u, g) => format!(
                "u={}|g={}",
                u.as_deref().unwrap_or("*"),
                g.as_deref().unwrap_or("*")
            ),
        };
        (scope, &p.limits)
    }

    /// The limits that apply to a principal's request to an upstream.
    pub fn limits(&self, upstream: &str, groups: &[String]) -> &BudgetLimits {
        &self.profile(upstream, groups).limits
    }

    /// Charges one sampling ask of `max_tokens` tokens.
    pub fn charge_sampling(
        &self,
        principal: &str,
        upstream: &str,
        groups: &[String],
        max_tokens: u64,
    ) -> Result<(), Refusal> {
        let p = self.profile(upstream, groups);
        let key = principal.to_owned();
        // Check tokens first without charging sampling, so a refusal costs nothing.
        if let Some(n) = NonZeroU32::new(max_tokens.min(u32::MAX as u64) as u32) {
            match p.tokens.check_key_n(&key, n) {
                Err(_) => return Err(Refusal::TokensNever(max_tokens)),
                Ok(Err(not_until)) => {
                    return Err(Refusal::Tokens(
                        not_until.wait_time_from(p.tokens_clock_now()),
                    ))
                }
                Ok(Ok(())) => {}
            }
        }
        if let Err(not_until) = p.sampling.check_key(&key) {
            return Err(Refusal::Sampling(
                not_until.wait_time_from(p.tokens_clock_now()),
            ));
        }
        Ok(())
    }

    /// Forgets principals idle for a whole window (run on a timer).
    pub fn retain_recent(&self) {
        for p in &self.profiles {
            p.sampling.retain_recent();
            p.tokens.retain_recent();
        }
    }
}

impl<C: Clock> Profile<C> {
    fn tokens_clock_now(&self) -> C::Instant {
        self.tokens.clock().now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use governor::clock::FakeRelativeClock;

    fn limits() -> BudgetLimits {
        BudgetLimits {
            sampling_per_window: 2,
            sampling_burst: 2,
            tokens_per_window: 100,
            window: Duration::from_secs(60),
            ..BudgetLimits::default()
        }
    }

    #[test]
    fn a_burst_over_the_window_is_refused_with_a_retry_time_and_time_restores_it() {
        let clock = FakeRelativeClock::default();
        let b = Budgets::with_clock(&limits(), &[], clock.clone());
        assert!(b.charge_sampling("alice", "u", &[], 10).is_ok());
        assert!(b.charge_sampling("alice", "u", &[], 10).is_ok());
        let Err(Refusal::Sampling(wait)) = b.charge_sampling("alice", "u", &[], 10) else {
            panic!("third ask should be refused")
        };
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        assert!(
            b.charge_sampling("bob", "u", &[], 10).is_ok(),
            "budgets are per principal"
        );
        clock.advance(wait);
        assert!(b.charge_sampling("alice", "u", &[], 10).is_ok());
    }

    #[test]
    fn tokens_are_summed_per_window_and_one_ask_over_the_window_never_fits() {
        let b = Budgets::with_clock(
            &BudgetLimits {
                sampling_burst: 100,
                sampling_per_window: 100,
                ..limits()
            },
            &[],
            FakeRelativeClock::default(),
        );
        assert!(b.charge_sampling("alice", "u", &[], 60).is_ok());
        assert!(matches!(
            b.charge_sampling("alice", "u", &[], 60),
            Err(Refusal::Tokens(_))
        ));
        assert_eq!(
            b.charge_sampling("alice", "u", &[], 101),
            Err(Refusal::TokensNever(101))
        );
    }

    #[test]
    fn the_most_specific_profile_applies() {
        let o = vec![
            BudgetProfile {
                upstream: Some("u".into()),
                group: None,
                limits: BudgetLimits {
                    max_rounds: 3,
                    ..limits()
                },
            },
            BudgetProfile {
                upstream: None,
                group: Some("eng".into()),
                limits: BudgetLimits {
                    max_rounds: 9,
                    ..limits()
                },
            },
        ];
        let b = Budgets::with_clock(&limits(), &o, FakeRelativeClock::default());
        assert_eq!(b.limits("u", &["eng".into()]).max_rounds, 3);
        assert_eq!(b.limits("v", &["eng".into()]).max_rounds, 9);
        assert_eq!(b.limits("v", &[]).max_rounds, limits().max_rounds);
    }
}
