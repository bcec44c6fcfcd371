//! `[budget]` and `[[budget.override]]`: what one principal may spend on sampling and rounds.
//!
//! Takes the raw `[budget]` table; gives the global [`BudgetLimits`] (each absent key at its
//! default) and one [`BudgetProfile`] per override (each absent key taken from the global
//! limits). Refuses an override that names neither an upstream nor a group.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::limits::ms;
use super::raw::{RawBudget, RawLimitsSet};
use super::Invalid;

/// What to do with a sampling ask whose `maxTokens` is over `max_tokens_per_ask`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum MaxTokensAction {
    /// Refuse the ask.
    #[default]
    Deny,
    /// Lower `maxTokens` to the cap and let it go on.
    Clamp,
}

/// Limits for one principal's requests (globally, or for an upstream or a group).
#[derive(Debug, Clone, Serialize)]
pub struct BudgetLimits {
    /// Sampling asks per window (default 60).
    pub sampling_per_window: u32,
    /// Sampling asks allowed at once (default 20).
    pub sampling_burst: u32,
    /// Sum of `maxTokens` asked for per window (default 200000).
    pub tokens_per_window: u32,
    /// The window (default 60 s).
    #[serde(with = "ms", rename = "window_ms")]
    pub window: Duration,
    /// `input_required` rounds per original request (default 5).
    pub max_rounds: u32,
    /// `maxTokens` per sampling ask (default 8192).
    pub max_tokens_per_ask: u64,
    /// Deny or clamp an ask over `max_tokens_per_ask` (default deny).
    pub max_tokens_action: MaxTokensAction,
    /// Parked exchanges per principal (default 16).
    pub max_parked_per_principal: usize,
    /// Bytes of one input request sent to the client (default 256 KiB).
    pub max_input_request_bytes: usize,
    /// Bytes of one input response from the client (default 1 MiB).
    pub max_input_response_bytes: usize,
    /// Input requests (asks) in one round; an upstream asking more at once is refused (default 16).
    pub max_asks_per_round: usize,
}

/// Limits for an upstream and/or a group.
#[derive(Debug, Clone, Serialize)]
pub struct BudgetProfile {
    /// The upstream it applies to (any when absent).
    pub upstream: Option<String>,
    /// The group it applies to (any when absent).
    pub group: Option<String>,
    /// The limits.
    pub limits: BudgetLimits,
}

/// The whole `[budget]` table once converted; `Config` keeps its two parts side by side.
pub(super) struct Budget {
    /// The limits every principal starts from.
    pub(super) global: BudgetLimits,
    /// The overrides, in file order.
    pub(super) overrides: Vec<BudgetProfile>,
}

// === impl BudgetLimits ===

impl Default for BudgetLimits {
    fn default() -> Self {
        BudgetLimits {
            sampling_per_window: 60,
            sampling_burst: 20,
            tokens_per_window: 200_000,
            window: Duration::from_secs(60),
            max_rounds: 5,
            max_tokens_per_ask: 8192,
            max_tokens_action: MaxTokensAction::Deny,
            max_parked_per_principal: 16,
            max_input_request_bytes: 256 << 10,
            max_input_response_bytes: 1 << 20,
            max_asks_per_round: 16,
        }
    }
}

impl BudgetLimits {
    /// These limits with every key `r` sets replaced.
    fn merged(&self, r: &RawLimitsSet) -> BudgetLimits {
        BudgetLimits {
            sampling_per_window: r.sampling_per_window.unwrap_or(self.sampling_per_window),
            sampling_burst: r.sampling_burst.unwrap_or(self.sampling_burst),
            tokens_per_window: r.tokens_per_window.unwrap_or(self.tokens_per_window),
            window: r
                .window_ms
                .map(Duration::from_millis)
                .unwrap_or(self.window),
            max_rounds: r.max_rounds.unwrap_or(self.max_rounds),
            max_tokens_per_ask: r.max_tokens_per_ask.unwrap_or(self.max_tokens_per_ask),
            max_tokens_action: r.max_tokens_action.unwrap_or(self.max_tokens_action),
            max_parked_per_principal: r
                .max_parked_per_principal
                .unwrap_or(self.max_parked_per_principal),
            max_input_request_bytes: r
                .max_input_request_bytes
                .unwrap_or(self.max_input_request_bytes),
            max_input_response_bytes: r
                .max_input_response_bytes
                .unwrap_or(self.max_input_response_bytes),
            max_asks_per_round: r.max_asks_per_round.unwrap_or(self.max_asks_per_round),
        }
    }
}

// === impl Budget ===

impl TryFrom<RawBudget> for Budget {
    type Error = Invalid;

    fn try_from(raw: RawBudget) -> Result<Budget, Invalid> {
        let global = BudgetLimits::default().merged(&raw.global);
        if raw
            .overrides
            .iter()
            .any(|o| o.upstream.is_none() && o.group.is_none())
        {
            return Err(Invalid(
                "a [[budget.override]] needs an upstream or a group".to_owned(),
            ));
        }
        let overrides = raw
            .overrides
            .into_iter()
            .map(|o| BudgetProfile {
                limits: global.merged(&o.limits),
                upstream: o.upstream,
                group: o.group,
            })
            .collect();
        Ok(Budget { global, overrides })
    }
}
