//! stdio upstreams: servers Sluice starts as child processes and speaks newline-delimited
//! JSON-RPC to on their stdin and stdout (the MCP stdio transport).
//!
//! Takes an upstream's [`StdioConfig`]; gives its [`Spec`]: how to start one process (each one
//! 2025-11-25 session, see `legacy::session`), at most `max_processes` at once, with
//! `spare_processes` of them started ahead and kept warm (not yet handshaken: a server that
//! takes a second to boot answers a new session's first call as fast as an HTTP one) until one
//! is taken or `idle_ms` passes (then it is ended, and none replaces it until a session next
//! starts), restarted
//! with back-off after failed starts (100 ms doubling to 30 s; a start whose handshake
//! succeeded resets it), every running one tracked so shutdown ends them all and waits for
//! them. Refuses a start while backing off and past `max_processes`, with errors naming the
//! upstream and what to do (a full pool: 503 with `Retry-After`). One principal's share of the
//! processes (`max_processes_per_principal`) is counted by the session pool
//! (`legacy::pool::slots`), where each process is one principal's session.

pub mod boot;
pub mod boundary;
pub mod env;
pub mod process;
pub mod reaper;
pub mod shared;
mod spares;
pub mod stderr;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use self::process::{Line, Lines, Proc};
use crate::config::StdioConfig;
use crate::upstream::client::UpstreamError;

/// Back-off after a failed start: first wait and the cap.
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// How to start a stdio upstream's processes, and those running.
pub struct Spec {
    /// The upstream's name.
    pub name: Arc<str>,
    /// Its configuration.
    pub cfg: StdioConfig,
    /// The longest stdout line read (`limits.max_response_bytes`, the bound of one HTTP
    /// answer): past it, a 2025-11-25 session's process is ended and the call under way fails;
    /// a 2026-07-28 server's one process has the line skipped (`shared`).
    pub max_line: usize,
    /// How long one write to a process's stdin may wait (`timeouts.response_ms`).
    pub write_timeout: Duration,
    /// How long ending a process may take (`timeouts.shutdown_ms`: half before SIGTERM, half
    /// before SIGKILL).
    pub grace: Duration,
    /// The one process of a 2026-07-28 server (every principal's requests on it).
    pub(crate) shared: shared::Shared,
    /// Set at shutdown: no process is started after it.
    closed: std::sync::atomic::AtomicBool,
    /// Set when a reload retired the upstream: no spare is started after it.
    retired: std::sync::atomic::AtomicBool,
    stderr: Arc<stderr::Sink>,
    slots: Arc<tokio::sync::Semaphore>,
    backoff: Mutex<Backoff>,
    running: Running,
    /// The digest of the stderr the last failed start logged (`None` after a start succeeded).
    last_failure: Mutex<Option<u64>>,
    /// Oldest first: the one started longest ago is the likeliest to have booted.
    spares: Mutex<std::collections::VecDeque<spares::Spare>>,
}

#[derive(Default)]
struct Backoff {
    failures: u32,
    not_before: Option<Instant>,
}

/// The processes running, as their (stop, exited) signals, for shutdown.
#[derive(Default)]
struct Running(Mutex<Vec<(CancellationToken, CancellationToken)>>);

impl Running {
    /// Whether a process was told to end and has not exited yet (its place is about to be free).
    fn ending(&self) -> bool {
        self.0.lock().is_ok_and(|v| {
            v.iter()
                .any(|(stop, exited)| stop.is_cancelled() && !exited.is_cancelled())
        })
    }

    fn track(&self, p: &Proc) {
        if let Ok(mut v) = self.0.lock() {
            v.retain(|(_, exited)| !exited.is_cancelled());
            v.push(p.signals());
        }
    }
}

