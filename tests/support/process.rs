//! The `sluice` binary as a child process: started with a config text (written to a scratch
//! directory), `RUST_LOG=trace`, its stdout and stderr collected; its address read from its
//! `sluice listening addr=…` line; its CPU time and RSS read from /proc; a `/healthz` prober
//! that records the worst latency while a test runs; and `sluice check` runs. Killed on drop,
//! or stopped with SIGTERM by [`Sluice::terminate`].
//!
//! The child is a separate process with its own wall clock: the waits here (its listening line,
//! `/readyz`, its exit) are on real time, bounded by deadlines.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

/// A fresh scratch directory for one test.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("hostile-{name}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

/// Environment changes for the child: variables set, variables removed.
#[derive(Default, Clone)]
pub(crate) struct Env {
    set: Vec<(String, String)>,
    remove: Vec<String>,
    user: Option<(u32, u32)>,
    setpriv: Vec<String>,
}

impl Env {
    /// No changes.
    pub(crate) fn new() -> Env {
        Env::default()
    }

    /// Sets `k` to `v` in the child.
    pub(crate) fn set(mut self, k: &str, v: &str) -> Env {
        self.set.push((k.to_owned(), v.to_owned()));
        self
    }

    /// Removes `k` from the child's environment.
    pub(crate) fn unset(mut self, k: &str) -> Env {
        self.remove.push(k.to_owned());
        self
    }

    /// Runs the child as `uid` and `gid` with no supplementary group (the tests must run as
    /// root to switch; std clears the groups when a root parent sets a uid).
    pub(crate) fn run_as(mut self, uid: u32, gid: u32) -> Env {
        self.user = Some((uid, gid));
        self
    }

    /// Starts the binary through `setpriv ARGS --` (util-linux), as an operator would give it
    /// a user and capabilities: `--reuid`, `--inh-caps`, `--ambient-caps`…
    pub(crate) fn setpriv(mut self, args: &[&str]) -> Env {
        self.setpriv = args.iter().map(|a| (*a).to_owned()).collect();
        self
    }

    /// The `sluice` binary's command, through setpriv if asked.
    fn command(&self) -> tokio::process::Command {
        let bin = env!("CARGO_BIN_EXE_sluice");
        if self.setpriv.is_empty() {
            return tokio::process::Command::new(bin);
        }
        let mut c = tokio::process::Command::new("setpriv");
        c.args(&self.setpriv).arg("--").arg(bin);
        c
    }

    fn apply(&self, c: &mut tokio::process::Command) {
        if let Some((uid, gid)) = self.user {
            c.uid(uid).gid(gid);
        }
        for k in &self.remove {
            c.env_remove(k);
        }
        for (k, v) in &self.set {
            c.env(k, v);
        }
    }
}

/// A running `sluice serve`.
pub(crate) struct Sluice {
    child: tokio::process::Child,
    /// Its pid.
    pub(crate) pid: u32,
    /// Its bound address.
    pub(crate) addr: String,
    /// Its scratch directory (the config is `sluice.toml` there).
    pub(crate) dir: PathBuf,
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
}

impl Drop for Sluice {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// How a start ended when it did not come up.
pub(crate) struct Exited {
    /// The exit code (None: killed by a signal).
    pub(crate) code: Option<i32>,
    /// Everything it wrote.
    pub(crate) output: String,
}

fn collect(
    mut pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    into: Arc<Mutex<Vec<u8>>>,
    line: Arc<tokio::sync::Notify>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 16 << 10];
        while let Ok(n) = pipe.read(&mut buf).await {
            if n == 0 {
                break;
            }
            into.lock().unwrap().extend_from_slice(&buf[..n]);
            line.notify_waiters();
        }
        line.notify_waiters();
    })
}

/// Waits for every task.
async fn drained(tasks: impl IntoIterator<Item = tokio::task::JoinHandle<()>>) {
    for t in tasks {
        let _ = t.await;
    }
}

/// stdout, a newline, then stderr, colours stripped.
fn joined(out: &Mutex<Vec<u8>>, err: &Mutex<Vec<u8>>) -> String {
    let (out, err) = (
        String::from_utf8_lossy(&out.lock().unwrap()).into_owned(),
        String::from_utf8_lossy(&err.lock().unwrap()).into_owned(),
    );
    strip_ansi(&format!("{out}\n{err}"))
}

