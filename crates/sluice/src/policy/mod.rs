//! Stage 5, governance: approval rules, budgets, call quotas and the identical-call breaker
//! per principal.
//!
//! Takes a tool call or an upstream's ask with its principal; gives allow, deny (with the rule
//! and a reason), approve (an approval round first), or a budget, quota or repeated-call
//! refusal. Rules come from
//! `policies/*.toml`; a config reload ([`Governor::next`]) reads them again and keeps the budget,
//! quota and consumed-state bookkeeping unless the budgets or quotas themselves changed.

pub mod approval;
pub mod ask;
pub mod budget;
pub mod loops;
pub mod operator;
pub mod quota;
pub mod refusal;
pub mod rules;
pub mod shape;
pub mod usage;
pub mod visibility;

use std::sync::Arc;

pub use budget::Budgets;
pub use quota::Quotas;
pub use refusal::Refusal;
pub use rules::{ByOperator, Decision, Effect, Rules, Subject};

/// Round states remembered as consumed at once (each until its expiry, `bridge.park_ms`).
const MAX_CONSUMED: usize = 1 << 20;

/// Rules and budgets, shared by the requests of one config generation.
pub struct Governor {
    rules: Arc<Rules>,
    /// Whether the rules hold any `hide` or `show`.
    visibility: bool,
    /// Budgets per principal (shared with the next generation while `[budget]` stays the same).
    pub budgets: Arc<Budgets>,
    /// Per-tool call quotas per principal (shared likewise while `[[quota]]` stays the same).
    pub quotas: Arc<Quotas>,
    /// The identical-call breaker (shared likewise while `[loop_breaker]` stays the same).
    pub loops: Arc<loops::Loops>,
    /// What each visibility class sees of each list.
    pub views: visibility::Views,
    /// Nonces of round states already presented (every Sluice-sealed round state is single use).
    consumed: Arc<crate::state::nonces::Nonces>,
    /// What each principal used (the admin API's view), kept across reloads.
    pub usage: Arc<usage::Usage>,
    /// The replicas' shared state (`[cluster]`), kept across reloads.
    pub cluster: Option<Arc<crate::cluster::Cluster>>,
    /// `[budget]` with its profiles, and `[[quota]]`, as read, to tell whether a reload changed
    /// them.
    settings: [serde_json::Value; 3],
}

/// The budget and the quota settings of a config, compared across a reload.
fn settings(cfg: &crate::config::Config) -> [serde_json::Value; 3] {
    [
        serde_json::json!([cfg.budget, cfg.budget_overrides]),
        serde_json::json!(cfg.quotas),
        serde_json::json!(cfg.loop_breaker),
    ]
}

impl Governor {
    /// Loads the policy files and sets up the budgets.
    pub fn new(cfg: &crate::config::Config) -> Result<Governor, String> {
        let rules = Rules::load(&cfg.policies)?;
        let upstreams: Vec<String> = cfg.upstreams.iter().map(|u| u.name.clone()).collect();
        check_upstreams(&rules, &upstreams)?;
        Ok(Governor {
            visibility: rules.has_visibility(),
            rules: Arc::new(rules),
            budgets: Arc::new(Budgets::new(&cfg.budget, &cfg.budget_overrides)),
            quotas: Arc::new(Quotas::new(&cfg.quotas)),
            loops: Arc::new(loops::Loops::new(&cfg.loop_breaker)),
            views: visibility::Views::default(),
            consumed: Arc::new(crate::state::nonces::Nonces::new(MAX_CONSUMED)),
            usage: Arc::default(),
            cluster: cfg
                .cluster
                .as_ref()
                .map(crate::cluster::Cluster::new)
                .transpose()?
                .map(Arc::new),
            settings: settings(cfg),
        })
    }

    /// The governor of a reloaded config: its rules read again (a broken file is an error and
    /// changes nothing), and the consumed round states carried over, so a state used before the
    /// reload is still refused after it. What principals spent carries over: their budgets
    /// unless `[budget]` changed, their quotas unless `[[quota]]` changed (each then starts
    /// again under its new limits).
    pub fn next(&self, cfg: &crate::config::Config) -> Result<Governor, String> {
        let mut fresh = Governor::new(cfg)?;
        if fresh.settings[0] == self.settings[0] {
            fresh.budgets = self.budgets.clone();
        }
        if fresh.settings[1] == self.settings[1] {
            fresh.quotas = self.quotas.clone();
        }
        if fresh.settings[2] == self.settings[2] {
            fresh.loops = self.loops.clone();
        }
        fresh.consumed = self.consumed.clone();
        fresh.usage = self.usage.clone();
        fresh.cluster = self.cluster.clone();
        Ok(fresh)
    }

