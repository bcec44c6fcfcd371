//! The endpoints of one HTTP upstream (its `urls`: replicas of one server), each behind a
//! circuit breaker, and the upstream's own concurrency limit.
//!
//! Takes the upstream's URLs and its [`Resilience`]; gives the endpoint a request goes to: one
//! whose breaker's open time is over takes the next request as its single trial (half-open),
//! else round robin among those whose breaker is closed; with none, the request is refused at
//! once with how long until a trial ([`Refused::Open`]). A breaker opens after
//! `breaker_failures` consecutive failures (no connection, a timeout, an HTTP 5xx without a
//! JSON-RPC body) and stays open
//! `breaker_open_ms`; a trial that succeeds closes it (the endpoint is readmitted), one that fails
//! opens it again. With `max_in_flight`, a request past it is refused ([`Refused::Busy`]), and
//! one principal's request past its share of it (`max_in_flight_per_principal`) too
//! ([`Refused::Share`], taken by the forward that knows the principal: [`Endpoints::share`]).
//! Refuses nothing else; every state is bounded by the configured endpoints.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{HeaderValue, Uri};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::config::Resilience;

/// One URL of an upstream.
pub struct Endpoint {
    /// Where requests go.
    pub uri: Uri,
    /// Its own `Host` header value (`None`: the upstream's configured `Host` header stands).
    pub host: Option<HeaderValue>,
    /// Its URL as logs and `/readyz` show it (credentials redacted).
    pub shown: String,
    state: Mutex<State>,
}

/// A breaker's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Requests pass; this many failed in a row.
    Closed(u32),
    /// Requests are refused until then.
    Open(Instant),
    /// One trial request is under way.
    Trial,
}

/// What a breaker did with one outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Nothing new.
    None,
    /// It opened (the endpoint is ejected).
    Opened,
    /// A trial failed: it stays open (ejected still: nothing new to tell).
    Reopened,
    /// A trial succeeded: it closed (the endpoint is readmitted).
    Closed,
}

/// Why no endpoint takes a request now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Every breaker is open; the first trial is in this long.
    Open(Duration),
    /// `max_in_flight` requests are under way.
    Busy(usize),
    /// The principal has `max_in_flight_per_principal` requests under way.
    Share(usize),
}

/// The endpoints of one upstream.
pub struct Endpoints {
    list: Vec<Endpoint>,
    next: AtomicUsize,
    failures: u32,
    open_for: Duration,
    in_flight: Option<(Arc<Semaphore>, usize)>,
    per_principal: Option<(Arc<crate::shares::Shares<String>>, usize)>,
}

impl Endpoints {
    /// The endpoints at `urls` (each with its host and shown form), bounded as `r` says.
    pub fn new(urls: Vec<(Uri, Option<HeaderValue>, String)>, r: &Resilience) -> Endpoints {
        let list = urls
            .into_iter()
            .map(|(uri, host, shown)| Endpoint {
                uri,
                host,
                shown,
                state: Mutex::new(State::Closed(0)),
            })
            .collect();
        let in_flight = r.max_in_flight.map(|n| (Arc::new(Semaphore::new(n)), n));
        // The pool is the semaphore's: the shares count per principal only.
        let per_principal = r
            .max_in_flight_per_principal
            .map(|n| (crate::shares::Shares::new(usize::MAX), n));
        Endpoints {
            list,
            next: AtomicUsize::new(0),
            failures: r.breaker_failures,
            open_for: r.breaker_open,
            in_flight,
            per_principal,
        }
    }

