//! `[[upstream]]` (and `--upstream NAME=URL` / `NAME=stdio:COMMAND ARGS`): the upstream MCP
//! servers, how each is reached (an HTTP URL or a command Sluice starts, `stdio.rs`) and how
//! their names are prefixed.
//!
//! Takes the raw upstream tables and the `separator`; gives [`UpstreamConfig`]s in configured
//! order, plus each upstream's `required_scopes` for `[auth]`. Refuses a name outside
//! `[A-Za-z0-9_.-]`, one holding the separator or used twice, a table with both or neither of
//! `url` and `command`, and a URL that is neither `http://` nor `https://`, naming the line (or
//! `--upstream`) and never printing the URL's credentials.

use serde::{Deserialize, Serialize};

use super::raw::RawUpstream;
use super::redact::{redact_map, redact_url};
use super::stdio::{RawStdio, StdioConfig};
use super::{ConfigError, Origin};

/// How tool and prompt names are prefixed with their upstream's name.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum PrefixMode {
    /// Prefix only when more than one upstream is configured.
    #[default]
    Auto,
    /// Always prefix.
    Always,
    /// Never prefix; a name served by two upstreams is reported as a collision.
    Never,
}

/// The protocol era of an upstream.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
pub enum Era {
    /// Probe with `server/discover`.
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// A stateless 2026-07-28 server.
    #[serde(rename = "2026-07-28")]
    Modern,
    /// A 2025-11-25 (handshake) server.
    #[serde(rename = "2025-11-25")]
    Legacy,
}

/// How an HTTP upstream is spoken to.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
pub enum Transport {
    /// Streamable HTTP, and when a URL fails every Streamable HTTP probe, a 2024-11-05 HTTP+SSE
    /// server if a `GET` there opens an event stream that names its endpoint (the default).
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// Streamable HTTP (2025-03-26 and later) only: one endpoint, answers on each POST.
    #[serde(rename = "streamable-http")]
    StreamableHttp,
    /// 2024-11-05 HTTP+SSE: a GET stream that names where to POST and carries every answer.
    #[serde(rename = "sse")]
    Sse,
}

impl Transport {
    fn is_default(&self) -> bool {
        *self == Transport::Auto
    }
}

/// A cache scope Sluice stamps on a legacy upstream's lists and reads.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// Shareable across principals.
    Public,
    /// One authorization context only.
    #[default]
    Private,
}

/// One upstream MCP server.
#[derive(Clone, PartialEq, Serialize)]
pub struct UpstreamConfig {
    /// Its name: the prefix of its tools and prompts, and what errors and logs call it.
    pub name: String,
    /// Its MCP endpoint URL (`http://` or `https://`; with `urls`, the first), empty for a
    /// stdio upstream.
    /// Printed (credentials redacted) with the resilience keys, as `url` or `urls`.
    #[serde(skip)]
    pub url: String,
    /// Its other URLs, breaker and own concurrency limit (`resilience.rs`).
    #[serde(flatten)]
    pub resilience: super::Resilience,
    /// How its URL is spoken to (Streamable HTTP, or 2024-11-05 HTTP+SSE).
    #[serde(skip_serializing_if = "Transport::is_default")]
    pub transport: Transport,
    /// The process Sluice starts and speaks to on stdin/stdout, instead of a URL.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub stdio: Option<StdioConfig>,
    /// Its era, or `auto` to probe.
    pub era: Era,
    /// Static headers sent with every upstream request (credentials for that upstream).
    #[serde(serialize_with = "redact_map")]
    pub headers: Vec<(String, String)>,
    /// Environment variable holding a bearer token for this upstream.
    pub bearer_token_env: Option<String>,
    /// `[upstream.auth]` of mode `client_credentials`: Sluice obtains its token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<super::UpstreamAuth>,
    /// `ttlMs` stamped on a legacy upstream's lists and reads (default 0).
    pub cache_ttl_ms: u64,
    /// `cacheScope` stamped on a legacy upstream's lists and reads (default private).
    pub cache_scope: CacheScope,
    /// HTTP/2 with prior knowledge (h2c) to its URLs: every request and stream multiplexed on
    /// one connection per host and port instead of an HTTP/1.1 connection each (default false).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub http2: bool,
    /// Its tool pinning mode (`None`: `[pins] mode`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pin: Option<super::PinMode>,
}

