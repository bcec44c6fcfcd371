//! The closed set of client capabilities Sluice can bridge to a 2025-11-25 upstream.
//!
//! Takes a client's declared capabilities (the 2026-07-28 `clientCapabilities`, or the legacy
//! JSON built from them: the members read are the same); gives a small `Copy` set (sampling,
//! sampling with tools, elicitation in form mode, in URL mode, roots) that keys the session pool
//! and is exactly what a session declares upstream. Refuses nothing: everything else a client
//! declares (sub-members' contents, `experimental`, unknown keys) is dropped, so no
//! client-chosen bytes reach the pool key or the upstream, and capability sets that bridge the
//! same share sessions.

use serde_json::{json, Map, Value};

/// What a session declares: the capabilities Sluice can bridge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Bridged {
    /// `sampling`.
    pub sampling: bool,
    /// `sampling.tools` (tool use in sampling requests).
    pub sampling_tools: bool,
    /// `elicitation.form` (also an empty `elicitation`, as the specification reads it).
    pub elicitation_form: bool,
    /// `elicitation.url`.
    pub elicitation_url: bool,
    /// `roots`.
    pub roots: bool,
}

impl Bridged {
    /// Everything Sluice's own sessions declare (for lists, so servers that register tools only
    /// for sampling clients list them all).
    pub const LISTING: Bridged = Bridged {
        sampling: true,
        sampling_tools: false,
        elicitation_form: true,
        elicitation_url: true,
        roots: true,
    };

    /// The bridged subset of a capability object (members with a `null` value are absent).
    pub fn from_capabilities(caps: &Map<String, Value>) -> Bridged {
        let get = |k: &str| caps.get(k).filter(|v| !v.is_null());
        let has =
            |v: Option<&Value>, k: &str| v.and_then(|v| v.get(k)).is_some_and(|m| !m.is_null());
        let (sampling, elicitation) = (get("sampling"), get("elicitation"));
        let form = has(elicitation, "form");
        let url = has(elicitation, "url");
        Bridged {
            sampling: sampling.is_some(),
            sampling_tools: has(sampling, "tools"),
            elicitation_form: form || (elicitation.is_some() && !url),
            elicitation_url: url,
            roots: get("roots").is_some(),
        }
    }

    /// The same, from a JSON value (not an object: nothing bridged).
    pub fn from_value(caps: &Value) -> Bridged {
        caps.as_object()
            .map(Bridged::from_capabilities)
            .unwrap_or_default()
    }

    /// The legacy `ClientCapabilities` declaring exactly this set.
    pub fn to_legacy(self) -> Value {
        let mut caps = Map::new();
        if self.sampling {
            caps.insert(
                "sampling".into(),
                if self.sampling_tools {
                    json!({"tools": {}})
                } else {
                    json!({})
                },
            );
        }
        if self.elicitation_form || self.elicitation_url {
            let mut modes = Map::new();
            for (on, mode) in [
                (self.elicitation_form, "form"),
                (self.elicitation_url, "url"),
            ] {
                if on {
                    modes.insert(mode.into(), json!({}));
                }
            }
            caps.insert("elicitation".into(), Value::Object(modes));
        }
        if self.roots {
            caps.insert("roots".into(), json!({}));
        }
        Value::Object(caps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_sets_that_bridge_the_same_give_the_same_set() {
        let a = json!({"sampling": {"x": "random-1"}, "elicitation": {}, "roots": {"listChanged": true}, "experimental": {"y": 1}});
        let b = json!({"sampling": {"context": {}, "x": [2, 3]}, "elicitation": {"form": {"z": 0}}, "roots": {}});
        assert_eq!(Bridged::from_value(&a), Bridged::from_value(&b));
        assert_eq!(
            Bridged::from_value(&a).to_legacy(),
            json!({"sampling": {}, "elicitation": {"form": {}}, "roots": {}})
        );
        let c = json!({"sampling": {"tools": {"q": 1}}, "elicitation": {"url": {}}});
        let want = Bridged {
            sampling: true,
            sampling_tools: true,
            elicitation_url: true,
            ..Default::default()
        };
        assert_eq!(Bridged::from_value(&c), want);
    }

    #[test]
    fn the_declared_set_reads_back_as_itself_and_carries_no_client_bytes() {
        for bits in 0u8..32 {
            let b = Bridged {
                sampling: bits & 3 != 0,
                sampling_tools: bits & 2 != 0,
                elicitation_form: bits & 4 != 0,
                elicitation_url: bits & 8 != 0,
                roots: bits & 16 != 0,
            };
            assert_eq!(Bridged::from_value(&b.to_legacy()), b, "{bits:05b}");
        }
        let junk =
            json!({"sampling": {"secret": "x".repeat(64)}, "elicitation": null, "roots": null});
        assert_eq!(
            Bridged::from_value(&junk).to_legacy(),
            json!({"sampling": {}})
        );
        assert_eq!(
            Bridged::from_value(&json!("not an object")),
            Bridged::default()
        );
    }
}
