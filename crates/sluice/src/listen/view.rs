//! What one listener last saw of each upstream's lists, so that with `hide`/`show` rules a
//! list-changed notification reaches it only when its own view changed.
//!
//! Takes the generation's tables (its [`Reach`]) and the listener's principal (a modern listen stream's, or a
//! 2025-11-25 client session's GET stream's); gives, per list change an upstream
//! announced, whether to tell this listener. Without visibility rules every change is told.
//! A change is held back only when the table was fetched after the upstream announced it and
//! the items the principal sees (their names and descriptors, in order) are the same as at the
//! last view; a change whose table was not fetched since (its refresh budget spent) is told, as
//! Sluice cannot know what changed.
//! A `resources/updated` is told only for a URI the principal may see. Bounded: one entry per
//! upstream and list kind.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::Instant;

use super::{Change, Published};
use crate::auth::Principal;
use crate::catalog::Reach;
use crate::policy::visibility::{Listed, Viewer};
use crate::route::table::{ListKind, ToolHints};

/// A listener's last views: per (upstream, kind), when the table was fetched and a
/// fingerprint of what the principal saw of it.
#[derive(Default)]
pub(crate) struct Views {
    seen: HashMap<(String, ListKind), (Instant, u64)>,
}

impl Views {
    /// The views at the listen's start, for every upstream the principal reaches.
    pub(crate) fn start(reach: &Reach, p: &Principal) -> Views {
        let mut v = Views::default();
        if reach.governor.has_visibility() {
            for up in reach.reachable(p) {
                for kind in ListKind::ALL {
                    v.look(reach, p, &up.name, kind, None);
                }
            }
        }
        v
    }

    /// Records the current view of `upstream`'s `kind` list; gives whether it differs from the
    /// one before, or the table was not fetched since `announced` (then it cannot show the
    /// change, and the listener is told).
    fn look(
        &mut self,
        reach: &Reach,
        p: &Principal,
        upstream: &str,
        kind: ListKind,
        announced: Option<Instant>,
    ) -> bool {
        let Some(up) = reach.upstream(upstream) else {
            return true;
        };
        let table = up.list(kind);
        let shown = reach.governor.shown(&Viewer::of(p), upstream, kind, &table);
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for (i, item) in table.items.iter().enumerate() {
            if shown.as_ref().is_none_or(|s| s[i]) {
                item.public.hash(&mut h);
                item.raw.get().hash(&mut h);
            }
        }
        let now = (table.fetched_at, h.finish());
        let before = self.seen.insert((upstream.to_owned(), kind), now);
        announced.is_some_and(|a| table.fetched_at < a)
            || before.is_none_or(|(_, print)| print != now.1)
    }

    /// Whether to tell the listener of a change an upstream announced.
    pub(crate) fn tell(&mut self, reach: &Reach, p: &Principal, change: &Published) -> bool {
        if !reach.governor.has_visibility() {
            return true;
        }
        if let Change::Updated(uri) = &change.change {
            // A resource the principal may not see is not one it hears about either.
            let item = Listed {
                kind: ListKind::Resources,
                key: uri,
                hints: ToolHints::default(),
            };
            return reach
                .governor
                .shows(&Viewer::of(p), &change.upstream, &item);
        }
        let mut changed = false;
        for kind in change.change.kinds() {
            changed |= self.look(reach, p, &change.upstream, *kind, Some(change.announced));
        }
        changed
    }
}
