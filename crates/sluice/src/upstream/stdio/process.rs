//! One running stdio server process: its stdin (newline-delimited JSON-RPC written one message
//! per line), its stdout (read as lines, each bounded), the requests Sluice itself waits on,
//! and a supervisor task that owns the child (and its place under `max_processes`) and ends it.
//!
//! Takes a [`Spec`] (the command, its environment, its bounds); gives a [`Proc`] to write to,
//! the stream of its stdout lines, and [`Proc::ended`] once it exited (with why, content-free).
//! The child gets what `env` says of Sluice's environment (proxies and CAs, never Sluice's
//! secrets) and its configured `env`; it runs as the upstream's `user` and `group` when set
//! (with that user's `HOME` and `USER`, and no supplementary group) and leads its own process
//! group. Its stderr is read by a task of its own (`stderr`), which keeps what it wrote while it
//! booted ([`Proc::boot`]) until [`Proc::handshaken`]. Ending it closes its
//! stdin, waits half of `timeouts.shutdown_ms`, sends SIGTERM to the group, waits the other
//! half, then SIGKILL; once the child exited, whatever of its group is left is killed, and so
//! is every orphan it left (`reaper`, bounded by `timeouts.shutdown_ms`); the child is always
//! waited for, so none is left a zombie. A write waits at most `timeouts.response_ms`. Refuses (as
//! [`UpstreamError`] naming the upstream) a spawn that fails and a write to an ended process,
//! or one it does not read.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio_util::codec::{Decoder, FramedRead, LinesCodec, LinesCodecError};
use tokio_util::sync::CancellationToken;

use super::Spec;
use crate::upstream::client::UpstreamError;
use crate::upstream::pending::Pending;

/// `cfg`'s command with its environment (what it inherits of Sluice's, `env`), working
/// directory, user and group.
fn command(cfg: &crate::config::StdioConfig) -> Command {
    let mut cmd = Command::new(&cfg.command[0]);
    cmd.args(&cfg.command[1..]).env_clear();
    cmd.envs(super::env::inherited(cfg, std::env::vars_os()));
    if let Some(user) = &cfg.user {
        // Its own home, not Sluice's (which it may not even enter).
        cmd.env_remove("HOME").env_remove("USER");
        if let Some((name, home)) = &user.account {
            cmd.env("USER", name).env("HOME", home);
        }
        // std sets the gid, clears the supplementary groups (Sluice is root: `boundary`
        // refuses the rest), then the uid, before the working directory and exec.
        cmd.uid(user.uid);
    }
    if let Some(gid) = cfg.gid() {
        cmd.gid(gid);
    }
    cmd.envs(cfg.env.iter().map(|(k, v)| (k, v)));
    if let Some(d) = &cfg.cwd {
        cmd.current_dir(d);
    }
    cmd
}

/// The lines of a process's stdout, each at most the spec's `max_line` bytes.
pub type Lines = FramedRead<ChildStdout, LineCodec>;

/// One stdout line: its text, or that it was over the bound (its bytes are skipped, never
/// buffered past the bound, and the next line is read as usual).
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A whole line, without its newline.
    Text(String),
    /// A line over `max_line` bytes.
    TooLong,
}

/// Newline-delimited text with a bound per line that, unlike a stream that stops at its
/// codec's first error, goes on after a line over it.
pub struct LineCodec(LinesCodec);

impl LineCodec {
    /// Lines of at most `max` bytes.
    pub fn new(max: usize) -> LineCodec {
        LineCodec(LinesCodec::new_with_max_length(max))
    }
}

impl Decoder for LineCodec {
    type Item = Line;
    type Error = LinesCodecError;

    fn decode(&mut self, buf: &mut bytes::BytesMut) -> Result<Option<Line>, LinesCodecError> {
        match self.0.decode(buf) {
            Err(LinesCodecError::MaxLineLengthExceeded) => Ok(Some(Line::TooLong)),
            other => other.map(|l| l.map(Line::Text)),
        }
    }

    fn decode_eof(&mut self, buf: &mut bytes::BytesMut) -> Result<Option<Line>, LinesCodecError> {
        match self.0.decode_eof(buf) {
            Err(LinesCodecError::MaxLineLengthExceeded) => Ok(Some(Line::TooLong)),
            other => other.map(|l| l.map(Line::Text)),
        }
    }
}

