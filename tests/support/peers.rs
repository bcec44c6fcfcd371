//! The real peers, one launcher for all: the upstreams (Python `mcp==2.3.0` on the 2026-07-28
//! wire, Python `mcp==1.30.0` and `@modelcontextprotocol/server-everything` on the 2025-11-25
//! wire), each started on 127.0.0.1 port 0 and reporting its port with a `LISTENING <port>`
//! line, and the client scripts (Python `mcp==2.3.0` in 2026-07-28 and `auto` modes, Python
//! `mcp==1.30.0`, TypeScript `@modelcontextprotocol/sdk@1.32.2`), each printing one
//! `SUMMARY {...}` line.
//!
//! Peers come from `eval "$(bash scripts/peers.sh)"`, which exports `SLUICE_PY1`, `SLUICE_PY2`,
//! `SLUICE_NODE22`, `SLUICE_EVERYTHING`, `SLUICE_TS_SDK1`, `SLUICE_TS_SERVER2`, `SLUICE_INSPECTOR`
//! and `SLUICE_OIDC_PROVIDER` (the company IdP of `with_peers/token_exchange.rs`). A missing variable fails the test
//! with the command to run; nothing is skipped.
//!
//! Each upstream takes about a second to start, so one process of each serves every test of the
//! binary: started on first use and kept in a static. Statics are never dropped, so each shared
//! process watches its stdin (a pipe only this process holds) and exits when the test binary
//! exits, however that happens. A test that must kill its upstream starts an [`OwnedPeer`].

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Time a peer gets to start, and a client script to finish its plan.
const START: Duration = Duration::from_secs(15);
const CLIENT_RUN: Duration = Duration::from_secs(60);

/// The path in an environment variable set by `scripts/peers.sh`; panics (fails the test) when unset.
pub(crate) fn peer_env(var: &str) -> PathBuf {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        panic!("{var} is not set: these tests need the real MCP peers; run `eval \"$(bash scripts/peers.sh)\"` first (it installs them and exports {var})")
    });
    assert!(
        path.exists(),
        "{var}={} does not exist; re-run `eval \"$(bash scripts/peers.sh)\"`",
        path.display()
    );
    path
}

/// A file under tests/peers/.
pub(crate) fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers")
        .join(name)
}

/// This run's scratch directory: one per process, named by pid and start time (pids repeat, and
/// upstreams and audit sinks append to their files), created empty on first use.
pub(crate) fn scratch() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("peers-{}-{nanos}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the scratch directory");
        dir
    })
    .clone()
}

