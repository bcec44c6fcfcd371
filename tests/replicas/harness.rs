//! The parts of a real cluster, as child processes: `redis-server` on a unix socket in a scratch
//! directory (no port to collide on), three `sluice serve` replicas sharing it, and HAProxy round
//! robin in front of them with no stickiness, configured as `deploy/haproxy.cfg` is.
//!
//! Waits are on the processes' own lines (Redis's "Ready to accept connections", Sluice's
//! listening line) or, for HAProxy, on its port accepting, each bounded by a deadline. HAProxy
//! needs a TCP port: one is picked free, and a start that loses it to another process is tried
//! again on another.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use sha2::Digest as _;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::process::{scratch, Sluice};

/// The API keys of the tests' principals.
pub(crate) const ALICE: &str = "alice-key-cluster";
pub(crate) const BOB: &str = "bob-key-cluster";

fn sha(key: &str) -> String {
    sha2::Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn which(bin: &str) -> PathBuf {
    for dir in ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"] {
        let p = PathBuf::from(dir).join(bin);
        if p.exists() {
            return p;
        }
    }
    panic!("{bin} is not installed: the cluster tests need Debian's redis-server and haproxy (.ci/run installs them: apt-get install redis-server haproxy)");
}

/// A `redis-server` on a unix socket.
pub(crate) struct Redis {
    child: Option<tokio::process::Child>,
    dir: PathBuf,
    /// In the system's temp directory: a unix socket's path must stay under 108 bytes.
    socket: PathBuf,
}

impl Redis {
    /// Starts one in a fresh scratch directory.
    pub(crate) async fn start() -> Redis {
        let dir = scratch("redis");
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let socket = std::env::temp_dir().join(format!("sluice-{name}.sock"));
        let mut r = Redis {
            child: None,
            dir,
            socket,
        };
        r.start_again().await;
        r
    }

    fn socket(&self) -> PathBuf {
        self.socket.clone()
    }

    /// The URL replicas use.
    pub(crate) fn url(&self) -> String {
        format!("redis+unix://{}", self.socket().display())
    }

    /// Starts it (again, after [`Redis::stop`]) on the same socket, with nothing kept.
    pub(crate) async fn start_again(&mut self) {
        let mut child = tokio::process::Command::new(which("redis-server"))
            .args([
                "--port",
                "0",
                "--save",
                "",
                "--appendonly",
                "no",
                "--unixsocketperm",
                "700",
            ])
            .arg("--unixsocket")
            .arg(self.socket())
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start redis-server");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let ready = tokio::time::timeout(Duration::from_secs(10), async {
            while let Ok(Some(l)) = lines.next_line().await {
                if l.to_ascii_lowercase()
                    .contains("ready to accept connections")
                {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(
            ready,
            Ok(true),
            "redis-server did not become ready within 10 s"
        );
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        self.child = Some(child);
    }

    /// Stops it (SIGSTOP) without closing anything: connections stay open and what replicas
    /// send waits in its sockets, applied once it is resumed (a stall, not an outage).
    pub(crate) async fn pause(&self) {
        self.signal("STOP").await;
    }

    /// Resumes it (SIGCONT) after [`Redis::pause`].
    pub(crate) async fn resume(&self) {
        self.signal("CONT").await;
    }

    async fn signal(&self, name: &str) {
        let pid = self
            .child
            .as_ref()
            .and_then(tokio::process::Child::id)
            .expect("a running redis-server");
        let sent = tokio::process::Command::new("kill")
            .arg(format!("-{name}"))
            .arg(pid.to_string())
            .status()
            .await;
        assert!(sent.is_ok_and(|s| s.success()), "kill -{name} {pid}");
    }

    /// Kills it (SIGKILL): what replicas see when Redis is lost.
    pub(crate) async fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill().await;
        }
    }
}

/// What a replica's config says beyond the cluster's own lines.
#[derive(Clone)]
pub(crate) struct Setup {
    /// Top-level keys (before any table).
    pub(crate) top: String,
    /// Extra TOML after the shared part (budgets, bridge timings, policies).
    pub(crate) extra: String,
    /// `cluster.on_redis_error`.
    pub(crate) on_redis_error: &'static str,
    /// The upstreams, as `(name, url, era)`.
    pub(crate) upstreams: Vec<(String, String, &'static str)>,
    /// Extra lines of the `[cluster]` table.
    pub(crate) cluster: String,
}

impl Setup {
    /// One legacy upstream `py` at `url`.
    pub(crate) fn legacy(url: &str) -> Setup {
        Setup {
            top: String::new(),
            extra: String::new(),
            on_redis_error: "closed",
            upstreams: vec![("py".into(), url.into(), "2025-11-25")],
            cluster: String::new(),
        }
    }

    /// With these top-level keys.
    pub(crate) fn top(mut self, keys: &str) -> Setup {
        self.top.push_str(keys);
        self.top.push('\n');
        self
    }

    /// With these extra lines in `[cluster]`.
    pub(crate) fn cluster(mut self, lines: &str) -> Setup {
        self.cluster.push_str(lines);
        self.cluster.push('\n');
        self
    }

