//! Calls held for an operator's approval (`approver = "operator"` rules): the registry.
//!
//! Takes a held call's description (names, argument keys, the values a rule shows, its
//! arguments digest) and, later, an operator's decision; gives each held call an unguessable
//! id, the listing the admin API serves, the decision to the call's stream (once: a second
//! decision is `already_decided`), and an event and a metric for each change (held, approved,
//! denied, expired, withdrawn). Refuses a call past [`Limits`] (in all, per principal), and a
//! decision by an operator the rule does not name. Holds no argument value but those a rule
//! shows; logs none.

pub mod hold;
pub mod shared;
pub mod webhook;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::{json, Map, Value};
use tokio::sync::oneshot;

/// The most argument keys listed of one call (the rest are counted in `more_keys`).
pub const MAX_KEYS: usize = 64;
/// A shown value longer than this (as JSON) is replaced by its length.
pub const MAX_SHOWN_BYTES: usize = 1024;
/// How long a decided call's id answers `already_decided` (then `not_found`).
const REMEMBER_MS: u64 = 600_000;
/// The most decided ids remembered.
const MAX_REMEMBERED: usize = 65_536;

/// How many calls may be held.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// In all, on this replica.
    pub total: usize,
    /// Per principal.
    pub per_principal: usize,
}

/// What an operator sees of a held call.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Held {
    /// Its id (random, 128 bits).
    pub id: String,
    /// `tools/call`.
    pub method: String,
    /// The upstream's own tool name.
    pub tool: String,
    /// The upstream.
    pub upstream: String,
    /// Who called.
    pub principal: String,
    /// The argument names, sorted (never their values).
    pub argument_keys: Vec<String>,
    /// The values of the arguments the rule shows (`show_arguments`).
    pub shown: Map<String, Value>,
    /// When it was held (Unix ms).
    pub held_at_ms: u64,
    /// When its wait ends (Unix ms).
    pub expires_at_ms: u64,
    /// The replica holding it.
    pub replica: String,
    /// The rule that holds it.
    pub rule: String,
    /// The operators who may decide (any when empty).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub approvers: Vec<String>,
    /// The arguments digest the decision is bound to (in Redis; never in the admin listing or
    /// an event).
    #[serde(default)]
    pub digest: String,
}

/// An operator's decision on a held call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Verdict {
    /// Approved (`true`) or denied.
    pub approved: bool,
    /// The operator's name.
    pub operator: String,
    /// The digest of the call decided on.
    pub digest: String,
}

/// Why a decision was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecideError {
    /// No such held call (never, or its wait ended).
    NotFound,
    /// It was decided already.
    AlreadyDecided,
    /// The rule names other operators.
    NotAnApprover,
    /// The shared state (Redis) did not answer.
    Unavailable,
}

struct Entry {
    held: Held,
    tx: Option<oneshot::Sender<Verdict>>,
}

#[derive(Default)]
struct Book {
    held: HashMap<String, Entry>,
    /// Decided ids and until when they are remembered (bounded by the held cap).
    decided: HashMap<String, u64>,
}

/// Where a held call's changes are told (the admin plane's event bus, as an `approval` event).
pub type Announce = Box<dyn Fn(Value) + Send + Sync>;

/// The held calls of this replica (one per process, in the runtime).
pub struct Registry {
    book: Mutex<Book>,
    announce: Announce,
    metrics: Arc<crate::metrics::Metrics>,
    /// `[cluster]`: held calls listed in Redis, decided from any replica.
    pub(crate) shared: Option<shared::Shared>,
}

/// A held call's place in the registry: its decision comes on `rx`; dropping it ends the
/// hold (withdrawn, when nothing decided and it did not expire).
pub struct Ticket {
    /// The held call.
    pub held: Held,
    /// The decision.
    pub rx: oneshot::Receiver<Verdict>,
    registry: Arc<Registry>,
    ended: bool,
}

impl Registry {
    /// An empty registry telling its changes to `announce`.
    pub fn new(
        announce: Announce,
        metrics: Arc<crate::metrics::Metrics>,
        cluster: Option<Arc<crate::cluster::Cluster>>,
    ) -> Arc<Registry> {
        Arc::new(Registry {
            book: Mutex::new(Book::default()),
            announce,
            metrics,
            shared: cluster.map(shared::Shared::new),
        })
    }

