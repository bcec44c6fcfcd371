//! Where a stdio upstream's stderr goes: dropped, or appended to a per-upstream file bounded by
//! rotation. A server's stderr is its diagnostics and may carry prompts or arguments, so it
//! never reaches Sluice's own log or the audit log, at any level, but for what it wrote before
//! its first handshake, logged when that start fails (`boot`).
//!
//! Takes a child's stderr pipe, the configured [`Stderr`] and the process's [`Boot`]; gives
//! nothing back (a task reads it to its end so the child never blocks on a full pipe). Bounded:
//! the file is renamed to `PATH.1` (replacing the one before) once it would pass
//! `stderr_max_bytes`, so one upstream holds at most twice that on disk. Refuses to write
//! anything but Sluice's own file: every open (the first, and each after a rotation or a
//! truncation) is `O_NOFOLLOW | O_APPEND | O_CLOEXEC` (and `O_NONBLOCK`, so a FIFO planted there
//! cannot hang it), and the opened descriptor must be a regular file owned by Sluice's
//! effective uid with one link ([`check`]): a symlink or hard link planted at the path (by a
//! server, or anyone who can write its directory) cannot make Sluice, root or not, append to or
//! truncate another file; a file is truncated only after that check, on its descriptor. A file
//! that cannot be opened, is refused or cannot be written drops the bytes with one warning
//! naming the upstream, the path and what to do, never the bytes.

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
            Stderr::File(p) => Some(tokio::sync::Mutex::new(FileState {
                path: p.clone(),
                file: None,
                size: 0,
                warned: false,
            })),
        };
        Sink {
            upstream: upstream.into(),
            file,
            max: max.max(1),
        }
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
                f.lock()
                    .await
                    .write(&self.upstream, &buf[..n], self.max)
                    .await;
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
            truncate = tokio::fs::rename(&self.path, rotated(&self.path))
                .await
                .is_err();
        }
        if self.file.is_none() {
            let path = self.path.clone();
            let opened = tokio::task::spawn_blocking(move || open_own(&path, truncate))
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e)));
            match opened {
                Ok((f, size)) => {
                    self.size = size;
                    self.file = Some(tokio::fs::File::from_std(f));
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
            tracing::warn!(upstream = %upstream, path = %self.path.display(), error = %e, "cannot write the upstream's stderr file; its stderr is dropped");
        }
    }
}

/// Opens `path` to append to (created when missing), without following a symlink there, and
/// truncated when `truncate` (after the check, on the descriptor); gives it with its size.
/// Refuses what [`check`] refuses.
fn open_own(path: &Path, truncate: bool) -> std::io::Result<(std::fs::File, u64)> {
    use std::os::unix::fs::OpenOptionsExt;
    let flags = nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC | nix::libc::O_NONBLOCK;
    let f = match std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(flags)
        .open(path)
    {
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(refused("it is a symbolic link"))
        }
        Err(e) if e.raw_os_error() == Some(nix::libc::ENXIO) => {
            return Err(refused("it is not a regular file"))
        }
        other => other?,
    };
    let meta = f.metadata()?;
    check(&meta, nix::unistd::geteuid().as_raw()).map_err(refused)?;
    if truncate {
        f.set_len(0)?;
        return Ok((f, 0));
    }
    Ok((f, meta.len()))
}

/// Whether `meta` (of an opened descriptor, or of the path with `lstat`) is a file Sluice may
/// write a server's stderr to: a regular file owned by `euid` with one link. Gives why not.
pub fn check(meta: &std::fs::Metadata, euid: u32) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    if meta.file_type().is_symlink() {
        return Err("it is a symbolic link".into());
    }
    if !meta.file_type().is_file() {
        return Err("it is not a regular file".into());
    }
    if meta.uid() != euid {
        return Err(format!(
            "it is owned by uid {}, not by Sluice's uid {euid}",
            meta.uid()
        ));
    }
    if meta.nlink() != 1 {
        return Err(format!("it has {} hard links", meta.nlink()));
    }
    Ok(())
}

/// The refusal of a stderr file: why, and what to do.
fn refused(why: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!("refused: {why}; Sluice writes a server's stderr only to a regular file of its own with one link: remove what is at that path (Sluice creates the file), and keep its directory writable by Sluice's user alone"),
    )
}

/// `PATH.1`.
fn rotated(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".1");
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory of this test's own.
    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sluice-stderr-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("a scratch directory");
        d
    }

    fn sink(path: &Path) -> FileState {
        FileState {
            path: path.to_owned(),
            file: None,
            size: 0,
            warned: false,
        }
    }

    #[tokio::test]
    async fn a_symlink_at_the_path_is_refused_and_its_target_is_unchanged() {
        let d = dir("symlink");
        let victim = d.join("victim");
        std::fs::write(&victim, "precious\n").expect("the victim file");
        let path = d.join("server.log");
        std::os::unix::fs::symlink(&victim, &path).expect("a symlink at the sink path");
        let mut f = sink(&path);
        f.write("up", b"from the server\n", 1 << 20).await;
        assert_eq!(
            std::fs::read_to_string(&victim).expect("the victim"),
            "precious\n"
        );
        assert!(f.file.is_none() && f.warned, "the symlink was refused");
        assert!(std::fs::symlink_metadata(&path)
            .expect("still there")
            .file_type()
            .is_symlink());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[tokio::test]
    async fn a_hard_link_at_the_path_is_refused_and_its_other_name_is_unchanged() {
        let d = dir("hardlink");
        let victim = d.join("victim");
        std::fs::write(&victim, "precious\n").expect("the victim file");
        let path = d.join("server.log");
        std::fs::hard_link(&victim, &path).expect("a hard link at the sink path");
        let mut f = sink(&path);
        f.write("up", b"from the server\n", 1 << 20).await;
        f.write("up", &[b'x'; 64], 8).await;
        assert_eq!(
            std::fs::read_to_string(&victim).expect("the victim"),
            "precious\n"
        );
        assert!(f.file.is_none() && f.warned, "the hard link was refused");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[tokio::test]
    async fn a_symlink_planted_before_a_rotation_that_fails_is_not_truncated_through() {
        let d = dir("rotate");
        let victim = d.join("victim");
        std::fs::write(&victim, "precious\n").expect("the victim file");
        let path = d.join("server.log");
        let mut f = sink(&path);
        f.write("up", b"first line\n", 32).await;
        assert!(
            f.file.is_some() && !f.warned,
            "Sluice's own file is written"
        );
        // While Sluice holds its file open, the path is swapped for a symlink and a non-empty
        // directory blocks the rotation: the file is then started again (truncated) in place.
        std::fs::remove_file(&path).expect("remove");
        std::os::unix::fs::symlink(&victim, &path).expect("plant a symlink");
        std::fs::create_dir_all(rotated(&path).join("x")).expect("block the rotation");
        f.write("up", &[b'y'; 40], 32).await;
        assert_eq!(
            std::fs::read_to_string(&victim).expect("the victim"),
            "precious\n"
        );
        assert!(
            f.file.is_none() && f.warned,
            "the reopen refused the symlink"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_file_of_another_owner_is_refused() {
        let d = dir("owner");
        let p = d.join("f");
        std::fs::write(&p, "").expect("a file");
        let meta = std::fs::symlink_metadata(&p).expect("meta");
        let me = nix::unistd::geteuid().as_raw();
        assert_eq!(check(&meta, me), Ok(()));
        assert!(check(&meta, me.wrapping_add(1)).is_err_and(|e| e.contains("owned by uid")));
        let _ = std::fs::remove_dir_all(&d);
    }
}
