//! What one listener last saw of each upstream's lists, so that with `hide`/`show` rules a
//! list-changed notification reaches it only when its own view changed.
//!
//! Takes the gateway's tables and the listener's principal; gives, per list change an upstream
//! announced, whether to tell this listener. Without visibility rules every change is told.
//! A change is held back only when the table was fetched again since the last view and the
//! items the principal sees (their public names, in order) are the same; a change whose table
//! was not refetched (its refresh budget spent) is told, as Sluice cannot know what changed.
//! Bounded: one entry per upstream and list kind.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::Instant;

use super::Change;
use crate::auth::Principal;
use crate::gateway::Gateway;
use crate::policy::visibility::Viewer;
use crate::route::table::ListKind;

/// A listener's last views: per (upstream, kind), when the table was fetched and a
/// fingerprint of what the principal saw of it.
#[derive(Default)]
pub(super) struct Views {
    seen: HashMap<(String, ListKind), (Instant, u64)>,
}

fn kinds(c: &Change) -> &'static [ListKind] {
    match c {
        Change::Tools => &[ListKind::Tools],
        Change::Prompts => &[ListKind::Prompts],
        Change::Resources => &[ListKind::Resources, ListKind::Templates],
        Change::Updated(_) => &[],
    }
}

impl Views {
    /// The views at the listen's start, for every upstream the principal reaches.
    pub(super) fn start(gw: &Gateway, p: &Principal) -> Views {
        let mut v = Views::default();
        if gw.governor.has_visibility() {
            for up in gw.reachable(p) {
                for kind in ListKind::ALL {
                    v.look(gw, p, &up.name, kind);
                }
            }
        }
        v
    }

    /// Records the current view of `upstream`'s `kind` list; gives whether it differs from the
    /// one before (or the table was not fetched again since).
    fn look(&mut self, gw: &Gateway, p: &Principal, upstream: &str, kind: ListKind) -> bool {
        let Some(up) = gw.upstream(upstream) else { return true };
        let table = up.list(kind);
        let shown = gw.governor.shown(&Viewer::of(p), upstream, kind, &table);
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for (i, item) in table.items.iter().enumerate() {
            if shown.as_ref().is_none_or(|s| s[i]) {
                item.public.hash(&mut h);
                item.raw.get().hash(&mut h);
            }
        }
        let now = (table.fetched_at, h.finish());
        let before = self.seen.insert((upstream.to_owned(), kind), now);
        before.is_none_or(|(at, print)| at >= now.0 || print != now.1)
    }

    /// Whether to tell the listener of `change` from `upstream`.
    pub(super) fn tell(&mut self, gw: &Gateway, p: &Principal, upstream: &str, change: &Change) -> bool {
        if !gw.governor.has_visibility() || kinds(change).is_empty() {
            return true;
        }
        let mut changed = false;
        for kind in kinds(change) {
            changed |= self.look(gw, p, upstream, *kind);
        }
        changed
    }
}
