//! Sluice's config built from typed values and serialized with `toml` (no config text is
//! written by hand), and Sluice started from it in-process on 127.0.0.1 port 0.
//!
//! Each preset is the config one group of tests has always run with; a test adds sections,
//! keys, principals and upstreams with the builder methods, then calls [`Gateway::start`] (in
//! process) or [`Gateway::text`] (for the `sluice` binary, tests/support/process.rs).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use sluice::config::{Config, Overrides};
use sluice::Running;
use toml::{Table, Value};

/// The sealing keys of the presets (`[state] keys`: id 1, 32 bytes each).
pub(crate) mod keys {
    /// Bridge A and the audit tests.
    pub(crate) const BRIDGE_A: &str = "1:YnJpZGdlLWEtdGVzdHMtc3RhdGUta2V5LTMyLWJ5dGVzIQ==";
    /// Bridge B.
    pub(crate) const BRIDGE_B: &str = "1:YnJpZGdlLWItdGVzdHMtc3RhdGUta2V5LTMyLWJ5dGVzIQ==";
    /// Governance.
    pub(crate) const GOVERNANCE: &str = "1:Z292ZXJuYW5jZS10ZXN0cy1zdGF0ZS1rZXktMzJieSE=";
    /// The hostile suite (the `sluice` binary).
    pub(crate) const HOSTILE: &str = "1:aG9zdGlsZS10ZXN0cy1zdGF0ZS1rZXktMzJieXRlcyE=";
}

/// The API keys of the two principals of [`Gateway::two_keys`].
pub(crate) const ALICE_KEY: &str = "bridge-b-alice-key-0123456789";
pub(crate) const BOB_KEY: &str = "bridge-b-bob-key-9876543210";

/// An `[[auth.api_keys]]` entry.
#[derive(Clone, Debug, Default)]
pub(crate) struct ApiKey {
    /// The key as the client sends it (hashed into the config).
    pub(crate) key: String,
    /// Its principal.
    pub(crate) principal: String,
    /// `groups`, left out when empty.
    pub(crate) groups: Vec<String>,
    /// `scopes`: `None` leaves the member out.
    pub(crate) scopes: Option<Vec<String>>,
}

impl ApiKey {
    /// `key` for `principal`, no groups, no scopes member.
    pub(crate) fn new(key: &str, principal: &str) -> ApiKey {
        ApiKey {
            key: key.to_owned(),
            principal: principal.to_owned(),
            ..ApiKey::default()
        }
    }

    /// With these groups.
    pub(crate) fn groups(mut self, groups: &[&str]) -> ApiKey {
        self.groups = groups.iter().map(|g| (*g).to_owned()).collect();
        self
    }

    /// With this `scopes` member (possibly empty).
    pub(crate) fn scopes(mut self, scopes: &[&str]) -> ApiKey {
        self.scopes = Some(scopes.iter().map(|s| (*s).to_owned()).collect());
        self
    }

    fn table(&self) -> Table {
        let mut t = Table::new();
        t.insert(
            "sha256".into(),
            sluice::auth::api_keys::hash_key(&self.key).into(),
        );
        t.insert("principal".into(), self.principal.clone().into());
        if !self.groups.is_empty() {
            t.insert("groups".into(), strings(&self.groups));
        }
        if let Some(s) = &self.scopes {
            t.insert("scopes".into(), strings(s));
        }
        t
    }
}

/// An `[[upstream]]` entry.
#[derive(Clone, Debug)]
pub(crate) struct Upstream {
    /// `name`.
    pub(crate) name: String,
    /// `url`.
    pub(crate) url: String,
    /// Its other keys (`required_scopes`, `headers`, `bearer_token_env`…).
    pub(crate) keys: Table,
}

impl Upstream {
    /// `name` at `url`.
    pub(crate) fn new(name: &str, url: &str) -> Upstream {
        Upstream {
            name: name.to_owned(),
            url: url.to_owned(),
            keys: Table::new(),
        }
    }

    /// `name` served by the process `command` on stdio (no url).
    pub(crate) fn stdio(name: &str, command: &[impl AsRef<str>]) -> Upstream {
        Upstream {
            name: name.to_owned(),
            url: String::new(),
            keys: Table::new(),
        }
        .key("command", strings(command))
    }

    /// `name` at several `urls` (replicas of one server).
    pub(crate) fn replicas(name: &str, urls: &[impl AsRef<str>]) -> Upstream {
        Upstream {
            name: name.to_owned(),
            url: String::new(),
            keys: Table::new(),
        }
        .key("urls", strings(urls))
    }

