//! `[pins]` and `[[upstream]] pin`: tool pinning against changed definitions (docs/pins.md).
//!
//! Takes the `[pins]` table as written and each upstream's `pin`; gives [`Pins`]: where pins are
//! kept and the mode of each upstream. Refuses an unknown mode (serde names the key) and an
//! empty `file`. Pinning is on when `[pins]` is present or an upstream sets `pin`; an upstream
//! without `pin` takes `[pins] mode` (default `changes` with `[pins]`, `off` without).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What pinning does for an upstream's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema, Hash)]
#[serde(rename_all = "lowercase")]
pub enum PinMode {
    /// No pinning: its tools are served as listed.
    Off,
    /// A tool is pinned when first seen; a later definition that differs is quarantined until
    /// an operator accepts it.
    #[default]
    Changes,
    /// As `changes`, and a tool not pinned is quarantined too once the upstream has pins.
    Strict,
}

/// `[pins]` as written.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPins {
    /// A JSON file the pins are kept in (written atomically; re-read when it changes, so
    /// `sluice pins accept` reaches a running Sluice). Under `[cluster]` the pins are in Redis
    /// and this is refused. Neither: in memory, lost on restart. Read at start only.
    pub(super) file: Option<String>,
    /// The mode of an upstream without `pin`: `off`, `changes` (default) or `strict`.
    pub(super) mode: Option<PinMode>,
}

/// Tool pinning as configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pins {
    /// The JSON file the pins are kept in (none: Redis under `[cluster]`, else memory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The mode of an upstream without its own `pin`.
    pub mode: PinMode,
}

/// `[pins]`, or `None` when pinning is off everywhere (no `[pins]`, no upstream's `pin`).
pub(super) fn pins(
    raw: Option<RawPins>,
    any_pin: bool,
    cluster: bool,
) -> Result<Option<Pins>, super::Invalid> {
    let present = raw.is_some();
    let raw = raw.unwrap_or_default();
    if raw.file.as_deref().is_some_and(|f| f.trim().is_empty()) {
        return Err(super::Invalid(
            "pins.file is empty: give a path, or leave it out".into(),
        ));
    }
    if raw.file.is_some() && cluster {
        return Err(super::Invalid(
            "pins.file with [cluster]: the replicas keep their pins in Redis; remove pins.file"
                .into(),
        ));
    }
    if !present && !any_pin {
        return Ok(None);
    }
    let mode = raw.mode.unwrap_or(if present {
        PinMode::Changes
    } else {
        PinMode::Off
    });
    Ok(Some(Pins {
        file: raw.file,
        mode,
    }))
}

impl Pins {
    /// The mode of `upstream`, whose own `pin` is `own`.
    pub fn mode_of(&self, own: Option<PinMode>) -> PinMode {
        own.unwrap_or(self.mode)
    }
}

#[cfg(test)]
mod tests {
    use super::PinMode;
    use crate::config::Config;

    fn load(text: &str) -> Result<Config, String> {
        Config::from_toml(text, "pins.toml", &Default::default()).map_err(|e| e.0)
    }

    const UP: &str = "[[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\n";

    #[test]
    fn pinning_is_off_without_pins_and_changes_by_default_with_it() {
        assert_eq!(load(UP).unwrap().pins, None);
        let p = load(&format!("[pins]\n{UP}")).unwrap().pins.unwrap();
        assert_eq!((p.mode, p.file), (PinMode::Changes, None));
        let c = load(&format!("{UP}pin = \"strict\"\n")).unwrap();
        let p = c.pins.clone().unwrap();
        assert_eq!(
            p.mode,
            PinMode::Off,
            "an upstream's pin alone turns pinning on for it"
        );
        assert_eq!(p.mode_of(c.upstreams[0].pin), PinMode::Strict);
        let c = load(&format!(
            "[pins]\nmode = \"off\"\nfile = \"/tmp/p.json\"\n{UP}"
        ))
        .unwrap();
        assert_eq!(c.pins.unwrap().file.as_deref(), Some("/tmp/p.json"));
    }

    #[test]
    fn an_unknown_mode_an_empty_file_and_a_file_under_cluster_are_refused() {
        let e = load(&format!("[pins]\nmode = \"paranoid\"\n{UP}")).unwrap_err();
        assert!(e.contains("paranoid") || e.contains("mode"), "{e}");
        let e = load(&format!("{UP}pin = \"always\"\n")).unwrap_err();
        assert!(e.contains("pin"), "{e}");
        let e = load(&format!("[pins]\nfile = \" \"\n{UP}")).unwrap_err();
        assert!(e.contains("pins.file is empty"), "{e}");
        let e = load(&format!(
            "[pins]\nfile = \"p.json\"\n[cluster]\nredis_url = \"redis://127.0.0.1:1\"\nid = \"r1\"\nlisten = \"127.0.0.1:0\"\n[state]\nkeys = [\"1:YnJpZGdlLWEtdGVzdHMtc3RhdGUta2V5LTMyLWJ5dGVzIQ==\"]\n{UP}"
        ))
        .unwrap_err();
        assert!(e.contains("pins.file with [cluster]"), "{e}");
    }

    #[test]
    fn a_printed_config_with_pins_loads_back() {
        let c = load(&format!(
            "[pins]\nmode = \"strict\"\nfile = \"p.json\"\n{UP}pin = \"off\"\n"
        ))
        .unwrap();
        let printed = c.redacted();
        let again = load(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
        assert_eq!(again.pins, c.pins);
        assert_eq!(again.upstreams[0].pin, Some(PinMode::Off));
    }
}
