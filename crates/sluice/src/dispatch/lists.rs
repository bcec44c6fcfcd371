//! Federated lists: `tools/list`, `prompts/list`, `resources/list`, `resources/templates/list`.
//!
//! Takes the upstream tables (refreshed when their TTL ran out); gives one page with every
//! healthy upstream's items in config order, `ttlMs` the smallest freshness left and
//! `cacheScope` public only when every upstream's pages were. Refuses a cursor (Sluice serves
//! each list as one page and never issues cursors). Items a `hide` rule hides from the principal
//! are left out (policy/visibility.rs).

use std::time::Instant;

use tracing::Instrument as _;

use crate::catalog::Reach;
use crate::error::GatewayError;
use crate::mcp::jsonrpc::{result_body, Envelope};
use crate::respond::Reply;
use crate::route::table::ListKind;

/// Serves one federated list.
pub async fn serve(
    reach: &Reach,
    server_info: &serde_json::Value,
    env: &Envelope,
    kind: ListKind,
    principal: &crate::auth::Principal,
) -> Result<Reply, GatewayError> {
    if env.param("cursor").is_some_and(|c| c != "null") {
        return Err(GatewayError::InvalidParams(
            "invalid cursor: Sluice returns each list in one page; call again without a cursor"
                .into(),
            None,
        ));
    }
    let mut out = String::with_capacity(4096);
    out.push_str("{\"");
    out.push_str(kind.member());
    out.push_str("\":[");
    let mut ttl = u64::MAX;
    // What a principal sees depends on its scopes once any upstream requires some, or on who
    // it is once any rule hides or shows items: never public then.
    // Nor with an upstream reached as each user (`oauth`, `token_exchange`): its lists are theirs.
    let mut public =
        !reach.auth.scoped() && !reach.governor.has_visibility() && !reach.catalog.per_user;
    let viewer = crate::policy::visibility::Viewer::of(principal);
    let mut seen = std::collections::HashSet::new();
    let mut any = false;
    for up in reach
        .reachable(principal)
        .filter(|u| u.serves(kind.capability()))
    {
        let mut table = up.list(kind);
        let now = Instant::now();
        let cached = table.fresh_for(now).is_some();
        let span = crate::telemetry::trace::list_page(env.method.as_str(), &up.name, cached);
        if !cached {
            table = reach.catalog.refresh(up, kind).instrument(span).await;
            if !up.status().healthy {
                continue;
            }
        }
        any = true;
        ttl = ttl.min(table.fresh_for(Instant::now()).unwrap_or(0));
        public &= table.public;
        // Judged once per visibility class and table (policy/visibility.rs), not per request.
        let shown = reach.governor.shown(&viewer, &up.name, kind, &table);
        for (i, item) in table.items.iter().enumerate() {
            if shown.as_ref().is_some_and(|s| !s[i]) {
                continue; // hidden from this principal: as if the upstream did not list it
            }
            if !seen.insert(item.public.as_str().to_owned()) {
                continue; // a collision with prefixing off: the first upstream wins (warned at fetch)
            }
            if seen.len() > 1 {
                out.push(',');
            }
            out.push_str(item.raw.get());
        }
    }
    let scope = if public && any { "public" } else { "private" };
    let ttl = if ttl == u64::MAX { 0 } else { ttl };
    let meta = serde_json::json!({crate::mcp::META_SERVER_INFO: server_info});
    out.push_str(&format!("],\"ttlMs\":{ttl},\"cacheScope\":\"{scope}\",\"resultType\":\"complete\",\"_meta\":{meta}}}"));
    Ok(Reply::Json(
        http::StatusCode::OK,
        result_body(env.id_json(), &out),
    ))
}