    /// Sets one more key.
    pub(crate) fn key(mut self, k: &str, v: impl Into<Value>) -> Upstream {
        self.keys.insert(k.to_owned(), v.into());
        self
    }
}

/// Which checks [`Gateway::start`] makes once every upstream was probed.
#[derive(Clone, Copy, Debug, Default)]
struct Checks {
    healthy: bool,
    legacy: bool,
}

/// A Sluice config under construction.
#[derive(Clone, Debug)]
pub(crate) struct Gateway {
    origin: &'static str,
    top: Table,
    sections: BTreeMap<String, Table>,
    api_keys: Vec<ApiKey>,
    budget_overrides: Vec<Table>,
    upstreams: Vec<Upstream>,
    policies: Vec<String>,
    overrides: Overrides,
    checks: Checks,
    probe_within: Duration,
    dir: PathBuf,
}

/// A TOML array of strings.
pub(crate) fn strings(items: &[impl AsRef<str>]) -> Value {
    Value::Array(
        items
            .iter()
            .map(|s| Value::String(s.as_ref().to_owned()))
            .collect(),
    )
}

impl Gateway {
    /// Loopback port 0 and nothing else.
    pub(crate) fn new() -> Gateway {
        let mut top = Table::new();
        top.insert("listen".into(), "127.0.0.1:0".into());
        Gateway {
            origin: "sluice.toml",
            top,
            sections: BTreeMap::new(),
            api_keys: Vec::new(),
            budget_overrides: Vec::new(),
            upstreams: Vec::new(),
            policies: Vec::new(),
            overrides: Overrides::default(),
            checks: Checks::default(),
            // Waiting on an event: as long as a stdio server's boot may take (start_ms, 30 s)
            // on a loaded machine, with room; a passing test never waits it out.
            probe_within: Duration::from_secs(60),
            dir: scratch_dir(),
        }
    }

    /// The front-door and federation tests: every timeout in milliseconds (connect 300,
    /// response 1500, listen retry 20), an empty `[limits]`; waits 5 s for the probes.
    pub(crate) fn e2e() -> Gateway {
        let mut g = Gateway::new().named("e2e.toml").timeouts(&[
            ("connect_ms", 300),
            ("response_ms", 1500),
            ("refresh_ms", 60_000),
            ("shutdown_ms", 500),
            ("listen_retry_ms", 20),
        ]);
        g.sections.entry("limits".into()).or_default();
        g.probe_within = Duration::from_secs(5);
        g
    }

    /// The SDK interop tests: connect 500, response 5000, listen retry 250; healthy upstreams.
    pub(crate) fn interop() -> Gateway {
        Gateway::new()
            .named("interop.toml")
            .timeouts(&[
                ("connect_ms", 500),
                ("response_ms", 5000),
                ("refresh_ms", 60_000),
                ("shutdown_ms", 500),
                ("listen_retry_ms", 250),
            ])
            .healthy()
    }

    /// The bridge and governance tests: [`Gateway::interop`]'s timeouts, `[bridge]` gather 20 ms,
    /// park 10 s, idle sessions 60 s, and the sealing key `state_key`.
    pub(crate) fn bridge(state_key: &str) -> Gateway {
        Gateway::interop()
            .named("bridge.toml")
            .bridge_key("gather_ms", 20)
            .bridge_key("park_ms", 10_000)
            .bridge_key("session_idle_ms", 60_000)
            .set("state", "keys", strings(&[state_key]))
    }

    /// The bridge B tests: [`Gateway::bridge`] with [`keys::BRIDGE_B`], every tool name prefixed
    /// by its upstream's, healthy upstreams.
    pub(crate) fn bridge_b() -> Gateway {
        Gateway::bridge(keys::BRIDGE_B)
            .named("bridge_b.toml")
            .top("prefix", "always")
    }

    /// Two API-key principals, `alice` ([`ALICE_KEY`]) and `bob` ([`BOB_KEY`]), under
    /// `[auth] resource = "http://gw.test/mcp"`.
    pub(crate) fn two_keys(self) -> Gateway {
        self.set("auth", "resource", "http://gw.test/mcp")
            .api_key(ApiKey::new(ALICE_KEY, "alice"))
            .api_key(ApiKey::new(BOB_KEY, "bob"))
    }

    /// The hostile suite's `sluice` binary: connect 500, response 10 s, no background refresh
    /// (600 s), listen retry 200, and [`keys::HOSTILE`].
    pub(crate) fn hostile() -> Gateway {
        Gateway::new()
            .timeouts(&[
                ("connect_ms", 500),
                ("response_ms", 10_000),
                ("refresh_ms", 600_000),
                ("shutdown_ms", 500),
                ("listen_retry_ms", 200),
            ])
            .set("state", "keys", strings(&[keys::HOSTILE]))
    }

