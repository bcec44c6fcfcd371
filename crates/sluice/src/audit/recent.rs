//! The last audit records written, for the admin API (`GET /admin/v1/audit`).
//!
//! Takes each record's JSON line as the writer writes it; gives the last ones back, oldest first,
//! made line-safe as the log is. Bounded: `[admin] recent_audit` lines (0: none kept).
//! Refuses nothing.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// The last records written, each one JSON line as written, at most `cap`.
#[derive(Clone)]
pub(super) struct Recent {
    lines: Arc<Mutex<VecDeque<String>>>,
    cap: usize,
}

impl Recent {
    /// Keeps at most `cap` lines.
    pub(super) fn new(cap: usize) -> Recent {
        Recent {
            lines: Arc::new(Mutex::new(VecDeque::with_capacity(cap))),
            cap,
        }
    }

    /// The last `limit` lines, oldest first.
    pub(super) fn last(&self, limit: usize) -> Vec<String> {
        let Ok(l) = self.lines.lock() else {
            return Vec::new();
        };
        l.iter()
            .skip(l.len().saturating_sub(limit))
            .cloned()
            .collect()
    }

    /// Keeps one written line.
    pub(super) fn keep(&self, line: &[u8]) {
        let Ok(text) = std::str::from_utf8(line) else {
            return;
        };
        if let Ok(mut l) = self.lines.lock() {
            while l.len() >= self.cap {
                l.pop_front();
            }
            l.push_back(crate::escape::line_safe(text).into_owned());
        }
    }
}