    /// Holds `held` (its `id` is set here); refuses past `limits`.
    pub fn hold(
        self: &Arc<Self>,
        mut held: Held,
        limits: Limits,
    ) -> Result<Ticket, crate::policy::Refusal> {
        let (tx, rx) = oneshot::channel();
        {
            let mut book = self.book.lock().unwrap_or_else(|e| e.into_inner());
            if book.held.len() >= limits.total {
                return Err(crate::policy::Refusal::HeldCap {
                    limit: limits.total,
                    per_principal: false,
                });
            }
            let mine = book
                .held
                .values()
                .filter(|e| e.held.principal == held.principal)
                .count();
            if mine >= limits.per_principal {
                return Err(crate::policy::Refusal::HeldCap {
                    limit: limits.per_principal,
                    per_principal: true,
                });
            }
            held.id = crate::state::nonce();
            book.held.insert(
                held.id.clone(),
                Entry {
                    held: held.clone(),
                    tx: Some(tx),
                },
            );
        }
        self.changed("held", &held, None);
        Ok(Ticket {
            held,
            rx,
            registry: self.clone(),
            ended: false,
        })
    }

    /// The calls held on every replica (with `[cluster]`; this replica's alone while Redis does
    /// not answer), oldest first.
    pub async fn list_all(&self) -> Vec<Held> {
        let Some(sh) = &self.shared else {
            return self.list();
        };
        match sh.all().await {
            Ok(mut all) => {
                all.sort_by(|a, b| (a.held_at_ms, &a.id).cmp(&(b.held_at_ms, &b.id)));
                all
            }
            Err(_) => self.list(),
        }
    }

    /// The calls held here now, oldest first.
    pub fn list(&self) -> Vec<Held> {
        let book = self.book.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<Held> = book
            .held
            .values()
            .filter(|e| e.tx.is_some())
            .map(|e| e.held.clone())
            .collect();
        out.sort_by(|a, b| (a.held_at_ms, &a.id).cmp(&(b.held_at_ms, &b.id)));
        out
    }

    /// The held call `id` on this replica, undecided.
    pub fn get(&self, id: &str) -> Option<Held> {
        let book = self.book.lock().unwrap_or_else(|e| e.into_inner());
        book.held
            .get(id)
            .filter(|e| e.tx.is_some())
            .map(|e| e.held.clone())
    }

    /// Decides the call `id`, once: on this replica, or (with `[cluster]`) in Redis, where the
    /// replica holding it reads it.
    pub async fn decide(
        &self,
        id: &str,
        approved: bool,
        operator: &str,
    ) -> Result<Verdict, DecideError> {
        let Some(sh) = &self.shared else {
            return self.decide_local(id, approved, operator);
        };
        let held = match self.get(id) {
            Some(h) => h,
            None => match sh.get(id).await {
                Ok(Some(h)) => h,
                Ok(None) => return Err(self.unknown(id)),
                Err(_) => return Err(DecideError::Unavailable),
            },
        };
        if !may_decide(&held, operator) {
            return Err(DecideError::NotAnApprover);
        }
        let verdict = Verdict {
            approved,
            operator: operator.to_owned(),
            digest: held.digest.clone(),
        };
        let ttl = held.expires_at_ms.saturating_sub(crate::state::now_ms()) + REMEMBER_MS;
        match sh.decide(id, &verdict, ttl).await {
            Ok(crate::cluster::shared::Decided::Now) => {
                self.deliver(id, verdict.clone());
                Ok(verdict)
            }
            Ok(crate::cluster::shared::Decided::Before) => Err(DecideError::AlreadyDecided),
            Ok(crate::cluster::shared::Decided::Unknown) => Err(DecideError::NotFound),
            Err(_) => Err(DecideError::Unavailable),
        }
    }

    /// `already_decided` for an id decided here lately, else `not_found`.
    fn unknown(&self, id: &str) -> DecideError {
        let book = self.book.lock().unwrap_or_else(|e| e.into_inner());
        if book.decided.contains_key(id) {
            DecideError::AlreadyDecided
        } else {
            DecideError::NotFound
        }
    }

