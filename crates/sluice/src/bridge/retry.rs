//! A retry of a bridge A round: the client's `requestState` and `inputResponses` for an
//! exchange parked on this replica.
//!
//! Takes the sealed state's token, the retry's answers and the routed request; gives the parked
//! exchange, taken from the table, with what the retry brings (answers to its asks, or its
//! approval granted or declined), and resumes it: the answers posted upstream as the responses
//! to its asks, then read on. Refuses with `-32602` and `data.reason` a state that is tampered,
//! expired, another principal's, for another request or upstream, or for an exchange that is
//! gone; with `-32602` a state that is not the exchange's current round's and a malformed
//! answer; with a refusal an answer over `budget.max_input_response_bytes` and the retry that
//! answers the last round `budget.max_rounds` allows (its upstream call cancelled).

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::exchange::{CallInfo, Event, Live, Outcome};
use super::park::Parked;
use super::run::{conclude, run, On};
use super::{asks, state_error, Bridge};
use crate::auth::Principal;
use crate::ctx::target::Target;
use crate::error::GatewayError;
use crate::respond::Reply;
use crate::state::{self, Sealed, StateError};

/// Opens a retry's `requestState` (`token`) for the request `info` describes on upstream `t`:
/// gives the sealed round and the handle of its parked exchange.
pub(super) fn open_state(
    br: &Bridge,
    info: &CallInfo,
    t: &Target,
    token: &str,
) -> Result<(Sealed, String), GatewayError> {
    let sealed = br
        .keys
        .open(
            token,
            &info.principal,
            info.method.as_str(),
            &info.name,
            &info.digest,
            state::now_ms(),
        )
        .and_then(|s| {
            if s.upstream == t.up.name {
                Ok(s)
            } else {
                Err(StateError::RequestChanged)
            }
        })
        .map_err(state_error)?;
    let handle = sealed
        .handle
        .clone()
        .filter(|_| sealed.kind == state::Kind::Bridge)
        .ok_or_else(|| state_error(StateError::Tampered))?;
    Ok((sealed, handle))
}

/// Takes the exchange parked at `handle` for `principal`'s retry, with what the retry brings:
/// refused (and the exchange cancelled) past the round cap, refused when the state is not its
/// current round's or an answer is malformed or too large (the exchange stays parked).
pub(super) async fn take_checked(
    br: &Bridge,
    principal: &Principal,
    t: &Target,
    sealed: &Sealed,
    handle: &str,
    supplied: &Map<String, Value>,
) -> Result<(Box<Parked>, Retry), GatewayError> {
    let limits = br
        .governor
        .budgets
        .limits(&t.up.name, &principal.groups)
        .clone();
    // The round cap: the retry that answers the last allowed round is refused and the
    // upstream's call cancelled, so a server cannot loop on the user's model.
    if sealed.round >= limits.max_rounds {
        br.release(&principal.id, handle);
        if let Some(mut l) = br.parked.take(handle).and_then(|p| p.live) {
            l.cancel(br, "the request reached the gateway's round cap")
                .await;
        }
        return Err(GatewayError::Refused(crate::policy::Refusal::RoundCap(
            limits.max_rounds,
        )));
    }
    let checked = br
        .parked
        .peek(handle, |p| {
            check_answers(p, sealed, supplied, limits.max_input_response_bytes)
        })
        .ok_or_else(|| state_error(StateError::UnknownExchange))?;
    let retry = checked?;
    let parked = br
        .parked
        .take(handle)
        .ok_or_else(|| state_error(StateError::UnknownExchange))?;
    br.release(&parked.info.principal, handle);
    Ok((parked, retry))
}

type Answered = Vec<(String, String)>;

/// What a retry brings.
pub(super) enum Retry {
    /// Answers to asks (upstream id, result JSON) and the asks still unanswered.
    Answers(Answered, Vec<asks::Ask>),
    /// The approval round was granted: show the asks now.
    Approved,
    /// The approval round was declined (the rule).
    Declined(String),
}

/// Checks a retry against its parked exchange: the state is its current round's, and each
/// answer is within `max_bytes` and of its ask's shape.
fn check_answers(
    p: &Parked,
    sealed: &Sealed,
    supplied: &Map<String, Value>,
    max_bytes: usize,
) -> Result<Retry, GatewayError> {
    let bad = |m: String| GatewayError::InvalidParams(m, None);
    if p.round != sealed.round || p.info.principal != sealed.principal {
        return Err(bad(
            "requestState does not match the exchange's current round; use the latest requestState"
                .into(),
        ));
    }
    if p.approving {
        let rule = p
            .asks
            .iter()
            .find_map(|a| a.approval.clone())
            .unwrap_or_default();
        return Ok(
            match crate::policy::approval::granted(supplied.get(crate::policy::approval::KEY)) {
                None => Retry::Answers(Vec::new(), p.asks.clone()),
                Some(true) => Retry::Approved,
                Some(false) => Retry::Declined(rule),
            },
        );
    }
    let mut answered = Vec::new();
    let mut missing = Vec::new();
    for a in &p.asks {
        match supplied.get(&a.key) {
            Some(v) => {
                let size = v.to_string().len();
                if size > max_bytes {
                    return Err(GatewayError::Refused(crate::policy::Refusal::TooLarge(format!(
                        "inputResponses[{:?}] is {size} bytes, over budget.max_input_response_bytes ({max_bytes})",
                        a.key
                    ))));
                }
                answered.push((
                    a.id.clone(),
                    asks::validate(&a.method, v)
                        .map_err(|why| bad(format!("inputResponses[{:?}]: {why}", a.key)))?,
                ))
            }
            None => missing.push(a.clone()),
        }
    }
    Ok(Retry::Answers(answered, missing))
}

/// Resumes a parked exchange with what its retry brought: the approval round granted shows its
/// asks, declined ends the call; answers go upstream, then the exchange reads on (or, with asks
/// still unanswered, asks the client again).
pub(super) async fn resume(
    br: Arc<Bridge>,
    mut live: Live,
    round: u32,
    asked: Vec<asks::Ask>,
    retry: Retry,
    tx: mpsc::Sender<Event>,
    id: String,
    on: On,
) {
    let up = &on.up;
    live.round = round;
    let (answered, missing) = match retry {
        Retry::Answers(a, m) => (a, m),
        Retry::Approved => {
            live.asks = asked
                .into_iter()
                .map(|a| asks::Ask {
                    approval: None,
                    ..a
                })
                .collect();
            return conclude(&br, live, Outcome::Asks, &tx, &id, up).await;
        }
        Retry::Declined(rule) => {
            for a in asked.iter().filter(|a| a.approval.is_some()) {
                live.lease
                    .session
                    .reply(
                        &br.client,
                        &a.id,
                        Err((-1, "User rejected the request (approval declined)")),
                    )
                    .await;
            }
            live.cancel(&br, "the user declined the approval").await;
            let _ = tx
                .send(Event::Reply(Reply::refusal(
                    &id,
                    &crate::policy::Refusal::Declined { rule },
                )))
                .await;
            return;
        }
    };
    for (ask_id, result) in &answered {
        live.lease
            .session
            .reply(&br.client, ask_id, Ok(result))
            .await;
    }
    if !missing.is_empty() {
        live.asks = missing;
        return conclude(&br, live, Outcome::Asks, &tx, &id, up).await;
    }
    run(br, live, Map::new(), tx, id, on).await
}
