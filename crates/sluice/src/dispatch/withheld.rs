//! Calls of quarantined tools (tool pinning, `pins/`): refused as such, not as unknown.
//!
//! Takes a name routing did not find in the tables (the quarantined tools are not in them: the
//! catalog withheld them); gives `-31050` (`GatewayError::Quarantined`) when the name is a
//! tool the catalog withheld at an upstream the principal reaches, and the principal would see
//! it; otherwise the refusal routing had. Refuses nothing else; only a miss pays for it.

use crate::auth::Principal;
use crate::catalog::Reach;
use crate::error::GatewayError;
use crate::policy::visibility::{Listed, Viewer};
use crate::route::table::ListKind;
use crate::upstream::Upstream;

/// The refusal of `own` at `up` when it is quarantined there (and seen), else `or`.
pub(super) fn refusal(
    reach: &Reach,
    principal: &Principal,
    up: &Upstream,
    kind: ListKind,
    own: &str,
    or: GatewayError,
) -> GatewayError {
    withheld(reach, principal, up, kind, own).unwrap_or(or)
}

/// `Err` when `name` is a quarantined tool of one of `reachable` (searched in order: an
/// unprefixed name no table lists, before an only upstream is let answer for it).
pub(super) fn none_of(
    reach: &Reach,
    principal: &Principal,
    reachable: &[&std::sync::Arc<Upstream>],
    kind: ListKind,
    name: &str,
) -> Result<(), GatewayError> {
    match reachable
        .iter()
        .find_map(|up| withheld(reach, principal, up, kind, name))
    {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn withheld(
    reach: &Reach,
    principal: &Principal,
    up: &Upstream,
    kind: ListKind,
    own: &str,
) -> Option<GatewayError> {
    if kind != ListKind::Tools {
        return None;
    }
    let hints = *up.list(kind).quarantined.get(own)?;
    let listed = Listed {
        kind,
        key: own,
        hints,
    };
    reach
        .governor
        .shows(&Viewer::of(principal), &up.name, &listed)
        .then(|| GatewayError::Quarantined(up.name.clone(), own.to_owned()))
}
