//! Sluice's warnings, captured for every test of the binary in one buffer.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use super::WAIT;

fn log_buf() -> &'static Mutex<Vec<u8>> {
    static BUF: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();
    BUF.get_or_init(|| Mutex::new(Vec::new()))
}

struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut v) = log_buf().lock() {
            v.extend_from_slice(b);
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Routes warnings of every test to one buffer (once per binary).
pub(crate) fn capture_logs() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let sub = tracing_subscriber::fmt().with_writer(|| LogWriter).with_ansi(false).with_max_level(tracing::Level::WARN).finish();
        let _ = tracing::subscriber::set_global_default(sub);
    });
}

/// Waits (up to [`WAIT`]) for a warning line holding every one of `parts`.
pub(crate) async fn wait_warning(parts: &[&str]) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let text = log_buf().lock().map(|v| String::from_utf8_lossy(&v).into_owned()).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains("WARN") && parts.iter().all(|p| l.contains(p))) {
            return line.to_owned();
        }
        assert!(tokio::time::Instant::now() < deadline, "no warning holding {parts:?} in the log:\n{text}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
