//! Orphans: no process a stdio server started outlives the server or Sluice.
//!
//! Sluice is a child subreaper (`boundary::harden`): a process whose parent exits while it runs
//! (a server's grandchild after `setsid` and a double fork, a daemon it launched, whatever a
//! crashed server leaves) is handed to Sluice, not to init. Every child Sluice starts itself is
//! registered as it is spawned ([`spawn`]: the spawn and its registration are one step under the
//! registry's lock, which a scan holds too, so a scan never takes a new child for an orphan).
//! Any other child of Sluice is an orphan: [`sweep`] kills it (SIGKILL) and reaps it (`waitpid`
//! on its pid only, never -1: tokio waits for its own children), then looks again for what that
//! end handed over, until none is left or its deadline passes.
//!
//! A sweep runs when a process Sluice started has exited (within `timeouts.shutdown_ms`), every
//! [`PERIOD`] while one runs (or the last sweep left an orphan), and at shutdown once every
//! process ended. An orphan is ended as soon as a sweep sees it, even while the server that
//! started it runs: a stdio server may not leave behind a process it abandoned. One pass reads
//! `/proc/<pid>/stat` of each process once (linear in the process table); one sweep runs at a
//! time. Refuses nothing; gives how many orphans a sweep ended. Until [`enable`] (the library in
//! a test binary, whose other children are not Sluice's) nothing is swept.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// How often a sweep runs while a process Sluice started runs (or an orphan was left).
pub const PERIOD: Duration = Duration::from_secs(2);

static ENABLED: AtomicBool = AtomicBool::new(false);
/// An orphan outlived the last sweep's deadline: the periodic sweep goes on until it is gone.
static LEFT: AtomicBool = AtomicBool::new(false);
static SERIAL: AtomicU64 = AtomicU64::new(0);
/// The children Sluice spawned and has not waited for, each with the serial of its spawn.
static MANAGED: LazyLock<Mutex<HashMap<i32, u64>>> = LazyLock::new(Mutex::default);
static SWEEPING: LazyLock<tokio::sync::Mutex<()>> = LazyLock::new(tokio::sync::Mutex::default);
static PERIODIC: std::sync::Once = std::sync::Once::new();

/// Turns sweeping on (Sluice is a child subreaper: its other children are orphans).
pub(super) fn enable() {
    ENABLED.store(true, Ordering::Release);
}

fn enabled() -> bool {
    ENABLED.load(Ordering::Acquire)
}

fn managed() -> MutexGuard<'static, HashMap<i32, u64>> {
    MANAGED.lock().unwrap_or_else(|p| p.into_inner())
}

/// A child Sluice spawned; drop it once the child was waited for (its pid may then be reused).
pub struct Registered {
    pid: i32,
    serial: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut m = managed();
        // A later child with the same pid has a registration of its own.
        if m.get(&self.pid) == Some(&self.serial) {
            m.remove(&self.pid);
        }
    }
}

/// Spawns `cmd` as a child of Sluice's own (every child Sluice starts must be spawned here, or
/// a sweep takes it for an orphan). Must run inside the runtime: the first one starts the
/// periodic sweep.
pub fn spawn(cmd: &mut Command) -> std::io::Result<(Child, Registered)> {
    let mut m = managed();
    let child = cmd.spawn()?;
    let pid = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
    let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
    m.insert(pid, serial);
    drop(m);
    if enabled() {
        PERIODIC.call_once(|| drop(tokio::spawn(periodic())));
    }
    Ok((child, Registered { pid, serial }))
}

/// Sweeps every [`PERIOD`] while a managed child runs or an orphan was left.
async fn periodic() {
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !managed().is_empty() || LEFT.load(Ordering::Acquire) {
            sweep(PERIOD).await;
        }
    }
}

