//! The checks that span sections of a config: the bridge's paths against the endpoint's, the
//! admin listener against the internal one, a listener off loopback against `[auth]`,
//! `[metrics]` against `[auth]` and the upstreams, and the secrets no stdio server inherits.
//!
//! Takes the converted sections; gives them back checked. Refuses, naming the file, what would
//! contradict another section.

use std::net::SocketAddr;

use super::{raw, Admin, AuthConfig, Bridge, Cluster, ConfigError, MetricsConfig, Origin};

/// `[bridge]`, apart from the MCP endpoint's path (across sections: `sse_path` vs `path`).
pub(super) fn bridge_of(
    raw: raw::RawBridge,
    path: &str,
    src: Origin<'_>,
) -> Result<Bridge, ConfigError> {
    let bridge = Bridge::try_from(raw).map_err(|e| src.refuse(e))?;
    bridge
        .apart_from(path)
        .map_err(|e| ConfigError(format!("{}: {e}", src.name)))?;
    Ok(bridge)
}

/// Across sections: the admin listener and the internal one must not take one port.
pub(super) fn apart(
    admin: &Option<Admin>,
    cluster: &Option<Cluster>,
    origin: &str,
) -> Result<(), ConfigError> {
    match (admin, cluster) {
        (Some(a), Some(c)) if super::admin::clash(a.listen, c.listen) => Err(ConfigError(format!(
            "{origin}: [admin] listen = {} takes the port of [cluster] listen; give each its own",
            a.listen
        ))),
        _ => Ok(()),
    }
}

/// Across sections: a listener off loopback lets in whoever reaches it unless auth is set.
pub(super) fn open_listener(
    listen: SocketAddr,
    auth: &AuthConfig,
    origin: &str,
) -> Result<(), ConfigError> {
    if !auth.configured() && !listen.ip().is_loopback() {
        return Err(ConfigError(format!(
            "{origin}: listen = {listen} is not loopback but [auth] configures no API keys and no JWT: anyone could call through; add [auth] or listen on 127.0.0.1"
        )));
    }
    Ok(())
}

/// `[metrics]`, checked against `[auth]` and the number of upstreams.
pub(super) fn metrics_config(
    raw: raw::RawMetrics,
    auth: &AuthConfig,
    upstreams: usize,
    origin: &str,
) -> Result<MetricsConfig, ConfigError> {
    let metrics = MetricsConfig::from(raw);
    // Across sections: `/metrics` can only require the auth `[auth]` configures.
    if metrics.require_auth && !auth.configured() {
        return Err(ConfigError(format!(
            "{origin}: metrics.require_auth = true but [auth] configures no API keys and no JWT: add [auth] or drop require_auth"
        )));
    }
    // Across sections: readiness cannot need more healthy upstreams than there are.
    metrics
        .check_upstreams(upstreams)
        .map_err(|e| ConfigError(format!("{origin}: {e}")))?;
    Ok(metrics)
}

/// Across sections: no stdio server inherits a variable the config names as a secret
/// (`[state]`, `[auth]`, `[cluster]`'s and the approval webhook's included).
pub(super) fn keep_secrets(
    upstreams: &mut [super::UpstreamConfig],
    (state, auth, cluster_var): (&super::StateConfig, &AuthConfig, Option<String>),
    approvals: &super::Approvals,
    origin: &str,
) -> Result<(), ConfigError> {
    let mut secrets = super::stdio::inherit::secrets(state, auth, cluster_var, upstreams);
    if let Some(w) = &approvals.webhook {
        secrets.push((w.secret_env.clone(), "approvals.webhook.secret_env".into()));
    }
    super::stdio::inherit::keep_secrets(upstreams, &secrets)
        .map_err(|e| ConfigError(format!("{origin}: {e}")))
}

/// Across sections: without credentials every caller is the one principal `local`, so a share
/// per principal defaults to the whole pool (what `AuthConfig::configured` says).
pub(super) fn one_principal(auth: &raw::RawAuth) -> bool {
    auth.api_keys.is_empty()
        && auth.api_keys_env.is_none()
        && auth.jwt.is_none()
        && auth.login.is_none()
}