    /// Decides the call `id` held on this replica, once.
    pub fn decide_local(
        &self,
        id: &str,
        approved: bool,
        operator: &str,
    ) -> Result<Verdict, DecideError> {
        let held = {
            let book = self.book.lock().unwrap_or_else(|e| e.into_inner());
            match book.held.get(id) {
                Some(e) if e.tx.is_some() => e.held.clone(),
                Some(_) => return Err(DecideError::AlreadyDecided),
                None => {
                    drop(book);
                    return Err(self.unknown(id));
                }
            }
        };
        if !may_decide(&held, operator) {
            return Err(DecideError::NotAnApprover);
        }
        let verdict = Verdict {
            approved,
            operator: operator.to_owned(),
            digest: held.digest.clone(),
        };
        if self.deliver(id, verdict.clone()) {
            Ok(verdict)
        } else {
            Err(DecideError::AlreadyDecided)
        }
    }

    /// Gives `verdict` to the call `id` held here, if it still waits; gives whether it did.
    pub fn deliver(&self, id: &str, verdict: Verdict) -> bool {
        let now = crate::state::now_ms();
        let (held, tx) = {
            let mut book = self.book.lock().unwrap_or_else(|e| e.into_inner());
            book.decided.retain(|_, until| *until > now);
            let Some(entry) = book.held.get_mut(id) else {
                return false;
            };
            let Some(tx) = entry.tx.take() else {
                return false;
            };
            let held = entry.held.clone();
            if book.decided.len() < MAX_REMEMBERED {
                book.decided.insert(id.to_owned(), now + REMEMBER_MS);
            }
            (held, tx)
        };
        let state = if verdict.approved {
            "approved"
        } else {
            "denied"
        };
        let operator = verdict.operator.clone();
        let _ = tx.send(verdict);
        self.changed(state, &held, Some(&operator));
        true
    }

    /// Ends the hold of `id` (`state`: `expired` or `withdrawn`) unless it was decided.
    fn end(&self, id: &str, state: &'static str) {
        let entry = {
            let mut book = self.book.lock().unwrap_or_else(|e| e.into_inner());
            book.held.remove(id)
        };
        if let Some(sh) = &self.shared {
            sh.unlist(id);
        }
        if let Some(e) = entry.filter(|e| e.tx.is_some()) {
            self.changed(state, &e.held, None);
        }
    }

    /// An event, a metric and (with `[cluster]`) the shared listing, for a change of `held`.
    fn changed(&self, state: &'static str, held: &Held, operator: Option<&str>) {
        let mut data = json!({
            "id": held.id, "state": state, "method": held.method, "tool": held.tool,
            "upstream": held.upstream, "principal": held.principal, "rule": held.rule,
            "expires_at_ms": held.expires_at_ms,
        });
        if let Some(op) = operator {
            data["operator"] = op.into();
        }
        (self.announce)(data);
        self.metrics.approval(state);
    }
}

impl Ticket {
    /// Ends the hold as expired (its wait ran out).
    pub fn expired(mut self) {
        self.ended = true;
        self.registry.end(&self.held.id, "expired");
    }

    /// The registry it is held in.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.ended {
            self.registry.end(&self.held.id, "withdrawn");
        }
    }
}

/// Whether `operator` may decide `held`.
pub fn may_decide(held: &Held, operator: &str) -> bool {
    held.approvers.is_empty() || held.approvers.iter().any(|a| a == operator)
}

/// The argument names of a call (sorted, at most [`MAX_KEYS`]) and the values of those in
/// `show` (each at most [`MAX_SHOWN_BYTES`] as JSON, else its length).
pub fn describe(arguments: Option<&str>, show: &[String]) -> (Vec<String>, Map<String, Value>) {
    let args: Map<String, Value> = arguments
        .and_then(|a| serde_json::from_str(a).ok())
        .unwrap_or_default();
    let mut keys: Vec<String> = args.keys().take(MAX_KEYS).cloned().collect();
    keys.sort();
    let mut shown = Map::new();
    for name in show {
        if let Some(v) = args.get(name) {
            let len = v.to_string().len();
            let v = if len <= MAX_SHOWN_BYTES {
                v.clone()
            } else {
                Value::String(format!("({len} bytes, not shown)"))
            };
            shown.insert(name.clone(), v);
        }
    }
    (keys, shown)
}

#[cfg(test)]
mod tests;
