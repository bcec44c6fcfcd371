//! What rules and budgets may look at in an upstream's ask, decoded once into typed values.
//!
//! Takes an ask's method and its `params` as raw JSON text; gives an [`AskShape`]: `maxTokens`
//! read exactly (`1e6` is one million, not "no number"), `includeContext`, whether tools or a
//! system prompt are present, model hint names, the elicitation mode and a URL's host. Never
//! its content (messages, prompts, schemas). Refuses an ask whose deciding members do not have
//! their schema's type: a `maxTokens` that is not a non-negative integer, an unknown
//! `includeContext` or `mode`, a URL-mode elicitation without an absolute URL.

use std::borrow::Cow;

use serde_json::value::RawValue;

use crate::mcp::jsonrpc::RawObject;
use crate::mcp::method::Method;
use crate::mcp::number::Exact;

/// Sampling `includeContext`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeContext {
    /// `none` (also when absent).
    #[default]
    None,
    /// `thisServer`.
    ThisServer,
    /// `allServers`.
    AllServers,
}

impl IncludeContext {
    /// The value as the schema spells it (what policy files match).
    pub fn as_str(self) -> &'static str {
        match self {
            IncludeContext::None => "none",
            IncludeContext::ThisServer => "thisServer",
            IncludeContext::AllServers => "allServers",
        }
    }
}

/// Elicitation `mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ElicitationMode {
    /// `form` (also when absent).
    #[default]
    Form,
    /// `url`.
    Url,
}

impl ElicitationMode {
    /// The value as the schema spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ElicitationMode::Form => "form",
            ElicitationMode::Url => "url",
        }
    }
}

/// The deciding parts of one ask.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AskShape {
    /// Sampling: `maxTokens`, exact, saturating at `u64::MAX` (0 for other asks).
    pub max_tokens: u64,
    /// Sampling: `includeContext`.
    pub include_context: IncludeContext,
    /// Sampling: `tools` present and not null.
    pub tools_present: bool,
    /// Sampling: how many tools it offers (the length of `tools` when it is an array).
    pub tools_offered: usize,
    /// Sampling: `systemPrompt` present and not null.
    pub system_prompt_present: bool,
    /// Sampling: `modelPreferences.hints[].name`.
    pub model_hints: Vec<String>,
    /// Elicitation: the mode.
    pub mode: ElicitationMode,
    /// Elicitation (URL mode): the URL's host, lower-cased.
    pub url_host: Option<String>,
    /// The size of the params as received (bytes).
    pub bytes: usize,
}

fn text(raw: &str) -> Option<Cow<'_, str>> {
    serde_json::from_str::<Cow<'_, str>>(raw).ok()
}

fn present(obj: &RawObject<'_>, key: &str) -> bool {
    obj.get(key).is_some_and(|v| v != "null")
}

impl AskShape {
    /// Reads the shape of an ask (`params` raw JSON; `None` when the ask has no params).
    pub fn read(method: &Method, params: Option<&str>) -> Result<AskShape, String> {
        let raw = params.unwrap_or("{}");
        let obj: RawObject<'_> = serde_json::from_str(raw)
            .map_err(|_| format!("the params of {method} must be an object"))?;
        let mut shape = AskShape {
            bytes: raw.len(),
            ..AskShape::default()
        };
        match method {
            Method::SamplingCreateMessage => {
                let max = obj
                    .get("maxTokens")
                    .ok_or("sampling/createMessage needs maxTokens (a non-negative integer)")?;
                shape.max_tokens = Exact::parse(max).and_then(|n| n.as_count()).ok_or(
                    "the maxTokens of sampling/createMessage must be a non-negative integer",
                )?;
                shape.include_context = match obj.get("includeContext") {
                    None | Some("null") => IncludeContext::None,
                    Some(v) => match text(v).as_deref() {
                        Some("none") => IncludeContext::None,
                        Some("thisServer") => IncludeContext::ThisServer,
                        Some("allServers") => IncludeContext::AllServers,
                        _ => return Err("the includeContext of sampling/createMessage must be none, thisServer or allServers".into()),
                    },
                };
                shape.tools_present = present(&obj, "tools");
                shape.tools_offered = obj
                    .get("tools")
                    .and_then(|t| serde_json::from_str::<Vec<serde::de::IgnoredAny>>(t).ok())
                    .map_or(0, |t| t.len());
                shape.system_prompt_present = present(&obj, "systemPrompt");
                shape.model_hints = model_hints(obj.get("modelPreferences"));
            }
            Method::ElicitationCreate => {
                shape.mode = match obj.get("mode") {
                    None | Some("null") => ElicitationMode::Form,
                    Some(v) => match text(v).as_deref() {
                        Some("form") => ElicitationMode::Form,
                        Some("url") => ElicitationMode::Url,
                        _ => {
                            return Err("the mode of elicitation/create must be form or url".into())
                        }
                    },
                };
                if shape.mode == ElicitationMode::Url {
                    let url = obj
                        .get("url")
                        .and_then(text)
                        .ok_or("a URL-mode elicitation/create needs a url")?;
                    let uri: http::Uri = url
                        .parse()
                        .map_err(|_| "the url of elicitation/create must be an absolute URL")?;
                    let host = uri
                        .host()
                        .ok_or("the url of elicitation/create must be an absolute URL")?;
                    // `evil.example.` is `evil.example`: the root label's dot does not make another host.
                    let host = host
                        .trim_start_matches('[')
                        .trim_end_matches(']')
                        .trim_end_matches('.');
                    shape.url_host = Some(host.to_ascii_lowercase());
                }
            }
            _ => {}
        }
        Ok(shape)
    }
}

