//! An HTTP upstream's resilience keys: its other `urls` (replicas of one server), its circuit
//! breaker and its own concurrency limit.
//!
//! Takes the raw keys of one `[[upstream]]`; gives [`Resilience`]. Refuses `url` and `urls`
//! together, an empty `urls` or one that is neither `http://` nor `https://`, the same URL twice, several URLs for
//! a 2024-11-05 HTTP+SSE server (a session lives on one GET stream), these keys on a stdio
//! upstream, `breaker_failures = 0`, a `breaker_open_ms` outside 1..=600000,
//! `max_in_flight = 0`, and a `max_in_flight_per_principal` of 0, over `max_in_flight` or
//! without it, each with the key and what to give instead.

use std::time::Duration;

use serde::Serialize;

use super::redact::redact_url;
use super::ConfigError;

/// The resilience of one upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resilience {
    /// Every URL of an HTTP upstream (`url`, or `urls = [...]`: replicas of one server,
    /// balanced round robin among those whose breaker is closed); empty for a stdio one.
    pub urls: Vec<String>,
    /// Consecutive failures (no connection, a timeout, an HTTP 5xx without a JSON-RPC body) of
    /// one URL that open its breaker (default 5).
    pub breaker_failures: u32,
    /// How long an open breaker refuses before one trial request may pass (default 10 s).
    pub breaker_open: Duration,
    /// Requests in flight to this upstream at once; past it a request is shed with 503 and
    /// `Retry-After` (default: no limit of its own, `limits.max_in_flight` applies).
    pub max_in_flight: Option<usize>,
    /// Of those, the requests of one principal at once (with `max_in_flight` only), so one
    /// principal's slow calls cannot take them all; past it 503 with `Retry-After`, `-31020`.
    /// Default a quarter of `max_in_flight` (at least 1); all of it when `[auth]` configures no
    /// credentials (every caller is then the one principal `local`).
    pub max_in_flight_per_principal: Option<usize>,
}

impl Default for Resilience {
    fn default() -> Self {
        Resilience {
            urls: Vec::new(),
            breaker_failures: 5,
            breaker_open: Duration::from_secs(10),
            max_in_flight: None,
            max_in_flight_per_principal: None,
        }
    }
}

/// Printed as written: `url` (one) or `urls` (several; their credentials go in the one
/// redaction of `redact.rs`), and the keys not at their defaults (an HTTP upstream's only).
impl Serialize for Resilience {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        match self.urls.as_slice() {
            [] => return m.end(),
            [one] => m.serialize_entry("url", one)?,
            many => m.serialize_entry("urls", many)?,
        }
        let d = Resilience::default();
        if self.breaker_failures != d.breaker_failures {
            m.serialize_entry("breaker_failures", &self.breaker_failures)?;
        }
        if self.breaker_open != d.breaker_open {
            m.serialize_entry("breaker_open_ms", &(self.breaker_open.as_millis() as u64))?;
        }
        if let Some(n) = self.max_in_flight {
            m.serialize_entry("max_in_flight", &n)?;
        }
        if let Some(n) = self.max_in_flight_per_principal {
            m.serialize_entry("max_in_flight_per_principal", &n)?;
        }
        m.end()
    }
}

/// The largest `max_in_flight`.
const MAX_IN_FLIGHT: usize = 1_000_000;

/// The longest `breaker_open_ms`.
const MAX_OPEN_MS: u64 = 600_000;

/// The resilience keys as written.
#[derive(Debug, Default)]
pub(super) struct RawResilience {
    pub(super) urls: Option<Vec<String>>,
    pub(super) breaker_failures: Option<u32>,
    pub(super) breaker_open_ms: Option<u64>,
    pub(super) max_in_flight: Option<usize>,
    pub(super) max_in_flight_per_principal: Option<usize>,
}

impl RawResilience {
    /// Whether any key is set (a stdio upstream takes none).
    pub(super) fn any(&self) -> bool {
        self.urls.is_some()
            || self.breaker_failures.is_some()
            || self.breaker_open_ms.is_some()
            || self.max_in_flight.is_some()
            || self.max_in_flight_per_principal.is_some()
    }