    /// The name config errors are reported under.
    pub(crate) fn named(mut self, origin: &'static str) -> Gateway {
        self.origin = origin;
        self
    }

    /// Sets a top-level key (`prefix`, `separator`, `allowed_origins`, `listen`…).
    pub(crate) fn top(mut self, k: &str, v: impl Into<Value>) -> Gateway {
        self.top.insert(k.to_owned(), v.into());
        self
    }

    /// Sets `k` in `[section]` (a dotted name such as `auth.jwt` is a nested table).
    pub(crate) fn set(mut self, section: &str, k: &str, v: impl Into<Value>) -> Gateway {
        self.sections
            .entry(section.to_owned())
            .or_default()
            .insert(k.to_owned(), v.into());
        self
    }

    /// Drops `[section]` and everything set in it.
    pub(crate) fn without(mut self, section: &str) -> Gateway {
        self.sections.remove(section);
        self
    }

    /// Sets `[timeouts]` keys.
    pub(crate) fn timeouts(mut self, ms: &[(&str, i64)]) -> Gateway {
        for (k, v) in ms {
            self = self.set("timeouts", k, *v);
        }
        self
    }

    /// Sets one `[timeouts]` key.
    pub(crate) fn timeout(self, k: &str, ms: i64) -> Gateway {
        self.set("timeouts", k, ms)
    }

    /// Sets one `[limits]` key.
    pub(crate) fn limit(self, k: &str, n: i64) -> Gateway {
        self.set("limits", k, n)
    }

    /// Sets one `[bridge]` key.
    pub(crate) fn bridge_key(self, k: &str, v: i64) -> Gateway {
        self.set("bridge", k, v)
    }

    /// Sets one `[budget]` key.
    pub(crate) fn budget(self, k: &str, v: impl Into<Value>) -> Gateway {
        self.set("budget", k, v)
    }

    /// Adds a `[[budget.override]]` for `group` with these keys.
    pub(crate) fn budget_override(mut self, group: &str, keys: &[(&str, i64)]) -> Gateway {
        let mut t = Table::new();
        t.insert("group".into(), group.into());
        for (k, v) in keys {
            t.insert((*k).to_owned(), (*v).into());
        }
        self.budget_overrides.push(t);
        self.sections.entry("budget".into()).or_default();
        self
    }

    /// Adds an `[[auth.api_keys]]` entry (and the `[auth]` table).
    pub(crate) fn api_key(mut self, key: ApiKey) -> Gateway {
        self.sections.entry("auth".into()).or_default();
        self.api_keys.push(key);
        self
    }

    /// The audit log appended to `path` (`[audit] sink`).
    pub(crate) fn audit_to(self, path: &std::path::Path) -> Gateway {
        self.set("audit", "sink", path.display().to_string())
    }

    /// Adds a policy file (`policies = [...]` in the config).
    pub(crate) fn policy_file(mut self, path: &std::path::Path) -> Gateway {
        self.policies.push(path.display().to_string());
        self
    }

    /// A policy file with these `[[rule]]` tables (policy text, the engine's input), loaded in
    /// order.
    pub(crate) fn policy(mut self, rules: &str) -> Gateway {
        let path = self.file(&format!("policy-{}.toml", self.policies.len()), rules);
        self.policies.push(path);
        self
    }

    /// A file with `text` in this config's scratch directory; gives its path.
    pub(crate) fn file(&self, name: &str, text: &str) -> String {
        std::fs::create_dir_all(&self.dir).expect("create a scratch directory");
        let path = self.dir.join(name);
        std::fs::write(&path, text).expect("write a scratch file");
        path.display().to_string()
    }

    /// Loads shipped policy files (names under policies/) as `--policy FILE` does.
    pub(crate) fn shipped_policies(mut self, names: &[&str]) -> Gateway {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("policies");
        self.overrides
            .policies
            .extend(names.iter().map(|p| dir.join(p).display().to_string()));
        self
    }

    /// The `--no-prefix` quick flag.
    pub(crate) fn no_prefix(mut self) -> Gateway {
        self.overrides.no_prefix = true;
        self
    }

    /// Adds an `[[upstream]]` with just a name and URL.
    pub(crate) fn upstream(self, name: &str, url: &str) -> Gateway {
        self.upstream_spec(Upstream::new(name, url))
    }

    /// Adds an `[[upstream]]`.
    pub(crate) fn upstream_spec(mut self, u: Upstream) -> Gateway {
        self.upstreams.push(u);
        self
    }

