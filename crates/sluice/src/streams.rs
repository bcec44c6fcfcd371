//! Open client streams (listen and GET streams, streamed answers), counted per principal and
//! in total, so no principal holds more than its share of the gateway's tasks and upstream
//! streams.
//!
//! Takes a principal asking for one more stream; gives a [`StreamPermit`] held for as long as
//! the stream is open (released when its body is dropped: finished, or the client gone).
//! Refuses past `limits.max_streams_per_principal` (429) or `limits.max_streams` (503), both
//! with `Retry-After`, code `-31018`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use dashmap::DashMap;

use crate::policy::Refusal;

/// The counters.
pub struct Streams {
    per: DashMap<String, usize>,
    total: AtomicUsize,
    max_total: usize,
    max_per: usize,
}

/// One open stream; dropping it gives its place back.
pub struct StreamPermit {
    streams: Arc<Streams>,
    principal: String,
}

impl Streams {
    /// Counters with the given caps.
    pub fn new(max_total: usize, max_per: usize) -> Arc<Streams> {
        Arc::new(Streams {
            per: DashMap::new(),
            total: AtomicUsize::new(0),
            max_total,
            max_per,
        })
    }

    /// Takes a place for one more stream of `principal`.
    pub fn acquire(self: &Arc<Self>, principal: &str) -> Result<StreamPermit, Refusal> {
        if self.total.fetch_add(1, Ordering::AcqRel) >= self.max_total {
            self.total.fetch_sub(1, Ordering::AcqRel);
            return Err(Refusal::Streams {
                limit: self.max_total,
                per_principal: false,
            });
        }
        let mut n = self.per.entry(principal.to_owned()).or_insert(0);
        if *n >= self.max_per {
            drop(n);
            self.total.fetch_sub(1, Ordering::AcqRel);
            return Err(Refusal::Streams {
                limit: self.max_per,
                per_principal: true,
            });
        }
        *n += 1;
        Ok(StreamPermit {
            streams: self.clone(),
            principal: principal.to_owned(),
        })
    }

    /// Streams open now.
    pub fn open(&self) -> usize {
        self.total.load(Ordering::Acquire)
    }
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        self.streams.total.fetch_sub(1, Ordering::AcqRel);
        self.streams.per.remove_if_mut(&self.principal, |_, n| {
            *n = n.saturating_sub(1);
            *n == 0
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_principal_holds_at_most_its_share_and_places_come_back() {
        let s = Streams::new(3, 2);
        let a1 = s.acquire("a").unwrap();
        let _a2 = s.acquire("a").unwrap();
        assert_eq!(
            s.acquire("a").err(),
            Some(Refusal::Streams {
                limit: 2,
                per_principal: true
            })
        );
        let _b = s.acquire("b").unwrap();
        assert_eq!(
            s.acquire("c").err(),
            Some(Refusal::Streams {
                limit: 3,
                per_principal: false
            })
        );
        drop(a1);
        assert!(s.acquire("a").is_ok());
        assert_eq!(
            s.open(),
            3 - 1,
            "the refused and dropped ones gave their places back"
        );
        assert!(s.per.get("c").is_none());
    }
}
