//! Logging and tracing setup: `RUST_LOG` filters, human-readable lines on stderr, and, with
//! `[telemetry]`, OpenTelemetry spans exported over OTLP/HTTP (`export.rs`), built by `trace.rs`.
//!
//! Takes the environment and the `[telemetry]` section; installs the global subscriber (each
//! log line written whole, with line-breaking characters escaped: `escape::line_safe`). Spans
//! go only to the exporter (never into log lines), so with `[telemetry]` absent they are
//! disabled at their call sites and cost nothing. Refuses an exporter that cannot be built (a
//! startup error, never "off"); a second init is ignored, which tests rely on.

pub mod counted;
pub mod export;
pub mod trace;
pub mod tracestate;

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

pub use export::Otel;

/// A name a peer chose (a tool name, a URI), as a log line may show it: escaped (no control
/// character can forge a line), at most 200 characters, and never a query string.
pub fn peer_name(s: &str) -> String {
    let s = s.split(['?', '#']).next().unwrap_or("");
    let mut short: String = s.chars().take(200).collect();
    if short.len() < s.len() {
        short.push('…');
    }
    format!("{short:?}")
}

/// Installs the subscriber of `sluice check`: log lines on stderr, each through the one
/// redaction (`config/redact.rs`), like everything `check` prints; no spans. `default` is the
/// log filter when `RUST_LOG` is unset.
pub fn init_check(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let logs = tracing_subscriber::fmt::layer()
        .with_ansi(colours())
        .with_writer(|| Redacted(Vec::new()))
        .with_filter(filter);
    let _ = tracing_subscriber::registry().with(logs).try_init();
}

/// Colour codes only for a person at a terminal: never into a pipe, a file or a log collector
/// (where they garble every line), and never with `NO_COLOR` set.
fn colours() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// One log line, buffered, then written to stderr redacted when the formatter drops it.
struct Redacted(Vec<u8>);

impl std::io::Write for Redacted {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Redacted {
    fn drop(&mut self) {
        let line = crate::config::redact_text(&String::from_utf8_lossy(&self.0));
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            crate::escape::line_safe(&line).as_bytes(),
        );
    }
}

/// One log line, buffered, then written to stderr with every character that breaks or reorders
/// a line in some reader escaped (`escape::line_safe`): whatever a field holds, a line stays one.
struct LineSafe(Vec<u8>);

impl std::io::Write for LineSafe {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LineSafe {
    fn drop(&mut self) {
        let line = String::from_utf8_lossy(&self.0);
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            crate::escape::line_safe(&line).as_bytes(),
        );
    }
}

/// Installs the subscriber; `default` is the log filter when `RUST_LOG` is unset. With
/// `telemetry`, spans are exported too, and the returned [`Otel`] flushes them at shutdown.
pub fn init(
    default: &str,
    telemetry: Option<&crate::config::Telemetry>,
) -> Result<Option<Otel>, String> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Spans are for the exporter: a log line never carries them (nor their cost), whatever RUST_LOG says.
    let filter = filter.add_directive(
        format!("{}=off", trace::TARGET)
            .parse()
            .map_err(|e| format!("log filter: {e}"))?,
    );
    let logs = tracing_subscriber::fmt::layer()
        .with_ansi(colours())
        .with_writer(|| LineSafe(Vec::new()))
        .with_filter(filter);
    let Some(t) = telemetry else {
        let _ = tracing_subscriber::registry().with(logs).try_init();
        return Ok(None);
    };
    let (otel, layer) = export::start(t)?;
    let spans = layer.with_filter(Targets::new().with_target(trace::TARGET, LevelFilter::TRACE));
    if tracing_subscriber::registry()
        .with(logs)
        .with(spans)
        .try_init()
        .is_ok()
    {
        trace::enable();
    }
    Ok(Some(otel))
}
