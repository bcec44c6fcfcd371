//! One running stdio server process: its stdin (newline-delimited JSON-RPC written one message
//! per line), its stdout (read as lines, each bounded), the requests Sluice itself waits on,
//! and a supervisor task that owns the child (and its place under `max_processes`) and ends it.
//!
//! Takes a [`Spec`] (the command, its environment, its bounds); gives a [`Proc`] to write to,
//! the stream of its stdout lines, and [`Proc::ended`] once it exited (with why, content-free).
//! Ending it closes its stdin, waits half of `timeouts.shutdown_ms`, sends SIGTERM, waits the
//! other half, then SIGKILL; the child is always waited for, so none is left a zombie. Refuses
//! (as [`UpstreamError`] naming the upstream) a spawn that fails and a write to an ended process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::oneshot;
use tokio_util::codec::{FramedRead, LinesCodec};
use tokio_util::sync::CancellationToken;

use super::Spec;
use crate::upstream::client::UpstreamError;

/// Environment variables a stdio server inherits from Sluice; everything else it gets is
/// configured (`env`), so Sluice's own secrets (state keys, API keys) never reach it.
const INHERITED: [&str; 7] = ["PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ"];

/// The lines of a process's stdout, each at most the spec's `max_line` bytes.
pub type Lines = FramedRead<ChildStdout, LinesCodec>;

/// A running stdio server.
pub struct Proc {
    upstream: Arc<str>,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pending: Mutex<HashMap<u64, oneshot::Sender<String>>>,
    stop: CancellationToken,
    exited: CancellationToken,
    why: Mutex<Option<String>>,
    /// The process's id, while it runs.
    pub pid: Option<u32>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Proc {
    /// Starts the process of `spec`; `slot` is its place under `max_processes`.
    pub fn spawn(spec: &Spec, slot: tokio::sync::OwnedSemaphorePermit, grace: Duration) -> Result<(Arc<Proc>, Lines), UpstreamError> {
        let cfg = &spec.cfg;
        let mut cmd = Command::new(&cfg.command[0]);
        cmd.args(&cfg.command[1..]).env_clear();
        for k in INHERITED {
            if let Some(v) = std::env::var_os(k) {
                cmd.env(k, v);
            }
        }
        cmd.envs(cfg.env.iter().map(|(k, v)| (k, v)));
        if let Some(d) = &cfg.cwd {
            cmd.current_dir(d);
        }
        let drop_stderr = matches!(cfg.stderr, crate::config::Stderr::Drop);
        cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
        cmd.stderr(if drop_stderr { std::process::Stdio::null() } else { std::process::Stdio::piped() });
        // A backstop only: the supervisor ends the child itself, gently first.
        cmd.kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .map_err(|e| UpstreamError::Unreachable(spec.name.to_string(), format!("cannot start {:?}: {}", cfg.command[0], e.kind())))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(UpstreamError::Unreachable(spec.name.to_string(), "its stdin or stdout could not be piped".into()));
        };
        if let Some(err) = child.stderr.take() {
            tokio::spawn(spec.stderr.clone().drain(err));
        }
        let proc = Arc::new(Proc {
            upstream: spec.name.clone(),
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            pending: Mutex::new(HashMap::new()),
            stop: CancellationToken::new(),
            exited: CancellationToken::new(),
            why: Mutex::new(None),
            pid: child.id(),
        });
        spec.running.track(&proc);
        // The slot is the supervisor's: it is free again once the process has exited.
        tokio::spawn(supervise(child, slot, Arc::downgrade(&proc), proc.stop.clone(), proc.exited.clone(), grace));
        Ok((proc, FramedRead::new(stdout, LinesCodec::new_with_max_length(spec.max_line))))
    }

    /// Writes one message (one line; JSON text has no raw newline).
    pub async fn send(&self, msg: &[u8]) -> Result<(), UpstreamError> {
        let mut g = self.stdin.lock().await;
        let gone = || UpstreamError::Closed(self.upstream.to_string());
        let stdin = g.as_mut().ok_or_else(gone)?;
        let mut line = Vec::with_capacity(msg.len() + 1);
        line.extend_from_slice(msg);
        line.push(b'\n');
        let r = stdin.write_all(&line).await.and(stdin.flush().await);
        if r.is_err() {
            *g = None;
            return Err(gone());
        }
        Ok(())
    }

