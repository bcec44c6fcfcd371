//! Log lines that repeat: the first of a kind is told, the same again within a window is only
//! counted, and the count is told with the next one after the window (one summary line at most
//! per window and kind).
//!
//! Takes a kind (a key from a closed set: a code, a method label, a reason Sluice wrote) each
//! time the line would be logged; gives whether to log it now and how many were held back.
//! Bounded: at most [`KINDS`] kinds are remembered; past it they are forgotten all at once (the
//! next of each is told, as a first). Refuses nothing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Kinds remembered at once.
pub const KINDS: usize = 256;

/// What to do with one occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tell {
    /// Log it: the first of its kind (or the first since the kinds were forgotten).
    First,
    /// Log it, with how many of its kind were held back since the last line.
    Again(u64),
    /// Say nothing (counted).
    Quiet,
}

/// The kinds seen, each with when it was last told and how many were held back since.
pub struct Repeats {
    window: Duration,
    seen: Mutex<Option<HashMap<String, (Instant, u64)>>>,
}

impl Repeats {
    /// A line per kind at most every `window`.
    pub const fn new(window: Duration) -> Repeats {
        Repeats {
            window,
            seen: Mutex::new(None),
        }
    }

    /// Notes one occurrence of `kind`.
    pub fn note(&self, kind: &str) -> Tell {
        let Ok(mut seen) = self.seen.lock() else {
            return Tell::First;
        };
        let seen = seen.get_or_insert_with(HashMap::new);
        let now = Instant::now();
        match seen.get_mut(kind) {
            Some((told, held)) if now.saturating_duration_since(*told) < self.window => {
                *held += 1;
                Tell::Quiet
            }
            Some((told, held)) => {
                let n = std::mem::take(held);
                *told = now;
                if n == 0 {
                    Tell::First
                } else {
                    Tell::Again(n)
                }
            }
            None => {
                if seen.len() >= KINDS {
                    seen.clear();
                }
                seen.insert(kind.to_owned(), (now, 0));
                Tell::First
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_is_told_the_rest_counted_and_summed_up_after_the_window() {
        let r = Repeats::new(Duration::from_millis(50));
        assert_eq!(r.note("a"), Tell::First);
        assert_eq!(r.note("a"), Tell::Quiet);
        assert_eq!(r.note("a"), Tell::Quiet);
        assert_eq!(r.note("b"), Tell::First, "another kind is told");
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(r.note("a"), Tell::Again(2));
        assert_eq!(r.note("a"), Tell::Quiet);
        let many = Repeats::new(Duration::from_secs(60));
        for i in 0..KINDS + 5 {
            assert_eq!(many.note(&i.to_string()), Tell::First);
        }
        assert!(many.seen.lock().unwrap().as_ref().unwrap().len() <= KINDS);
    }
}
