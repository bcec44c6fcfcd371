//! One 2026-07-28 request to an HTTP upstream with several endpoints, breakers and a retry
//! budget: which endpoint takes it, what its outcome does to that endpoint's breaker, and
//! whether it is tried once more elsewhere.
//!
//! Takes the request (its method, decided by the caller: never read back from a header, then
//! headers, body, stream timeout) and the upstream's [`Endpoints`]; gives the first answer,
//! holding the upstream's `max_in_flight` place for as long as the answer's stream is read. An outcome counts against its endpoint's breaker when it is no answer from
//! the server: no connection, a timeout, or any HTTP 5xx without a JSON-RPC body (a JSON-RPC
//! error under a 5xx is an answer). A request that could not be sent (no connection), and one
//! whose method is idempotent (`server/discover`, the lists) that got no answer (those, or a
//! 502-504 whatever its body),
//! is sent once more to another endpoint, within a retry budget (one retry per five requests
//! over the last ten seconds, at least ten a second): nothing has reached the client yet. Refuses, with an error naming the
//! upstream and saying when to retry, a request when every breaker is open or the upstream
//! has `max_in_flight` requests under way; a probe (`server/discover`) is never refused by open
//! breakers: it is the trial of the endpoint due soonest.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use tower::retry::budget::{Budget, TpsBudget};

use super::client::{Answer, HttpClient, UpstreamError};
use super::endpoints::{Change, Endpoints, Refused};
use crate::mcp::method::Method;

/// What happened to an upstream's requests, for `/metrics` (totals since start).
#[derive(Default)]
pub struct Counts {
    /// Endpoints ejected (a breaker opened).
    pub ejected: AtomicU64,
    /// Endpoints readmitted (a trial succeeded).
    pub readmitted: AtomicU64,
    /// Requests refused past `max_in_flight`.
    pub shed: AtomicU64,
    /// Requests refused with every breaker open.
    pub fast_failed: AtomicU64,
    /// Requests tried once more on another endpoint.
    pub retried: AtomicU64,
}

/// An upstream's endpoints with their retry budget and counts.
pub struct Balancer {
    /// Its endpoints.
    pub endpoints: Endpoints,
    /// Its counts.
    pub counts: Counts,
    budget: TpsBudget,
}

impl Balancer {
    /// Balances over `endpoints`.
    pub fn new(endpoints: Endpoints) -> Balancer {
        Balancer {
            endpoints,
            counts: Counts::default(),
            budget: TpsBudget::new(Duration::from_secs(10), 10, 0.2),
        }
    }

    /// One try on endpoint `i` (its `Host`, counted in progress while it runs). The headers
    /// are taken when no other endpoint could need them for a retry.
    async fn send(
        &self,
        name: &str,
        client: &HttpClient,
        i: usize,
        headers: &mut HeaderMap,
        body: &Bytes,
        stream_timeout: Option<Duration>,
    ) -> Result<Answer, UpstreamError> {
        let ep = self.endpoints.get(i);
        if let Some(host) = &ep.host {
            headers.insert(http::header::HOST, host.clone());
        }
        let sent = if self.endpoints.len() > 1 {
            headers.clone()
        } else {
            std::mem::take(headers)
        };
        let pending = Pending {
            endpoints: &self.endpoints,
            i,
            done: false,
        };
        let got = client
            .post(name, &ep.uri, sent, body.clone(), stream_timeout)
            .await;
        pending.done();
        got
    }

    /// Sends the request as the module says.
    pub async fn post(
        &self,
        name: &str,
        client: &HttpClient,
        method: &Method,
        mut headers: HeaderMap,
        body: Bytes,
        stream_timeout: Option<Duration>,
    ) -> Result<Answer, UpstreamError> {
        let idempotent = idempotent(method);
        // Sluice's own requests (discovery, list pages, its listen stream that stays open for
        // good) take no place under max_in_flight: shedding load must not make the upstream
        // look down to its probe. Clients' lists are answered from Sluice's tables.
        let own = idempotent || *method == Method::SubscriptionsListen;
        let probe = *method == Method::ServerDiscover;
        let place = if own {
            None
        } else {
            self.endpoints.admit().map_err(|r| self.refused(name, r))?
        };
        let several = self.endpoints.len() > 1;
        if several {
            self.budget.deposit();
        }
        let mut tried = None;
        let mut last = None;
        loop {
            let i = match (self.endpoints.pick(tried), last.take()) {
                (Ok(i), _) => i,
                // A probe is the upstream's health check: with every breaker open it goes to
                // the endpoint due soonest as its trial (as Envoy's active health checks un-eject
                // a host), so a server back on its port is readmitted by the probe that finds it.
                (Err(Refused::Open(_)), None) if probe && tried.is_none() => {
                    self.endpoints.pick_probe()
                }
                // No other endpoint for the retry: the first outcome stands.
                (Err(_), Some(got)) => return got,
                (Err(r), None) => return Err(self.refused(name, r)),
            };
            let got = self
                .send(name, client, i, &mut headers, &body, stream_timeout)
                .await;
            let answered = answered(&got);
            self.note(name, i, self.endpoints.record(i, answered));
            // A gateway's 502-504, even with a JSON-RPC body, did not come from the server: an
            // idempotent request may go elsewhere.
            let answered = answered
                && !matches!(&got, Ok(Answer::Json(s, _)) if matches!(s.as_u16(), 502..=504));
            // A request never sent (no connection) may go elsewhere whatever it is.
            let unsent = matches!(got, Err(UpstreamError::NoConnection(..)));
            if !answered
                && (idempotent || unsent)
                && tried.is_none()
                && several
                && self.budget.withdraw()
            {
                self.counts.retried.fetch_add(1, Ordering::Relaxed);
                tried = Some(i);
                last = Some(got);
                continue;
            }
            return match got {
                Ok(Answer::Sse(stream)) => Ok(Answer::Sse(
                    stream.holding(place.map(|p| Box::new(p) as Box<dyn Send + Sync>)),
                )),
                other => other,
            };
        }
    }

