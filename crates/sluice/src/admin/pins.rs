//! `/admin/v1/pins`: tools pinned against changes of their definitions (docs/pins.md).
//!
//! Takes the path after `/admin/v1/pins` and the operator; gives `GET` → every pin of the
//! configured upstreams with its status, and for a quarantined tool the definitions before
//! (pinned; `null` for a new tool) and after (listed now), for the console's diff; `POST
//! {upstream}/{tool}/accept` → the pending definition pinned, the tool served again (its
//! upstream's tools refetched, listeners told), and the accept logged, audited and published
//! with the operator's name. Refuses `404 not_found` (no such upstream or pin), `409
//! not_quarantined` (nothing to accept), `503 pins_unavailable` (the store cannot be read or
//! written), `405` for another method. The list is bounded by what is pinned: at most
//! `pins::book::MAX_PER_UPSTREAM` tools per upstream.

use http::{Method, StatusCode};
use serde_json::{json, Value};

use super::{Answer, Cx};
use crate::pins::book::Entry;
use crate::pins::AcceptError;

/// Serves `/admin/v1/pins/…` (`rest`: the segments after `pins`).
pub async fn route(cx: &Cx, method: &Method, rest: &[&str], _body: &[u8]) -> Answer {
    match rest {
        [] | [""] if *method == Method::GET => list(cx).await,
        [] | [""] => super::method_not_allowed("GET"),
        [upstream, tool @ .., "accept"] if !tool.is_empty() => {
            if *method != Method::POST {
                return super::method_not_allowed("POST");
            }
            accept(cx, upstream, &tool.join("/")).await
        }
        _ => super::not_found(
            "no such pins path: GET /admin/v1/pins, POST /admin/v1/pins/{upstream}/{tool}/accept",
        ),
    }
}

fn unavailable(why: &str) -> Answer {
    tracing::warn!(reason = %crate::escape::Escaped(&why), "admin: the pins store did not answer");
    super::error(
        StatusCode::SERVICE_UNAVAILABLE,
        "pins_unavailable",
        "the pins store (the pins file, or Redis) cannot be read or written now; try again",
    )
}

/// One pin as the API shows it.
pub fn shown(upstream: &str, tool: &str, e: &Entry) -> Value {
    let pending = e.pending.as_ref();
    json!({
        "upstream": upstream,
        "tool": tool,
        "status": if pending.is_some() { "quarantined" } else { "pinned" },
        "reason": pending.map(|p| p.reason.as_str()),
        "digest": e.pinned.as_ref().map(|d| &d.digest),
        "pending_digest": pending.map(|p| &p.def.digest),
        "changed_at_ms": pending.map(|p| p.since_ms),
        "before": e.pinned.as_ref().map(|d| &d.definition),
        "after": pending.map(|p| &p.def.definition),
    })
}

async fn list(cx: &Cx) -> Answer {
    let names: Vec<String> = cx
        .gw
        .catalog
        .upstreams
        .iter()
        .map(|u| u.name.clone())
        .collect();
    match cx.gw.rt.pins.list(&names).await {
        Ok(book) => {
            let pins: Vec<Value> = book
                .iter()
                .flat_map(|(u, entries)| entries.iter().map(move |(t, e)| shown(u, t, e)))
                .collect();
            super::json(StatusCode::OK, &json!({"pins": pins}))
        }
        Err(why) => unavailable(&why),
    }
}

async fn accept(cx: &Cx, upstream: &str, tool: &str) -> Answer {
    let Some(up) = cx.gw.catalog.upstream(upstream).cloned() else {
        return super::not_found("no such upstream");
    };
    let done = match cx
        .gw
        .rt
        .pins
        .accept(upstream, Some(tool), &cx.op.name)
        .await
    {
        Ok(d) => d,
        Err(AcceptError::NotFound) => {
            return super::not_found("no pin of that tool at that upstream")
        }
        Err(AcceptError::NotQuarantined) => {
            return super::error(
                StatusCode::CONFLICT,
                "not_quarantined",
                "the tool is not quarantined: nothing to accept",
            )
        }
        Err(AcceptError::Store(why)) => return unavailable(&why),
    };
    let digest = done.first().map(|(_, d)| d.clone()).unwrap_or_default();
    // Served again now: its tools refetched (and judged) here, and listeners told.
    let catalog = cx.gw.catalog.clone();
    catalog
        .refresh(&up, crate::route::table::ListKind::Tools)
        .await;
    let change = crate::catalog::hub::Change::Tools;
    catalog
        .hub
        .publish(&up.name, change, std::time::Instant::now());
    super::json(
        StatusCode::OK,
        &json!({"upstream": upstream, "tool": tool, "status": "pinned", "digest": digest, "operator": cx.op.name}),
    )
}
