//! Stages 2–3, validation of a modern request, in the order the spec's conformance implies:
//! `_meta` (`-32602`), then headers against the body (`-32020`), then the version (`-32022`),
//! then the method (`-32601`, 404).
//!
//! Takes the parsed envelope and the request headers; gives the request's [`Meta`]. Refuses
//! with the [`ValidateError`] of the first rule broken (mapped to its status and code, with
//! every other stage's error, in `error.rs`).

pub mod headers;
pub mod meta;

pub use meta::Meta;

use crate::mcp::method::Method;
use crate::mcp::version;

/// Why validation refused a request: the first rule it broke.
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    /// The `_meta` envelope is missing or mistyped (`-32602`).
    #[error("{0}")]
    Meta(String),
    /// A mirrored header is missing, undecodable or disagrees with the body (`-32020`).
    #[error("{0}")]
    Headers(String),
    /// The requested protocol version is not served (`-32022`).
    #[error("unsupported protocol version {requested:?}: use one of {supported:?}")]
    Version {
        /// What the request asked for.
        requested: String,
        /// What Sluice serves.
        supported: Vec<&'static str>,
    },
    /// The method does not exist, or its family is not served (`-32601`, 404).
    #[error("method {0:?} is not served by this endpoint")]
    Method(String),
}

/// Refuses a version the modern front door does not serve.
pub fn check_version(meta: &Meta) -> Result<(), ValidateError> {
    if version::is_supported_modern(&meta.version) {
        Ok(())
    } else {
        Err(ValidateError::Version {
            requested: meta.version.clone(),
            supported: version::SUPPORTED_MODERN.to_vec(),
        })
    }
}

/// Refuses a method that does not exist on the modern wire (removed ones included) or whose
/// family no healthy upstream serves (`serves(cap)`).
pub fn check_method(method: &Method, serves: impl Fn(&str) -> bool) -> Result<(), ValidateError> {
    match method.capability() {
        Some(None) => Ok(()),
        Some(Some(cap)) if serves(cap) => Ok(()),
        _ => Err(ValidateError::Method(method.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_and_unknown_methods_are_not_found() {
        for m in [
            "initialize",
            "ping",
            "logging/setLevel",
            "resources/subscribe",
            "resources/unsubscribe",
            "unknown/method",
        ] {
            assert!(
                matches!(
                    check_method(&Method::parse(m), |_| true),
                    Err(ValidateError::Method(_))
                ),
                "{m}"
            );
        }
        assert!(check_method(&Method::ToolsList, |_| true).is_ok());
        assert!(check_method(&Method::ToolsList, |c| c != "tools").is_err());
        assert!(check_method(&Method::ServerDiscover, |_| false).is_ok());
    }
}
