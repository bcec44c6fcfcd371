//! `[cluster]`: several replicas that behave as one, sharing budgets, single use and parked
//! counts in Redis and forwarding continuations to the replica that owns them.
//!
//! Takes the raw table; gives [`Cluster`] (`None` when the table is absent: one process, as
//! before). Refuses a table without `redis_url` (a configured cluster with nowhere to share is
//! a mistake, not "off"), a URL that is not `redis://` (or `redis+unix://`), an `id` that is empty or not
//! `[A-Za-z0-9._-]{1,64}`, a `listen` that is not IP:PORT, an `advertise_url` that is not
//! `http://host:port`, or one left out while `listen` is a wildcard address (other replicas
//! could not be told where to come), a `max_connections_per_source` of 0 or over
//! `limits.max_connections`. `redis_url`, `id` and `advertise_url` may be `${VAR}`,
//! read from the environment (a secret's URL, a pod's name, its IP). The URL's password is redacted wherever it is printed.

use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;

use super::raw::RawCluster;
use super::Invalid;

/// What a replica does with a governed request while Redis cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnRedisError {
    /// Refuse it with a retryable error (`-31019`, HTTP 503, `Retry-After`): nothing is ever
    /// granted twice.
    #[default]
    Closed,
    /// Count in this process alone (budgets per replica, single use per replica), with a
    /// warning and `sluice_cluster_redis_fallbacks_total`.
    Local,
}

/// The cluster settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cluster {
    /// Redis, `redis://[user:password@]host:port[/db]` (printed, like `advertise_url`, through
    /// the one redaction of `redact.rs`).
    pub redis_url: String,
    /// This replica's id: written into every sealed state it issues (the owner of its parked
    /// exchanges), and its key in Redis.
    pub id: String,
    /// Where other replicas reach this one's internal listener (`http://host:port`); `None`:
    /// the listener's own bound address.
    pub advertise_url: Option<String>,
    /// The internal listener (continuations forwarded from other replicas; nothing else).
    pub listen: SocketAddr,
    /// What happens while Redis is unreachable (default `closed`).
    pub on_redis_error: OnRedisError,
    /// The longest one Redis command may take before it counts as Redis unreachable
    /// (`redis_timeout_ms`, default 500).
    #[serde(with = "super::limits::ms", rename = "redis_timeout_ms")]
    pub redis_timeout: Duration,
    /// Connections to the internal listener from one source (an IPv4 address, an IPv6 /64) at
    /// once, of `limits.max_connections`; past it a new one is closed at once. Default a
    /// quarter of `limits.max_connections` (at least 1), all of them when `listen` is loopback.
    pub max_connections_per_source: usize,
}

/// `${VAR}` read from the environment; anything else as written.
fn expand(what: &str, v: String) -> Result<String, Invalid> {
    match v.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
        Some(var) => std::env::var(var).ok().filter(|x| !x.trim().is_empty()).ok_or_else(|| {
            Invalid(format!(
                "cluster.{what} names an environment variable, {}, that is not set or empty; set it or write the value",
                crate::escape::shown_var(var)
            ))
        }),
        None => Ok(v),
    }
}

/// The `[cluster]` table, checked.
/// `max_connections`: `limits.max_connections`, the pool the internal listener's share is of.
pub(super) fn cluster(
    raw: Option<RawCluster>,
    max_connections: usize,
) -> Result<Option<Cluster>, Invalid> {
    let Some(raw) = raw else { return Ok(None) };
    let redis_url = redis_url(raw.redis_url)?;
    let id = expand("id", raw.id.unwrap_or_default())?;
    if !super::replica::is_valid(&id) {
        return Err(Invalid(format!(
            "cluster.id {id:?}: every replica needs its own id of 1 to 64 letters, digits, '.', '_' or '-' (e.g. \"sluice-1\", or \"${{HOSTNAME}}\")"
        )));
    }
    let listen = listen(raw.listen)?;
    let advertise_url = advertise_url(raw.advertise_url, listen)?;
    let ms = raw.redis_timeout_ms.unwrap_or(500);
    if ms == 0 || ms > 60_000 {
        return Err(Invalid(format!(
            "cluster.redis_timeout_ms = {ms}: expected 1 to 60000"
        )));
    }
    let per_source = raw
        .max_connections_per_source
        .unwrap_or(if listen.ip().is_loopback() {
            max_connections
        } else {
            (max_connections / 4).max(1)
        });
    if !(1..=max_connections).contains(&per_source) {
        return Err(Invalid(format!(
            "cluster.max_connections_per_source = {per_source}: expected 1 to limits.max_connections = {max_connections}"
        )));
    }
    Ok(Some(Cluster {
        max_connections_per_source: per_source,
        redis_url,
        id,
        advertise_url,
        listen,
        on_redis_error: on_redis_error(raw.on_redis_error.as_deref())?,
        redis_timeout: Duration::from_millis(ms),
    }))
}

