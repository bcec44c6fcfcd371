//! Stages 2–3, validation of a modern request, in the order the spec's conformance implies:
//! `_meta` (`-32602`), then headers against the body (`-32020`), then the version (`-32022`),
//! then the method (`-32601`, 404).
//!
//! Takes the parsed envelope and the request headers; gives the request's [`Meta`]. Refuses
//! with the typed [`GatewayError`] of the first rule broken.

pub mod headers;
pub mod meta;

pub use meta::Meta;

use crate::error::GatewayError;
use crate::mcp::method::Method;
use crate::mcp::version;

/// Refuses a version the modern front door does not serve.
pub fn check_version(meta: &Meta) -> Result<(), GatewayError> {
    if version::is_supported_modern(&meta.version) {
        Ok(())
    } else {
        Err(GatewayError::UnsupportedVersion { requested: meta.version.clone(), supported: version::SUPPORTED_MODERN.to_vec() })
    }
}

/// Refuses a method that does not exist on the modern wire (removed ones included) or whose
/// family no healthy upstream serves (`serves(cap)`).
pub fn check_method(method: &Method, serves: impl Fn(&str) -> bool) -> Result<(), GatewayError> {
    match method.capability() {
        Some(None) => Ok(()),
        Some(Some(cap)) if serves(cap) => Ok(()),
        _ => Err(GatewayError::MethodNotFound(method.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_and_unknown_methods_are_not_found() {
        for m in ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "unknown/method"] {
            assert!(matches!(check_method(&Method::parse(m), |_| true), Err(GatewayError::MethodNotFound(_))), "{m}");
        }
        assert!(check_method(&Method::ToolsList, |_| true).is_ok());
        assert!(check_method(&Method::ToolsList, |c| c != "tools").is_err());
        assert!(check_method(&Method::ServerDiscover, |_| false).is_ok());
    }
}
