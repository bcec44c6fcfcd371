//! `sluice check --principal`: what one principal meets through Sluice, item by item.
//!
//! Takes a built gateway (its upstreams are probed and listed here, as `serve` would at start)
//! and a principal (its id, groups and scopes); gives a text report: per list, each item of
//! each upstream the principal may reach, `shown` or `hidden` with the `hide` or `show` rule
//! that decided (or none); for a tool, its fate when called, in the order the pipeline decides
//! it: hidden (answered as an unknown tool), else the first call rule that matches (`deny`
//! with its reason, `approve`: an approval round first, `allow`, or none), then the `[[quota]]`
//! that counts it and its limit (a denied call is counted by none). Refuses nothing: an
//! upstream that cannot be probed is reported as down, its items unknown (its reason is in the
//! log, never in the report, as it may repeat what the upstream said).

use std::fmt::Write as _;
use std::sync::Arc;

use crate::auth::Principal;
use crate::gateway::Generation;
use crate::mcp::method::Method;
use crate::policy::visibility::{Listed, Viewer};
use crate::policy::{Effect, Rules, Subject};
use crate::route::table::{Item, ListKind};
use crate::upstream::Upstream;

/// Probes the upstreams and reports what `p` sees of each list and what each tool does.
pub async fn report(gw: &Arc<Generation>, p: &Principal) -> String {
    gw.catalog.probe_all().await;
    let rules = gw.governor.rules();
    let mut out = String::new();
    let _ = writeln!(out, "principal {:?}, groups {:?}", p.id, p.groups);
    for up in gw
        .catalog
        .upstreams
        .iter()
        .filter(|u| !gw.auth.may_reach(p, &u.name))
    {
        let _ = writeln!(
            out,
            "upstream {:?}: not reachable (its required_scopes): every call to it is refused (403)",
            up.name
        );
    }
    for kind in ListKind::ALL {
        let _ = writeln!(out, "{}", kind.name());
        for up in gw.reach.reachable(p) {
            if !up.status().healthy {
                let _ = writeln!(
                    out,
                    "  upstream {:?}: down (the log says why): its items are not known",
                    up.name
                );
                continue;
            }
            if !up.serves(kind.capability()) {
                continue;
            }
            for item in &up.list(kind).items {
                let _ = writeln!(out, "  {}", line(gw, &rules, p, up, kind, item));
            }
        }
    }
    out
}

/// One item: whether `p` sees it and why, and for a tool what a call of it does.
fn line(
    gw: &Generation,
    rules: &Rules,
    p: &Principal,
    up: &Upstream,
    kind: ListKind,
    item: &Item,
) -> String {
    let listed = Listed {
        kind,
        key: &item.key,
        hints: item.hints,
    };
    let (word, why) = match rules.visibility_rule(&Viewer::of(p), &up.name, &listed) {
        None => ("shown", "no rule".to_owned()),
        Some((Effect::Show, rule)) => ("shown", format!("show rule {rule:?}")),
        Some((_, rule)) => ("hidden", format!("hide rule {rule:?}")),
    };
    let name = crate::telemetry::peer_name(&item.public);
    let fate = match (kind, word) {
        (ListKind::Tools, "hidden") => "; call: answered as an unknown tool".to_owned(),
        (ListKind::Tools, _) => format!("; call: {}", call(gw, rules, p, up, item)),
        _ => String::new(),
    };
    format!("{word:<6} {name}  ({why}){fate}")
}

/// What a call of a tool `p` sees does: the call rule that decides it, and the quota that
/// counts it (none for a denied call, which is never counted).
fn call(gw: &Generation, rules: &Rules, p: &Principal, up: &Upstream, item: &Item) -> String {
    let d = rules.judge(&Subject {
        principal: p.id(),
        groups: &p.groups,
        upstream: &up.name,
        method: Method::ToolsCall.as_str(),
        tool: Some(&item.key),
        destructive: item.hints.destructive,
        read_only: item.hints.read_only,
        ask: None,
    });
    let rule = d
        .rule
        .as_deref()
        .map_or_else(|| "no rule".to_owned(), |r| format!("rule {r:?}"));
    let decided = match d.effect {
        Effect::Deny => {
            return format!(
                "denied ({rule}: {:?})",
                d.reason.as_deref().unwrap_or("not allowed")
            )
        }
        Effect::Approve => {
            format!("needs approval first ({rule}: an approval round the user answers)")
        }
        Effect::Allow | Effect::Hide | Effect::Show => format!("allowed ({rule})"),
    };
    let who = crate::policy::quota::Call {
        principal: p.id(),
        groups: &p.groups,
        upstream: &up.name,
        tool: &item.key,
    };
    match gw.governor.quotas.matching(&who) {
        Some(q) => format!(
            "{decided}, quota {:?}: {} calls per {} ms (burst {}), then -31017",
            q.name,
            q.calls_per_window,
            q.window.as_millis(),
            q.burst
        ),
        None => format!("{decided}, no quota"),
    }
}