/// A running stdio server.
pub struct Proc {
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    /// Sluice's own requests waiting, and the process's end (its token is the supervisor's
    /// "exited" signal).
    pending: Pending,
    stop: CancellationToken,
    /// The process's id, while it runs.
    pub pid: Option<u32>,
    /// The longest stdout line read from it.
    pub max_line: usize,
    /// How long one write may wait on a child that does not read its stdin.
    write_timeout: Duration,
    /// What it wrote to stderr while it booted (until [`Proc::handshaken`]).
    boot: Arc<super::boot::Boot>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Proc {
    /// Starts the process of `spec`; `slot` is its place under `max_processes`.
    pub fn spawn(
        spec: &Spec,
        slot: tokio::sync::OwnedSemaphorePermit,
        grace: Duration,
    ) -> Result<(Arc<Proc>, Lines), UpstreamError> {
        let cfg = &spec.cfg;
        let mut cmd = command(cfg);
        // stderr is always read: what it writes while it boots says why a start failed.
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        // Its own process group, so ending it ends what it started too (npx, uvx, sh -c).
        cmd.process_group(0);
        // A backstop only: the supervisor ends the child itself, gently first.
        cmd.kill_on_drop(true);
        // Registered as Sluice's own child as it is spawned: a sweep never takes it for an orphan.
        let (mut child, registered) = super::reaper::spawn(&mut cmd).map_err(|e| {
            UpstreamError::Start(
                spec.name.to_string(),
                format!("{:?}: {}", cfg.command[0], e.kind()),
            )
        })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(UpstreamError::Start(
                spec.name.to_string(),
                "its stdin or stdout could not be piped".into(),
            ));
        };
        let boot = Arc::new(super::boot::Boot::default());
        match child.stderr.take() {
            Some(err) => drop(tokio::spawn(spec.stderr.clone().drain(err, boot.clone()))),
            None => boot.ended(),
        }
        let proc = Arc::new(Proc {
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            pending: Pending::new(&spec.name),
            stop: CancellationToken::new(),
            pid: child.id(),
            max_line: spec.max_line,
            write_timeout: spec.write_timeout,
            boot,
        });
        spec.running.track(&proc);
        // The slot is the supervisor's: it is free again once the process has exited.
        let signals = (proc.stop.clone(), proc.pending.token());
        tokio::spawn(supervise(
            Held {
                child,
                registered,
                slot,
            },
            Arc::downgrade(&proc),
            signals,
            grace,
        ));
        Ok((proc, FramedRead::new(stdout, LineCodec::new(spec.max_line))))
    }

    /// Its first handshake completed: what it wrote to stderr is no longer kept (from now on it
    /// may carry a client's content).
    pub fn handshaken(&self) {
        self.boot.completed();
    }

    /// What it wrote to stderr while it booted, for a failed start's log line.
    pub fn boot(&self) -> &super::boot::Boot {
        &self.boot
    }

    /// Writes one message (one line; JSON text has no raw newline), within `timeouts.response_ms`
    /// and never past the process being ended: a child that stops reading its stdin is ended,
    /// not waited on.
    pub async fn send(&self, msg: &[u8]) -> Result<(), UpstreamError> {
        let gone = || self.pending.error();
        let mut g = tokio::select! {
            g = self.stdin.lock() => g,
            _ = self.stop.cancelled() => return Err(gone()),
        };
        if self.stop.is_cancelled() {
            return Err(gone());
        }
        let stdin = g.as_mut().ok_or_else(gone)?;
        // A writer that gives up mid-line (its caller dropped) would leave half a line for the
        // next one to be glued to: the process is ended instead.
        let mut cut = CutShort {
            proc: self,
            whole: false,
        };
        let mut line = Vec::with_capacity(msg.len() + 1);
        line.extend_from_slice(msg);
        line.push(b'\n');
        let write = async { stdin.write_all(&line).await.and(stdin.flush().await) };
        let written = tokio::select! {
            r = tokio::time::timeout(self.write_timeout, write) => r.map_err(|_| ()).and_then(|r| r.map_err(|_| ())),
            _ = self.stop.cancelled() => Err(()),
        };
        cut.whole = true;
        if written.is_err() {
            // A write cut short leaves a partial line: nothing more can be framed on it.
            *g = None;
            drop(g);
            self.end("it stopped reading its stdin (timeouts.response_ms)");
            return Err(gone());
        }
        Ok(())
    }

    /// Sends request `id` and waits up to `timeout` for its response (JSON text).
    pub async fn request(
        &self,
        id: u64,
        body: Bytes,
        timeout: Duration,
    ) -> Result<String, UpstreamError> {
        self.pending.request(id, timeout, self.send(&body)).await
    }