    /// Whether [`Governor::next`] started the budgets or the quotas again.
    pub fn restarted_budgets(&self, previous: &Governor) -> bool {
        !Arc::ptr_eq(&self.budgets, &previous.budgets)
            || !Arc::ptr_eq(&self.quotas, &previous.quotas)
    }

    /// The rules.
    pub fn rules(&self) -> Arc<Rules> {
        self.rules.clone()
    }

    /// Whether `v` sees `item` of `upstream` (the current rules' `hide` and `show`).
    pub fn shows(
        &self,
        v: &visibility::Viewer<'_>,
        upstream: &str,
        item: &visibility::Listed<'_>,
    ) -> bool {
        !self.has_visibility() || self.rules().shows(v, upstream, item)
    }

    /// Which items of `table` `v` sees, by position (`None`: all of them); see
    /// [`visibility::Views::shown`].
    pub fn shown(
        &self,
        v: &visibility::Viewer<'_>,
        upstream: &str,
        kind: crate::route::table::ListKind,
        table: &Arc<crate::route::table::ListTable>,
    ) -> Option<Arc<[bool]>> {
        if !self.has_visibility() {
            return None;
        }
        self.views.shown(&self.rules(), v, upstream, kind, table)
    }

    /// Whether what a principal sees can depend on who it is (any `hide` or `show` rule).
    pub fn has_visibility(&self) -> bool {
        self.visibility
    }

    /// Consumes a round state's nonce; `Ok(false)` when it was presented before (a replay),
    /// here or, with `[cluster]`, on any replica. Redis unreachable: refused under
    /// `on_redis_error = "closed"`, this replica's own record under `"local"` (a state
    /// consumed on another replica is then not known here).
    pub async fn consume_state(&self, nonce: &str, expires_ms: u64) -> Result<bool, Refusal> {
        let now = crate::state::now_ms();
        // This replica's own record first: a replay here costs no round trip, and it still
        // holds while Redis is away.
        if !self.consumed.consume(nonce, expires_ms, now) {
            return Ok(false);
        }
        let Some(c) = &self.cluster else {
            return Ok(true);
        };
        // A claim that times out is released when the request is refused (its retry can then
        // succeed on any replica), confirmed when it goes on (local).
        let timed_out = match c.cfg.on_redis_error {
            crate::config::OnRedisError::Closed => crate::cluster::shared::TimedOut::Release,
            crate::config::OnRedisError::Local => crate::cluster::shared::TimedOut::Confirm,
        };
        match c.shared.consume(nonce, expires_ms, now, timed_out).await {
            Ok(crate::cluster::shared::Consumed::First) => Ok(true),
            Ok(crate::cluster::shared::Consumed::Used) => Ok(false),
            Ok(crate::cluster::shared::Consumed::Settling) => {
                // An earlier attempt's claim is being released: retryable, as Redis away is.
                self.consumed.release(nonce, expires_ms);
                Err(Refusal::SharedState)
            }
            Err(_) if c.unavailable("single use") == crate::cluster::Fallback::Local => Ok(true),
            Err(_) => {
                // Refused as retryable: the retry must find the state unused here too.
                self.consumed.release(nonce, expires_ms);
                Err(Refusal::SharedState)
            }
        }
    }

    /// Counts one tool call against its `[[quota]]`: across replicas in Redis with
    /// `[cluster]`, in this process otherwise (or, under `"local"`, while Redis is away). A
    /// Redis charge that got no answer in time is refunded when it lands (the call is refused as
    /// retryable, or counted here alone under `"local"`): never counted twice.
    pub async fn charge_quota(&self, call: &quota::Call<'_>) -> Result<(), Refusal> {
        let charged = self.charge_quota_once(call).await;
        if let (Ok(()), Some(q)) = (&charged, self.quotas.matching(call)) {
            self.usage.quota(call.principal, q);
        }
        charged
    }

    async fn charge_quota_once(&self, call: &quota::Call<'_>) -> Result<(), Refusal> {
        if let (Some(c), Some(q)) = (&self.cluster, self.quotas.matching(call)) {
            let rate = crate::cluster::Rate {
                interval_us: q.window.as_micros() as f64 / f64::from(q.calls_per_window.max(1)),
                burst: u64::from(q.burst.max(1)),
            };
            // Length-prefixed: no quota name and principal can spell another pair's key.
            let key = format!("q{}:{}:{}", q.name.len(), q.name, call.principal);
            match c.shared.charge(&key, rate, rate, 0).await {
                Ok(crate::cluster::Charged::Ok) => return Ok(()),
                Ok(crate::cluster::Charged::Sampling(w) | crate::cluster::Charged::Tokens(w)) => {
                    let retry_after_ms = w.div_ceil(1000).max(1);
                    return Err(Refusal::Quota {
                        name: q.name.clone(),
                        limit: q.calls_per_window,
                        retry_after_ms,
                    });
                }
                Ok(crate::cluster::Charged::TokensNever) => {}
                Err(_) if c.unavailable("call quota") == crate::cluster::Fallback::Local => {}
                Err(_) => return Err(Refusal::SharedState),
            }
        }
        self.quotas.charge(call)
    }