    /// With these extra TOML lines.
    pub(crate) fn with(mut self, extra: &str) -> Setup {
        self.extra.push_str(extra);
        self.extra.push('\n');
        self
    }
}

fn config(id: &str, redis: &str, s: &Setup) -> String {
    let mut c = format!(
        "listen = \"127.0.0.1:0\"\n{}\n[state]\nkeys = [\"1:{}\"]\n\n[cluster]\nredis_url = \"{redis}\"\nid = \"{id}\"\nlisten = \"127.0.0.1:0\"\non_redis_error = \"{}\"\nredis_timeout_ms = 300\n{}\n[timeouts]\nconnect_ms = 500\n\n[audit]\nenabled = true\n\n[auth]\napi_keys = [{{ sha256 = \"{}\", principal = \"alice\" }}, {{ sha256 = \"{}\", principal = \"bob\" }}]\n\n",
        s.top,
        base64_key(),
        s.on_redis_error,
        s.cluster,
        sha(ALICE),
        sha(BOB),
    );
    c.push_str(&s.extra);
    for (name, url, era) in &s.upstreams {
        c.push_str(&format!(
            "\n[[upstream]]\nname = \"{name}\"\nurl = \"{url}\"\nera = \"{era}\"\n"
        ));
    }
    c
}

/// The state keys every replica of the tests' cluster shares (what a forward is signed with).
pub(crate) fn keys() -> sluice::state::Keys {
    sluice::state::Keys::new(vec![
        sluice::state::Key::new(1, vec![42u8; 32]).expect("a key")
    ])
    .expect("a ring")
}

fn base64_key() -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode([42u8; 32])
}

/// Three replicas behind HAProxy.
pub(crate) struct Cluster {
    /// The replicas, `r1`…`r3`; `None` once killed.
    pub(crate) replicas: Vec<Option<Sluice>>,
    haproxy: tokio::process::Child,
    /// HAProxy's front URL (the MCP endpoint).
    pub(crate) url: String,
}

impl Cluster {
    /// Starts three replicas sharing `redis`, then HAProxy over them.
    pub(crate) async fn start(redis: &Redis, s: &Setup) -> Cluster {
        Cluster::start_on(redis, s, None).await
    }

    /// The same, HAProxy on `port` when given (a config that names the balancer's URL needs
    /// it before the replicas start: see [`free_port`]).
    pub(crate) async fn start_on(redis: &Redis, s: &Setup, port: Option<u16>) -> Cluster {
        let mut replicas = Vec::new();
        for id in ["r1", "r2", "r3"] {
            replicas.push(Some(Sluice::start(&config(id, &redis.url(), s)).await));
        }
        let addrs: Vec<String> = replicas.iter().flatten().map(|r| r.addr.clone()).collect();
        let (haproxy, port) = haproxy(&addrs, port).await;
        Cluster {
            replicas,
            haproxy,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }

    /// Replica `i` (0-based).
    pub(crate) fn replica(&self, i: usize) -> &Sluice {
        self.replicas[i].as_ref().expect("a running replica")
    }

    /// The audit records every running replica wrote so far (JSON lines with a `status`).
    pub(crate) fn audit(&self) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        for (i, r) in self.replicas.iter().enumerate() {
            let Some(r) = r else { continue };
            for l in r.output().lines() {
                if let Ok(mut v) = serde_json::from_str::<serde_json::Value>(l.trim()) {
                    if v.get("status").is_some() && v.get("latency_us").is_some() {
                        v["replica"] = serde_json::json!(format!("r{}", i + 1));
                        out.push(v);
                    }
                }
            }
        }
        out
    }

    /// Replica `i`'s internal listener's forward URL, from its startup line.
    pub(crate) fn internal_url(&self, i: usize) -> String {
        let out = self.replica(i).output();
        let line = out
            .lines()
            .find(|l| l.contains("cluster internal listener up"))
            .expect("the internal listener's line");
        let addr = line
            .split("internal=")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .expect("internal=ADDR");
        format!("http://{addr}{}", sluice::handoff::PATH)
    }

    /// Replica `i`'s admin listener (`[admin]`), from its startup line: `http://ADDR`.
    pub(crate) fn admin_url(&self, i: usize) -> String {
        let out = self.replica(i).output();
        let line = out
            .lines()
            .find(|l| l.contains("admin listener up"))
            .expect("the admin listener's line");
        let addr = line
            .split("admin=")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .expect("admin=ADDR");
        format!("http://{}", crate::support::process::strip_ansi(addr))
    }

    /// The index of replica `id` (`r1` is 0).
    pub(crate) fn index(id: &str) -> usize {
        id.trim_start_matches('r').parse::<usize>().expect("rN") - 1
    }

    /// Kills replica `i` (SIGKILL, as a crashed pod).
    pub(crate) fn kill(&mut self, i: usize) {
        self.replicas[i] = None; // dropping kills it
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.haproxy.start_kill();
    }
}

/// A port free now (to be bound by a process started later: a race another process can win).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// HAProxy in HTTP mode, round robin over `addrs`, no stickiness, every request balanced on its
/// own (no `prefer-last-server`): `deploy/haproxy.cfg` with the test's addresses.
async fn haproxy(addrs: &[String], fixed: Option<u16>) -> (tokio::process::Child, u16) {
    let template =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/haproxy.cfg"))
            .expect("deploy/haproxy.cfg");
    for _attempt in 0..5 {
        let port = fixed.unwrap_or_else(free_port);
        let servers: String = addrs
            .iter()
            .enumerate()
            .map(|(i, a)| format!("    server sluice-{} {a}\n", i + 1))
            .collect();
        let cfg = template
            .replace("bind :8080", &format!("bind 127.0.0.1:{port}"))
            .split("    server sluice-")
            .next()
            .expect("the servers come last")
            .to_owned()
            + &servers;
        let dir = scratch("haproxy");
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, cfg).expect("write haproxy.cfg");
        let mut child = tokio::process::Command::new(which("haproxy"))
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start haproxy");
        // A separate process: its port is polled until it accepts, or it exits (port taken).
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                break; // lost the port: try another
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return (child, port);
            }
            assert!(
                Instant::now() < deadline,
                "haproxy did not accept on port {port} within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    panic!("haproxy could not bind a free port in 5 attempts");
}
