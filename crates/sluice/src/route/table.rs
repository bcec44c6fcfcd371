//! The federation table: what each upstream lists, as Sluice last fetched it.
//!
//! Takes list pages fetched from an upstream; gives per-kind tables of items whose descriptors
//! are kept byte for byte (only `name` is rewritten to the public name), with their cache hints.
//! Refuses nothing itself: dropping tools with invalid annotations or over-long names happens
//! when the table is built ([`ListTable::build`]), each with a warning.

use std::time::Instant;

use serde_json::value::RawValue;

use super::xheader::ParamHeader;

pub use crate::mcp::lists::ListKind;

/// One listed item.
#[derive(Debug, Clone)]
pub struct Item {
    /// The upstream's own name (tools, prompts) or the URI / URI template (resources).
    pub key: String,
    /// The public name (tools, prompts) or the URI again (resources).
    pub public: String,
    /// The descriptor as the client sees it: the upstream's bytes, `name` rewritten.
    pub raw: Box<RawValue>,
    /// `x-mcp-header` annotations (tools only).
    pub headers: Vec<ParamHeader>,
    /// `annotations.destructiveHint` and `annotations.readOnlyHint` (tools only), read once here
    /// so the policy gate does not parse the descriptor on every call.
    pub hints: ToolHints,
}

/// A tool's behaviour hints, as its descriptor's `annotations` say (absent: false).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolHints {
    /// `destructiveHint`.
    pub destructive: bool,
    /// `readOnlyHint`.
    pub read_only: bool,
}

/// One upstream's list of one kind.
#[derive(Debug, Clone)]
pub struct ListTable {
    /// The items in the upstream's order.
    pub items: Vec<Item>,
    /// The smallest `ttlMs` of the upstream's pages (absent or negative counts as 0).
    pub ttl_ms: u64,
    /// Whether every page said `cacheScope: "public"`.
    pub public: bool,
    /// When it was fetched.
    pub fetched_at: Instant,
    /// Item positions by key (the first item of a key), so a lookup costs one hash.
    index: std::collections::HashMap<String, usize>,
    /// Tools withheld from `items` because their definitions are quarantined (`pins/`), by key,
    /// with their hints (a call of one is refused as such, when the caller would see it).
    pub quarantined: std::collections::HashMap<String, ToolHints>,
}

impl ListTable {
    /// A table of `items` (indexed by key once, here).
    pub fn new(items: Vec<Item>, ttl_ms: u64, public: bool, fetched_at: Instant) -> Self {
        let mut index = std::collections::HashMap::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            index.entry(item.key.clone()).or_insert(i);
        }
        ListTable {
            items,
            ttl_ms,
            public,
            fetched_at,
            index,
            quarantined: std::collections::HashMap::new(),
        }
    }

    /// An empty table (nothing fetched yet, or the family is not served).
    pub fn empty() -> Self {
        ListTable::new(Vec::new(), 0, false, Instant::now())
    }

    /// Milliseconds of freshness left, if any.
    pub fn fresh_for(&self, now: Instant) -> Option<u64> {
        let age = now.saturating_duration_since(self.fetched_at).as_millis() as u64;
        (age < self.ttl_ms).then(|| self.ttl_ms - age)
    }

    /// The item with upstream key `key`.
    pub fn by_key(&self, key: &str) -> Option<&Item> {
        self.index.get(key).map(|&i| &self.items[i])
    }
}