/// Refuses, before anything starts, a `cwd` that is not a directory, a `stderr` file whose
/// directory does not exist (every start would fail, and the first call would be the first to
/// say) or that is there but not a file Sluice may write (`stderr::check`: a symlink, a hard
/// link, another user's), and a `user` or `group` Sluice cannot switch to; warns of processes that would run as
/// root (`boundary`).
pub fn preflight(name: &str, cfg: &StdioConfig) -> Result<(), String> {
    if boundary::check_run_as(name, cfg, &boundary::Credentials::current())?.is_some() {
        tracing::warn!(
            upstream = %name,
            "a stdio upstream's processes run as root: they can read Sluice's memory and environment (its keys and tokens) and every file; set user = \"…\" (an unprivileged user of their own)"
        );
    }
    if let Some(cwd) = &cfg.cwd {
        if !cwd.is_dir() {
            return Err(format!(
                "upstream '{name}': cwd {} is not a directory; create it or correct cwd",
                cwd.display()
            ));
        }
    }
    if let crate::config::Stderr::File(path) = &cfg.stderr {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        if !dir.is_dir() {
            return Err(format!(
                "upstream '{name}': stderr file {}: its directory does not exist; create it or use stderr = \"drop\"",
                path.display()
            ));
        }
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            stderr::check(&meta, nix::unistd::geteuid().as_raw()).map_err(|why| {
                format!(
                    "upstream '{name}': stderr file {}: {why}; remove it (Sluice creates the file) or point stderr elsewhere",
                    path.display()
                )
            })?;
        }
    }
    Ok(())
}

impl Spec {
    /// The spec of upstream `name`.
    pub fn new(
        name: &str,
        cfg: StdioConfig,
        max_line: usize,
        write_timeout: Duration,
        grace: Duration,
    ) -> Spec {
        let stderr = Arc::new(stderr::Sink::new(name, &cfg.stderr, cfg.stderr_max_bytes));
        let slots = Arc::new(tokio::sync::Semaphore::new(cfg.max_processes));
        Spec {
            name: name.into(),
            cfg,
            max_line,
            write_timeout,
            grace,
            shared: shared::Shared::default(),
            closed: Default::default(),
            retired: Default::default(),
            stderr,
            slots,
            backoff: Mutex::default(),
            running: Running::default(),
            last_failure: Mutex::default(),
            spares: Mutex::default(),
        }
    }

