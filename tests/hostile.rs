//! The adversarial suite of issue 10: hostile upstreams, hostile clients and hostile configs,
//! one module per defect class. Each test states the behaviour Sluice must have; most fail on
//! the code before the issue-10 fixes (each module's doc says why).
//!
//! - `decisions`: governance decides on decoded values (escaped or repeated `resultType`);
//! - `numbers`: `maxTokens` and `Mcp-Param-*` integers compared as numbers, whatever their
//!   spelling;
//! - `digest`: nesting depth, and the request digest that binds a state to its request;
//! - `fail_open`: configs whose secret, key or file is missing or empty stop `check` and `serve`;
//! - `bounded`: work per request is bounded (CPU, memory, metric labels, sessions, streams);
//! - `guarantees`: single use, scopes, audit and redaction hold on every path.
//!
//! Sluice runs as the built binary (tests/support/process.rs) with `RUST_LOG=trace`; every test
//! also asserts its output carries none of the unique strings the test put into arguments,
//! prompts and upstream messages.

#[path = "support/hostile/client.rs"]
mod client;
#[path = "support/hostile.rs"]
mod hostile;
#[path = "support/hostile/legacy.rs"]
mod legacy;
#[path = "support/process.rs"]
mod process;

#[path = "hostile/bounded.rs"]
mod bounded;
#[path = "hostile/decisions.rs"]
mod decisions;
#[path = "hostile/digest.rs"]
mod digest;
#[path = "hostile/fail_open.rs"]
mod fail_open;
#[path = "hostile/guarantees.rs"]
mod guarantees;
#[path = "hostile/numbers.rs"]
mod numbers;

/// Building a Sluice config text.
mod conf {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    /// The sealing key of every test Sluice.
    pub(crate) const STATE_KEY: &str = "1:aG9zdGlsZS10ZXN0cy1zdGF0ZS1rZXktMzJieXRlcyE=";

    /// A config under construction: top-level keys, tables, API keys, upstreams, policy files.
    pub(crate) struct Conf {
        top: Vec<String>,
        tables: BTreeMap<String, Vec<String>>,
        keys: Vec<String>,
        upstreams: Vec<String>,
        policies: Vec<String>,
        dir: PathBuf,
    }

    impl Conf {
        /// Loopback port 0, short timeouts, no background refresh, one sealing key.
        pub(crate) fn new() -> Conf {
            let mut c = Conf {
                top: vec!["listen = \"127.0.0.1:0\"".into()],
                tables: BTreeMap::new(),
                keys: Vec::new(),
                upstreams: Vec::new(),
                policies: Vec::new(),
                dir: crate::process::scratch("conf"),
            };
            for l in ["connect_ms = 500", "response_ms = 10000", "refresh_ms = 600000", "shutdown_ms = 500", "listen_retry_ms = 200"] {
                c = c.set("timeouts", l);
            }
            c.set("state", &format!("keys = [\"{STATE_KEY}\"]"))
        }

        /// Adds `line` to `[table]` ("" for the top level).
        pub(crate) fn set(mut self, table: &str, line: &str) -> Conf {
            if table.is_empty() {
                self.top.push(line.to_owned());
            } else {
                self.tables.entry(table.to_owned()).or_default().push(line.to_owned());
            }
            self
        }

        /// Drops `[table]` and everything set in it.
        pub(crate) fn without(mut self, table: &str) -> Conf {
            self.tables.remove(table);
            self
        }

        /// A file in this config's scratch directory with `text`; gives its path.
        pub(crate) fn file(&self, name: &str, text: &str) -> String {
            let path = self.dir.join(name);
            std::fs::write(&path, text).expect("write a scratch file");
            path.display().to_string()
        }

        /// An API key for `principal` with `scopes`.
        pub(crate) fn key(mut self, key: &str, principal: &str, scopes: &[&str]) -> Conf {
            self.tables.entry("auth".into()).or_default();
            self.keys.push(format!(
                "[[auth.api_keys]]\nsha256 = \"{}\"\nprincipal = \"{principal}\"\nscopes = {scopes:?}\n",
                sluice::auth::api_keys::hash_key(key)
            ));
            self
        }

        /// An upstream, with more of its keys as `extra` lines.
        pub(crate) fn upstream(mut self, name: &str, url: &str, extra: &[&str]) -> Conf {
            let mut u = format!("[[upstream]]\nname = \"{name}\"\nurl = \"{url}\"\n");
            for l in extra {
                u.push_str(l);
                u.push('\n');
            }
            self.upstreams.push(u);
            self
        }

        /// A policy file with these `[[rule]]` tables (TOML text), loaded in order.
        pub(crate) fn policy(mut self, rules: &str) -> Conf {
            let path = self.dir.join(format!("policy-{}.toml", self.policies.len()));
            std::fs::write(&path, rules).expect("write a policy file");
            self.policies.push(path.display().to_string());
            self
        }

        /// The config text.
        pub(crate) fn text(&self) -> String {
            let mut t = self.top.join("\n");
            t.push('\n');
            if !self.policies.is_empty() {
                t.push_str(&format!("policies = {:?}\n", self.policies));
            }
            for (name, lines) in &self.tables {
                t.push_str(&format!("\n[{name}]\n"));
                for l in lines {
                    t.push_str(l);
                    t.push('\n');
                }
                if name == "auth" {
                    for k in &self.keys {
                        t.push('\n');
                        t.push_str(k);
                    }
                }
            }
            for u in &self.upstreams {
                t.push('\n');
                t.push_str(u);
            }
            t
        }
    }

    /// A policy denying every sampling ask (rule `no-sampling`).
    pub(crate) const DENY_SAMPLING: &str =
        "[[rule]]\nname = \"no-sampling\"\nmatch = { method = [\"sampling/createMessage\"] }\neffect = \"deny\"\nreason = \"no sampling here\"\n";

    /// A unique string for canaries and names.
    pub(crate) fn unique(what: &str) -> String {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        format!("canary-{what}-{:x}{nanos:x}", std::process::id())
    }
}
