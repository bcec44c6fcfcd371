//! `/admin/v1/pins`: tools pinned against changes of their definitions.
//!
//! Takes the path after `/admin/v1/pins`; gives the pins and accepts changes.
//! Refuses (404) until tool pinning lands.

use http::Method;

use super::{Answer, Cx};

/// Serves `/admin/v1/pins/…` (`rest`: the segments after `pins`).
pub async fn route(_cx: &Cx, _method: &Method, _rest: &[&str], _body: &[u8]) -> Answer {
    super::not_found("no pins API yet")
}
