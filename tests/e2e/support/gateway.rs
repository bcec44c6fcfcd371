//! Sluice in-process: a config built in code with millisecond timeouts, and upstream URLs that
//! are down or never accept.

use std::time::Duration;

use sluice::config::{Config, Overrides};
use sluice::Running;

use super::capture_logs;

/// A config built in code, with every timeout in milliseconds.
pub(crate) struct Setup {
    top: Vec<String>,
    timeouts: Vec<(&'static str, u64)>,
    limits: Vec<(&'static str, u64)>,
    upstreams: Vec<(String, String)>,
    no_prefix: bool,
}

impl Setup {
    /// Loopback port 0, short timeouts, no upstreams yet.
    pub(crate) fn new() -> Self {
        Setup {
            top: Vec::new(),
            timeouts: vec![
                ("connect_ms", 300),
                ("response_ms", 1500),
                ("refresh_ms", 60_000),
                ("shutdown_ms", 500),
                ("listen_retry_ms", 20),
            ],
            limits: Vec::new(),
            upstreams: Vec::new(),
            no_prefix: false,
        }
    }

    /// Adds an `[[upstream]]`.
    pub(crate) fn upstream(mut self, name: &str, url: &str) -> Self {
        self.upstreams.push((name.to_owned(), url.to_owned()));
        self
    }

    /// Adds a top-level line such as `separator = "--"`.
    pub(crate) fn top(mut self, line: &str) -> Self {
        self.top.push(line.to_owned());
        self
    }

    /// Sets a `[timeouts]` key.
    pub(crate) fn timeout(mut self, key: &'static str, ms: u64) -> Self {
        self.timeouts.retain(|(k, _)| *k != key);
        self.timeouts.push((key, ms));
        self
    }

    /// Sets a `[limits]` key.
    pub(crate) fn limit(mut self, key: &'static str, n: u64) -> Self {
        self.limits.push((key, n));
        self
    }

    /// The `--no-prefix` quick flag.
    pub(crate) fn no_prefix(mut self) -> Self {
        self.no_prefix = true;
        self
    }

    /// The config text.
    pub(crate) fn toml(&self) -> String {
        let mut t = String::from("listen = \"127.0.0.1:0\"\n");
        for l in &self.top {
            t.push_str(l);
            t.push('\n');
        }
        t.push_str("[timeouts]\n");
        for (k, v) in &self.timeouts {
            t.push_str(&format!("{k} = {v}\n"));
        }
        t.push_str("[limits]\n");
        for (k, v) in &self.limits {
            t.push_str(&format!("{k} = {v}\n"));
        }
        for (n, u) in &self.upstreams {
            t.push_str(&format!("[[upstream]]\nname = \"{n}\"\nurl = \"{u}\"\n"));
        }
        t
    }

    /// The validated config.
    pub(crate) fn config(&self) -> Config {
        let over = Overrides { no_prefix: self.no_prefix, ..Default::default() };
        Config::from_toml(&self.toml(), "e2e.toml", &over).unwrap_or_else(|e| panic!("config refused: {e}\n{}", self.toml()))
    }

    /// Starts Sluice and waits until every upstream was probed.
    pub(crate) async fn start(self) -> Running {
        capture_logs();
        let running = sluice::start(self.config()).await.expect("sluice starts");
        tokio::time::timeout(Duration::from_secs(5), running.ready()).await.expect("sluice probes its upstreams");
        running
    }
}

/// One demo upstream named `name`, and Sluice in front of it alone (names unprefixed).
pub(crate) async fn one_demo(name: &'static str) -> (sluice::demo::upstream::DemoUpstream, Running) {
    let demo = sluice::demo::upstream::start(name, ([127, 0, 0, 1], 0).into()).await.expect("demo upstream starts");
    let sluice = Setup::new().upstream(name, &demo.url()).start().await;
    (demo, sluice)
}

/// An `http://` URL on loopback where nothing listens: its port stays bound (never listening,
/// so connections are refused) until the test process exits, so no other test can take it.
pub(crate) fn dead_url() -> String {
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let addr = sock.local_addr().expect("addr");
    std::mem::forget(sock);
    format!("http://{addr}/mcp")
}

/// A loopback listener whose accept queue is full: connecting to it hangs until the caller's
/// connect timeout. Keep the value alive while it is used.
pub(crate) struct Stalled {
    _listener: tokio::net::TcpListener,
    _filler: std::net::TcpStream,
    pub(crate) url: String,
}

/// A [`Stalled`] listener.
pub(crate) fn stalled() -> Stalled {
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let addr = sock.local_addr().expect("addr");
    let listener = sock.listen(0).expect("listen");
    let filler = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).expect("the one queued connection");
    Stalled { _listener: listener, _filler: filler, url: format!("http://{addr}/mcp") }
}
