//! A listener's connections (the public one's, the internal one's): how many are held, by which source, whether each has a
//! request in progress, and which one makes room when they are all taken.
//!
//! Takes each accepted connection's source (`server::source_of`); gives a [`Held`] connection:
//! a place among `limits.max_connections`, one of its source's `limits.max_connections_per_source`,
//! and its [`Activity`], which the service marks for each request in progress ([`Activity::begin`],
//! held by the request until its response body ends: an SSE stream is a request in progress)
//! and the pipeline marks once the connection has served an authenticated request
//! ([`authenticated`]; the internal listener, once a forward's signature verified). [`serve`]
//! drives each connection and closes it once idle (no request in progress) past its deadline
//! ([`Activity::idle`], [`Deadlines`]). Refuses a connection past its source's share
//! ([`Refused::Share`]); when every place is taken, the oldest connection that is idle and has
//! never served an authenticated request is closed to make room for the new one (among the
//! [`EVICTION_SCAN`] oldest such), else the new one is refused ([`Refused::Pool`]). So sources
//! that hold connections without a credential cannot keep an authenticated client out: a
//! connection that made room is one that had no request in progress and nothing to lose.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

pub use self::serve::{serve, Deadlines};
pub use crate::shares::Refused;

mod serve;

/// How many of the oldest connections without an authenticated request are looked at for one
/// that is idle, when a new connection needs room: each accept's work stays bounded.
pub const EVICTION_SCAN: usize = 64;

/// The connections of one listener.
pub struct Table {
    pool: Arc<Semaphore>,
    max: usize,
    sources: Arc<crate::shares::Shares<IpAddr>>,
    per_source: usize,
    /// Connections that have not served an authenticated request, oldest first.
    unproven: Mutex<BTreeMap<u64, Arc<Activity>>>,
    next: AtomicU64,
}

/// What a connection is doing, shared by its task, its requests and the [`Table`].
pub struct Activity {
    id: u64,
    table: Weak<Table>,
    /// Its place among `limits.max_connections`: taken from it when it makes room.
    place: Mutex<Option<OwnedSemaphorePermit>>,
    busy: AtomicUsize,
    served: AtomicBool,
    proven: AtomicBool,
    /// When it was admitted; `ended` counts from it.
    born: tokio::time::Instant,
    /// When its last request ended, in nanoseconds since `born`: read by [`Activity::idle`]
    /// when its timer fires, so no request wakes the connection's task to say it began or ended.
    ended: AtomicU64,
    evicted: CancellationToken,
}

/// A connection held: its place and its source's share, given back when dropped.
pub struct Held {
    activity: Arc<Activity>,
    _share: crate::shares::Place<IpAddr>,
}

/// One request in progress on a connection, until dropped.
pub struct Busy(Arc<Activity>);

/// What the pipeline finds in a request's extensions to mark its connection: present only
/// while the connection has not served an authenticated request.
#[derive(Clone)]
pub struct Unproven(Arc<Activity>);

/// A response body that holds its request's [`Busy`] until it ends or is dropped.
pub struct Tracked<B> {
    inner: B,
    busy: Option<Busy>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

// === impl Table ===

impl Table {
    /// `max` connections, at most `per_source` of them from one source.
    pub fn new(max: usize, per_source: usize) -> Arc<Table> {
        Arc::new(Table {
            pool: Arc::new(Semaphore::new(max)),
            max,
            sources: crate::shares::Shares::new(max),
            per_source,
            unproven: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(0),
        })
    }

    /// A place for a new connection from `source`: a free one, else the place of the oldest
    /// idle connection that has served no authenticated request (which is told to close).
    pub fn admit(self: &Arc<Self>, source: IpAddr) -> Result<Held, Refused> {
        let share = self.sources.share(source, self.per_source)?;
        let place = match self.pool.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => self.make_room().ok_or(Refused::Pool(self.max))?,
        };
        let activity = Arc::new(Activity {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            table: Arc::downgrade(self),
            place: Mutex::new(Some(place)),
            busy: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            proven: AtomicBool::new(false),
            born: tokio::time::Instant::now(),
            ended: AtomicU64::new(0),
            evicted: CancellationToken::new(),
        });
        locked(&self.unproven).insert(activity.id, activity.clone());
        Ok(Held {
            activity,
            _share: share,
        })
    }