    /// Sends request `id` and waits up to `timeout` for its response (JSON text).
    pub async fn request(&self, id: u64, body: Bytes, timeout: Duration) -> Result<String, UpstreamError> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(id, tx);
        }
        let forget = || {
            if let Ok(mut p) = self.pending.lock() {
                p.remove(&id);
            }
        };
        if let Err(e) = self.send(&body).await {
            forget();
            return Err(e);
        }
        let out = tokio::select! {
            r = tokio::time::timeout(timeout, rx) => match r {
                Ok(Ok(line)) => Ok(line),
                Ok(Err(_)) => Err(UpstreamError::Closed(self.upstream.to_string())),
                Err(_) => Err(UpstreamError::Timeout(self.upstream.to_string(), timeout.as_millis() as u64)),
            },
            _ = self.exited.cancelled() => Err(self.exit_error()),
        };
        forget();
        out
    }

    /// Hands a response line to the request of Sluice's own waiting for it; gives the line
    /// back when none is (the response is for a client's call).
    pub fn complete(&self, id: u64, line: String) -> Result<(), String> {
        let waiter = self.pending.lock().ok().and_then(|mut p| p.remove(&id));
        match waiter {
            Some(tx) => {
                let _ = tx.send(line);
                Ok(())
            }
            None => Err(line),
        }
    }

    /// Ends the process for `why` (content-free), as the module says.
    pub fn end(&self, why: &str) {
        if let Ok(mut w) = self.why.lock() {
            w.get_or_insert_with(|| why.to_owned());
        }
        self.stop.cancel();
    }

    /// Its (stop, exited) signals, for shutdown to end it and wait.
    pub(super) fn signals(&self) -> (CancellationToken, CancellationToken) {
        (self.stop.clone(), self.exited.clone())
    }

    /// Whether it has exited (or is being ended).
    pub fn is_done(&self) -> bool {
        self.stop.is_cancelled() || self.exited.is_cancelled()
    }

    /// Resolves once the process has exited.
    pub async fn ended(&self) {
        self.exited.cancelled().await
    }

    /// Closes its stdin: a well-behaved server exits on end of input.
    pub async fn close_stdin(&self) {
        self.stdin.lock().await.take();
    }

    /// The error a call gets when the process ended under it.
    pub fn exit_error(&self) -> UpstreamError {
        let why = self.why.lock().ok().and_then(|w| w.clone()).unwrap_or_else(|| "its process exited".into());
        UpstreamError::Exited(self.upstream.to_string(), why)
    }

    fn exited_with(&self, status: &str) {
        if let Ok(mut w) = self.why.lock() {
            w.get_or_insert_with(|| format!("its process exited ({status})"));
        }
    }
}

/// Owns the child: waits for it to exit, or ends it when asked (stdin closed, SIGTERM, SIGKILL).
async fn supervise(
    mut child: Child,
    slot: tokio::sync::OwnedSemaphorePermit,
    proc: std::sync::Weak<Proc>,
    stop: CancellationToken,
    exited: CancellationToken,
    grace: Duration,
) {
    let status = tokio::select! {
        s = child.wait() => s,
        _ = stop.cancelled() => {
            if let Some(p) = proc.upgrade() {
                p.close_stdin().await;
            }
            let half = grace / 2;
            match tokio::time::timeout(half, child.wait()).await {
                Ok(s) => s,
                Err(_) => {
                    // Not reaped yet, so the pid is still this child's.
                    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
                        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM);
                    }
                    match tokio::time::timeout(half, child.wait()).await {
                        Ok(s) => s,
                        Err(_) => {
                            let _ = child.kill().await;
                            child.wait().await
                        }
                    }
                }
            }
        }
    };
    let shown = match status {
        Ok(s) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
            (Some(c), _) => format!("status {c}"),
            (None, Some(sig)) => format!("signal {sig}"),
            _ => "unknown status".into(),
        },
        Err(e) => format!("not waitable: {}", e.kind()),
    };
    if let Some(p) = proc.upgrade() {
        p.exited_with(&shown);
    }
    drop(slot);
    exited.cancel();
}