    /// Hands a response line to the request of Sluice's own waiting for it; gives the line
    /// back when none is (the response is for a client's call).
    pub fn complete(
        &self,
        id: u64,
        msg: crate::upstream::message::Message,
    ) -> Result<(), crate::upstream::message::Message> {
        self.pending.complete(id, msg)
    }

    /// Ends the process, its exit status being the reason told.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Ends the process for `why` (content-free), as the module says.
    pub fn end(&self, why: &str) {
        self.pending.note(why);
        self.stop.cancel();
    }

    /// Its (stop, exited) signals, for shutdown to end it and wait.
    pub(super) fn signals(&self) -> (CancellationToken, CancellationToken) {
        (self.stop.clone(), self.pending.token())
    }

    /// Whether it has exited (or is being ended).
    pub fn is_done(&self) -> bool {
        self.stop.is_cancelled() || self.pending.is_closed()
    }

    /// Resolves once the process has exited.
    pub async fn ended(&self) {
        self.pending.closed().await
    }

    /// Closes its stdin: a well-behaved server exits on end of input. A write in progress
    /// holds it: that write sees the process ending and drops it itself.
    pub fn close_stdin(&self) {
        if let Ok(mut g) = self.stdin.try_lock() {
            g.take();
        }
    }

    /// The error a call gets when the process ended under it.
    pub fn exit_error(&self) -> UpstreamError {
        self.pending.error()
    }
}

/// Ends the process when a write to its stdin is dropped before the line was whole.
struct CutShort<'a> {
    proc: &'a Proc,
    whole: bool,
}

impl Drop for CutShort<'_> {
    fn drop(&mut self) {
        if !self.whole {
            self.proc.end("a write to its stdin was cut short");
        }
    }
}

/// What a supervisor holds until the child exited: the child, its registration as Sluice's
/// own, its place under `max_processes`.
struct Held {
    child: Child,
    registered: super::reaper::Registered,
    slot: tokio::sync::OwnedSemaphorePermit,
}

/// Owns the child: waits for it to exit, or ends it when asked (stdin closed, SIGTERM, SIGKILL);
/// then ends what it left behind.
async fn supervise(
    held: Held,
    proc: std::sync::Weak<Proc>,
    (stop, exited): (CancellationToken, CancellationToken),
    grace: Duration,
) {
    let Held {
        mut child,
        registered,
        slot,
    } = held;
    let group = child.id().and_then(|p| i32::try_from(p).ok());
    let status = tokio::select! {
        s = child.wait() => s,
        _ = stop.cancelled() => {
            if let Some(p) = proc.upgrade() {
                p.close_stdin();
            }
            let half = grace / 2;
            match tokio::time::timeout(half, child.wait()).await {
                Ok(s) => s,
                Err(_) => {
                    signal_group(&child, nix::sys::signal::Signal::SIGTERM);
                    match tokio::time::timeout(half, child.wait()).await {
                        Ok(s) => s,
                        Err(_) => {
                            signal_group(&child, nix::sys::signal::Signal::SIGKILL);
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
    // Waited for: its pid may be reused from now on.
    drop(registered);
    // What it started and left behind goes with it. Its group id cannot be reused while a
    // member of the group lives.
    if let Some(g) = group {
        super::reaper::refused(
            g,
            nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(g),
                nix::sys::signal::Signal::SIGKILL,
            ),
        );
    }
    if let Some(p) = proc.upgrade() {
        p.pending.close(&format!("its process exited ({shown})"));
    }
    // And what left the group (setsid, a double fork): handed to Sluice as orphans once their
    // parents exited.
    super::reaper::sweep(grace).await;
    drop(slot);
    exited.cancel();
}

/// Signals the child's process group (the child leads it); only while the child is not reaped,
/// so its pid, the group's id, is still its own.
fn signal_group(child: &Child, sig: nix::sys::signal::Signal) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        super::reaper::refused(
            pid,
            nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), sig),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_over_the_bound_is_told_and_skipped_and_the_next_line_read() {
        let mut codec = LineCodec::new(8);
        let mut buf = bytes::BytesMut::from(&b"0123456789abcdef\nok\n"[..]);
        let mut got = Vec::new();
        while let Some(l) = codec.decode(&mut buf).expect("no error") {
            got.push(l);
        }
        assert_eq!(got, [Line::TooLong, Line::Text("ok".into())]);
    }
}