/// A per-process scratch file path (any earlier file removed).
pub(crate) fn scratch_file(name: &str) -> PathBuf {
    let path = scratch().join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// A running peer process.
pub(crate) struct Peer {
    /// Its MCP endpoint.
    pub(crate) url: String,
    /// Where it records events (the Python upstreams).
    pub(crate) events: PathBuf,
    child: Mutex<Child>,
    /// Held, never written: a shared process exits when this pipe closes.
    _stdin: Mutex<Option<ChildStdin>>,
}

impl Peer {
    /// The event lines the upstream recorded under `tag` so far.
    pub(crate) fn events(&self, tag: &str) -> Vec<String> {
        std::fs::read_to_string(self.events.join(tag))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Waits (at most 2 s) until the upstream recorded `event` under `tag`; fails the test otherwise.
    pub(crate) async fn wait_event(&self, tag: &str, event: &str) -> Vec<String> {
        self.wait_event_within(tag, event, Duration::from_secs(2))
            .await
    }

    /// [`Peer::wait_event`] waiting at most `within`.
    pub(crate) async fn wait_event_within(
        &self,
        tag: &str,
        event: &str,
        within: Duration,
    ) -> Vec<String> {
        self.wait_any_within(tag, &[event], within).await
    }

    /// Waits (at most 2 s) until the upstream recorded, under `tag`, one of `ends`; gives all it
    /// recorded.
    pub(crate) async fn wait_any(&self, tag: &str, ends: &[&str]) -> Vec<String> {
        self.wait_any_within(tag, ends, Duration::from_secs(2))
            .await
    }

    /// The upstream is a separate process writing a file: this polls the file (every 10 ms) on
    /// the wall clock.
    async fn wait_any_within(&self, tag: &str, ends: &[&str], within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        loop {
            let seen = self.events(tag);
            if seen.iter().any(|e| ends.contains(&e.as_str())) {
                return seen;
            }
            assert!(
                Instant::now() < deadline,
                "the upstream recorded none of {ends:?} for tag {tag:?} within {within:?}; it recorded {seen:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Kills the process (an upstream that dies).
    pub(crate) fn kill(&self) {
        if let Ok(mut c) = self.child.lock() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A peer this test owns: killed when dropped.
pub(crate) struct OwnedPeer(pub(crate) Peer);

impl Drop for OwnedPeer {
    fn drop(&mut self) {
        self.0.kill();
    }
}

impl std::ops::Deref for OwnedPeer {
    type Target = Peer;
    fn deref(&self) -> &Peer {
        &self.0
    }
}

/// Starts `cmd` and waits for its `LISTENING <port>` line.
fn spawn(name: &str, mut cmd: Command, events: PathBuf) -> Result<Peer, String> {
    let log = scratch().join(format!("{name}.log"));
    let stderr =
        std::fs::File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    let stdin = child.stdin.take().ok_or("no stdin pipe")?;
    let stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout);
        let mut line = String::new();
        while lines.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            if let Some(port) = line.trim().strip_prefix("LISTENING ") {
                let _ = tx.send(port.to_owned());
            }
            line.clear();
        }
        let _ = lines.read_to_end(&mut Vec::new()); // keep draining so the pipe never fills
    });
    let port = rx.recv_timeout(START).map_err(|_| {
        let _ = child.kill();
        let tail = std::fs::read_to_string(&log).unwrap_or_default();
        format!(
            "{name} did not print `LISTENING <port>` within {START:?}; its stderr ({}):\n{tail}",
            log.display()
        )
    })?;
    Ok(Peer {
        url: format!("http://127.0.0.1:{port}/mcp"),
        events,
        child: Mutex::new(child),
        _stdin: Mutex::new(Some(stdin)),
    })
}

fn py1_command(events: &PathBuf) -> Command {
    let mut cmd = Command::new(peer_env("SLUICE_PY1"));
    cmd.arg(script("py1_upstream.py"))
        .arg("--events")
        .arg(events);
    cmd
}

fn py2_command() -> Command {
    let mut cmd = Command::new(peer_env("SLUICE_PY2"));
    cmd.arg(script("py_upstream.py"));
    cmd
}

static PY1: OnceLock<Result<Peer, String>> = OnceLock::new();
static PY2: OnceLock<Result<Peer, String>> = OnceLock::new();
static EVERYTHING: OnceLock<Result<Peer, String>> = OnceLock::new();

async fn shared(
    cell: &'static OnceLock<Result<Peer, String>>,
    make: fn() -> Result<Peer, String>,
) -> &'static Peer {
    match tokio::task::spawn_blocking(move || cell.get_or_init(make))
        .await
        .expect("peer start task")
    {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

/// The shared `tests/peers/py1_upstream.py` process (`mcp==1.30.0`, 2025-11-25: mid-call asks).
pub(crate) async fn py1() -> &'static Peer {
    peer_env("SLUICE_PY1");
    shared(&PY1, || {
        let events = scratch().join("py1-events");
        spawn("py1_upstream", py1_command(&events), events)
    })
    .await
}

/// A `tests/peers/py1_upstream.py` process of this test's own on the 2024-11-05 HTTP+SSE
/// transport (its `url` is the `/sse` stream).
pub(crate) async fn own_py1_sse(name: &str) -> OwnedPeer {
    peer_env("SLUICE_PY1");
    let name = name.to_owned();
    let peer = tokio::task::spawn_blocking(move || {
        let events = scratch().join(format!("{name}-events"));
        let mut cmd = py1_command(&events);
        cmd.arg("--sse");
        spawn(&name, cmd, events).map(|mut p| {
            p.url = p.url.replace("/mcp", "/sse");
            p
        })
    })
    .await
    .expect("peer start task");
    OwnedPeer(peer.unwrap_or_else(|e| panic!("{e}")))
}

/// A `tests/peers/py1_upstream.py` process of this test's own (to kill).
pub(crate) async fn own_py1(name: &str) -> OwnedPeer {
    peer_env("SLUICE_PY1");
    let name = name.to_owned();
    let peer = tokio::task::spawn_blocking(move || {
        let events = scratch().join(format!("{name}-events"));
        spawn(&name, py1_command(&events), events)
    })
    .await
    .expect("peer start task");
    OwnedPeer(peer.unwrap_or_else(|e| panic!("{e}")))
}

/// A `tests/fixtures/modern_fixture.py` process of this test's own (`mcp==2.3.0`, both eras,
/// the conformance fixture: its `test_reconnection` ends its 2025-11-25 stream mid-call).
pub(crate) async fn own_modern_fixture(name: &str) -> OwnedPeer {
    own_modern_fixture_at(name, 0).await
}

/// [`own_modern_fixture`] on `port` (0: a free one), to start one again where it was.
pub(crate) async fn own_modern_fixture_at(name: &str, port: u16) -> OwnedPeer {
    peer_env("SLUICE_PY2");
    let name = name.to_owned();
    let peer = tokio::task::spawn_blocking(move || {
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/modern_fixture.py");
        let mut cmd = Command::new(peer_env("SLUICE_PY2"));
        cmd.arg(fixture).args(["--port", &port.to_string()]);
        spawn(&name, cmd, scratch().join(format!("{name}-events")))
    })
    .await
    .expect("peer start task");
    OwnedPeer(peer.unwrap_or_else(|e| panic!("{e}")))
}

/// A `tests/peers/py_upstream.py` process of the test's own serving HTTPS, with a certificate
/// for 127.0.0.1 signed by a CA it writes to `folder/ca.pem`.
pub(crate) async fn own_py2_tls(name: &str, folder: &Path) -> OwnedPeer {
    peer_env("SLUICE_PY2");
    let (name, folder) = (name.to_owned(), folder.to_owned());
    let peer = tokio::task::spawn_blocking(move || {
        let mut cmd = py2_command();
        cmd.arg("--tls").arg(&folder);
        spawn(&name, cmd, scratch().join(format!("{name}-events")))
    })
    .await
    .expect("peer start task");
    let mut peer = peer.unwrap_or_else(|e| panic!("{e}"));
    peer.url = peer.url.replacen("http://", "https://", 1);
    OwnedPeer(peer)
}

/// The shared `tests/peers/py_upstream.py` process (`mcp==2.3.0`, 2026-07-28: `echo`, `add`,
/// `ask_llm`, `ask_raw`).
pub(crate) async fn py2() -> &'static Peer {
    peer_env("SLUICE_PY2");
    shared(&PY2, || {
        spawn("py_upstream", py2_command(), scratch().join("py2-events"))
    })
    .await
}

/// The shared `@modelcontextprotocol/server-everything` process (streamable HTTP, loopback only).
pub(crate) async fn everything() -> &'static Peer {
    peer_env("SLUICE_NODE22");
    peer_env("SLUICE_EVERYTHING");
    shared(&EVERYTHING, || {
        let mut cmd = Command::new(peer_env("SLUICE_NODE22"));
        cmd.arg("--require")
            .arg(script("force_loopback.cjs"))
            .arg("--require")
            .arg(script("stdin_lifeline.cjs"))
            .arg(peer_env("SLUICE_EVERYTHING"))
            .arg("streamableHttp")
            .env("PORT", "0");
        spawn(
            "server-everything",
            cmd,
            scratch().join("everything-events"),
        )
    })
    .await
}

/// A `tests/peers/ts2_upstream.cjs` process of this test's own (`@modelcontextprotocol/server@2.4.0`,
/// dual-era: 2026-07-28, and 2025-11-25 statelessly, with no `Mcp-Session-Id`).
pub(crate) async fn own_ts2(name: &str) -> OwnedPeer {
    peer_env("SLUICE_NODE22");
    peer_env("SLUICE_TS_SERVER2");
    let name = name.to_owned();
    let peer = tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(peer_env("SLUICE_NODE22"));
        cmd.env("NODE_PATH", peer_env("SLUICE_TS_SERVER2"))
            .arg(script("ts2_upstream.cjs"));
        spawn(&name, cmd, scratch().join(format!("{name}-events")))
    })
    .await
    .expect("peer start task");
    OwnedPeer(peer.unwrap_or_else(|e| panic!("{e}")))
}

