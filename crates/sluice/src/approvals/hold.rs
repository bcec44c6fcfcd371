//! A call held for an operator: its SSE answer while it waits, and what ends the wait.
//!
//! Takes the held call's ticket, the request's id and `progressToken`, `[approvals]`, and what
//! runs the call once approved; gives the SSE reply: every `progress_ms` a
//! `notifications/progress` ("waiting for approval by an operator") when the request carried a
//! `progressToken`, else an SSE comment; then the approved call's answer, or `-31051` (an
//! operator denied it), or `-31052` (no decision within `wait_ms`). Refuses a decision bound to
//! other arguments (answered as denied). A client that goes away withdraws the call.

use std::future::Future;
use std::pin::Pin;

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::{Held, Ticket, Verdict};
use crate::auth::Principal;
use crate::ctx::target::Target;
use crate::mcp::jsonrpc::{self, Envelope};
use crate::mcp::sse::Frame;
use crate::policy::{ByOperator, Refusal};
use crate::respond::Reply;

/// What a held call's stream says while it waits.
pub const WAITING: &str = "waiting for approval by an operator";

/// The approved call's answer, once run.
pub type Then = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = Reply> + Send>> + Send>;

/// A held call's description: names, argument keys and the values `by` shows; never another
/// value.
pub fn describe(
    env: &Envelope,
    t: &Target,
    principal: &Principal,
    by: &ByOperator,
    rule: &str,
    cfg: &crate::config::Approvals,
    replica: &str,
) -> Held {
    let (argument_keys, shown) = super::describe(env.param("arguments"), &by.show_arguments);
    let now = crate::state::now_ms();
    Held {
        id: String::new(),
        method: env.method.to_string(),
        tool: t.own.clone(),
        upstream: t.up.name.clone(),
        principal: principal.id().to_owned(),
        argument_keys,
        shown,
        held_at_ms: now,
        expires_at_ms: now + cfg.wait.as_millis() as u64,
        replica: replica.to_owned(),
        rule: rule.to_owned(),
        approvers: by.approvers.clone(),
        digest: crate::state::params_digest(env.members()),
    }
}

/// The request's `_meta.progressToken`, if any.
pub fn progress_token(env: &Envelope) -> Option<Value> {
    let meta: Value = serde_json::from_str(env.param("_meta")?).ok()?;
    meta.get("progressToken")
        .filter(|t| t.is_string() || t.is_number())
        .cloned()
}

/// The held call's SSE answer; `then` runs the call once an operator approves it.
pub fn stream(
    ticket: Ticket,
    cfg: &crate::config::Approvals,
    id_json: String,
    token: Option<Value>,
    webhook: Option<super::webhook::Sender>,
    then: Then,
) -> Reply {
    let (tx, rx) = mpsc::channel::<Frame>(16);
    let (wait, every) = (cfg.wait, cfg.progress);
    crate::audit::spawn(async move {
        if let Some(sh) = &ticket.registry().shared {
            if sh.list(&ticket.held).await.is_err() {
                tracing::warn!("a held call could not be listed in Redis: only this replica's admin API lists it");
            }
        }
        if let Some(w) = webhook {
            w.notify(&ticket.held);
        }
        let Some(verdict) = wait_for(ticket, wait, every, &id_json, token, &tx).await else {
            return;
        };
        crate::audit::note(|r| r.approver = Some(verdict.0.operator.clone()));
        let frames = if verdict.0.approved && verdict.0.digest == verdict.1 {
            then().await
        } else {
            crate::audit::note(|r| r.decision = Some("deny"));
            refused(&id_json, &Refusal::OperatorDenied { rule: verdict.2 })
        };
        pipe(frames, &tx).await;
    });
    Reply::Sse(rx.into())
}

/// Waits for the decision, saying it waits; `None` when the wait ended otherwise (the error is
/// sent, or the client went away). Gives the verdict, the call's digest and its rule.
async fn wait_for(
    mut ticket: Ticket,
    wait: std::time::Duration,
    every: std::time::Duration,
    id_json: &str,
    token: Option<Value>,
    tx: &mpsc::Sender<Frame>,
) -> Option<(Verdict, String, String)> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let mut poll = tokio::time::interval(super::shared::POLL);
    let shared = ticket.registry().shared.is_some();
    let mut n = 0u64;
    loop {
        tokio::select! {
            v = &mut ticket.rx => {
                let v = v.ok()?;
                let (digest, rule) = (ticket.held.digest.clone(), ticket.held.rule.clone());
                return Some((v, digest, rule));
            }
            _ = tokio::time::sleep_until(deadline) => {
                let rule = ticket.held.rule.clone();
                ticket.expired();
                let r = Refusal::NoOperatorDecision { rule, wait_ms: wait.as_millis() as u64 };
                pipe(refused(id_json, &r), tx).await;
                return None;
            }
            _ = tick.tick() => {
                n += 1;
                let frame = match &token {
                    Some(t) => Frame::message(json!({"jsonrpc": "2.0", "method": crate::mcp::method::Method::Progress.as_str(),
                        "params": {"progressToken": t, "progress": n, "message": WAITING}}).to_string().as_bytes()),
                    None => Frame::Comment(WAITING),
                };
                if tx.send(frame).await.is_err() {
                    return None; // the client went away: dropping the ticket withdraws the call
                }
            }
            _ = poll.tick(), if shared => {
                let reg = ticket.registry().clone();
                if let Some(sh) = &reg.shared {
                    if let Ok(Some(v)) = sh.decision(&ticket.held.id).await {
                        reg.deliver(&ticket.held.id, v);
                    }
                }
            }
            _ = tx.closed() => return None,
        }
    }
}

/// A refusal as the stream's last message.
fn refused(id_json: &str, r: &Refusal) -> Reply {
    crate::audit::note(|a| {
        if a.decision != Some("deny") {
            a.decision = Some("refused");
        }
    });
    let (status, code, msg, data) = r.classify();
    Reply::Json(
        status,
        jsonrpc::error_body(id_json, code, &msg, Some(&data)),
    )
}

/// Sends a reply's messages on the held call's stream.
async fn pipe(reply: Reply, tx: &mpsc::Sender<Frame>) {
    match reply {
        Reply::Sse(mut body) => {
            while let Some(f) = body.recv().await {
                if tx.send(f).await.is_err() {
                    return;
                }
            }
        }
        other => {
            let body = other.json_body().cloned().unwrap_or_else(|| {
                jsonrpc::error_body("null", jsonrpc::INTERNAL_ERROR, "the call failed", None)
            });
            let _ = tx.send(Frame::message(&body)).await;
        }
    }
}
