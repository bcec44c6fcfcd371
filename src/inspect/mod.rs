//! `sluice check --principal`: what one principal would see through Sluice, and which rule
//! decides each item, so an operator can verify a policy before shipping it.
//!
//! Takes a built gateway (its upstreams are probed and listed here, as `serve` would at start)
//! and a principal (its id, groups and scopes); gives a text report: per list, each item of
//! each upstream the principal may reach, `shown` or `hidden`, with the `hide` or `show` rule
//! that decided (or none). Refuses nothing: an upstream that cannot be probed is reported as
//! down (its reason is in the log, never in the report, as it may repeat what the upstream
//! said).

use std::fmt::Write as _;
use std::sync::Arc;

use crate::auth::Principal;
use crate::gateway::Gateway;
use crate::policy::visibility::{Listed, Viewer};
use crate::policy::Effect;
use crate::route::table::ListKind;

/// The principal `id` as `[[auth.api_keys]]` configures it (its groups and scopes), with the
/// `groups` given instead when there are any; an id no key names (a JWT subject) has no
/// scopes, so upstreams with `required_scopes` are reported as not reachable for it.
pub fn principal(gw: &Gateway, id: &str, groups: &[String]) -> Principal {
    let key = gw.cfg.auth.api_keys.iter().find(|k| k.principal == id);
    Principal {
        id: id.to_owned(),
        groups: if groups.is_empty() { key.map(|k| k.groups.clone()).unwrap_or_default() } else { groups.to_vec() },
        scopes: key.map(|k| k.scopes.iter().cloned().collect()).unwrap_or_default(),
    }
}

/// Probes the upstreams and reports what `p` sees of each list.
pub async fn report(gw: &Arc<Gateway>, p: &Principal) -> String {
    gw.probe_all().await;
    let rules = gw.governor.rules();
    let viewer = Viewer::of(p);
    let mut out = String::new();
    let _ = writeln!(out, "principal {:?}, groups {:?}", p.id, p.groups);
    for up in gw.upstreams.iter().filter(|u| !gw.auth.may_reach(p, &u.name)) {
        let _ = writeln!(out, "upstream {:?}: not reachable (its required_scopes)", up.name);
    }
    for kind in ListKind::ALL {
        let _ = writeln!(out, "{}", kind.name());
        for up in gw.reachable(p) {
            if !up.status().healthy {
                let _ = writeln!(out, "  upstream {:?}: down (the log says why)", up.name);
                continue;
            }
            if !up.serves(kind.capability()) {
                continue;
            }
            for item in &up.list(kind).items {
                let listed = Listed { kind, key: &item.key, hints: item.hints };
                let (word, why) = match rules.visibility_rule(&viewer, &up.name, &listed) {
                    None => ("shown", "no rule".to_owned()),
                    Some((Effect::Show, rule)) => ("shown", format!("show rule {rule:?}")),
                    Some((_, rule)) => ("hidden", format!("hide rule {rule:?}")),
                };
                let _ = writeln!(out, "  {word:<6} {}  ({why})", crate::telemetry::peer_name(&item.public));
            }
        }
    }
    out
}
