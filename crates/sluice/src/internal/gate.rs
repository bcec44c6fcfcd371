//! What the internal listener may serve: only what a replica may forward, a continuation this
//! replica owns. A valid signature says a replica sent the forward, not that it may run
//! anything: the rule holds against a forward signed with the right cluster key.
//!
//! Takes a forward whose signature verified (the principal the sender authenticated, the
//! carried headers, the body); decides on the decoded, typed request, before the pipeline sees
//! the body. Gives [`Admitted`] for:
//! - a 2026-07-28 retry whose `requestState` opens under the state keys for this principal and
//!   this very request (method, name, params digest), is a bridge A round's (the only state
//!   that is parked, so the only one ever forwarded), names this replica as its owner, and
//!   whose exchange is parked here for the same principal id and groups;
//! - a 2025-11-25 client's answer (one JSON-RPC response, a JSON object, with `result` or
//!   `error`, no `method`, on a session) whose id is one of this replica's requests (`sluice-<this replica>-<n>`).
//!
//! Refuses ([`Refused::NotOwned`], answered 403 and logged) a fresh request of any method, a
//! notification, an array (a batch, or an answer's fields in order), a state another replica owns, a state of another kind or that does not open
//! (forged, another principal's, another request's), an exchange parked for other groups, an
//! answer whose id names another replica or none; and ([`Refused::Gone`], answered `-32602`
//! with `data.reason` as the pipeline would) a continuation of this replica's whose state
//! expired or whose exchange was answered, cancelled or swept meanwhile.

use bytes::Bytes;
use http::HeaderMap;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use crate::auth::Principal;
use crate::gateway::Generation;
use crate::mcp::jsonrpc::Envelope;
use crate::state::{self, Kind, StateError};

/// What the internal listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    /// A retry of a bridge A round parked here.
    Continuation,
    /// A 2025-11-25 client's answer to a request this replica sent it.
    Answer,
}

/// Why a forward is not served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Not a continuation this replica owns (the reason is fixed text, never the request's).
    NotOwned(&'static str),
    /// This replica's continuation, no longer usable: the id to answer and the reason.
    Gone(String, StateError),
}

/// Decides whether the forward `body` (with `headers`, for `principal`) is a continuation this
/// replica owns.
pub fn admit(
    gw: &Generation,
    headers: &HeaderMap,
    body: &Bytes,
    principal: &Principal,
) -> Result<Admitted, Refused> {
    let me = gw
        .governor
        .cluster
        .as_ref()
        .map(|c| c.id())
        .ok_or(Refused::NotOwned("this replica has no [cluster]"))?;
    if crate::mcp::jsonrpc::nests_deeper_than(body, gw.cfg.limits.max_json_depth) {
        return Err(Refused::NotOwned(
            "nested deeper than limits.max_json_depth",
        ));
    }
    // The pipeline serves a body as the handshake era's by this same test: decided alike here.
    if crate::bridge_b::is_legacy(headers, body) {
        return answer(headers, body, me);
    }
    continuation(gw, body, principal, me)
}

/// A 2025-11-25 client's JSON-RPC response whose id names this replica.
fn answer(headers: &HeaderMap, body: &[u8], me: &str) -> Result<Admitted, Refused> {
    #[derive(serde::Deserialize)]
    struct Response<'a> {
        jsonrpc: String,
        #[serde(borrow)]
        id: Option<&'a RawValue>,
        method: Option<IgnoredAny>,
        result: Option<IgnoredAny>,
        error: Option<IgnoredAny>,
    }
    if !headers.contains_key(crate::mcp::headers::SESSION_ID) {
        return Err(Refused::NotOwned("a 2025-11-25 message without a session"));
    }
    // One JSON object: an array (a batch, or a response's fields in order) answers nothing.
    let r: Response<'_> = crate::mcp::jsonrpc::decode_object(body)
        .map_err(|_| Refused::NotOwned("not one JSON-RPC message (an object)"))?;
    if r.jsonrpc != "2.0" || r.method.is_some() || r.result.is_some() == r.error.is_some() {
        return Err(Refused::NotOwned(
            "a 2025-11-25 request or notification, not an answer",
        ));
    }
    let named =
        r.id.and_then(|id| crate::bridge_b::shared::answer_replica(id.get()));
    match named {
        Some(replica) if replica == *me => Ok(Admitted::Answer),
        Some(_) => Err(Refused::NotOwned("an answer to another replica's request")),
        None => Err(Refused::NotOwned(
            "an answer whose id is not one of Sluice's",
        )),
    }
}