    /// A place of `principal`'s share of the upstream's `max_in_flight` (none without one);
    /// refused, counted as shed, past it.
    pub fn share(
        &self,
        name: &str,
        principal: &str,
    ) -> Result<Option<crate::shares::Place<String>>, UpstreamError> {
        self.endpoints
            .share(principal)
            .map_err(|r| self.refused(name, r))
    }

    fn refused(&self, name: &str, r: Refused) -> UpstreamError {
        match r {
            Refused::Open(wait) => {
                self.counts.fast_failed.fetch_add(1, Ordering::Relaxed);
                UpstreamError::Open(name.to_owned(), wait.as_millis().max(1) as u64)
            }
            Refused::Busy(n) => {
                self.counts.shed.fetch_add(1, Ordering::Relaxed);
                UpstreamError::Busy(name.to_owned(), n)
            }
            Refused::Share(n) => {
                self.counts.shed.fetch_add(1, Ordering::Relaxed);
                UpstreamError::Full(crate::shares::Full::share(
                    crate::shares::Pool::Requests(name.to_owned()),
                    n,
                ))
            }
        }
    }

    fn note(&self, name: &str, i: usize, change: Change) {
        let shown = &self.endpoints.get(i).shown;
        match change {
            Change::None | Change::Reopened => {}
            Change::Opened => {
                self.counts.ejected.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(upstream = %name, endpoint = %shown, "upstream endpoint failed repeatedly: its breaker is open, requests go elsewhere");
            }
            Change::Closed => {
                self.counts.readmitted.fetch_add(1, Ordering::Relaxed);
                tracing::info!(upstream = %name, endpoint = %shown, "upstream endpoint answered its trial request: readmitted");
            }
        }
    }
}

/// A request on its way to endpoint `i`: dropped before its outcome (the caller went away), it
/// is abandoned ([`Endpoints::abandon`]).
struct Pending<'a> {
    endpoints: &'a Endpoints,
    i: usize,
    done: bool,
}

impl Pending<'_> {
    fn done(mut self) {
        self.done = true;
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.endpoints.abandon(self.i);
        }
    }
}

/// Whether an outcome is the server's answer (its breaker's success): a JSON-RPC message, under
/// any status (an error body under a 5xx is still an answer), an event stream, or a status
/// under 500. A failure: no connection, a timeout, and every 5xx without a JSON-RPC body (as
/// Envoy's outlier detection counts consecutive 5xx).
fn answered(got: &Result<Answer, UpstreamError>) -> bool {
    match got {
        Ok(Answer::Json(s, body)) => !s.is_server_error() || is_jsonrpc(body),
        Ok(Answer::Status(s, _)) => !s.is_server_error(),
        Ok(Answer::Sse(_)) => true,
        Err(e) => !matches!(
            e,
            UpstreamError::Unreachable(..)
                | UpstreamError::NoConnection(..)
                | UpstreamError::Timeout(..)
        ),
    }
}

/// Whether `body` is one JSON-RPC message (a response or an error), decoded, not guessed.
fn is_jsonrpc(body: &[u8]) -> bool {
    crate::mcp::jsonrpc::Incoming::parse(body).is_ok_and(|m| m.is_response())
}

/// Whether a method may be sent twice: discovery and the lists change nothing.
fn idempotent(method: &Method) -> bool {
    matches!(
        method,
        Method::ServerDiscover
            | Method::ToolsList
            | Method::PromptsList
            | Method::ResourcesList
            | Method::ResourcesTemplatesList
    )
}