    /// Takes the place of the oldest idle connection without an authenticated request, among
    /// the [`EVICTION_SCAN`] oldest, and tells it to close.
    fn make_room(&self) -> Option<OwnedSemaphorePermit> {
        let mut unproven = locked(&self.unproven);
        let id = unproven
            .values()
            .take(EVICTION_SCAN)
            .find(|a| a.busy.load(Ordering::Acquire) == 0)
            .map(|a| a.id)?;
        let victim = unproven.remove(&id)?;
        drop(unproven);
        let place = locked(&victim.place).take();
        victim.evicted.cancel();
        tracing::debug!("every connection is taken: closed the oldest idle one that served no authenticated request, to make room");
        place
    }

    /// Connections held now.
    pub fn in_use(&self) -> usize {
        self.max - self.pool.available_permits()
    }
}

// === impl Held ===

impl Held {
    /// The connection's activity, for its service and its task.
    pub fn activity(&self) -> &Arc<Activity> {
        &self.activity
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let a = &self.activity;
        locked(&a.place).take();
        if let Some(t) = a.table.upgrade() {
            locked(&t.unproven).remove(&a.id);
        }
    }
}

// === impl Activity ===

impl Activity {
    /// A request begins; it is in progress until the [`Busy`] is dropped.
    pub fn begin(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.served.store(true, Ordering::Release);
        Busy(self.clone())
    }

    /// For the request's extensions, while the connection has served no authenticated request.
    pub fn unproven(self: &Arc<Self>) -> Option<Unproven> {
        (!self.proven.load(Ordering::Acquire)).then(|| Unproven(self.clone()))
    }

    /// Resolves once the connection has had no request in progress for `first` since `since`
    /// (before its first request) or for `between` since its last request ended: the time it
    /// may sit idle. One timer, looked at when it fires: while a request is in progress it is
    /// set `between` ahead (looked at again then), else at the deadline the last end gives.
    pub async fn idle(&self, since: tokio::time::Instant, first: Duration, between: Duration) {
        loop {
            let now = tokio::time::Instant::now();
            let ended = self.ended.load(Ordering::Acquire);
            let at = if self.busy.load(Ordering::Acquire) > 0 {
                now + between
            } else if self.served.load(Ordering::Acquire) {
                self.born + Duration::from_nanos(ended) + between
            } else {
                since + first
            };
            // Read again: a request that began (or began and ended) meanwhile is not idle time.
            if at <= now
                && self.busy.load(Ordering::Acquire) == 0
                && self.ended.load(Ordering::Acquire) == ended
            {
                return;
            }
            tokio::time::sleep_until(at.max(now)).await;
        }
    }

    /// Whether a request is in progress on it now.
    pub fn in_progress(&self) -> bool {
        self.busy.load(Ordering::Acquire) > 0
    }

    /// Resolves once the connection's place was taken to make room: it is to close at once.
    pub async fn evicted(&self) {
        self.evicted.cancelled().await
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        // The end is stamped before the request stops counting: whoever then reads no request
        // in progress reads this end too.
        let a = &self.0;
        let since = a.born.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        a.ended.fetch_max(since, Ordering::AcqRel);
        a.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Marks the request's connection as one that served an authenticated request: it never makes
/// room for another. Called by the pipeline once the request's credential is accepted.
pub fn authenticated(extensions: &http::Extensions) {
    if let Some(Unproven(a)) = extensions.get::<Unproven>() {
        if !a.proven.swap(true, Ordering::AcqRel) {
            if let Some(t) = a.table.upgrade() {
                locked(&t.unproven).remove(&a.id);
            }
        }
    }
}

// === impl Tracked ===

impl<B> Tracked<B> {
    /// `inner`, its request in progress until it ends.
    pub fn new(inner: B, busy: Busy) -> Tracked<B> {
        Tracked {
            inner,
            busy: Some(busy),
        }
    }
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            self.busy = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests;
