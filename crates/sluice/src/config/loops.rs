//! `[loop_breaker]`: the breaker for identical tool calls, an agent stuck calling one tool
//! with the same arguments.
//!
//! Takes the raw table and its `[[loop_breaker.override]]` entries; gives a [`LoopBreaker`]:
//! the default limit (on, 30 identical calls per 60 s window and principal) and the overrides,
//! in file order (the first whose match holds sets the limit; `0` turns the breaker off for
//! what it matches). Refuses a limit over 1,000,000, a window outside 1 s..=1 day, an override
//! naming an upstream that is not configured, an override that matches everything (set the
//! default instead), and an empty tool glob.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::limits::ms;
use super::Invalid;

/// The default `max_identical_calls`.
pub(super) const DEFAULT_MAX: u32 = 30;
/// The default window.
pub(super) const DEFAULT_WINDOW: Duration = Duration::from_secs(60);
const MAX_LIMIT: u32 = 1_000_000;

/// `[loop_breaker]`: identical tool calls (one principal, one tool, the same canonical
/// arguments) allowed per window.
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLoopBreaker {
    /// Identical calls allowed per window and principal (default 30; `0` turns the breaker
    /// off). Past it a call gets 429 `-31021` with `Retry-After`.
    pub(super) max_identical_calls: Option<u32>,
    /// The window (default 60000, 1000 to 86400000): the limit refills evenly over it.
    pub(super) window_ms: Option<u64>,
    /// Other limits for some principals, groups, upstreams or tools (the first whose match
    /// holds wins), such as `0` for a tool polled on purpose.
    #[serde(default, rename = "override")]
    pub(super) overrides: Vec<RawLoopOverride>,
}

/// `[[loop_breaker.override]]`: another limit where its match holds.
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLoopOverride {
    /// The principals it applies to (any when absent).
    #[serde(default)]
    pub(super) principal: Vec<String>,
    /// The groups it applies to (any of them; any when absent).
    #[serde(default)]
    pub(super) group: Vec<String>,
    /// Configured upstream names (every upstream when absent).
    #[serde(default)]
    pub(super) upstream: Vec<String>,
    /// Globs (`*`, `?`) on the upstream's own tool names (every tool when absent).
    #[serde(default)]
    pub(super) tool: Vec<String>,
    /// Identical calls allowed per window where it applies (`0`: not counted).
    pub(super) max_identical_calls: Option<u32>,
}

/// The identical-call breaker, as configured.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LoopBreaker {
    /// Identical calls allowed per window (0: off).
    pub max_identical_calls: u32,
    /// The window.
    #[serde(with = "ms", rename = "window_ms")]
    pub window: Duration,
    /// The overrides, in file order.
    #[serde(rename = "override")]
    pub overrides: Vec<LoopOverride>,
}

impl Default for LoopBreaker {
    fn default() -> Self {
        LoopBreaker {
            max_identical_calls: DEFAULT_MAX,
            window: DEFAULT_WINDOW,
            overrides: Vec::new(),
        }
    }
}

/// One `[[loop_breaker.override]]`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LoopOverride {
    /// Principal ids (any when empty).
    pub principal: Vec<String>,
    /// Groups (any when empty).
    pub group: Vec<String>,
    /// Upstream names (any when empty).
    pub upstream: Vec<String>,
    /// Tool globs on the upstream's own names (any when empty).
    pub tool: Vec<String>,
    /// Its limit (0: off).
    pub max_identical_calls: u32,
}

/// Converts `[loop_breaker]`.
pub(super) fn loop_breaker(
    raw: RawLoopBreaker,
    upstreams: &[super::UpstreamConfig],
) -> Result<LoopBreaker, Invalid> {
    let limit = |at: &str, v: Option<u32>| match v {
        Some(n) if n > MAX_LIMIT => Err(Invalid(format!(
            "{at}: max_identical_calls = {n} is out of range (0 to {MAX_LIMIT}; 0 turns it off)"
        ))),
        Some(n) => Ok(n),
        None => Ok(DEFAULT_MAX),
    };
    let max_identical_calls = limit("[loop_breaker]", raw.max_identical_calls)?;
    let window = raw.window_ms.map_or(DEFAULT_WINDOW, Duration::from_millis);
    if window < Duration::from_secs(1) || window > Duration::from_secs(86_400) {
        return Err(Invalid(format!(
            "[loop_breaker]: window_ms = {} is out of range (1000 to 86400000)",
            window.as_millis()
        )));
    }
    let mut overrides = Vec::with_capacity(raw.overrides.len());
    for (i, o) in raw.overrides.into_iter().enumerate() {
        let at = format!("[[loop_breaker.override]] #{}", i + 1);
        if o.principal.is_empty()
            && o.group.is_empty()
            && o.upstream.is_empty()
            && o.tool.is_empty()
        {
            return Err(Invalid(format!(
                "{at} matches every call; set [loop_breaker] max_identical_calls instead"
            )));
        }
        if o.max_identical_calls.is_none() {
            return Err(Invalid(format!(
                "{at} needs max_identical_calls (0 turns the breaker off where it applies)"
            )));
        }
        if let Some(u) = o
            .upstream
            .iter()
            .find(|u| !upstreams.iter().any(|c| &c.name == *u))
        {
            return Err(Invalid(format!(
                "{at}: upstream {u:?} is not configured, so the override would apply to nothing; fix the name"
            )));
        }
        if o.tool.iter().any(|t| t.is_empty()) {
            return Err(Invalid(format!(
                "{at}: an empty tool glob matches nothing; use \"*\" for every tool"
            )));
        }
        overrides.push(LoopOverride {
            max_identical_calls: limit(&at, o.max_identical_calls)?,
            principal: o.principal,
            group: o.group,
            upstream: o.upstream,
            tool: o.tool,
        });
    }
    Ok(LoopBreaker {
        max_identical_calls,
        window,
        overrides,
    })
}
