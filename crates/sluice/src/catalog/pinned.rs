//! A tools table under tool pinning: the one place a fetched tools list meets the pins.
//!
//! Takes a freshly fetched tools table of an upstream and the generation's pinning scope; gives
//! the table to store, the quarantined tools moved out of its items (so no list of any era
//! shows them) into its `quarantined` map (so a call of one is refused as such, not as unknown).
//! Refuses nothing itself: `pins/` judges; other kinds of list and an upstream whose mode is
//! `off` pass unchanged. Each tool's digest is computed here, once per fetch, never per call.

use serde_json::Value;

use crate::pins::book::{Def, Mode, Seen};
use crate::pins::{digest, Scope};
use crate::route::table::{ListKind, ListTable};
use crate::upstream::Upstream;

/// `table` with the tools `pins` quarantines withheld.
pub async fn withhold(
    pins: Option<&Scope>,
    up: &Upstream,
    kind: ListKind,
    table: ListTable,
) -> ListTable {
    let Some(scope) = pins.filter(|_| kind == ListKind::Tools) else {
        return table;
    };
    let mode = scope.mode(&up.name);
    if mode == Mode::Off {
        return table;
    }
    let seen = table
        .items
        .iter()
        .map(|i| {
            let descriptor: Value = serde_json::from_str(i.raw.get()).unwrap_or(Value::Null);
            let definition = digest::definition(&i.key, &descriptor);
            Seen {
                tool: i.key.clone(),
                def: Def {
                    digest: digest::digest(&definition),
                    definition,
                },
            }
        })
        .collect();
    let out = scope.pins.judge(&up.name, mode, seen).await;
    if out.is_empty() {
        return table;
    }
    let (held, kept): (Vec<_>, Vec<_>) =
        table.items.into_iter().partition(|i| out.contains(&i.key));
    let mut next = ListTable::new(kept, table.ttl_ms, table.public, table.fetched_at);
    next.quarantined = held.into_iter().map(|i| (i.key, i.hints)).collect();
    next
}
