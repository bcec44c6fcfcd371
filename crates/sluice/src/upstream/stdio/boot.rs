//! What a stdio server wrote to stderr while it booted, kept to say why a start failed.
//!
//! Takes the chunks its stderr reader reads; gives, when a start fails or times out, the last
//! [`LINES`] lines (at most [`BYTES`] bytes in all, each line cut at [`BYTES`]) it wrote before
//! its first handshake completed, for one log line where each is Debug-escaped (a line can
//! forge no log line, and carries no control byte); at warn, or at debug when a start failed
//! the same way as the last one of its upstream (a server retried with back-off says it once). Once the first handshake completed (for a
//! 2026-07-28 server: its first answer, or a request other than Sluice's own `server/discover`
//! written to it) nothing is kept any more and what was kept is dropped: from then on its stderr
//! may carry a client's content. Bounded: [`BYTES`] plus one partial line of at most [`BYTES`].

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Lines kept.
pub const LINES: usize = 20;

/// Bytes kept in all (and the longest line kept).
pub const BYTES: usize = 4096;

/// One process's boot-time stderr.
#[derive(Default)]
pub struct Boot {
    /// Set once its first handshake completed: nothing is kept after it.
    done: AtomicBool,
    tail: Mutex<Tail>,
    /// Cancelled once its stderr reached its end (every holder of the pipe closed it).
    eof: CancellationToken,
}

#[derive(Default)]
struct Tail {
    lines: VecDeque<String>,
    bytes: usize,
    /// The line being written (no newline yet), at most [`BYTES`].
    partial: Vec<u8>,
}

impl Boot {
    /// Keeps `chunk` (as read from the pipe) unless the handshake completed.
    pub fn keep(&self, chunk: &[u8]) {
        // Read after the chunk arrived: a chunk read after the handshake completed is dropped,
        // whenever the child wrote it (a client's content reaches it only after that).
        if self.done.load(Ordering::Acquire) {
            return;
        }
        if let Ok(mut t) = self.tail.lock() {
            t.keep(chunk);
        }
    }

    /// Its first handshake completed: what was kept is dropped, nothing more is kept.
    pub fn completed(&self) {
        if !self.done.swap(true, Ordering::AcqRel) {
            if let Ok(mut t) = self.tail.lock() {
                *t = Tail::default();
            }
        }
    }

    /// Its stderr ended.
    pub fn ended(&self) {
        self.eof.cancel();
    }

    /// The lines kept (none once the handshake completed), after waiting at most `wait` for its
    /// stderr to end (a process that exited may have written its last lines just before).
    pub async fn lines(&self, wait: Duration) -> Vec<String> {
        let _ = tokio::time::timeout(wait, self.eof.cancelled()).await;
        if self.done.load(Ordering::Acquire) {
            return Vec::new();
        }
        let Ok(mut t) = self.tail.lock() else {
            return Vec::new();
        };
        let partial = std::mem::take(&mut t.partial);
        if !partial.is_empty() {
            t.push(&partial);
        }
        t.lines.iter().cloned().collect()
    }
}

impl Tail {
    fn keep(&mut self, chunk: &[u8]) {
        for (i, piece) in chunk.split(|b| *b == b'\n').enumerate() {
            if i > 0 {
                let line = std::mem::take(&mut self.partial);
                self.push(&line);
            }
            let room = BYTES.saturating_sub(self.partial.len());
            self.partial
                .extend_from_slice(&piece[..piece.len().min(room)]);
        }
    }

    fn push(&mut self, line: &[u8]) {
        let line = String::from_utf8_lossy(line)
            .trim_end_matches('\r')
            .to_owned();
        if line.trim().is_empty() {
            return;
        }
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.lines.len() > LINES || (self.bytes > BYTES && self.lines.len() > 1) {
            if let Some(old) = self.lines.pop_front() {
                self.bytes -= old.len();
            }
        }
    }
}

/// Logs a failed start of upstream `name` (`why`, content-free) with the `stderr` its process
/// wrote before its handshake, each line Debug-escaped: at warn, or at debug when `repeated`
/// (the same lines as the failed start before, which was logged at warn).
pub fn log_failed_start(name: &str, why: &str, stderr: &[String], repeated: bool) {
    let msg = "a stdio server did not start; stderr holds the last lines it wrote before its handshake (see Troubleshooting)";
    let reason = crate::escape::Escaped(why);
    if repeated {
        tracing::debug!(upstream = %name, reason = %reason, stderr_lines = stderr.len(), stderr = ?stderr, "{msg}");
    } else {
        tracing::warn!(upstream = %name, reason = %reason, stderr_lines = stderr.len(), stderr = ?stderr, "{msg}");
    }
}

/// A digest of `lines`, to tell a failed start that wrote the same as the one before.
pub fn digest(lines: &[String]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    lines.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_last_lines_are_kept_bounded_until_the_handshake_completes() {
        let b = Boot::default();
        for i in 0..30 {
            b.keep(format!("line {i}\n").as_bytes());
        }
        b.keep(b"no newline yet");
        b.ended();
        let got = b.lines(Duration::ZERO).await;
        assert_eq!(got.len(), LINES);
        assert_eq!(got.first().map(String::as_str), Some("line 11"));
        assert_eq!(got.last().map(String::as_str), Some("no newline yet"));
        b.completed();
        b.keep(b"after the handshake\n");
        assert!(
            b.lines(Duration::ZERO).await.is_empty(),
            "nothing is kept once the handshake completed"
        );
    }

    #[tokio::test]
    async fn long_lines_are_cut_and_the_whole_is_at_most_bytes() {
        let b = Boot::default();
        b.keep(&vec![b'x'; 3 * BYTES]);
        b.keep(b"\nshort\n");
        b.keep(&[b'y'; 3000]);
        b.keep(b"\n");
        let got = b.lines(Duration::ZERO).await;
        assert!(
            got.iter().map(String::len).sum::<usize>() <= BYTES,
            "{:?}",
            got.iter().map(String::len).collect::<Vec<_>>()
        );
        assert_eq!(got, ["short".to_owned(), "y".repeat(3000)]);
    }
}