    /// [`Gateway::start`] fails the test unless every upstream is healthy once probed.
    pub(crate) fn healthy(mut self) -> Gateway {
        self.checks.healthy = true;
        self
    }

    /// [`Gateway::start`] checks nothing of the upstreams (a test of unhealthy ones).
    pub(crate) fn unchecked(mut self) -> Gateway {
        self.checks = Checks::default();
        self
    }

    /// [`Gateway::start`] fails the test unless every upstream was seen as a 2025-11-25 one.
    pub(crate) fn all_legacy(mut self) -> Gateway {
        self.checks.legacy = true;
        self
    }

    /// The config document.
    pub(crate) fn table(&self) -> Table {
        let mut doc = self.top.clone();
        if !self.policies.is_empty() {
            doc.insert("policies".into(), strings(&self.policies));
        }
        for (name, keys) in &self.sections {
            let mut keys = keys.clone();
            if name == "auth" && !self.api_keys.is_empty() {
                keys.insert(
                    "api_keys".into(),
                    Value::Array(
                        self.api_keys
                            .iter()
                            .map(|k| Value::Table(k.table()))
                            .collect(),
                    ),
                );
            }
            if name == "budget" && !self.budget_overrides.is_empty() {
                keys.insert(
                    "override".into(),
                    Value::Array(
                        self.budget_overrides
                            .iter()
                            .cloned()
                            .map(Value::Table)
                            .collect(),
                    ),
                );
            }
            insert_dotted(&mut doc, name, keys);
        }
        if !self.upstreams.is_empty() {
            let ups = self.upstreams.iter().map(|u| {
                let mut t = Table::new();
                t.insert("name".into(), u.name.clone().into());
                if !u.url.is_empty() {
                    t.insert("url".into(), u.url.clone().into());
                }
                t.extend(u.keys.clone());
                Value::Table(t)
            });
            doc.insert("upstream".into(), Value::Array(ups.collect()));
        }
        doc
    }

    /// The config text (what `sluice serve --config` reads).
    pub(crate) fn text(&self) -> String {
        toml::to_string(&self.table()).expect("a config serializes")
    }

    /// The validated config.
    pub(crate) fn config(&self) -> Config {
        let text = self.text();
        Config::from_toml(&text, self.origin, &self.overrides)
            .unwrap_or_else(|e| panic!("config refused: {e}\n{text}"))
    }

    /// Starts Sluice in-process, waits until every upstream was probed and makes the checks
    /// asked for ([`Gateway::healthy`], [`Gateway::all_legacy`]).
    pub(crate) async fn start(self) -> Running {
        super::logs::capture();
        let running = sluice::start(self.config())
            .await
            .unwrap_or_else(|e| panic!("sluice starts: {e}"));
        tokio::time::timeout(self.probe_within, running.ready())
            .await
            .unwrap_or_else(|_| {
                panic!("sluice probed its upstreams within {:?}", self.probe_within)
            });
        for up in &running.gateway.catalog.upstreams {
            let s = up.status();
            if self.checks.healthy || self.checks.legacy {
                assert!(
                    s.healthy,
                    "upstream {} is not healthy behind sluice: {:?}",
                    up.name, s.error
                );
            }
            if self.checks.legacy {
                assert!(
                    s.wire == sluice::upstream::Wire::Legacy,
                    "upstream {} was not recognised as a 2025-11-25 upstream",
                    up.name
                );
            }
        }
        running
    }
}

impl Default for Gateway {
    fn default() -> Self {
        Gateway::new()
    }
}

/// A directory path no other config of this run uses (created when a file is written).
fn scratch_dir() -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("conf-{}-{nanos}-{n}", std::process::id()))
}

/// Puts `keys` at the dotted path `name` of `doc`.
fn insert_dotted(doc: &mut Table, name: &str, keys: Table) {
    let mut at = doc;
    let mut parts = name.split('.').peekable();
    while let Some(p) = parts.next() {
        let entry = at
            .entry(p.to_owned())
            .or_insert_with(|| Value::Table(Table::new()));
        let Value::Table(t) = entry else {
            panic!("{name}: {p} is not a table")
        };
        if parts.peek().is_none() {
            t.extend(keys);
            return;
        }
        at = t;
    }
}

/// One demo upstream named `name`, and Sluice in front of it alone (names unprefixed).
pub(crate) async fn one_demo(
    name: &'static str,
) -> (sluice_testkit::demo::upstream::DemoUpstream, Running) {
    let demo = sluice_testkit::demo::upstream::start(name, ([127, 0, 0, 1], 0).into())
        .await
        .expect("demo upstream starts");
    let sluice = Gateway::e2e().upstream(name, &demo.url()).start().await;
    (demo, sluice)
}
