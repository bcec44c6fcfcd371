//! The real peers: the upstreams (Python `mcp==2.3.0` on the 2026-07-28 wire, Python
//! `mcp==1.30.0` on the 2025-11-25 wire) and the client scripts (Python `mcp==1.30.0`,
//! TypeScript `@modelcontextprotocol/sdk@1.32.2`, Python `mcp==2.3.0` in `auto` mode).
//!
//! Peers come from `eval "$(bash scripts/peers.sh)"`, which exports `SLUICE_PY1`, `SLUICE_PY2`,
//! `SLUICE_NODE22` and `SLUICE_TS_SDK1`. A missing variable fails the test with the command to
//! run; nothing is skipped.
//!
//! Each upstream takes about a second to start, so one process of each serves every test of this
//! binary: started on first use and kept in a static. Statics are never dropped, so each shared
//! process watches its stdin (a pipe only this process holds) and exits when the test binary
//! exits, however that happens.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
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
        panic!("{var} is not set: the bridge B tests need the real MCP peers; run `eval \"$(bash scripts/peers.sh)\"` first (it installs them and exports {var})")
    });
    assert!(path.exists(), "{var}={} does not exist; re-run `eval \"$(bash scripts/peers.sh)\"`", path.display());
    path
}

/// A file under tests/peers/.
pub(crate) fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peers").join(name)
}

/// This run's scratch directory: one per process, named by pid and start time (pids repeat, and
/// upstreams and audit sinks append to their files), created empty on first use.
pub(crate) fn scratch() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("bridge_b-{}-{nanos}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the scratch directory");
        dir
    })
    .clone()
}

/// A running upstream process.
pub(crate) struct Peer {
    /// Its MCP endpoint.
    pub(crate) url: String,
    /// Where it records events (`py1_upstream.py`).
    pub(crate) events: PathBuf,
    _child: Mutex<Child>,
    /// Held, never written: the process exits when this pipe closes.
    _stdin: Mutex<ChildStdin>,
}

impl Peer {
    /// The event lines the upstream recorded under `tag` so far.
    pub(crate) fn events(&self, tag: &str) -> Vec<String> {
        std::fs::read_to_string(self.events.join(tag)).unwrap_or_default().lines().map(str::to_owned).collect()
    }

    /// Waits (at most 2 s) until the upstream recorded `event` under `tag`; fails the test otherwise.
    pub(crate) async fn wait_event(&self, tag: &str, event: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let seen = self.events(tag);
            if seen.iter().any(|e| e == event) {
                return seen;
            }
            assert!(Instant::now() < deadline, "the upstream did not record {event:?} for tag {tag:?} within 2 s; it recorded {seen:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

fn spawn(name: &str, mut cmd: Command, events: PathBuf) -> Result<Peer, String> {
    let log = scratch().join(format!("{name}.log"));
    let stderr = std::fs::File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let mut child =
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(stderr).spawn().map_err(|e| format!("cannot start {name}: {e}"))?;
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
        format!("{name} did not print `LISTENING <port>` within {START:?}; its stderr ({}):\n{tail}", log.display())
    })?;
    Ok(Peer { url: format!("http://127.0.0.1:{port}/mcp"), events, _child: Mutex::new(child), _stdin: Mutex::new(stdin) })
}

static PY2: OnceLock<Result<Peer, String>> = OnceLock::new();
static PY1: OnceLock<Result<Peer, String>> = OnceLock::new();

async fn shared(cell: &'static OnceLock<Result<Peer, String>>, make: fn() -> Result<Peer, String>) -> &'static Peer {
    match tokio::task::spawn_blocking(move || cell.get_or_init(make)).await.expect("peer start task") {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

/// The shared `tests/peers/py_upstream.py` process (`mcp==2.3.0`, 2026-07-28: `ask_llm`, `ask_raw`).
pub(crate) async fn py2() -> &'static Peer {
    peer_env("SLUICE_PY2");
    shared(&PY2, || {
        let mut cmd = Command::new(peer_env("SLUICE_PY2"));
        cmd.arg(script("py_upstream.py"));
        spawn("py_upstream", cmd, scratch().join("py2-events"))
    })
    .await
}

/// The shared `tests/peers/py1_upstream.py` process (`mcp==1.30.0`, 2025-11-25: mid-call sampling).
pub(crate) async fn py1() -> &'static Peer {
    peer_env("SLUICE_PY1");
    shared(&PY1, || {
        let events = scratch().join("py1-events");
        let mut cmd = Command::new(peer_env("SLUICE_PY1"));
        cmd.arg(script("py1_upstream.py")).arg("--events").arg(&events);
        spawn("py1_upstream", cmd, events)
    })
    .await
}

/// What a client script reported.
pub(crate) struct Run {
    pub(crate) success: bool,
    pub(crate) summary: Value,
    pub(crate) transcript: String,
}

async fn run_client(label: &str, mut cmd: tokio::process::Command) -> Run {
    let run = cmd.stdin(Stdio::null()).kill_on_drop(true).output();
    let out = tokio::time::timeout(CLIENT_RUN, run)
        .await
        .unwrap_or_else(|_| panic!("{label} did not finish within {CLIENT_RUN:?}"))
        .unwrap_or_else(|e| panic!("start {label}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let transcript = format!("--- {label} stdout\n{stdout}--- stderr\n{}", String::from_utf8_lossy(&out.stderr));
    let summary = stdout
        .lines()
        .find_map(|l| l.strip_prefix("SUMMARY "))
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_else(|| panic!("{label} printed no SUMMARY line (status {})\n{transcript}", out.status));
    Run { success: out.status.success(), summary, transcript }
}

/// Runs `tests/peers/py1_client.py` (`mcp==1.30.0`, 2025-11-25) with `plan`.
pub(crate) async fn py1_client(plan: &Value) -> Run {
    let mut cmd = tokio::process::Command::new(peer_env("SLUICE_PY1"));
    cmd.arg(script("py1_client.py")).arg(plan.to_string());
    run_client("tests/peers/py1_client.py", cmd).await
}

/// Runs `tests/peers/ts1_client.cjs` (`@modelcontextprotocol/sdk@1.32.2`, 2025-11-25) with `plan`.
pub(crate) async fn ts1_client(plan: &Value) -> Run {
    let mut cmd = tokio::process::Command::new(peer_env("SLUICE_NODE22"));
    cmd.env("NODE_PATH", peer_env("SLUICE_TS_SDK1")).arg(script("ts1_client.cjs")).arg(plan.to_string());
    run_client("tests/peers/ts1_client.cjs", cmd).await
}

/// Runs `tests/peers/py2_auto_client.py` (`mcp==2.3.0`, mode `auto`) with `plan`.
pub(crate) async fn py2_auto_client(plan: &Value) -> Run {
    let mut cmd = tokio::process::Command::new(peer_env("SLUICE_PY2"));
    cmd.arg(script("py2_auto_client.py")).arg(plan.to_string());
    run_client("tests/peers/py2_auto_client.py", cmd).await
}
