//! `[[quota]]`: per-tool call quotas, counted per principal.
//!
//! Takes the raw `[[quota]]` tables; gives one [`Quota`] each, in file order (the first whose
//! match holds counts a call). Refuses a quota without a name or with a name given twice, one
//! naming an upstream that is not configured,
//! `calls_per_window` or `burst` outside 1..=1,000,000, a window outside 1 ms..=1 day, and a
//! tool glob that is empty.

use std::time::Duration;

use serde::Serialize;

use super::limits::ms;
use super::raw::RawQuota;
use super::Invalid;

/// The largest `calls_per_window` and `burst`.
pub(super) const MAX_CALLS: u32 = 1_000_000;
/// The longest window.
pub(super) const MAX_WINDOW: Duration = Duration::from_secs(86_400);

/// One call quota: who, which tools, how many calls per window.
#[derive(Debug, Clone, Serialize)]
pub struct Quota {
    /// Its name (in the refusal and the audit record).
    pub name: String,
    /// Principal ids it counts (any when empty).
    pub principal: Vec<String>,
    /// Groups it counts (any of them; any when empty).
    pub group: Vec<String>,
    /// Upstream names (any when empty).
    pub upstream: Vec<String>,
    /// Tool name globs (`*`, `?`) on the upstream's own names (every tool when empty).
    pub tool: Vec<String>,
    /// Calls per window and principal.
    pub calls_per_window: u32,
    /// The window (default 60 s).
    #[serde(with = "ms", rename = "window_ms")]
    pub window: Duration,
    /// Calls allowed at once (default `calls_per_window`: the whole window's calls may come
    /// together, and then one more each `window / calls_per_window`).
    pub burst: u32,
}

/// Converts the `[[quota]]` tables, in order.
pub(super) fn quotas(
    raw: Vec<RawQuota>,
    upstreams: &[super::UpstreamConfig],
) -> Result<Vec<Quota>, Invalid> {
    let mut out: Vec<Quota> = Vec::with_capacity(raw.len());
    for (i, q) in raw.into_iter().enumerate() {
        let at = format!("[[quota]] #{}", i + 1);
        let name = q
            .name
            .filter(|n| !n.trim().is_empty())
            .ok_or_else(|| Invalid(format!("{at} needs a name")))?;
        if out.iter().any(|o| o.name == name) {
            return Err(Invalid(format!(
                "{at}: the name {name:?} is given twice; quota names must differ"
            )));
        }
        let calls = q
            .calls_per_window
            .ok_or_else(|| Invalid(format!("quota {name:?} needs calls_per_window")))?;
        let burst = q.burst.unwrap_or(calls);
        for (key, v) in [("calls_per_window", calls), ("burst", burst)] {
            if !(1..=MAX_CALLS).contains(&v) {
                return Err(Invalid(format!(
                    "quota {name:?}: {key} = {v} is out of range (1 to {MAX_CALLS})"
                )));
            }
        }
        let window = Duration::from_millis(q.window_ms.unwrap_or(60_000));
        if window.is_zero() || window > MAX_WINDOW {
            return Err(Invalid(format!(
                "quota {name:?}: window_ms = {} is out of range (1 to 86400000)",
                window.as_millis()
            )));
        }
        if let Some(u) = q
            .upstream
            .iter()
            .find(|u| !upstreams.iter().any(|c| &c.name == *u))
        {
            return Err(Invalid(format!(
                "quota {name:?}: upstream {u:?} is not configured, so the quota would count nothing; fix the name"
            )));
        }
        if q.tool.iter().any(|t| t.is_empty()) {
            return Err(Invalid(format!(
                "quota {name:?}: an empty tool glob matches nothing; use \"*\" for every tool"
            )));
        }
        out.push(Quota {
            name,
            principal: q.principal,
            group: q.group,
            upstream: q.upstream,
            tool: q.tool,
            calls_per_window: calls,
            window,
            burst,
        });
    }
    Ok(out)
}