    /// A free place under `max_processes`, if any.
    pub fn slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.slots.clone().try_acquire_owned().ok()
    }

    /// Whether every place under `max_processes` is taken (a request Sluice could not make for
    /// itself then says the server is busy, not that it is down).
    pub fn saturated(&self) -> bool {
        self.slots.available_permits() == 0
    }

    /// Whether one of its processes is being ended (its place is free once it has exited).
    pub fn ending(&self) -> bool {
        self.running.ending()
    }

    /// A place under `max_processes` within `wait` (after one was ended to make room).
    pub async fn slot_within(&self, wait: Duration) -> Option<tokio::sync::OwnedSemaphorePermit> {
        tokio::time::timeout(wait, self.slots.clone().acquire_owned())
            .await
            .ok()?
            .ok()
    }

    /// The error when every place is taken by a session in use: 503 with `Retry-After`, naming
    /// `max_processes` (Sluice's pool is full; the server did nothing wrong).
    pub fn full(&self) -> UpstreamError {
        UpstreamError::Full(crate::shares::Full::pool(
            crate::shares::Pool::Processes(self.name.to_string()),
            self.cfg.max_processes,
        ))
    }

    fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Acquire)
    }

    fn backing_off(&self) -> bool {
        self.backoff
            .lock()
            .ok()
            .and_then(|b| b.not_before)
            .is_some_and(|t| t > Instant::now())
    }

    /// Starts a process in `slot` (and spares after it), unless a failed start before says to wait.
    pub fn start(
        &self,
        slot: tokio::sync::OwnedSemaphorePermit,
        grace: Duration,
    ) -> Result<(Arc<Proc>, Lines), UpstreamError> {
        let started = self.start_alone_within(slot, grace);
        if started.is_ok() {
            self.refill(grace);
        }
        started
    }

    /// Starts a process in `slot` and no spare (the one process of a 2026-07-28 server).
    pub fn start_alone(
        &self,
        slot: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<(Arc<Proc>, Lines), UpstreamError> {
        self.start_alone_within(slot, self.grace)
    }

    fn start_alone_within(
        &self,
        slot: tokio::sync::OwnedSemaphorePermit,
        grace: Duration,
    ) -> Result<(Arc<Proc>, Lines), UpstreamError> {
        if self.is_closed() {
            return Err(UpstreamError::Exited(
                self.name.to_string(),
                "Sluice is shutting down".into(),
            ));
        }
        if let Some(wait) = self
            .backoff
            .lock()
            .ok()
            .and_then(|b| b.not_before)
            .and_then(|t| t.checked_duration_since(Instant::now()))
            .filter(|d| !d.is_zero())
        {
            return Err(UpstreamError::Unreachable(
                self.name.to_string(),
                format!(
                    "its last start failed; the next start is in {} ms",
                    wait.as_millis().max(1)
                ),
            ));
        }
        let started = Proc::spawn(self, slot, grace);
        if started.is_err() {
            self.failed();
        }
        started
    }

    /// A start failed (the process did not start or its handshake did not succeed).
    pub fn failed(&self) {
        if let Ok(mut b) = self.backoff.lock() {
            let wait = BACKOFF_FIRST
                .saturating_mul(1u32 << b.failures.min(16))
                .min(BACKOFF_MAX);
            b.failures = b.failures.saturating_add(1);
            b.not_before = Some(Instant::now() + wait);
        }
    }

    /// A start succeeded: the back-off is reset, and the next failed start is logged at warn.
    pub fn succeeded(&self) {
        self.reset_backoff();
        if let Ok(mut l) = self.last_failure.lock() {
            *l = None;
        }
    }

    /// The next start is not held back (the process before was ended on purpose).
    pub fn reset_backoff(&self) {
        if let Ok(mut b) = self.backoff.lock() {
            *b = Backoff::default();
        }
    }

    /// Logs that `proc` did not start (`why`, content-free), with what it wrote to stderr
    /// before its handshake, once that stderr ended (within `grace`); at warn unless the last
    /// failed start wrote the same (`boot`).
    pub async fn log_failed_start(&self, why: &str, proc: &Proc) {
        let lines = proc.boot().lines(self.grace).await;
        let digest = boot::digest(&lines);
        let repeated = self
            .last_failure
            .lock()
            .is_ok_and(|mut l| l.replace(digest) == Some(digest));
        boot::log_failed_start(&self.name, why, &lines, repeated);
    }

    /// At shutdown: no process starts from now on, and every running one is told to end.
    pub fn end_all_now(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        if let Ok(mut spares) = self.spares.lock() {
            spares.clear();
        }
        if let Ok(v) = self.running.0.lock() {
            for (stop, _) in v.iter() {
                stop.cancel();
            }
        }
    }

    /// Waits until every process has exited (each is given `grace` in all; its supervisor
    /// kills one that outlives it), then until no orphan is left (within `grace` more).
    pub async fn wait_ended(&self) {
        let all = self
            .running
            .0
            .lock()
            .map(|v| v.iter().map(|(_, e)| e.clone()).collect::<Vec<_>>())
            .unwrap_or_default();
        for exited in all {
            exited.cancelled().await;
        }
        reaper::sweep(self.grace).await;
    }

    /// Ends every process and waits for them ([`Spec::end_all_now`], then [`Spec::wait_ended`]).
    pub async fn end_all(&self) {
        self.end_all_now();
        self.wait_ended().await;
    }

    /// How many of its processes run now.
    pub fn running(&self) -> usize {
        self.running
            .0
            .lock()
            .map(|v| v.iter().filter(|(_, e)| !e.is_cancelled()).count())
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests;