/// Removes ANSI colour sequences.
pub(crate) fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\u{1b}' && it.peek() == Some(&'[') {
            for d in it.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl Sluice {
    /// Starts `sluice serve` with `config`; fails the test unless it listens within 10 s.
    /// Waits until `/readyz` says every upstream was probed.
    pub(crate) async fn start(config: &str) -> Sluice {
        Sluice::start_env(config, &Env::new()).await
    }

    /// The same, with environment changes.
    pub(crate) async fn start_env(config: &str, env: &Env) -> Sluice {
        match Sluice::spawn(config, env).await {
            Ok(s) => {
                s.ready().await;
                s
            }
            Err(e) => panic!(
                "sluice did not start (exit {:?}):\n{}\nconfig:\n{config}",
                e.code, e.output
            ),
        }
    }

    /// Starts it and gives it once it listens, or how it exited (10 s at most).
    pub(crate) async fn spawn(config: &str, env: &Env) -> Result<Sluice, Exited> {
        Sluice::spawn_with(config, env, &[]).await
    }

    /// The same, with more arguments after `serve --config FILE` (the quick flags).
    pub(crate) async fn spawn_with(
        config: &str,
        env: &Env,
        args: &[String],
    ) -> Result<Sluice, Exited> {
        // The default listen address is a fixed port: tests run in parallel.
        let port_0 = config
            .lines()
            .any(|l| l.starts_with("listen = \"") && l.ends_with(":0\""));
        assert!(
            port_0,
            "a test's config must listen on port 0 (listen = \"127.0.0.1:0\"):\n{config}"
        );
        let dir = scratch("serve");
        let path = dir.join("sluice.toml");
        std::fs::write(&path, config).expect("write the config");
        let mut cmd = env.command();
        cmd.args(["serve", "--config"])
            .arg(&path)
            .args(args)
            .env("RUST_LOG", "trace")
            .env("NO_COLOR", "1");
        env.apply(&mut cmd);
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the sluice binary");
        let pid = child.id().expect("its pid");
        // Two buffers, so a line on one pipe is never cut by a chunk of the other.
        let (out, err) = (
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(Mutex::new(Vec::new())),
        );
        let line = Arc::new(tokio::sync::Notify::new());
        let readers = [
            collect(
                child.stdout.take().expect("stdout"),
                out.clone(),
                line.clone(),
            ),
            collect(
                child.stderr.take().expect("stderr"),
                err.clone(),
                line.clone(),
            ),
        ];
        let output = || joined(&out, &err);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let notified = line.notified();
            let text = output();
            if let Some(l) = text.lines().find(|l| l.contains("sluice listening")) {
                let addr = l
                    .split("addr=")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .expect("addr= in the listening line");
                let addr = addr.to_owned();
                return Ok(Sluice {
                    child,
                    pid,
                    addr,
                    dir,
                    out,
                    err,
                });
            }
            tokio::select! {
                _ = notified => {}
                status = child.wait() => {
                    let status = status.expect("wait for sluice");
                    // The readers drain the pipes to their end (the process is gone, so they end;
                    // bounded all the same, should a stray child hold one open).
                    let _ = tokio::time::timeout(Duration::from_secs(10), drained(readers)).await;
                    return Err(Exited { code: status.code(), output: output() });
                }
                _ = tokio::time::sleep_until(deadline) => {
                    panic!("sluice neither listened nor exited within 10 s:\n{}", output());
                }
            }
        }
    }

    /// Its MCP endpoint.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// `http://addr` + `path`.
    pub(crate) fn at(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Waits (at most 10 s) until `/readyz` says every upstream was probed: 200, or 503 with
    /// `"probed": true` (too few upstreams healthy: a test of down ones), or 401 (it needs a
    /// credential, with `[metrics] require_auth`, and Sluice is up).
    pub(crate) async fn ready(&self) {
        let h = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(r) = h.get(self.at("/readyz")).send().await {
                let status = r.status();
                if status == 200 || status == 401 {
                    return;
                }
                let body: serde_json::Value = r.json().await.unwrap_or_default();
                if status == 503 && body["probed"] == true {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "sluice was not ready within 10 s:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits (at most 10 s) until `/readyz` answers 200 to a request bearing `key` (with
    /// `[metrics] require_auth`, [`Sluice::ready`] cannot see past the 401).
    pub(crate) async fn ready_for(&self, key: &str) {
        let h = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(r) = h.get(self.at("/readyz")).bearer_auth(key).send().await {
                if r.status() == 200 {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "sluice was not ready within 10 s:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The config file it was started with (a test edits it, then sends SIGHUP).
    pub(crate) fn config_path(&self) -> PathBuf {
        self.dir.join("sluice.toml")
    }

    /// Waits (at most 10 s) until `needle` appears in its output `n` times.
    pub(crate) async fn logged(&self, needle: &str, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.output().matches(needle).count() < n {
            assert!(
                Instant::now() < deadline,
                "sluice did not log {needle:?} {n} time(s) within 10 s:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Everything it wrote so far (stdout, then stderr; colours stripped).
    pub(crate) fn output(&self) -> String {
        joined(&self.out, &self.err)
    }

    /// Its user + system CPU time so far (/proc/<pid>/stat, in 10 ms ticks).
    pub(crate) fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid))
            .expect("read /proc/<pid>/stat");
        // Fields after the parenthesized command name: state is field 3, utime 14, stime 15.
        let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        Duration::from_millis(ticks * 10)
    }

    /// Its resident set size (VmRSS), in bytes.
    pub(crate) fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .expect("read /proc/<pid>/status");
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("VmRSS");
        kb * 1024
    }

    /// Starts a `/healthz` prober (one probe every 50 ms).
    pub(crate) fn prober(&self) -> Prober {
        let url = self.at("/healthz");
        let (stop, worst, failed) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(Mutex::new(Vec::new())),
        );
        let (s, w, f) = (stop.clone(), worst.clone(), failed.clone());
        let task = tokio::spawn(async move {
            let h = reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .expect("reqwest client");
            while !s.load(Ordering::Relaxed) {
                let started = Instant::now();
                let r = h.get(&url).send().await;
                let took = started.elapsed();
                w.fetch_max(took.as_micros() as u64, Ordering::Relaxed);
                match r {
                    Ok(r) if r.status() == 200 => {}
                    Ok(r) => f.lock().unwrap().push(format!("HTTP {}", r.status())),
                    Err(e) => f.lock().unwrap().push(e.to_string()),
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Prober {
            stop,
            worst,
            failed,
            task,
        }
    }

    /// Sends it `SIG<name>` (e.g. "TERM").
    pub(crate) async fn signal(&self, name: &str) {
        let sent = tokio::process::Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid.to_string())
            .status()
            .await;
        assert!(sent.is_ok_and(|s| s.success()), "kill -{name} {}", self.pid);
    }

    /// Waits (at most `within`) until it exits; gives its status and everything it wrote.
    pub(crate) async fn exit_within(
        &mut self,
        within: Duration,
    ) -> Option<(std::process::ExitStatus, String)> {
        let status = tokio::time::timeout(within, self.child.wait())
            .await
            .ok()?
            .expect("wait for sluice");
        self.drained().await;
        Some((status, self.output()))
    }

    /// Waits (at most 2 s) until both pipe readers reached the end.
    async fn drained(&self) {
        let deadline = Instant::now() + Duration::from_secs(2);
        while (Arc::strong_count(&self.out) > 1 || Arc::strong_count(&self.err) > 1)
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stops it with SIGTERM (killed after 10 s); gives everything it wrote, stdout then stderr
    /// as they arrived.
    pub(crate) async fn terminate(mut self) -> String {
        self.signal("TERM").await;
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.start_kill();
            let _ = self.child.wait().await;
        }
        self.drained().await;
        self.output()
    }

    /// Asserts none of `canaries` appears in its output (plain or JSON-escaped).
    pub(crate) fn assert_no_leak(&self, canaries: &[&str]) {
        let out = self.output();
        for c in canaries {
            let escaped = serde_json::to_string(c).unwrap();
            for form in [c.to_string(), escaped[1..escaped.len() - 1].to_owned()] {
                if let Some(at) = out.find(&form) {
                    let line = out[..at].rfind('\n').map_or(0, |i| i + 1);
                    let end = out[at..].find('\n').map_or(out.len(), |i| at + i);
                    panic!(
                        "the canary {c:?} leaked into sluice's output:\n{}",
                        &out[line..end.min(line + 2000)]
                    );
                }
            }
        }
    }
}

/// A running `/healthz` prober.
pub(crate) struct Prober {
    stop: Arc<AtomicBool>,
    worst: Arc<AtomicU64>,
    failed: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Prober {
    /// Stops it and asserts every probe answered 200 within `limit`.
    pub(crate) async fn assert_within(self, limit: Duration) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        let failed = self.failed.lock().unwrap().clone();
        assert!(failed.is_empty(), "/healthz probes failed: {failed:?}");
        let worst = Duration::from_micros(self.worst.load(Ordering::Relaxed));
        assert!(
            worst < limit,
            "the slowest /healthz probe took {worst:?}, more than {limit:?}"
        );
    }
}

/// What a `sluice check` (or any one-shot) run gave.
pub(crate) struct Run {
    /// Its exit code.
    pub(crate) code: Option<i32>,
    /// Its stdout.
    pub(crate) stdout: String,
    /// Its stderr.
    pub(crate) stderr: String,
}

/// Runs `sluice check --config <config written to a file>` with environment changes.
pub(crate) async fn check(config: &str, env: &Env) -> Run {
    let dir = scratch("check");
    let path = dir.join("sluice.toml");
    std::fs::write(&path, config).expect("write the config");
    check_file(&path, env).await
}

/// Runs `sluice check --config <path>`.
pub(crate) async fn check_file(path: &std::path::Path, env: &Env) -> Run {
    let mut cmd = env.command();
    cmd.args(["check", "--config"])
        .arg(path)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    env.apply(&mut cmd);
    let out = tokio::time::timeout(Duration::from_secs(20), cmd.output())
        .await
        .expect("sluice check ends within 20 s")
        .expect("run sluice check");
    Run {
        code: out.status.code(),
        stdout: strip_ansi(&String::from_utf8_lossy(&out.stdout)),
        stderr: strip_ansi(&String::from_utf8_lossy(&out.stderr)),
    }
}

/// Serializes the tests that measure Sluice's CPU time, memory or latency, and the heavy ones
/// that share their binary (hardening), so they do not disturb each other on a small machine.
/// Hold the guard for the whole test.
pub(crate) async fn measured() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::OnceLock<tokio::sync::Mutex<()>> = std::sync::OnceLock::new();
    LOCK.get_or_init(|| tokio::sync::Mutex::new(()))
        .lock()
        .await
}