impl std::fmt::Debug for UpstreamConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamConfig")
            .field("name", &self.name)
            .field("url", &redact_url(&self.url))
            .field("transport", &self.transport)
            .field("stdio", &self.stdio)
            .field("era", &self.era)
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(k, _)| (k, "<redacted>"))
                    .collect::<Vec<_>>(),
            )
            .field("bearer_token_env", &self.bearer_token_env)
            .field("auth", &self.auth)
            .field("http2", &self.http2)
            .finish()
    }
}

/// Upstream scopes by upstream name, as `[auth]` keeps them.
pub(super) type UpstreamScopes = Vec<(String, Vec<String>)>;

/// Whether `s` is a usable upstream name or separator: one or more of `[A-Za-z0-9_.-]`.
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// `separator`, or `__` when absent.
pub(super) fn separator(separator: Option<String>, src: Origin<'_>) -> Result<String, ConfigError> {
    let separator = separator.unwrap_or_else(|| "__".into());
    if !is_name(&separator) {
        return Err(ConfigError(format!(
            "{}: separator = {separator:?}: expected one or more of [A-Za-z0-9_.-]",
            src.name
        )));
    }
    Ok(separator)
}

/// Every upstream, checked in order against the separator and the names before it; with the
/// `required_scopes` of those that have some.
pub(super) fn upstreams(
    raw: Vec<RawUpstream>,
    separator: &str,
    src: Origin<'_>,
    one_principal: bool,
) -> Result<(Vec<UpstreamConfig>, UpstreamScopes), ConfigError> {
    let mut upstreams: Vec<UpstreamConfig> = Vec::new();
    let mut scopes = Vec::new();
    for u in raw {
        let (upstream, required) =
            UpstreamConfig::from_raw(u, separator, &upstreams, src, one_principal)?;
        if !required.is_empty() {
            scopes.push((upstream.name.clone(), required));
        }
        upstreams.push(upstream);
    }
    super::resilience::http2_apart(&upstreams, src)?;
    Ok((upstreams, scopes))
}

// === impl UpstreamConfig ===

impl UpstreamConfig {
    /// One upstream, its name checked against `separator` and the upstreams `before` it; with
    /// its `required_scopes`.
    fn from_raw(
        mut u: RawUpstream,
        separator: &str,
        before: &[UpstreamConfig],
        src: Origin<'_>,
        one_principal: bool,
    ) -> Result<(UpstreamConfig, Vec<String>), ConfigError> {
        let name = checked_name(&u, separator, before, src)?;
        let at = src.at(u.name.span());
        let resilience = resilience(&mut u, &name, &at, one_principal)?;
        let (url, stdio) = transport(&mut u, &name, src, one_principal)?;
        let mut resilience = resilience;
        if resilience.urls.is_empty() && !url.is_empty() {
            resilience.urls = vec![url.clone()];
        }
        transport_fits(&u, &resilience.urls, stdio.is_some(), &name, &at)?;
        protocol_headers_unset(&u, &name, &at)?;
        if let Some((header, _)) = u
            .headers
            .iter()
            .find(|(_, v)| v.trim().is_empty() || v.trim().eq_ignore_ascii_case("bearer"))
        {
            return Err(ConfigError(format!(
                "{}: upstream {name:?} header {header:?} is empty: an empty credential is not one; set it or remove it",
                src.at(u.name.span())
            )));
        }
        let static_credentials = u.bearer_token_env.is_some()
            || u.headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("authorization"));
        let auth = super::upstream_auth::check(
            u.auth.take(),
            &name,
            &at,
            static_credentials,
            stdio.is_some(),
            &resilience.urls,
        )?;
        let upstream = UpstreamConfig {
            name,
            url,
            resilience,
            stdio,
            transport: u.transport,
            era: u.era,
            headers: u.headers.into_iter().collect(),
            bearer_token_env: u.bearer_token_env,
            auth,
            cache_ttl_ms: u.cache_ttl_ms.unwrap_or(0),
            cache_scope: u.cache_scope.unwrap_or_default(),
            http2: u.http2.unwrap_or(false),
            pin: u.pin,
        };
        Ok((upstream, u.required_scopes))
    }
}

