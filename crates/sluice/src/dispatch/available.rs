//! Whether a method can be served now: 404 for one no configured upstream could ever serve,
//! 503 with `Retry-After` for one only upstreams that are down could serve.
//!
//! Takes the method and the upstreams' health; gives `Ok` when the method needs no family, or a
//! healthy upstream serves its family. Refuses an unknown or removed method, and a family no
//! upstream advertises (down ones that advertised it when last discovered, or were never
//! discovered, aside), with `-32601` (404): asking again will not help. Refuses a family only
//! down upstreams could serve with `-31030` (503, `Retry-After`), naming them and why, after
//! giving each of them a probe the call waits for (`catalog::reprobe::revive`): an upstream
//! that just came back serves this very request.

use std::sync::Arc;

use crate::catalog::Catalog;
use crate::error::GatewayError;
use crate::mcp::method::Method;
use crate::upstream::error::Unavailable;
use crate::upstream::Upstream;
use crate::validate::check_method;

/// Refuses `method` as the module says; `also(cap)`: whether something else serves the family
/// (a round's retry for an upstream a reload retired).
pub async fn check(
    catalog: &Catalog,
    method: &Method,
    also: impl Fn(&str) -> bool,
) -> Result<(), GatewayError> {
    let served = |cap: &str| catalog.serves(cap) || also(cap);
    let Err(not_served) = check_method(method, served) else {
        return Ok(());
    };
    let Some(Some(cap)) = method.capability() else {
        return Err(not_served.into());
    };
    let could: Vec<&Arc<Upstream>> = catalog
        .upstreams
        .iter()
        .filter(|u| u.could_serve(cap))
        .collect();
    if could.is_empty() {
        return Err(not_served.into());
    }
    let t = &catalog.timeouts;
    futures_util::future::join_all(
        could.iter().map(|up| {
            crate::catalog::reprobe::revive(up, crate::catalog::reprobe::wait_for(up, t))
        }),
    )
    .await;
    if served(cap) {
        return Ok(());
    }
    Err(unavailable(method.as_str(), could.iter().map(|u| u.as_ref())).into())
}

/// The refusal for `what` when `down` (the upstreams that could serve it) are down.
pub fn unavailable<'a>(what: &str, down: impl Iterator<Item = &'a Upstream>) -> Unavailable {
    let down = down
        .map(|u| {
            let s = u.status();
            let why = s.error.clone().unwrap_or_else(|| {
                if s.probed {
                    "unhealthy"
                } else {
                    "not probed yet"
                }
                .into()
            });
            (u.name.clone(), why)
        })
        .collect();
    Unavailable {
        what: what.to_owned(),
        down,
        retry_after_ms: crate::catalog::reprobe::RETRY_AFTER.as_millis() as u64,
    }
}

/// For a routed call: `Ok` when `up` is up, after a probe of it the call waits for when it is
/// down (see the module); the 503 refusal naming it otherwise.
pub async fn up_now(catalog: &Catalog, up: &Upstream, what: &str) -> Result<(), GatewayError> {
    if crate::catalog::reprobe::revive(up, crate::catalog::reprobe::wait_for(up, &catalog.timeouts))
        .await
    {
        return Ok(());
    }
    Err(unavailable(what, std::iter::once(up)).into())
}
