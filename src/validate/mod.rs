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
use crate::mcp::version;

/// Methods the modern front door serves, with the server capability each needs (if any).
const METHODS: &[(&str, Option<&str>)] = &[
    ("server/discover", None),
    ("subscriptions/listen", None),
    ("tools/list", Some("tools")),
    ("tools/call", Some("tools")),
    ("prompts/list", Some("prompts")),
    ("prompts/get", Some("prompts")),
    ("resources/list", Some("resources")),
    ("resources/read", Some("resources")),
    ("resources/templates/list", Some("resources")),
    ("completion/complete", Some("completions")),
];

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
pub fn check_method(method: &str, serves: impl Fn(&str) -> bool) -> Result<(), GatewayError> {
    match METHODS.iter().find(|(m, _)| *m == method) {
        Some((_, None)) => Ok(()),
        Some((_, Some(cap))) if serves(cap) => Ok(()),
        _ => Err(GatewayError::MethodNotFound(method.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_and_unknown_methods_are_not_found() {
        for m in ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "unknown/method"] {
            assert!(matches!(check_method(m, |_| true), Err(GatewayError::MethodNotFound(_))), "{m}");
        }
        assert!(check_method("tools/list", |_| true).is_ok());
        assert!(check_method("tools/list", |c| c != "tools").is_err());
        assert!(check_method("server/discover", |_| false).is_ok());
    }
}
