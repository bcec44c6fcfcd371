//! Sluice's logs in an in-process test binary: one subscriber for the whole binary (a second
//! cannot be installed), writing every event both to the running test's captured output (shown
//! when it fails) and to one buffer that [`wait_warning`] searches.
//!
//! The filter is `RUST_LOG` when set, `warn` otherwise.

use super::WAIT;
use std::sync::{Mutex, OnceLock};

fn log_buf() -> &'static Mutex<Vec<u8>> {
    static BUF: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();
    BUF.get_or_init(|| Mutex::new(Vec::new()))
}

/// Notified after every write to the buffer.
fn written() -> &'static tokio::sync::Notify {
    static N: OnceLock<tokio::sync::Notify> = OnceLock::new();
    N.get_or_init(tokio::sync::Notify::new)
}

/// Writes to the buffer and to the test's captured output.
struct Tee;

impl std::io::Write for Tee {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut v) = log_buf().lock() {
            v.extend_from_slice(b);
        }
        written().notify_waiters();
        // `print!` is what the test harness captures per test.
        print!("{}", String::from_utf8_lossy(b));
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the binary's subscriber (once; later calls do nothing).
pub(crate) fn capture() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let filter =
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
        let sub = tracing_subscriber::fmt()
            .with_writer(|| Tee)
            .with_ansi(false)
            .with_env_filter(filter)
            .finish();
        let _ = tracing::subscriber::set_global_default(sub);
    });
}

/// Whether any line logged so far holds `needle`.
pub(crate) fn contains(needle: &str) -> bool {
    log_buf()
        .lock()
        .map(|v| String::from_utf8_lossy(&v).contains(needle))
        .unwrap_or(false)
}

/// The lines logged so far that hold every one of `parts`.
pub(crate) fn lines_with(parts: &[&str]) -> Vec<String> {
    let text = log_buf()
        .lock()
        .map(|v| String::from_utf8_lossy(&v).into_owned())
        .unwrap_or_default();
    text.lines()
        .filter(|l| parts.iter().all(|p| l.contains(p)))
        .map(str::to_owned)
        .collect()
}

/// Waits (up to [`WAIT`]) for a warning line holding every one of `parts`.
pub(crate) async fn wait_warning(parts: &[&str]) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let next = written().notified();
        let text = log_buf()
            .lock()
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default();
        if let Some(line) = text
            .lines()
            .find(|l| l.contains("WARN") && parts.iter().all(|p| l.contains(p)))
        {
            return line.to_owned();
        }
        assert!(
            tokio::time::timeout_at(deadline, next).await.is_ok(),
            "no warning holding {parts:?} in the log:\n{text}"
        );
    }
}