/// Its name, checked: usable, without the separator, and not one an upstream `before` it has.
fn checked_name(
    u: &RawUpstream,
    separator: &str,
    before: &[UpstreamConfig],
    src: Origin<'_>,
) -> Result<String, ConfigError> {
    let name = u.name.get_ref().clone();
    if !is_name(&name) {
        return Err(ConfigError(format!(
            "{}: upstream name {name:?}: expected one or more of [A-Za-z0-9_.-]",
            src.at(u.name.span())
        )));
    }
    if name.contains(separator) {
        return Err(ConfigError(format!(
            "{}: upstream name {name:?} contains the prefix separator {separator:?}: rename it or set another `separator`",
            src.at(u.name.span())
        )));
    }
    if before.iter().any(|x| x.name == name) {
        return Err(ConfigError(format!(
            "{}: upstream name {name:?} is used twice",
            src.at(u.name.span())
        )));
    }
    Ok(name)
}

/// Refuses a configured header of the protocol's own (`Mcp-*`: `Mcp-Method`, `Mcp-Name`,
/// `Mcp-Protocol-Version`, `Mcp-Session-Id`, `Mcp-Param-*`): Sluice sets them per request from
/// what the request is, and a fixed one would misstate every request to the upstream.
fn protocol_headers_unset(u: &RawUpstream, name: &str, at: &str) -> Result<(), ConfigError> {
    let Some(h) = u
        .headers
        .keys()
        .find(|h| h.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("mcp-")))
    else {
        return Ok(());
    };
    Err(ConfigError(format!(
        "{at}: upstream {name:?}: headers sets {h:?}, a header of the MCP protocol that Sluice sets per request; remove it (headers are for credentials and the like)"
    )))
}

/// Refuses `transport = "sse"` or `http2` next to a command, `http2` with credentials in a URL
/// (`urls`), an `https://` URL or a Host header, and `transport = "sse"` with `era = "2026-07-28"`.
fn transport_fits(
    u: &RawUpstream,
    urls: &[String],
    stdio: bool,
    name: &str,
    at: &str,
) -> Result<(), ConfigError> {
    if u.transport == Transport::Sse && stdio {
        return Err(ConfigError(format!(
            "{at}: upstream {name:?}: transport = \"sse\" is for a url, not a command"
        )));
    }
    if u.http2 == Some(true) && stdio {
        return Err(ConfigError(format!(
            "{at}: upstream {name:?}: http2 is for a url, not a command; remove it"
        )));
    }
    let userinfo = |url: &str| {
        url.parse::<http::Uri>()
            .ok()
            .and_then(|x| x.authority().map(|a| a.as_str().contains('@')))
            .unwrap_or(false)
    };
    if u.http2 == Some(true) && urls.iter().any(|x| userinfo(x)) {
        return Err(ConfigError(format!(
            "{at}: upstream {name:?}: credentials in a URL with http2 = true: HTTP/2 would send them as the host; put them in headers"
        )));
    }
    if u.http2 == Some(true) && urls.iter().any(|x| x.starts_with("https://")) {
        return Err(ConfigError(format!(
            "{at}: upstream {name:?}: http2 = true is HTTP/2 in clear text (h2c); over https:// HTTP/2 is agreed in the TLS handshake when the server offers it: remove http2"
        )));
    }
    if u.http2 == Some(true) && u.headers.keys().any(|h| h.eq_ignore_ascii_case("host")) {
        return Err(ConfigError(format!(
            "{at}: upstream {name:?}: a Host header with http2 = true: over HTTP/2 the host is the URL's (:authority); put it in the url, or remove http2"
        )));
    }
    if u.transport == Transport::Sse && u.era == Era::Modern {
        return Err(ConfigError(format!(
            "{at}: upstream {name:?}: a transport = \"sse\" server speaks 2024-11-05 (served as 2025-11-25); use era = \"auto\" or \"2025-11-25\""
        )));
    }
    Ok(())
}