/// A 2026-07-28 retry of a bridge A round parked here, for this principal.
fn continuation(
    gw: &Generation,
    body: &Bytes,
    principal: &Principal,
    me: &str,
) -> Result<Admitted, Refused> {
    let env = Envelope::parse_prechecked(body.clone())
        .map_err(|_| Refused::NotOwned("not a JSON-RPC request"))?;
    if env.is_notification() {
        return Err(Refused::NotOwned("a notification"));
    }
    let Some(Ok(token)) = env.param_str("requestState") else {
        return Err(Refused::NotOwned("a fresh request (no requestState)"));
    };
    let name = env
        .method
        .name_member()
        .and_then(|m| env.param_str(m))
        .and_then(Result::ok)
        .unwrap_or_default();
    let digest = state::params_digest(env.members());
    let sealed = match gw.bridge.keys.open(
        &token,
        principal.id(),
        env.method.as_str(),
        &name,
        &digest,
        state::now_ms(),
    ) {
        Ok(s) => s,
        Err(StateError::Expired) => {
            return Err(Refused::Gone(env.id_json().to_owned(), StateError::Expired))
        }
        Err(StateError::WrongPrincipal) => {
            return Err(Refused::NotOwned(
                "a requestState sealed for another principal",
            ))
        }
        Err(_) => {
            return Err(Refused::NotOwned(
                "a requestState that does not open for this request",
            ))
        }
    };
    if sealed.kind != Kind::Bridge {
        return Err(Refused::NotOwned(
            "a requestState of a round no replica parks (approval or modern)",
        ));
    }
    if sealed.owner != me {
        return Err(Refused::NotOwned("a requestState another replica owns"));
    }
    let handle = sealed
        .handle
        .as_deref()
        .ok_or(Refused::NotOwned("a requestState without its exchange"))?;
    let same = |held: &crate::bridge::park::Parked| {
        held.info.principal == principal.id && same_groups(&held.info.ctx.groups, &principal.groups)
    };
    match gw.bridge.parked.peek(handle, same) {
        Some(true) => Ok(Admitted::Continuation),
        Some(false) => Err(Refused::NotOwned(
            "a principal or groups other than the exchange's",
        )),
        None => Err(Refused::Gone(
            env.id_json().to_owned(),
            StateError::UnknownExchange,
        )),
    }
}

/// Whether two group lists hold the same groups (order aside).
fn same_groups(a: &[String], b: &[String]) -> bool {
    fn sorted(g: &[String]) -> Vec<&str> {
        let mut g: Vec<&str> = g.iter().map(String::as_str).collect();
        g.sort_unstable();
        g.dedup();
        g
    }
    sorted(a) == sorted(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(headers: &HeaderMap, body: &str) -> Option<&'static str> {
        match answer(headers, body.as_bytes(), "r1") {
            Ok(_) => None,
            Err(Refused::NotOwned(why)) => Some(why),
            Err(Refused::Gone(..)) => Some("gone"),
        }
    }

    #[test]
    fn an_answer_is_served_only_when_its_id_names_this_replica() {
        let mut h = HeaderMap::new();
        h.insert(
            crate::mcp::headers::SESSION_ID,
            http::HeaderValue::from_static("s2.x"),
        );
        assert_eq!(
            refused(&h, r#"{"jsonrpc":"2.0","id":"sluice-r1-4","result":{}}"#),
            None
        );
        assert_eq!(
            refused(
                &h,
                r#"{"jsonrpc":"2.0","id":"\u0073luice-r1-4","error":{"code":1,"message":"no"}}"#
            ),
            None
        );
        for body in [
            r#"{"jsonrpc":"2.0","id":"sluice-r2-4","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"sluice-r1\nERROR granted root-4","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":4,"result":{}}"#,
            r#"{"jsonrpc":"2.0","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"sluice-r1-4","method":"tools/call","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":"sluice-r1-4","method":"tools/call","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"sluice-r1-4","result":{},"error":{}}"#,
            r#"{"jsonrpc":"2.0","id":"sluice-r1-4"}"#,
            r#"{"jsonrpc":"1.0","id":"sluice-r1-4","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"sluice-r1-4","id":"sluice-r2-4","result":{}}"#,
            r#"[{"jsonrpc":"2.0","id":"sluice-r1-4","result":{}}]"#,
            // A response's fields as an array, in order: what serde reads as the struct.
            r#"["2.0","sluice-r1-4",null,{},null]"#,
            r#" ["2.0","sluice-r1-4",null,null,{"code":1,"message":"no"}]"#,
        ] {
            assert!(refused(&h, body).is_some(), "{body}");
        }
        assert!(
            refused(
                &HeaderMap::new(),
                r#"{"jsonrpc":"2.0","id":"sluice-r1-4","result":{}}"#
            )
            .is_some(),
            "no session"
        );
    }

    #[test]
    fn groups_are_compared_as_sets() {
        let g = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(same_groups(&g(&["a", "b"]), &g(&["b", "a"])));
        assert!(!same_groups(&g(&["a"]), &g(&["a", "admin"])));
        assert!(!same_groups(&g(&[]), &g(&["admin"])));
    }
}
