//! Where a stdio upstream's stderr goes: dropped, or appended to a per-upstream file bounded by
//! rotation. A server's stderr is its diagnostics and may carry prompts or arguments, so it
//! never reaches Sluice's own log or the audit log, at any level, but for what it wrote before
//! its first handshake, logged when that start fails (`boot`).
//!
//! Takes a child's stderr pipe, the configured [`Stderr`] and the process's [`Boot`]; gives
//! nothing back (a task reads it to its end so the child never blocks on a full pipe). Bounded: the file is renamed to
//! `PATH.1` (replacing the one before) once it would pass `stderr_max_bytes`, so one upstream
//! holds at most twice that on disk. Refuses nothing: a file that cannot be opened or written
//! drops the bytes with one warning naming the upstream and the path, never the bytes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::ChildStderr;

use super::boot::Boot;
use crate::config::Stderr;

/// One upstream's stderr destination, shared by all its processes.
pub struct Sink {
    upstream: Arc<str>,
    file: Option<tokio::sync::Mutex<FileState>>,
    max: u64,
}

struct FileState {
    path: PathBuf,
    file: Option<tokio::fs::File>,
    size: u64,
    warned: bool,
}

impl Sink {
    /// A sink for upstream `upstream`.
    pub fn new(upstream: &str, to: &Stderr, max: u64) -> Sink {
        let file = match to {
            Stderr::Drop => None,
            Stderr::File(p) => Some(tokio::sync::Mutex::new(FileState { path: p.clone(), file: None, size: 0, warned: false })),
        };
        Sink { upstream: upstream.into(), file, max: max.max(1) }
    }

    /// Reads `pipe` to its end into the sink, and into `boot` until the handshake completed.
    pub async fn drain(self: Arc<Self>, mut pipe: ChildStderr, boot: Arc<Boot>) {
        let mut buf = vec![0u8; 8192];
        loop {
            let n = match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => return boot.ended(),
                Ok(n) => n,
            };
            boot.keep(&buf[..n]);
            if let Some(f) = &self.file {
                f.lock().await.write(&self.upstream, &buf[..n], self.max).await;
            }
        }
    }
}

impl FileState {
    async fn write(&mut self, upstream: &str, bytes: &[u8], max: u64) {
        let mut truncate = false;
        if self.size + bytes.len() as u64 > max && self.file.is_some() {
            self.file = None;
            // When it cannot be rotated it is started again: it never grows past the bound.
            truncate = tokio::fs::rename(&self.path, rotated(&self.path)).await.is_err();
        }
        if self.file.is_none() {
            let mut open = tokio::fs::OpenOptions::new();
            open.create(true);
            if truncate {
                open.write(true).truncate(true);
            } else {
                open.append(true);
            }
            let opened = open.open(&self.path).await;
            match opened {
                Ok(f) => {
                    self.size = f.metadata().await.map(|m| m.len()).unwrap_or(0);
                    self.file = Some(f);
                }
                Err(e) => return self.warn(upstream, &e),
            }
        }
        if let Some(f) = self.file.as_mut() {
            match f.write_all(bytes).await {
                Ok(()) => self.size += bytes.len() as u64,
                Err(e) => {
                    self.file = None;
                    self.warn(upstream, &e);
                }
            }
        }
    }

    fn warn(&mut self, upstream: &str, e: &std::io::Error) {
        if !std::mem::replace(&mut self.warned, true) {
            tracing::warn!(upstream = %upstream, path = %self.path.display(), error = %e.kind(), "cannot write the upstream's stderr file; its stderr is dropped");
        }
    }
}

/// `PATH.1`.
fn rotated(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".1");
    PathBuf::from(s)
}