    /// The first URL of `urls`, if given, and the checked keys (its `urls` filled in once the
    /// upstream's `url` is known); `at` names the upstream in errors; `one_principal`: `[auth]`
    /// configures no credentials.
    pub(super) fn check(
        self,
        at: &str,
        sse: bool,
        one_principal: bool,
    ) -> Result<(Option<String>, Resilience), ConfigError> {
        let bad = |what: String| ConfigError(format!("{at}: {what}"));
        let mut first = None;
        let mut all = Vec::new();
        if let Some(urls) = self.urls {
            let mut seen = std::collections::BTreeSet::new();
            for u in &urls {
                if !web_url(u) {
                    return Err(bad(format!(
                        "urls entry {:?}: expected an http:// or https:// URL",
                        redact_url(u)
                    )));
                }
                if !seen.insert(u.as_str()) {
                    return Err(bad(format!("urls lists {:?} twice", redact_url(u))));
                }
            }
            if urls.len() > 1 && sse {
                return Err(bad("transport = \"sse\" takes one url: a 2024-11-05 session lives on one GET stream".into()));
            }
            first = Some(urls.first().cloned().ok_or_else(|| {
                bad("urls is empty: give at least one URL, or url = \"http://...\"".into())
            })?);
            all = urls;
        }
        let d = Resilience::default();
        let breaker_failures = self.breaker_failures.unwrap_or(d.breaker_failures);
        if breaker_failures == 0 {
            return Err(bad(
                "breaker_failures = 0: give 1 or more consecutive failures that open the breaker"
                    .into(),
            ));
        }
        let open_ms = self
            .breaker_open_ms
            .unwrap_or(d.breaker_open.as_millis() as u64);
        if !(1..=MAX_OPEN_MS).contains(&open_ms) {
            return Err(bad(format!(
                "breaker_open_ms = {open_ms}: give 1 to {MAX_OPEN_MS}"
            )));
        }
        if self.max_in_flight == Some(0) {
            return Err(bad(
                "max_in_flight = 0 would refuse every request: give 1 or more, or leave it out"
                    .into(),
            ));
        }
        if self.max_in_flight.is_some_and(|n| n > MAX_IN_FLIGHT) {
            return Err(bad(format!(
                "max_in_flight above {MAX_IN_FLIGHT}: give 1 to {MAX_IN_FLIGHT}, or leave it out"
            )));
        }
        let max_in_flight_per_principal = match (self.max_in_flight, self.max_in_flight_per_principal) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err(bad("max_in_flight_per_principal is a share of max_in_flight: set max_in_flight too, or leave it out".into()))
            }
            (Some(max), given) => {
                let n = given.unwrap_or(if one_principal { max } else { (max / 4).max(1) });
                if !(1..=max).contains(&n) {
                    return Err(bad(format!("max_in_flight_per_principal = {n}: give 1 to max_in_flight = {max}")));
                }
                Some(n)
            }
        };
        let r = Resilience {
            urls: all,
            breaker_failures,
            breaker_open: Duration::from_millis(open_ms),
            max_in_flight: self.max_in_flight,
            max_in_flight_per_principal,
        };
        Ok((first, r))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Config, Overrides};

    fn load(text: &str) -> Result<Config, String> {
        Config::from_toml(text, "sluice.toml", &Overrides::default()).map_err(|e| e.0)
    }

    fn refused(rest: &str) -> String {
        load(&format!("[[upstream]]\nname = \"f\"\n{rest}\n")).expect_err("refused")
    }

    #[test]
    fn several_urls_are_one_upstream_and_print_back_as_urls() {
        let c = load(
            "[[upstream]]\nname = \"f\"\nurls = [\"http://u:pa55@127.0.0.1:1/mcp\", \"http://127.0.0.1:2/mcp\"]\nbreaker_failures = 3\nmax_in_flight = 8\n",
        )
        .expect("loads");
        let u = &c.upstreams[0];
        assert_eq!(
            u.url, "http://u:pa55@127.0.0.1:1/mcp",
            "the first is its url"
        );
        assert_eq!(u.resilience.urls.len(), 2);
        assert_eq!(
            (u.resilience.breaker_failures, u.resilience.max_in_flight),
            (3, Some(8))
        );
        let printed = c.redacted();
        assert!(
            printed.contains("urls = [") && !printed.contains("pa55"),
            "{printed}"
        );
        let again = Config::from_toml(&printed, "printed", &Overrides::default())
            .expect("the printed config loads again");
        assert_eq!(again.redacted(), printed);
        let one =
            load("[[upstream]]\nname = \"f\"\nurl = \"http://127.0.0.1:1/mcp\"\n").expect("loads");
        assert_eq!(one.upstreams[0].resilience.urls, ["http://127.0.0.1:1/mcp"]);
        assert!(
            one.redacted().contains("url = \"http://127.0.0.1:1/mcp\""),
            "{}",
            one.redacted()
        );
    }

    #[test]
    fn bad_resilience_keys_are_refused_saying_what_to_give() {
        assert!(
            refused("url = \"http://127.0.0.1:1/\"\nurls = [\"http://127.0.0.1:2/\"]")
                .contains("has both url and urls")
        );
        assert!(refused("urls = []").contains("urls is empty"));
        assert!(refused("urls = [\"ftp://x/\"]").contains("expected an http:// or https:// URL"));
        assert!(
            refused("urls = [\"http://127.0.0.1:1/\", \"http://127.0.0.1:1/\"]").contains("twice")
        );
        assert!(refused(
            "urls = [\"http://127.0.0.1:1/\", \"http://127.0.0.1:2/\"]\ntransport = \"sse\""
        )
        .contains("takes one url"));
        assert!(refused("command = [\"x\"]\nmax_in_flight = 2")
            .contains("are for a url, not a command"));
        assert!(
            refused("url = \"http://127.0.0.1:1/\"\nbreaker_failures = 0")
                .contains("breaker_failures = 0")
        );
        assert!(
            refused("url = \"http://127.0.0.1:1/\"\nbreaker_open_ms = 0")
                .contains("give 1 to 600000")
        );
        assert!(refused("url = \"http://127.0.0.1:1/\"\nmax_in_flight = 0")
            .contains("max_in_flight = 0"));
        assert!(
            refused("url = \"http://127.0.0.1:1/\"\nmax_in_flight_per_principal = 2")
                .contains("set max_in_flight too")
        );
        assert!(refused(
            "url = \"http://127.0.0.1:1/\"\nmax_in_flight = 2\nmax_in_flight_per_principal = 3"
        )
        .contains("give 1 to max_in_flight = 2"));
    }

    #[test]
    fn an_upstreams_share_per_principal_is_a_quarter_of_max_in_flight_or_all_of_it_without_auth() {
        let share = |text: &str| {
            load(text).expect("loads").upstreams[0]
                .resilience
                .max_in_flight_per_principal
        };
        let up = "[[upstream]]\nname = \"f\"\nurl = \"http://127.0.0.1:1/\"\n";
        let auth = "[auth]\napi_keys_env = \"KEYS\"\n";
        assert_eq!(share(&format!("{auth}{up}max_in_flight = 8\n")), Some(2));
        assert_eq!(share(&format!("{auth}{up}max_in_flight = 3\n")), Some(1));
        assert_eq!(
            share(&format!("{up}max_in_flight = 8\n")),
            Some(8),
            "one principal: all of it"
        );
        assert_eq!(
            share(&format!(
                "{auth}{up}max_in_flight = 8\nmax_in_flight_per_principal = 5\n"
            )),
            Some(5)
        );
        assert_eq!(share(up), None);
    }
}