/// `redis_url`, read from the environment when `${VAR}`: set, and a `redis://` URL (or
/// `redis+unix://`, `unix://`).
fn redis_url(raw: Option<String>) -> Result<String, Invalid> {
    // "${VAR}": a URL with a password comes from a secret, not the config file.
    let redis_url = expand("redis_url", raw.unwrap_or_default())?;
    if redis_url.trim().is_empty() {
        return Err(Invalid("[cluster] needs redis_url (e.g. \"redis://127.0.0.1:6379\"); remove the table for a single replica".into()));
    }
    if !["redis://", "redis+unix://", "unix://"]
        .iter()
        .any(|s| redis_url.starts_with(s))
    {
        return Err(Invalid(format!(
            "cluster.redis_url {:?} must be a redis:// URL (or redis+unix:///path/to/redis.sock)",
            super::redact_url(&redis_url)
        )));
    }
    Ok(redis_url)
}

/// `listen`, the internal listener: given, and IP:PORT.
fn listen(raw: Option<String>) -> Result<SocketAddr, Invalid> {
    let text = raw.ok_or_else(|| {
        Invalid(
            "[cluster] needs listen, the internal listener's IP:PORT (e.g. \"0.0.0.0:9100\")"
                .into(),
        )
    })?;
    text.parse().map_err(|_| {
        Invalid(format!(
            "cluster.listen = {text:?}: expected IP:PORT, e.g. 0.0.0.0:9100"
        ))
    })
}

/// `advertise_url`, read from the environment when `${VAR}`: `http://host:port`, and required
/// when `listen` does not tell other replicas where to come (a wildcard address, or port 0 off
/// loopback).
fn advertise_url(raw: Option<String>, listen: SocketAddr) -> Result<Option<String>, Invalid> {
    let advertise_url = raw.map(|u| expand("advertise_url", u)).transpose()?;
    match &advertise_url {
        Some(u) => {
            let shown = super::redact_url(u);
            let uri: http::Uri = u
                .parse()
                .map_err(|_| Invalid(format!("cluster.advertise_url {shown:?} is not a URL")))?;
            if uri.scheme_str() != Some("http")
                || uri.host().is_none_or(str::is_empty)
                || uri.port().is_none()
            {
                return Err(Invalid(format!(
                    "cluster.advertise_url {shown:?} must be http://host:port (the internal listener as other replicas reach it)"
                )));
            }
        }
        None if listen.ip().is_unspecified()
            || listen.port() == 0 && !listen.ip().is_loopback() =>
        {
            return Err(Invalid(format!(
                "cluster.listen = {listen} does not tell other replicas where to come: set cluster.advertise_url (e.g. \"http://${{POD_IP}}:9100\")"
            )));
        }
        None => {}
    }
    Ok(advertise_url)
}

/// `on_redis_error`: `closed` (the default) or `local`.
fn on_redis_error(raw: Option<&str>) -> Result<OnRedisError, Invalid> {
    match raw {
        None | Some("closed") => Ok(OnRedisError::Closed),
        Some("local") => Ok(OnRedisError::Local),
        Some(other) => Err(Invalid(format!(
            "cluster.on_redis_error = {other:?}: expected \"closed\" or \"local\""
        ))),
    }
}
