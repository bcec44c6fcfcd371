//! `sluice check`: whether a config would start, said in its first line, what in it deserves a
//! warning, and then the effective config (secrets redacted) or, with `--principal`, what that
//! principal meets: every item it would see or not, and every tool's fate.
//!
//! Takes the config's file and flags, and optionally a principal (its id, and groups instead of
//! its API key's); gives the text to print, every line of it through the one redaction
//! (`config/redact.rs`: the effective config structurally, the other lines as text), and the
//! error that refused the config, if one did. Checks exactly what `serve` checks before it
//! listens (`reload::check`). Refuses nothing itself: the first error is the verdict.
//!
//! Without `--principal` nothing is connected to. With it the upstreams are probed and listed
//! as `serve` does at start (stdio servers are started and ended again), so each tool's fate is
//! decided on the tools the upstreams really list (`report.rs`); an upstream that cannot be
//! reached is reported down, its tools unknown.

mod report;
mod summary;

use std::path::Path;

use crate::auth::Principal;
use crate::config::{redact_text, Config, Overrides};
use crate::gateway::Generation;

pub use report::report;

/// What `sluice check` prints, and the error that refused the config (then it exits 2).
#[derive(Debug)]
pub struct Checked {
    /// The whole output, every line redacted.
    pub text: String,
    /// The first error, redacted, when the config is refused.
    pub refused: Option<String>,
}

/// The line the effective config follows; everything after it loads as a config.
pub const CONFIG_HEADER: &str =
    "# the effective config, secrets redacted (the lines below load as a config):";

/// Runs `sluice check` on the config of `path` and `over`; with `principal`, reports what it
/// meets instead of printing the config.
pub async fn check(
    path: Option<&Path>,
    over: &Overrides,
    principal: Option<&str>,
    groups: &[String],
) -> Checked {
    let cfg = match Config::load(path, over)
        .map_err(|e| e.0)
        .and_then(|c| crate::reload::check(&c).map(|()| c))
    {
        Ok(c) => c,
        Err(e) => return Checked::refused(&e),
    };
    let mut warnings = summary::warnings(&cfg);
    let Some(id) = principal else {
        let auth = match crate::auth::Authenticator::new(&cfg.auth) {
            Ok(a) => a,
            Err(e) => return Checked::refused(&e),
        };
        let head = lines(&summary::verdict(&cfg, &auth, warnings.len()), &warnings);
        return Checked {
            text: format!("{head}\n{CONFIG_HEADER}\n{}", cfg.redacted()),
            refused: None,
        };
    };
    let summary_of = |gw: &Generation, n: usize| summary::verdict(&gw.cfg, &gw.auth, n);
    let gw = match Generation::new(cfg) {
        Ok(gw) => gw,
        Err(e) => return Checked::refused(&e),
    };
    // Quarantined tools are left out of what it sees; nothing is pinned or told by a check.
    gw.rt.pins.set_read_only();
    let p = self::principal(&gw, id, groups);
    warnings.extend(summary::principal_warnings(&gw, &p, !groups.is_empty()));
    let body = report(&gw, &p).await;
    gw.rt.shutdown.cancel();
    gw.close_upstreams().await;
    Checked {
        text: format!(
            "{}{}",
            lines(&summary_of(&gw, warnings.len()), &warnings),
            redact_text(&body)
        ),
        refused: None,
    }
}

/// The verdict line and the warnings, redacted.
fn lines(verdict: &str, warnings: &[String]) -> String {
    let mut out = redact_text(verdict) + "\n";
    for w in warnings {
        out.push_str(&redact_text(&format!("warning: {w}")));
        out.push('\n');
    }
    out
}

impl Checked {
    fn refused(e: &str) -> Checked {
        let e = redact_text(e);
        Checked {
            text: format!("refused: {e}\n"),
            refused: Some(e),
        }
    }
}

/// The principal `id` as an API key (in the config or `api_keys_env`) configures it, its
/// groups and scopes, with the `groups` given instead when there are any; an id no key names (a
/// JWT subject) has no scopes, so upstreams with `required_scopes` are reported as not
/// reachable for it.
pub fn principal(gw: &Generation, id: &str, groups: &[String]) -> Principal {
    let key = gw.auth.key_principals().find(|k| k.id == id);
    Principal {
        id: id.to_owned(),
        groups: if groups.is_empty() {
            key.map(|k| k.groups.clone()).unwrap_or_default()
        } else {
            groups.to_vec()
        },
        scopes: key.map(|k| k.scopes.clone()).unwrap_or_default(),
        subject: None,
    }
}