    /// Counts one tool call against the identical-call breaker: across replicas in Redis with
    /// `[cluster]` (the same GCRA, keyed on the principal and the call's digest), in this
    /// process otherwise, and while Redis is away whatever `on_redis_error` says (a safety net
    /// on by default must not stop every call when Redis is).
    pub async fn charge_repeat(&self, call: &loops::Call<'_>) -> Result<(), Refusal> {
        let (max, window) = self.loops.limit(call);
        if max == 0 {
            return Ok(());
        }
        let digest = loops::digest(call.upstream, call.tool, call.arguments);
        if let Some(c) = &self.cluster {
            let rate = crate::cluster::Rate {
                interval_us: window.as_micros() as f64 / f64::from(max),
                burst: u64::from(max),
            };
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            // Length-prefixed principal; a letter first, as no budget key starts.
            let key = format!("l{}:{}:{hex}", call.principal.len(), call.principal);
            let refused = |retry_after_ms| Refusal::Repeated {
                tool: call.tool.to_owned(),
                limit: max,
                window_ms: window.as_millis() as u64,
                retry_after_ms,
            };
            match c.shared.charge(&key, rate, rate, 0).await {
                Ok(crate::cluster::Charged::Ok) => return Ok(()),
                Ok(crate::cluster::Charged::Sampling(w) | crate::cluster::Charged::Tokens(w)) => {
                    return Err(refused(w.div_ceil(1000).max(1)));
                }
                Ok(crate::cluster::Charged::TokensNever) => {}
                Err(_) => {
                    tracing::debug!("Redis unreachable: identical calls counted in this replica");
                }
            }
        }
        self.loops.charge(call, digest, max)
    }

    /// Charges one sampling ask of `max_tokens` to the principal's budgets: across replicas
    /// in Redis with `[cluster]` (one atomic script, applied at most once, refunded when it got
    /// no answer in time), in this process otherwise or, under `on_redis_error = "local"`, while
    /// Redis is unreachable.
    pub async fn charge_sampling(
        &self,
        ctx: &ask::AskCtx,
        max_tokens: u64,
    ) -> Result<(), budget::Refusal> {
        let charged = self.charge_sampling_once(ctx, max_tokens).await;
        if charged.is_ok() {
            let limits = self.budgets.limits(&ctx.upstream, &ctx.groups);
            self.usage.sampling(&ctx.principal, limits, max_tokens);
        }
        charged
    }

    async fn charge_sampling_once(
        &self,
        ctx: &ask::AskCtx,
        max_tokens: u64,
    ) -> Result<(), budget::Refusal> {
        if let Some(c) = &self.cluster {
            let (scope, l) = self.budgets.shared_key(&ctx.upstream, &ctx.groups);
            let window_us = l.window.as_micros() as f64;
            let sampling = crate::cluster::Rate {
                interval_us: window_us / f64::from(l.sampling_per_window.max(1)),
                burst: u64::from(l.sampling_burst.max(1)),
            };
            let tokens = crate::cluster::Rate {
                interval_us: window_us / f64::from(l.tokens_per_window.max(1)),
                burst: u64::from(l.tokens_per_window.max(1)),
            };
            let key = format!("{}:{scope}:{}", scope.len(), ctx.principal);
            let us = |w: u64| std::time::Duration::from_micros(w);
            match c.shared.charge(&key, sampling, tokens, max_tokens).await {
                Ok(crate::cluster::Charged::Ok) => return Ok(()),
                Ok(crate::cluster::Charged::Sampling(w)) => {
                    return Err(budget::Refusal::Sampling(us(w)))
                }
                Ok(crate::cluster::Charged::Tokens(w)) => {
                    return Err(budget::Refusal::Tokens(us(w)))
                }
                Ok(crate::cluster::Charged::TokensNever) => {
                    return Err(budget::Refusal::TokensNever(max_tokens))
                }
                Err(_) if c.unavailable("budget") == crate::cluster::Fallback::Local => {}
                Err(_) => return Err(budget::Refusal::Unavailable),
            }
        }
        self.budgets
            .charge_sampling(&ctx.principal, &ctx.upstream, &ctx.groups, max_tokens)
    }
}

/// A `hide` or `show` rule naming an upstream the config does not have would hide nothing.
fn check_upstreams(rules: &Rules, upstreams: &[String]) -> Result<(), String> {
    match rules.unknown_upstreams(upstreams).next() {
        Some((rule, u)) => {
            Err(format!("policy rule {rule:?}: upstream {u:?} is not configured, so the rule would hide or show nothing; fix the name"))
        }
        None => Ok(()),
    }
}