/// The HTTP version is chosen per host and port (one connection pool for all upstreams):
/// refuses two upstreams on one `host:port` that disagree on `http2`.
pub(super) fn http2_apart(
    upstreams: &[super::UpstreamConfig],
    src: super::Origin<'_>,
) -> Result<(), ConfigError> {
    let mut seen: std::collections::HashMap<http::uri::Authority, (&str, bool)> =
        std::collections::HashMap::new();
    for u in upstreams {
        for url in &u.resilience.urls {
            let Some(authority) = url
                .parse::<http::Uri>()
                .ok()
                .and_then(|x| x.authority().cloned())
            else {
                continue;
            };
            match seen.get(&authority) {
                Some(&(other, h2)) if h2 != u.http2 => {
                    // Host and port only: the authority may carry credentials.
                    let at = format!(
                        "{}:{}",
                        authority.host(),
                        authority.port_u16().unwrap_or(80)
                    );
                    return Err(ConfigError(format!(
                        "{}: upstreams {other:?} and {:?} share {at} but not http2: one host and port is spoken to in one HTTP version; set http2 alike on both",
                        src.name, u.name
                    )));
                }
                Some(_) => {}
                None => {
                    seen.insert(authority, (&u.name, u.http2));
                }
            }
        }
    }
    Ok(())
}

/// Whether `url` is an `http://` or `https://` URL with a host.
pub(super) fn web_url(url: &str) -> bool {
    (url.starts_with("http://") || url.starts_with("https://"))
        && url
            .parse::<http::Uri>()
            .is_ok_and(|u| u.authority().is_some_and(|a| !a.host().is_empty()))
}
