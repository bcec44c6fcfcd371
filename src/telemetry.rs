//! Logging setup: `RUST_LOG` filters, human-readable lines on stderr.
//!
//! Takes the environment; installs the global subscriber. Refuses nothing (a second init is
//! ignored, which tests rely on).

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

/// Installs the subscriber; `default` is the filter when `RUST_LOG` is unset.
pub fn init(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
