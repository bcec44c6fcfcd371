//! `[approvals]`: how long a call held for an operator's approval waits, how many may wait,
//! and the optional webhook told of each (`[approvals.webhook]`).
//!
//! Takes the raw table; gives [`Approvals`] (defaults: wait 300000 ms, a progress line every
//! 5000 ms, 256 held calls in all and 16 per principal, no webhook). Refuses a wait outside
//! 1000..=3600000 ms, a progress interval outside 100..=60000 ms, caps outside 1..=10000, a
//! webhook URL that is not `http(s)://`, and a `secret_env` naming a variable that is unset or
//! empty (the secret is read once, at load, and never serialized).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::limits::ms;
use super::Invalid;

/// The default wait for an operator.
pub(super) const DEFAULT_WAIT_MS: u64 = 300_000;
/// The longest wait allowed.
pub(super) const MAX_WAIT_MS: u64 = 3_600_000;
const DEFAULT_PROGRESS_MS: u64 = 5_000;
const DEFAULT_MAX_HELD: usize = 256;
const DEFAULT_MAX_PER_PRINCIPAL: usize = 16;
const MAX_CAP: usize = 10_000;

/// `[approvals]`: calls held for an operator's decision (`approver = "operator"` rules).
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApprovals {
    /// How long a held call waits for an operator (default 300000, 1000 to 3600000); then
    /// the client gets `-31052`.
    pub(super) wait_ms: Option<u64>,
    /// How often the held call's stream says it is still waiting (default 5000, 100 to
    /// 60000): `notifications/progress` when the request carried a `progressToken`, else an
    /// SSE comment.
    pub(super) progress_ms: Option<u64>,
    /// The most calls held at once on this replica (default 256, 1 to 10000); past it `-31053`.
    pub(super) max_held: Option<usize>,
    /// The most calls one principal has held at once (default 16, 1 to 10000); past it `-31053`.
    pub(super) max_held_per_principal: Option<usize>,
    /// A URL told of each held call (a signed JSON POST).
    pub(super) webhook: Option<RawWebhook>,
}

/// `[approvals.webhook]`: where each held call is announced.
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWebhook {
    /// The receiver (`http://` or `https://`).
    pub(super) url: String,
    /// The environment variable holding the HMAC-SHA256 secret the `Sluice-Signature` header
    /// is made with (required).
    pub(super) secret_env: String,
}

/// Calls held for an operator's approval, as configured.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Approvals {
    /// How long a held call waits.
    #[serde(with = "ms", rename = "wait_ms")]
    pub wait: Duration,
    /// How often a held call's stream says it waits.
    #[serde(with = "ms", rename = "progress_ms")]
    pub progress: Duration,
    /// The most held calls on this replica.
    pub max_held: usize,
    /// The most held calls per principal.
    pub max_held_per_principal: usize,
    /// The webhook, if any.
    pub webhook: Option<Webhook>,
}

impl Default for Approvals {
    fn default() -> Self {
        Approvals {
            wait: Duration::from_millis(DEFAULT_WAIT_MS),
            progress: Duration::from_millis(DEFAULT_PROGRESS_MS),
            max_held: DEFAULT_MAX_HELD,
            max_held_per_principal: DEFAULT_MAX_PER_PRINCIPAL,
            webhook: None,
        }
    }
}

/// The webhook of held calls.
#[derive(Clone, Serialize, PartialEq)]
pub struct Webhook {
    /// Its URL.
    pub url: String,
    /// The variable the secret was read from.
    pub secret_env: String,
    /// The secret (never serialized, never logged).
    #[serde(skip)]
    pub secret: String,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("url", &self.url)
            .field("secret_env", &self.secret_env)
            .finish_non_exhaustive()
    }
}

/// Converts `[approvals]`.
pub(super) fn approvals(raw: RawApprovals) -> Result<Approvals, Invalid> {
    let range = |key: &str, v: Option<u64>, default: u64, lo: u64, hi: u64| {
        let v = v.unwrap_or(default);
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(Invalid(format!(
                "[approvals]: {key} = {v} is out of range ({lo} to {hi})"
            )))
        }
    };
    let wait = range("wait_ms", raw.wait_ms, DEFAULT_WAIT_MS, 1000, MAX_WAIT_MS)?;
    let progress = range(
        "progress_ms",
        raw.progress_ms,
        DEFAULT_PROGRESS_MS,
        100,
        60_000,
    )?;
    let cap = |key: &str, v: Option<usize>, default: usize| {
        range(key, v.map(|n| n as u64), default as u64, 1, MAX_CAP as u64).map(|n| n as usize)
    };
    let max_held = cap("max_held", raw.max_held, DEFAULT_MAX_HELD)?;
    let max_held_per_principal = cap(
        "max_held_per_principal",
        raw.max_held_per_principal,
        DEFAULT_MAX_PER_PRINCIPAL,
    )?;
    let webhook = raw.webhook.map(webhook).transpose()?;
    Ok(Approvals {
        wait: Duration::from_millis(wait),
        progress: Duration::from_millis(progress),
        max_held,
        max_held_per_principal,
        webhook,
    })
}

fn webhook(raw: RawWebhook) -> Result<Webhook, Invalid> {
    let ok_url = raw
        .url
        .parse::<http::Uri>()
        .is_ok_and(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some());
    if !ok_url {
        return Err(Invalid(
            "[approvals.webhook]: url must be an http:// or https:// URL".into(),
        ));
    }
    let secret = std::env::var(&raw.secret_env)
        .ok()
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| {
            Invalid(format!(
                "[approvals.webhook]: secret_env names {:?}, which is unset or empty",
                raw.secret_env
            ))
        })?;
    Ok(Webhook {
        url: raw.url,
        secret_env: raw.secret_env,
        secret,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_hold_and_values_out_of_range_are_refused_by_name() {
        let a = approvals(RawApprovals::default()).unwrap();
        assert_eq!(a, Approvals::default());
        let e = approvals(RawApprovals {
            wait_ms: Some(10),
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.0.contains("wait_ms = 10"), "{}", e.0);
        let e = approvals(RawApprovals {
            max_held_per_principal: Some(0),
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.0.contains("max_held_per_principal"), "{}", e.0);
        let e = approvals(RawApprovals {
            webhook: Some(RawWebhook {
                url: "http://127.0.0.1:9/hook".into(),
                secret_env: "SLUICE_TEST_SURELY_UNSET_WEBHOOK_SECRET".into(),
            }),
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.0.contains("unset or empty"), "{}", e.0);
    }
}
