//! `/admin/v1/approvals`: calls held for an operator's decision.
//!
//! Takes the path after `/admin/v1/approvals`; gives the held calls and the decisions.
//! Refuses (404) until out-of-band approvals land.

use http::Method;

use super::{Answer, Cx};

/// Serves `/admin/v1/approvals/…` (`rest`: the segments after `approvals`).
pub async fn route(_cx: &Cx, _method: &Method, _rest: &[&str], _body: &[u8]) -> Answer {
    super::not_found("no approvals API yet")
}