    /// Endpoint `i`.
    pub fn get(&self, i: usize) -> &Endpoint {
        &self.list[i.min(self.list.len().saturating_sub(1))]
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether there are none (a stdio upstream's).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// A place under `max_in_flight` (none to hold without one).
    pub fn admit(&self) -> Result<Option<OwnedSemaphorePermit>, Refused> {
        match &self.in_flight {
            None => Ok(None),
            Some((s, n)) => s
                .clone()
                .try_acquire_owned()
                .map(Some)
                .map_err(|_| Refused::Busy(*n)),
        }
    }

    /// A place of `principal`'s share of `max_in_flight` (none to hold without a share), held
    /// for as long as its request and answer are.
    pub fn share(&self, principal: &str) -> Result<Option<crate::shares::Place<String>>, Refused> {
        match &self.per_principal {
            None => Ok(None),
            // A share that is all of max_in_flight (one principal) is refused as the pool.
            Some((s, n)) => {
                s.share(principal.to_owned(), *n)
                    .map(Some)
                    .map_err(|_| match &self.in_flight {
                        Some((_, max)) if n >= max => Refused::Busy(*max),
                        _ => Refused::Share(*n),
                    })
            }
        }
    }

    /// The endpoint for the next request; with `not` (a retry), another one than that, unless it
    /// is the only one.
    pub fn pick(&self, not: Option<usize>) -> Result<usize, Refused> {
        if self.list.is_empty() {
            return Err(Refused::Open(self.open_for));
        }
        let n = self.list.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let order = || {
            (0..n)
                .map(move |k| (start + k) % n)
                .filter(move |i| Some(*i) != not || n == 1)
        };
        // One whose open time is over takes the next request as its trial (else it would never
        // be readmitted while another serves).
        let now = Instant::now();
        for i in order() {
            if let Ok(mut s) = self.list[i].state.lock() {
                if matches!(*s, State::Open(until) if until <= now) {
                    *s = State::Trial;
                    return Ok(i);
                }
            }
        }
        if let Some(i) = order().find(|i| matches!(self.state(*i), State::Closed(_))) {
            return Ok(i);
        }
        let soonest = order()
            .filter_map(|i| match self.state(i) {
                State::Open(until) => Some(until.saturating_duration_since(now)),
                _ => None,
            })
            .min()
            .unwrap_or(self.open_for);
        Err(Refused::Open(soonest.max(Duration::from_millis(1))))
    }

    /// The endpoint for a probe when [`Endpoints::pick`] refused with every breaker open: the
    /// one whose open time ends soonest, taken as its trial (its outcome closes or reopens it).
    pub fn pick_probe(&self) -> usize {
        let until = |i: usize| match self.state(i) {
            State::Open(until) => Some(until),
            _ => None,
        };
        let i = (0..self.list.len())
            .filter_map(|i| until(i).map(|u| (u, i)))
            .min()
            .map_or(0, |(_, i)| i);
        if let Some(Ok(mut s)) = self.list.get(i).map(|e| e.state.lock()) {
            if matches!(*s, State::Open(_)) {
                *s = State::Trial;
            }
        }
        i
    }

    /// Records how a request to endpoint `i` ended.
    pub fn record(&self, i: usize, ok: bool) -> Change {
        let Some(e) = self.list.get(i) else {
            return Change::None;
        };
        let Ok(mut s) = e.state.lock() else {
            return Change::None;
        };
        let (next, change) = match (*s, ok) {
            (State::Trial, true) => (State::Closed(0), Change::Closed),
            (State::Trial, false) => (
                State::Open(Instant::now() + self.open_for),
                Change::Reopened,
            ),
            (State::Closed(_), true) => (State::Closed(0), Change::None),
            (State::Closed(f), false) if f + 1 >= self.failures => {
                (State::Open(Instant::now() + self.open_for), Change::Opened)
            }
            (State::Closed(f), false) => (State::Closed(f + 1), Change::None),
            // An answer from before it opened: the open time stands.
            (open @ State::Open(_), _) => (open, Change::None),
        };
        *s = next;
        change
    }

    /// A request to endpoint `i` was given up before its outcome (its caller went away): a trial
    /// it was is due again at once, so no breaker waits on an outcome that never comes.
    pub fn abandon(&self, i: usize) {
        if let Some(Ok(mut s)) = self.list.get(i).map(|e| e.state.lock()) {
            if *s == State::Trial {
                *s = State::Open(Instant::now());
            }
        }
    }

    /// Each endpoint's URL (shown) and breaker state (`closed`, `open`, `trial`).
    pub fn states(&self) -> Vec<(&str, &'static str)> {
        (0..self.list.len())
            .map(|i| {
                let name = match self.state(i) {
                    State::Closed(_) => "closed",
                    State::Open(_) => "open",
                    State::Trial => "trial",
                };
                (self.list[i].shown.as_str(), name)
            })
            .collect()
    }

    fn state(&self, i: usize) -> State {
        self.list[i]
            .state
            .lock()
            .map(|s| *s)
            .unwrap_or(State::Closed(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two(failures: u32, open_ms: u64) -> Endpoints {
        let r = Resilience {
            breaker_failures: failures,
            breaker_open: Duration::from_millis(open_ms),
            ..Resilience::default()
        };
        let ep = |p: u16| {
            (
                format!("http://127.0.0.1:{p}/mcp").parse().unwrap(),
                Some(HeaderValue::from_static("h")),
                format!("{p}"),
            )
        };
        Endpoints::new(vec![ep(1), ep(2)], &r)
    }

    #[tokio::test(start_paused = true)]
    async fn failures_in_a_row_eject_an_endpoint_and_a_trial_after_the_open_time_readmits_it() {
        let e = two(2, 1000);
        assert_eq!(
            (e.pick(None), e.pick(None), e.pick(None)),
            (Ok(0), Ok(1), Ok(0)),
            "round robin"
        );
        assert_eq!(e.record(0, false), Change::None);
        assert_eq!(
            e.record(0, true),
            Change::None,
            "a success resets the count"
        );
        assert_eq!(e.record(0, false), Change::None);
        assert_eq!(e.record(0, false), Change::Opened);
        for _ in 0..4 {
            assert_eq!(e.pick(None), Ok(1), "only the closed one takes requests");
        }
        assert_eq!(e.states(), [("1", "open"), ("2", "closed")]);
        tokio::time::advance(Duration::from_millis(1000)).await;
        assert_eq!(
            e.pick(None),
            Ok(0),
            "its open time over, it takes the next request as a trial"
        );
        assert_eq!(
            e.pick(None),
            Ok(1),
            "one trial at a time: the others go to the closed one"
        );
        assert_eq!(e.record(1, false), Change::None);
        assert_eq!(e.record(1, false), Change::Opened);
        assert_eq!(
            e.pick(None),
            Err(Refused::Open(Duration::from_millis(1000))),
            "both out: one on trial, the other opened just now"
        );
        assert_eq!(e.record(0, true), Change::Closed);
        assert_eq!(e.pick(None), Ok(0));
        assert!(
            e.pick(Some(0)).is_err(),
            "another is asked for (a retry), and the only other is open"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_trial_opens_it_again_and_max_in_flight_refuses_past_it() {
        let r = Resilience {
            breaker_failures: 1,
            max_in_flight: Some(1),
            ..Resilience::default()
        };
        let e = Endpoints::new(
            vec![(
                "http://127.0.0.1:1/".parse().unwrap(),
                Some(HeaderValue::from_static("h")),
                "x".into(),
            )],
            &r,
        );
        assert_eq!(e.record(0, false), Change::Opened);
        assert!(matches!(e.pick(None), Err(Refused::Open(_))));
        tokio::time::advance(r.breaker_open).await;
        assert_eq!(e.pick(None), Ok(0));
        assert_eq!(
            e.record(0, false),
            Change::Reopened,
            "a failed trial: open again, nothing new to tell"
        );
        assert_eq!(e.pick(None), Err(Refused::Open(r.breaker_open)));
        tokio::time::advance(r.breaker_open).await;
        assert_eq!(e.pick(None), Ok(0), "a trial");
        e.abandon(0);
        assert_eq!(e.pick(None), Ok(0), "a trial given up is due again at once");
        let held = e.admit().expect("a place");
        assert_eq!(e.admit().err(), Some(Refused::Busy(1)));
        drop(held);
        assert!(e.admit().is_ok());
    }
}
