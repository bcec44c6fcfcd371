//! The real Python peers: where they are installed, the shared `mcp==2.3.0` upstream, and runs of
//! the `mcp==2.3.0` client.
//!
//! Peers come from `eval "$(bash scripts/peers.sh)"`, which exports `SLUICE_PY2`. A missing
//! variable fails the test with the command to run; nothing is skipped.
//!
//! The Python upstream takes about a second to start, so one process serves every test of this
//! binary: it is started on first use and kept in a static. Statics are never dropped, so it
//! cannot be killed from Rust at the end; instead it watches its stdin (a pipe only this process
//! holds) and exits when the test binary exits, however that happens.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;

/// Time a Python peer gets to start or to finish its script.
const PY_START: Duration = Duration::from_secs(15);
const PY_CLIENT_RUN: Duration = Duration::from_secs(60);

/// The path in an environment variable set by `scripts/peers.sh`; panics (fails the test) when unset.
pub(crate) fn peer_env(var: &str) -> PathBuf {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        panic!("{var} is not set: these interop tests need the real MCP peers; run `eval \"$(bash scripts/peers.sh)\"` first (it installs them and exports {var})")
    });
    assert!(path.exists(), "{var}={} does not exist; re-run `eval \"$(bash scripts/peers.sh)\"`", path.display());
    path
}

/// A file under tests/peers/.
pub(crate) fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peers").join(name)
}

/// Where peer processes write their stderr.
pub(crate) fn log_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("interop-{name}.log"))
}

/// The shared Python SDK upstream.
pub(crate) struct PyUpstream {
    /// Its MCP endpoint.
    pub(crate) url: String,
    _child: Mutex<Child>,
    /// Held, never written: the process exits when this pipe closes (when the test binary ends).
    _stdin: Mutex<ChildStdin>,
}

static PY_UPSTREAM: OnceLock<Result<PyUpstream, String>> = OnceLock::new();

/// The shared `tests/peers/py_upstream.py` process, started on first use.
pub(crate) async fn py_upstream() -> &'static PyUpstream {
    let python = peer_env("SLUICE_PY2");
    let shared =
        tokio::task::spawn_blocking(move || PY_UPSTREAM.get_or_init(|| spawn_py_upstream(python))).await.expect("py upstream start task");
    match shared {
        Ok(up) => up,
        Err(e) => panic!("{e}"),
    }
}

fn spawn_py_upstream(python: PathBuf) -> Result<PyUpstream, String> {
    let log = log_path("py_upstream");
    let stderr = std::fs::File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let mut child = Command::new(&python)
        .arg(script("py_upstream.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("cannot start {} tests/peers/py_upstream.py: {e}", python.display()))?;
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
    let port = rx.recv_timeout(PY_START).map_err(|_| {
        let _ = child.kill();
        let tail = std::fs::read_to_string(&log).unwrap_or_default();
        format!("tests/peers/py_upstream.py did not print `LISTENING <port>` within {PY_START:?}; its stderr ({}):\n{tail}", log.display())
    })?;
    Ok(PyUpstream { url: format!("http://127.0.0.1:{port}/mcp"), _child: Mutex::new(child), _stdin: Mutex::new(stdin) })
}

/// Runs `tests/peers/py_client.py` with `plan`; returns its exit status and JSON summary.
pub(crate) async fn py_client(plan: &Value) -> (std::process::ExitStatus, Value, String) {
    let python = peer_env("SLUICE_PY2");
    let run = tokio::process::Command::new(&python)
        .arg(script("py_client.py"))
        .arg(plan.to_string())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(PY_CLIENT_RUN, run)
        .await
        .unwrap_or_else(|_| panic!("tests/peers/py_client.py did not finish within {PY_CLIENT_RUN:?}"))
        .expect("start tests/peers/py_client.py");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let transcript = format!("--- stdout\n{stdout}--- stderr\n{}", String::from_utf8_lossy(&out.stderr));
    let summary = stdout
        .lines()
        .find_map(|l| l.strip_prefix("SUMMARY "))
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_else(|| panic!("py_client.py printed no SUMMARY line (status {})\n{transcript}", out.status));
    (out.status, summary, transcript)
}
