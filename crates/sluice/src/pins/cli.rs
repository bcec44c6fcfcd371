//! `sluice pins list|accept`: an operator's view of the pins, and the accept of a change.
//!
//! Takes a config (its `[pins] file`, or its `[cluster]` Redis) and an upstream and tool;
//! gives one line per pin (upstream, tool, status, reason, pinned and pending digests' prefixes,
//! since when: never a definition) or one line per tool accepted. A running Sluice takes an
//! accept on its next refresh of that upstream's tools (a call of the tool refreshes them).
//! Refuses a config without pinning, and one whose pins are in the serving process's memory
//! (no `[pins] file`, no `[cluster]`): no other process can reach them.

use std::sync::Arc;

use super::{AcceptError, Pins, Tell};
use crate::config::Config;

fn pins(cfg: &Config) -> Result<Pins, String> {
    let Some(p) = &cfg.pins else {
        return Err("this config does not pin tools: add [pins] (docs/pins.md)".into());
    };
    let cluster = match &cfg.cluster {
        Some(c) => Some(Arc::new(crate::cluster::Cluster::new(c)?)),
        None if p.file.is_none() => return Err("the pins are kept in the serving process's memory when there is neither [pins] file nor [cluster]: accept changes through the admin API or the console, or configure a file".into()),
        None => None,
    };
    Pins::new(Some(p), cluster, Tell::default())
}

/// A name as written, unless a control character would break the line (then escaped), and
/// without what would reorder it in a terminal.
fn shown(s: &str) -> String {
    match s.chars().any(char::is_control) {
        true => crate::escape::Escaped(&s).to_string(),
        false => crate::escape::line_safe(s).into_owned(),
    }
}

fn upstreams(cfg: &Config) -> Vec<String> {
    cfg.upstreams.iter().map(|u| u.name.clone()).collect()
}

/// One line per pin, with a header.
pub async fn list(cfg: &Config) -> Result<String, String> {
    let book = pins(cfg)?.list(&upstreams(cfg)).await?;
    let mut out = String::from("upstream\ttool\tstatus\treason\tpinned\tpending\tsince_ms\n");
    let short = |d: Option<&str>| d.map_or("-".to_owned(), |d| super::digest::short(d).to_owned());
    for (u, entries) in &book {
        for (t, e) in entries {
            let p = e.pending.as_ref();
            out += &format!(
                "{u}\t{}\t{}\t{}\t{}\t{}\t{}\n",
                shown(t),
                if p.is_some() { "quarantined" } else { "pinned" },
                p.map_or("-", |p| p.reason.as_str()),
                short(e.pinned.as_ref().map(|d| d.digest.as_str())),
                short(p.map(|p| p.def.digest.as_str())),
                p.map_or("-".to_owned(), |p| p.since_ms.to_string()),
            );
        }
    }
    Ok(out)
}

/// Accepts the change of `tool` at `upstream` (every quarantined tool of it with `None`).
pub async fn accept(cfg: &Config, upstream: &str, tool: Option<&str>) -> Result<String, String> {
    if !cfg.upstreams.iter().any(|u| u.name == upstream) {
        return Err(format!("no upstream {upstream:?} in this config"));
    }
    let operator = std::env::var("USER").unwrap_or_else(|_| "cli".into());
    let done = pins(cfg)?
        .accept(upstream, tool, &format!("cli:{operator}"))
        .await
        .map_err(|e| match e {
            AcceptError::NotFound => format!(
                "no pin of tool {:?} at upstream {upstream:?}",
                tool.unwrap_or_default()
            ),
            AcceptError::NotQuarantined => format!(
                "tool {:?} at upstream {upstream:?} is not quarantined: nothing to accept",
                tool.unwrap_or_default()
            ),
            AcceptError::Store(why) => why,
        })?;
    if done.is_empty() {
        return Ok(format!("nothing quarantined at upstream {upstream:?}\n"));
    }
    let mut out = String::new();
    for (t, d) in done {
        out += &format!("accepted\t{upstream}\t{}\t{d}\n", shown(&t));
    }
    Ok(out)
}
