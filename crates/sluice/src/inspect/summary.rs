//! The first lines of `sluice check`: the verdict (`ok: …`) and the warnings, each only where
//! it changes what the config does.
//!
//! Takes a config that passed every check (with its authenticator), and for `--principal` the
//! gateway and the principal; gives the verdict line and the warnings' text (the caller puts
//! them through the one redaction). Refuses nothing.

use crate::auth::{Authenticator, Principal};
use crate::config::Config;
use crate::gateway::Generation;

/// The most principal ids a warning lists.
const MAX_NAMED: usize = 10;

/// `ok: config valid, 4 upstreams (2 stdio), auth api_keys (3 principals), 2 warnings`.
pub(super) fn verdict(cfg: &Config, auth: &Authenticator, warnings: usize) -> String {
    let ups = cfg.upstreams.len();
    let stdio = cfg.upstreams.iter().filter(|u| u.stdio.is_some()).count();
    let mut ids: Vec<&str> = auth.key_principals().map(|p| p.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let keys = match ids.len() {
        0 => None,
        n => Some(format!("api_keys ({n} principal{})", plural(n))),
    };
    let jwt = match (cfg.auth.jwt.is_some(), cfg.auth.login.is_some()) {
        (true, true) => "jwt and login",
        (false, true) => "login",
        _ => "jwt",
    };
    let auth = match (keys, auth.jwt()) {
        (None, false) => {
            "no auth (every caller is the principal \"local\"; loopback only)".to_owned()
        }
        (Some(k), false) => format!("auth {k}"),
        (None, true) => format!("auth {jwt}"),
        (Some(k), true) => format!("auth {k} and {jwt}"),
    };
    let warned = match warnings {
        0 => "no warnings".to_owned(),
        n => format!("{n} warning{}", plural(n)),
    };
    format!(
        "ok: config valid, {ups} upstream{} ({stdio} stdio), {auth}, {warned}",
        plural(ups)
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// What the config itself deserves a warning for.
///
/// No `[state]` keys: sealed round state (a modern upstream's `input_required`, an approval
/// round) and 2025-11-25 session ids are sealed under a key made at start. That matters where
/// clients outlive a process or share one endpoint across processes: said only off loopback (a
/// deployed gateway, restarted under its clients or run as replicas behind a balancer). With
/// `[cluster]` the keys are required, and a loopback gateway's restart costs its own user a
/// retried call, so neither is warned about.
pub(super) fn warnings(cfg: &Config) -> Vec<String> {
    let mut out = Vec::new();
    let keyless = cfg.state.keys.is_empty() && cfg.state.key_env.is_none();
    if keyless && cfg.cluster.is_none() && !cfg.listen.ip().is_loopback() {
        out.push(format!(
            "no [state] keys and listen = {} is not loopback: round states (input_required, approvals) and 2025-11-25 session ids are sealed with a key made at start, so a restart fails every round in progress and replicas behind one balancer refuse each other's; set state.keys or state.key_env (the same on every replica)",
            cfg.listen
        ));
    }
    out
}

/// What `--principal` deserves a warning for: no credential names it, or it lacks the scopes
/// every request needs.
pub(super) fn principal_warnings(
    gw: &Generation,
    p: &Principal,
    groups_given: bool,
) -> Vec<String> {
    let auth = &gw.auth;
    let mut out = Vec::new();
    let mut ids: Vec<&str> = auth.key_principals().map(|k| k.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let named = ids.contains(&p.id.as_str());
    let listed = || {
        let more = if ids.len() > MAX_NAMED { ", …" } else { "" };
        format!("{:?}{more}", &ids[..ids.len().min(MAX_NAMED)])
    };
    if !auth.enabled() && p.id != "local" {
        out.push(format!(
            "no credential is configured, so every caller is the principal \"local\", never {:?}: this report is for a principal no request can be",
            p.id
        ));
    } else if auth.enabled() && !named && !auth.jwt() {
        out.push(format!(
            "no credential names the principal {:?}: no API key is for it and no JWT is accepted, so no request is ever {:?} (the API keys name {})",
            p.id,
            p.id,
            listed()
        ));
    } else if !named && auth.jwt() {
        let groups = if groups_given {
            "the --group given here"
        } else {
            "none here (give --group)"
        };
        out.push(format!(
            "no API key names the principal {:?}: only a JWT whose principal claim is {:?} can be it, its groups from the token ({groups})",
            p.id, p.id
        ));
    }
    let missing: Vec<&str> = auth.missing_scopes(p).collect();
    if !missing.is_empty() {
        out.push(format!("the principal {:?} lacks auth.required_scopes {missing:?}: every request it makes is refused (403)", p.id));
    }
    out
}