/// Kills and reaps every orphan, then those their end handed over, until none is left or
/// `within` has passed; gives how many it ended.
pub async fn sweep(within: Duration) -> usize {
    if !enabled() {
        return 0;
    }
    let deadline = tokio::time::Instant::now() + within;
    let Ok(_one) = tokio::time::timeout_at(deadline, SWEEPING.lock()).await else {
        return 0;
    };
    // Before any kill, so no SIGCHLD of a victim is missed.
    let mut chld = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child()).ok();
    let me = std::process::id() as i32;
    let (mut dying, mut ended) = (HashSet::new(), 0);
    let left = loop {
        let found = tokio::task::spawn_blocking(move || orphans(me))
            .await
            .unwrap_or_default();
        for &pid in &found {
            // Our child, not yet reaped: its pid is still its own.
            if dying.insert(pid) {
                refused(pid, kill(Pid::from_raw(pid), Signal::SIGKILL));
            }
        }
        let before = dying.len();
        dying.retain(|&p| !reaped(p));
        ended += before - dying.len();
        if found.is_empty() && dying.is_empty() {
            break false;
        }
        if tokio::time::Instant::now() >= deadline {
            break true;
        }
        if !dying.is_empty() {
            // Until one of them has died (SIGCHLD), or the deadline.
            let Some(s) = chld.as_mut() else { break true };
            if tokio::time::timeout_at(deadline, s.recv()).await.is_err() {
                break true;
            }
        }
    };
    LEFT.store(left, Ordering::Release);
    if ended > 0 {
        tracing::warn!(orphans = ended, "ended processes a stdio server left behind (a stdio server may not leave a process running)");
    }
    if left {
        tracing::warn!("processes a stdio server left behind outlived a sweep's deadline; the next sweep tries again");
    }
    ended
}

/// Notes a signal to `pid` Sluice was not allowed to send (EPERM: a process of another user,
/// and Sluice without CAP_KILL; `boundary` refuses such a `user` at startup, so this is a
/// process that changed its own uid): logged with the pid and how many were refused so far,
/// at the 1st, 2nd, 4th, 8th… refusal (a process refused at every sweep cannot flood the log),
/// no content. Other errors (the process is gone) are no news.
pub(super) fn refused(pid: i32, sent: nix::Result<()>) {
    static REFUSED: AtomicU64 = AtomicU64::new(0);
    if sent != Err(nix::errno::Errno::EPERM) {
        return;
    }
    let n = REFUSED.fetch_add(1, Ordering::AcqRel) + 1;
    if n.is_power_of_two() {
        tracing::warn!(
            pid,
            refused = n,
            "a process a stdio server started could not be ended: Sluice may not signal it (EPERM: it runs as another user); it may outlive its server; give Sluice CAP_KILL or run it as root"
        );
    }
}

/// Whether the killed child `pid` has exited and is reaped now.
fn reaped(pid: i32) -> bool {
    !matches!(
        waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)),
        Ok(WaitStatus::StillAlive)
    )
}

/// Sluice's children it did not spawn, read under the registry's lock: one pass over /proc.
fn orphans(me: i32) -> Vec<i32> {
    let m = managed();
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me || m.contains_key(&pid) {
            continue;
        }
        let stat = std::fs::read(format!("/proc/{pid}/stat")).unwrap_or_default();
        if parent_in(&stat) == Some(me) {
            out.push(pid);
        }
    }
    out
}

/// The parent's pid in a `/proc/<pid>/stat` line: the second field after the command name,
/// which is in parentheses and may hold any byte (so the last `)` ends it).
fn parent_in(stat: &[u8]) -> Option<i32> {
    let after = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(stat.get(after + 1..)?).ok()?;
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_is_read_past_a_command_name_holding_parentheses_and_spaces() {
        assert_eq!(parent_in(b"4242 (sleep) S 17 4242 4242 0 -1"), Some(17));
        assert_eq!(parent_in(b"4242 (a) b) (c) Z 1 4242 4242 0 -1"), Some(1));
        assert_eq!(parent_in(b"4242 (x\n) R 99 1"), Some(99));
        assert_eq!(parent_in(b"4242 (truncated"), None);
        assert_eq!(parent_in(b""), None);
        let mine = std::fs::read("/proc/self/stat").expect("our own stat");
        assert_eq!(parent_in(&mine), Some(nix::unistd::getppid().as_raw()));
    }

    #[tokio::test]
    async fn without_enable_nothing_is_swept() {
        // The test binary's other children are not orphans: a disabled reaper never looks.
        assert!(!enabled());
        assert_eq!(sweep(Duration::from_secs(1)).await, 0);
    }
}