fn model_hints(prefs: Option<&str>) -> Vec<String> {
    let Some(prefs) = prefs.and_then(|p| serde_json::from_str::<RawObject<'_>>(p).ok()) else {
        return Vec::new();
    };
    let Some(hints) = prefs
        .get("hints")
        .and_then(|h| serde_json::from_str::<Vec<&RawValue>>(h).ok())
    else {
        return Vec::new();
    };
    hints
        .iter()
        .filter_map(|h| serde_json::from_str::<RawObject<'_>>(h.get()).ok())
        .filter_map(|h| h.get("name").and_then(text).map(Cow::into_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampling(params: &str) -> Result<AskShape, String> {
        AskShape::read(&Method::SamplingCreateMessage, Some(params))
    }

    #[test]
    fn max_tokens_is_read_exactly_in_every_spelling() {
        for spelling in [
            "1e6",
            "1000000.0",
            "1E6",
            "10e5",
            "1000000",
            "1000000e0",
            "0.1e7",
        ] {
            assert_eq!(
                sampling(&format!(r#"{{"maxTokens":{spelling}}}"#))
                    .unwrap()
                    .max_tokens,
                1_000_000,
                "{spelling}"
            );
        }
        assert_eq!(
            sampling(r#"{"maxTokens":1e400}"#).unwrap().max_tokens,
            u64::MAX
        );
        assert_eq!(
            sampling(r#"{"maxTokens":5,"maxTokens":1e9}"#)
                .unwrap()
                .max_tokens,
            1_000_000_000,
            "the last of a repeated key"
        );
        for bad in [
            r#"{"maxTokens":1.5}"#,
            r#"{"maxTokens":-1}"#,
            r#"{"maxTokens":"100"}"#,
            r#"{"maxTokens":null}"#,
            "{}",
            "[]",
        ] {
            assert!(sampling(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn deciding_members_are_decoded() {
        let s = sampling(
            r#"{"maxTokens":5,"includeContext":"\u0061llServers","tools":[],"systemPrompt":null,"modelPreferences":{"hints":[{"name":"c\u006caude"},{"x":1}]}}"#,
        )
        .unwrap();
        assert_eq!(s.include_context, IncludeContext::AllServers);
        assert!(s.tools_present && !s.system_prompt_present);
        assert_eq!(s.model_hints, vec!["claude".to_owned()]);
        assert!(sampling(r#"{"maxTokens":5,"includeContext":"everything"}"#).is_err());
        let e = AskShape::read(
            &Method::ElicitationCreate,
            Some(r#"{"mode":"u\u0072l","url":"https://Login.Example.com:8443/x?y"}"#),
        )
        .unwrap();
        assert_eq!(
            (e.mode, e.url_host.as_deref()),
            (ElicitationMode::Url, Some("login.example.com"))
        );
        assert!(AskShape::read(
            &Method::ElicitationCreate,
            Some(r#"{"mode":"url","url":"not a url"}"#)
        )
        .is_err());
        let dot = AskShape::read(
            &Method::ElicitationCreate,
            Some(r#"{"mode":"url","url":"https://evil.example./login"}"#),
        )
        .unwrap();
        assert_eq!(dot.url_host.as_deref(), Some("evil.example"));
        assert!(AskShape::read(&Method::ElicitationCreate, Some(r#"{"mode":"URL"}"#)).is_err());
        assert_eq!(AskShape::read(&Method::RootsList, None).unwrap().bytes, 2);
    }
}