/// What a client script reported.
pub(crate) struct Run {
    /// Whether it exited 0 (every check of its plan held).
    pub(crate) success: bool,
    /// Its exit status.
    pub(crate) status: std::process::ExitStatus,
    /// Its `SUMMARY` line.
    pub(crate) summary: Value,
    /// Its stdout and stderr, for failure messages.
    pub(crate) transcript: String,
}

async fn run_client(label: &str, mut cmd: tokio::process::Command) -> Run {
    let run = cmd.stdin(Stdio::null()).kill_on_drop(true).output();
    let out = tokio::time::timeout(CLIENT_RUN, run)
        .await
        .unwrap_or_else(|_| panic!("{label} did not finish within {CLIENT_RUN:?}"))
        .unwrap_or_else(|e| panic!("start {label}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let transcript = format!(
        "--- {label} stdout\n{stdout}--- stderr\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = stdout
        .lines()
        .find_map(|l| l.strip_prefix("SUMMARY "))
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_else(|| {
            panic!(
                "{label} printed no SUMMARY line (status {})\n{transcript}",
                out.status
            )
        });
    Run {
        success: out.status.success(),
        status: out.status,
        summary,
        transcript,
    }
}

fn python(var: &str, file: &str, plan: &Value) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(peer_env(var));
    cmd.arg(script(file)).arg(plan.to_string());
    cmd
}

/// Runs `tests/peers/py_client.py` (`mcp==2.3.0`, 2026-07-28: discover, lists, calls) with `plan`.
pub(crate) async fn py_client(plan: &Value) -> Run {
    run_client(
        "tests/peers/py_client.py",
        python("SLUICE_PY2", "py_client.py", plan),
    )
    .await
}

/// Runs `tests/peers/py2_bridge_client.py` (`mcp==2.3.0`, 2026-07-28: rounds of bridge A) with `plan`.
pub(crate) async fn py2_bridge_client(plan: &Value) -> Run {
    run_client(
        "tests/peers/py2_bridge_client.py",
        python("SLUICE_PY2", "py2_bridge_client.py", plan),
    )
    .await
}

/// Runs `tests/peers/py2_auto_client.py` (`mcp==2.3.0`, mode `auto`) with `plan`.
pub(crate) async fn py2_auto_client(plan: &Value) -> Run {
    run_client(
        "tests/peers/py2_auto_client.py",
        python("SLUICE_PY2", "py2_auto_client.py", plan),
    )
    .await
}

/// Runs `tests/peers/py1_client.py` (`mcp==1.30.0`, 2025-11-25) with `plan`.
pub(crate) async fn py1_client(plan: &Value) -> Run {
    run_client(
        "tests/peers/py1_client.py",
        python("SLUICE_PY1", "py1_client.py", plan),
    )
    .await
}

/// Runs `tests/peers/py_sse_client.py` (the 2024-11-05 HTTP+SSE transport, `sse_client`) on the
/// Python SDK in `var` (`SLUICE_PY1`: `mcp==1.30.0`, or `SLUICE_PY2`: `mcp==2.3.0`) with `plan`.
pub(crate) async fn py_sse_client(var: &str, plan: &Value) -> Run {
    run_client(
        &format!("tests/peers/py_sse_client.py ({var})"),
        python(var, "py_sse_client.py", plan),
    )
    .await
}

/// What a run of the MCP Inspector's CLI printed.
pub(crate) struct Inspected {
    /// Whether it exited 0.
    pub(crate) success: bool,
    /// Its stdout (the JSON result).
    pub(crate) stdout: String,
    /// Its stdout and stderr, for failure messages.
    pub(crate) transcript: String,
}

/// Runs the MCP Inspector's CLI (`@modelcontextprotocol/inspector@2.12.0`, `--cli`) with `args`,
/// its catalog file in this run's scratch directory (never the user's home).
pub(crate) async fn inspector(args: &[&str]) -> Inspected {
    let mut cmd = tokio::process::Command::new(peer_env("SLUICE_NODE22"));
    cmd.arg(peer_env("SLUICE_INSPECTOR"))
        .arg("--cli")
        .args(args)
        .env("MCP_CATALOG_PATH", scratch().join("inspector-catalog.json"));
    let run = cmd.stdin(Stdio::null()).kill_on_drop(true).output();
    let out = tokio::time::timeout(CLIENT_RUN, run)
        .await
        .unwrap_or_else(|_| panic!("the Inspector did not finish within {CLIENT_RUN:?}"))
        .unwrap_or_else(|e| panic!("start the Inspector: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let transcript = format!(
        "--- inspector {args:?} ({})\n{stdout}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Inspected {
        success: out.status.success(),
        stdout,
        transcript,
    }
}

/// Runs `tests/peers/ts1_client.cjs` (`@modelcontextprotocol/sdk@1.32.2`, 2025-11-25) with `plan`.
pub(crate) async fn ts1_client(plan: &Value) -> Run {
    let mut cmd = tokio::process::Command::new(peer_env("SLUICE_NODE22"));
    cmd.env("NODE_PATH", peer_env("SLUICE_TS_SDK1"))
        .arg(script("ts1_client.cjs"))
        .arg(plan.to_string());
    run_client("tests/peers/ts1_client.cjs", cmd).await
}

/// Runs tests/peers/hold_connections.py (any python3) against `addr`, opening `count` idle
/// connections from a separate process; gives the process (holding its connections until its
/// stdin closes) and its report lines up to `HELD`.
pub(crate) fn hold_connections(
    addr: std::net::SocketAddr,
    count: usize,
) -> (std::process::Child, Vec<String>) {
    let script = script("hold_connections.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .args([
            "--port",
            &addr.port().to_string(),
            "--count",
            &count.to_string(),
            "--settle-ms",
            "500",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start python3 tests/peers/hold_connections.py");
    let mut lines = Vec::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    loop {
        let mut l = String::new();
        if out.read_line(&mut l).unwrap_or(0) == 0 {
            let _ = child.kill();
            let _ = child.wait();
            panic!("hold_connections.py ended early: {lines:?}");
        }
        eprintln!("hold_connections.py: {}", l.trim());
        let done = l.starts_with("HELD ");
        lines.push(l.trim().to_owned());
        if done {
            return (child, lines);
        }
    }
}
