//! What of Sluice's environment a stdio server may inherit, as configured: the `inherit`
//! patterns, the quick flag `--env [UPSTREAM:]NAME[=VALUE]`, and Sluice's own secrets, which
//! no server ever inherits.
//!
//! Takes `inherit` entries, the `--env` flags with the upstreams given by `--upstream`, and the
//! assembled config; gives checked patterns, the flags written into those upstreams' `env`
//! (`NAME=VALUE`) and `inherit` (`NAME`: Sluice's value, read when a process starts), each flag
//! to the stdio `--upstream` it names or, without `UPSTREAM:`, to every one; and every stdio
//! upstream's `secret_env`. Refuses a pattern that is empty, holds `=` or NUL, has `*` anywhere
//! but at its end, or is `*` alone; an `--env` with no stdio `--upstream` given, one that copies
//! a variable Sluice does not have, or is not `NAME[=VALUE]`; and an `inherit` entry (an
//! `--env NAME`) that is one of Sluice's secrets.

use super::super::raw::RawUpstream;
use super::super::{AuthConfig, ConfigError, StateConfig, UpstreamConfig};

/// Environment variables that configure Sluice's own OTLP exporter's headers (credentials):
/// secrets whatever the config says.
const OTLP_HEADERS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
];

/// Checks `inherit` entries (`NAME`, or `PREFIX*`); `bad` words the refusal.
pub(in crate::config) fn check_patterns(
    inherit: &[String],
    bad: impl Fn(String) -> ConfigError,
) -> Result<(), ConfigError> {
    for p in inherit {
        let name = p.strip_suffix('*').unwrap_or(p);
        if name.is_empty() {
            return Err(bad(format!(
                "inherit = [{p:?}] would pass Sluice's whole environment, its secrets' neighbours included: name the variables, or a prefix such as \"AWS_*\""
            )));
        }
        if name.contains(['=', '\0', '*']) {
            return Err(bad(format!("inherit entry {p:?} is not a variable name or a PREFIX* (no '=', NUL, or '*' but at its end)")));
        }
    }
    Ok(())
}

/// Writes each `--env [UPSTREAM:]NAME[=VALUE]` into the stdio upstreams given by `--upstream`
/// (`flagged`, by name, those of `raw` with a command): the one it names, else every one.
pub(in crate::config) fn env_flags(
    flags: &[String],
    flagged: &[&str],
    raw: &mut [RawUpstream],
) -> Result<(), ConfigError> {
    let stdio: Vec<&str> = flagged
        .iter()
        .copied()
        .filter(|n| {
            raw.iter()
                .any(|u| u.name.get_ref() == n && u.command.is_some())
        })
        .collect();
    for flag in flags {
        if stdio.is_empty() {
            return Err(ConfigError(format!(
                "--env {:?}: no stdio upstream was given with --upstream 'NAME=stdio:COMMAND'; in a config file, use env = {{...}} or inherit = [...]",
                shown(flag)
            )));
        }
        let (target, rest) = split_flag(flag, &stdio);
        let var = env_flag(rest, flag)?;
        for up in raw.iter_mut().filter(|u| {
            u.command.is_some()
                && target.map_or(stdio.contains(&u.name.get_ref().as_str()), |t| {
                    u.name.get_ref() == t
                })
        }) {
            match var {
                (name, Some(value)) => drop(up.env.insert(name.to_owned(), value.to_owned())),
                (name, None) => up.inherit.push(name.to_owned()),
            }
        }
    }
    Ok(())
}

/// `NAME=VALUE` (a value of its own) or `NAME` (Sluice's, which must be set), checked.
fn env_flag<'a>(rest: &'a str, flag: &str) -> Result<(&'a str, Option<&'a str>), ConfigError> {
    match rest.split_once('=') {
        Some((var, value)) => {
            check_name(var, flag)?;
            if value.contains('\0') {
                return Err(ConfigError(format!(
                    "--env {:?}: the value holds a NUL byte",
                    shown(flag)
                )));
            }
            Ok((var, Some(value)))
        }
        None => {
            check_name(rest, flag)?;
            if std::env::var_os(rest).is_none() {
                return Err(ConfigError(format!(
                    "--env {rest}: Sluice's environment has no {rest} to copy; set it, or give the value: --env {rest}=VALUE"
                )));
            }
            Ok((rest, None))
        }
    }
}