/// Its resilience keys, checked (`resilience.rs`); the first of its `urls` becomes its `url`.
fn resilience(
    u: &mut RawUpstream,
    name: &str,
    at: &str,
    one_principal: bool,
) -> Result<super::Resilience, ConfigError> {
    let raw = super::resilience::RawResilience {
        urls: u.urls.take(),
        breaker_failures: u.breaker_failures.take(),
        breaker_open_ms: u.breaker_open_ms.take(),
        max_in_flight: u.max_in_flight.take(),
        max_in_flight_per_principal: u.max_in_flight_per_principal.take(),
    };
    if raw.any() && u.command.is_some() {
        return Err(ConfigError(format!(
            "{at}: upstream {name:?}: urls, breaker_failures, breaker_open_ms, max_in_flight and max_in_flight_per_principal are for a url, not a command"
        )));
    }
    if raw.urls.is_some() && u.url.is_some() {
        return Err(ConfigError(format!(
            "{at}: upstream {name:?} has both url and urls: give one (urls for several replicas of one server)"
        )));
    }
    let (first, r) = raw.check(
        &format!("{at}: upstream {name:?}"),
        u.transport == Transport::Sse,
        one_principal,
    )?;
    if let Some(first) = first {
        u.url = Some(toml::Spanned::new(u.name.span(), first));
    }
    Ok(r)
}

/// How the upstream is reached: its `url`, or the stdio process of its `command` (with the
/// keys only that one takes), each refused next to the other's keys.
fn transport(
    u: &mut RawUpstream,
    name: &str,
    src: Origin<'_>,
    one_principal: bool,
) -> Result<(String, Option<StdioConfig>), ConfigError> {
    let at = src.at(u.name.span());
    match (u.url.take(), u.command.take()) {
        (Some(_), Some(_)) => {
            Err(ConfigError(format!("{at}: upstream {name:?} has both url and command: give one (url for HTTP, command for stdio)")))
        }
        (None, None) => Err(ConfigError(format!(
            "{at}: upstream {name:?} has neither url nor command: give url = \"http://...\" or command = [\"program\", \"arg\"]"
        ))),
        (Some(url), None) => {
            let (span, url) = (url.span(), url.into_inner());
            if !super::resilience::web_url(&url) {
                let shown = redact_url(&url);
                return Err(ConfigError(format!("{}: upstream {name:?} url {shown:?}: expected an http:// or https:// URL", src.at(span))));
            }
            if RawStdio::any_on(u) {
                return Err(ConfigError(format!(
                    "{at}: upstream {name:?}: {} are for a stdio upstream (command = [...]), not a url",
                    RawStdio::KEYS
                )));
            }
            Ok((url, None))
        }
        (None, Some(command)) => {
            if !u.headers.is_empty() || u.bearer_token_env.is_some() {
                return Err(ConfigError(format!(
                    "{at}: upstream {name:?}: headers and bearer_token_env are HTTP headers; a stdio upstream takes its credentials in env = {{...}}"
                )));
            }
            let raw = RawStdio::take(u, command, one_principal);
            Ok((String::new(), Some(raw.check(name, &at)?)))
        }
    }
}

// === impl RawUpstream ===

impl RawUpstream {
    /// `--upstream NAME=URL` or `--upstream 'NAME=stdio:COMMAND ARGS'`: an upstream with every
    /// other key at its default. Its empty spans make errors name the flag instead of a line.
    pub(super) fn from_flag(spec: &str) -> Result<RawUpstream, ConfigError> {
        let (name, target) = spec.split_once('=').ok_or_else(|| {
            ConfigError(format!(
                "--upstream {spec:?}: expected NAME=URL or NAME=stdio:COMMAND, e.g. --upstream weather=http://127.0.0.1:9000/mcp"
            ))
        })?;
        let (url, command, user) = match target
            .strip_prefix("stdio")
            .filter(|r| r.starts_with([':', '@']))
        {
            Some(rest) => {
                let raw = RawStdio::from_flag(spec, rest)?;
                (None, Some(raw.command), raw.user)
            }
            None => (
                Some(toml::Spanned::new(0..0, target.to_owned())),
                None,
                None,
            ),
        };
        Ok(RawUpstream {
            name: toml::Spanned::new(0..0, name.to_owned()),
            url,
            urls: None,
            breaker_failures: None,
            breaker_open_ms: None,
            max_in_flight: None,
            max_in_flight_per_principal: None,
            command,
            env: Default::default(),
            inherit_env: None,
            inherit: Vec::new(),
            idle_ms: None,
            cwd: None,
            stderr: None,
            stderr_max_bytes: None,
            max_processes: None,
            max_processes_per_principal: None,
            spare_processes: None,
            start_ms: None,
            user,
            group: None,
            transport: Transport::Auto,
            era: Era::Auto,
            headers: Default::default(),
            bearer_token_env: None,
            auth: None,
            cache_ttl_ms: None,
            cache_scope: None,
            http2: None,
            pin: None,
            required_scopes: Vec::new(),
        })
    }
}
