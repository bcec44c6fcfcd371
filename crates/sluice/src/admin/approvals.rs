//! `/admin/v1/approvals`: calls held for an operator's decision.
//!
//! Takes the path after `/admin/v1/approvals` and the operator; gives `GET` → the held calls
//! (every replica's under `[cluster]`): `{"approvals": [{id, method, tool, upstream,
//! principal, argument_keys, shown, held_at_ms, expires_at_ms, replica}]}`, and
//! `POST {id}/approve` or `{id}/deny` → `{id, decision, operator}`. Refuses an unknown or
//! expired id (404 `not_found`), a second decision (409 `already_decided`), an operator the
//! rule does not name (403 `not_an_approver`), Redis unreachable under `[cluster]` (503
//! `shared_state_unavailable`), and any other path or method. Never shows an argument value a
//! rule does not list in `show_arguments`.

use http::{Method, StatusCode};
use serde_json::{json, Value};

use super::{Answer, Cx};
use crate::approvals::{DecideError, Held};

/// Serves `/admin/v1/approvals/…` (`rest`: the segments after `approvals`).
pub async fn route(cx: &Cx, method: &Method, rest: &[&str], _body: &[u8]) -> Answer {
    match rest {
        [] | [""] => {
            if method != Method::GET {
                return super::method_not_allowed("GET");
            }
            let all = cx.gw.rt.approvals.list_all().await;
            let listed: Vec<Value> = all.iter().map(listing).collect();
            super::json(StatusCode::OK, &json!({ "approvals": listed }))
        }
        [id, action @ ("approve" | "deny")] => {
            if method != Method::POST {
                return super::method_not_allowed("POST");
            }
            decide(cx, id, *action == "approve").await
        }
        _ => super::not_found("no such approvals path"),
    }
}

async fn decide(cx: &Cx, id: &str, approve: bool) -> Answer {
    let reg = &cx.gw.rt.approvals;
    match reg.decide(id, approve, &cx.op.name).await {
        Ok(v) => super::json(
            StatusCode::OK,
            &json!({"id": id, "decision": if v.approved { "approved" } else { "denied" }, "operator": v.operator}),
        ),
        Err(DecideError::NotFound) => super::not_found(
            "no call with this id waits for a decision (never held, or its wait ended)",
        ),
        Err(DecideError::AlreadyDecided) => super::error(
            StatusCode::CONFLICT,
            "already_decided",
            "this call was decided already",
        ),
        Err(DecideError::NotAnApprover) => super::error(
            StatusCode::FORBIDDEN,
            "not_an_approver",
            "the rule holding this call names other operators as its approvers",
        ),
        Err(DecideError::Unavailable) => super::error(
            StatusCode::SERVICE_UNAVAILABLE,
            "shared_state_unavailable",
            "the cluster's shared state (Redis) did not answer; retry shortly",
        ),
    }
}

/// What the API lists of a held call (not its digest, rule or approvers).
pub fn listing(h: &Held) -> Value {
    json!({
        "id": h.id, "method": h.method, "tool": h.tool, "upstream": h.upstream,
        "principal": h.principal, "argument_keys": h.argument_keys, "shown": h.shown,
        "held_at_ms": h.held_at_ms, "expires_at_ms": h.expires_at_ms, "replica": h.replica,
    })
}