/// `UPSTREAM:` (when what precedes the first `:`, before any `=`, names one of `stdio`) and the rest.
fn split_flag<'a>(flag: &'a str, stdio: &[&'a str]) -> (Option<&'a str>, &'a str) {
    let head = flag.split('=').next().unwrap_or(flag);
    match head.split_once(':') {
        Some((up, _)) if stdio.contains(&up) => (
            stdio.iter().copied().find(|s| *s == up),
            &flag[up.len() + 1..],
        ),
        _ => (None, flag),
    }
}

/// The flag as shown in an error: its value left out (it may be a credential).
fn shown(flag: &str) -> &str {
    flag.split('=').next().unwrap_or(flag)
}

fn check_name(var: &str, flag: &str) -> Result<(), ConfigError> {
    if var.is_empty() || var.contains(['\0', '*']) {
        return Err(ConfigError(format!(
            "--env {:?}: expected [UPSTREAM:]NAME or [UPSTREAM:]NAME=VALUE",
            shown(flag)
        )));
    }
    Ok(())
}

/// The variables Sluice's config names as its secrets, each with the key that names it:
/// `state.key_env`, `auth.api_keys_env`, `auth.jwt.hs256_secret_env`, the `VAR` of
/// `cluster.redis_url = "${VAR}"` (`cluster_var`), every upstream's `bearer_token_env`, and the
/// OTLP exporter's header variables.
pub(in crate::config) fn secrets(
    state: &StateConfig,
    auth: &AuthConfig,
    cluster_var: Option<String>,
    upstreams: &[UpstreamConfig],
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = OTLP_HEADERS
        .iter()
        .map(|v| ((*v).to_owned(), "Sluice's OTLP exporter".to_owned()))
        .collect();
    let mut named = |var: Option<&String>, key: String| {
        if let Some(v) = var.filter(|v| !v.is_empty()) {
            out.push((v.clone(), key));
        }
    };
    named(state.key_env.as_ref(), "state.key_env".into());
    named(auth.api_keys_env.as_ref(), "auth.api_keys_env".into());
    named(
        auth.jwt.as_ref().and_then(|j| j.hs256_secret_env.as_ref()),
        "auth.jwt.hs256_secret_env".into(),
    );
    named(
        auth.login
            .as_ref()
            .and_then(|l| l.idp_client_secret_env.as_ref()),
        "auth.login.idp_client_secret_env".into(),
    );
    named(cluster_var.as_ref(), "cluster.redis_url".into());
    for u in upstreams {
        named(
            u.bearer_token_env.as_ref(),
            format!("upstream {:?} bearer_token_env", u.name),
        );
    }
    out
}

/// Gives every stdio upstream the secrets it never inherits; refuses one whose `inherit` names
/// one of them outright (a pattern that merely matches one is fine: the secret is left out).
pub(in crate::config) fn keep_secrets(
    upstreams: &mut [UpstreamConfig],
    secrets: &[(String, String)],
) -> Result<(), String> {
    for u in upstreams.iter_mut() {
        let Some(s) = u.stdio.as_mut() else { continue };
        if let Some((var, key)) = secrets.iter().find(|(var, _)| s.inherit.contains(var)) {
            return Err(format!(
                "upstream {:?}: inherit (or --env) names {var}, which is Sluice's own secret ({key}); a stdio server never inherits Sluice's secrets: give it a value of its own with env = {{...}} (or --env {}:NAME=VALUE)",
                u.name, u.name
            ));
        }
        s.secret_env = secrets.iter().map(|(v, _)| v.clone()).collect();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_env_flag_names_its_upstream_before_a_colon_unless_the_colon_is_the_variables() {
        let ups = ["x", "y"];
        assert_eq!(split_flag("x:A=1", &ups), (Some("x"), "A=1"));
        assert_eq!(split_flag("A=x:1", &ups), (None, "A=x:1"));
        assert_eq!(
            split_flag("npm_config_//reg/:_authToken=t", &ups),
            (None, "npm_config_//reg/:_authToken=t")
        );
        assert_eq!(
            split_flag("y:npm_config_//reg/:_authToken", &ups),
            (Some("y"), "npm_config_//reg/:_authToken")
        );
        assert_eq!(shown("x:TOKEN=s3cret"), "x:TOKEN");
    }

    #[test]
    fn patterns_must_name_variables() {
        let bad = |m: String| ConfigError(m);
        assert!(check_patterns(&["AWS_*".into(), "GITHUB_TOKEN".into()], bad).is_ok());
        for p in ["*", "", "A=B", "A*B", "*A"] {
            assert!(check_patterns(&[p.into()], bad).is_err(), "{p:?} accepted");
        }
    }
}
