//! Approval rules (`policies/*.toml`): ordered, first match wins.
//!
//! Takes policy files; gives [`Rules`] that judge a [`Subject`] (a tool call or an upstream's
//! ask) as allow, deny (with a reason) or approve. Refuses at load an unknown key or effect, or
//! a bad value, naming the file and the line.

use std::path::Path;

use serde::Deserialize;

pub use super::operator::ByOperator;

/// What a rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Let it go on.
    Allow,
    /// Refuse it.
    Deny,
    /// Ask the user first (a Sluice-originated elicitation round).
    Approve,
    /// Leave matching tools, prompts and resources out of the principal's lists, and answer a
    /// call of one as of an unknown one (visibility; `policy/visibility.rs`).
    Hide,
    /// Show matching items (an exception to a later `hide`).
    Show,
}

impl Effect {
    /// Whether it decides what a principal sees (`hide`, `show`), not what a call or ask does.
    pub fn is_visibility(self) -> bool {
        matches!(self, Effect::Hide | Effect::Show)
    }
}

/// The match conditions of a rule; every condition present must hold.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Match {
    /// Principal ids.
    #[serde(default)]
    pub principal: Vec<String>,
    /// Groups (any).
    #[serde(default)]
    pub group: Vec<String>,
    /// Upstream names.
    #[serde(default)]
    pub upstream: Vec<String>,
    /// Methods: `tools/call`, `sampling/createMessage`, `elicitation/create`, `roots/list`, …
    #[serde(default)]
    pub method: Vec<String>,
    /// Tool name globs (`*` and `?`), the upstream's own names.
    #[serde(default)]
    pub tool: Vec<String>,
    /// Visibility: prompt name globs, the upstream's own names.
    #[serde(default)]
    pub prompt: Vec<String>,
    /// Visibility: resource URI and URI-template globs.
    #[serde(default)]
    pub resource: Vec<String>,
    /// The tool's `annotations.destructiveHint`.
    pub destructive: Option<bool>,
    /// The tool's `annotations.readOnlyHint`.
    pub read_only: Option<bool>,
    /// Sampling: `includeContext` values (`none`, `thisServer`, `allServers`).
    #[serde(default)]
    pub include_context: Vec<String>,
    /// Sampling: `maxTokens` strictly above this.
    pub max_tokens_above: Option<u64>,
    /// Sampling: whether `tools` are present.
    pub tools_present: Option<bool>,
    /// Sampling: whether a `systemPrompt` is present.
    pub system_prompt_present: Option<bool>,
    /// Sampling: a model hint name glob.
    #[serde(default)]
    pub model_hint: Vec<String>,
    /// Elicitation: `form` or `url`.
    #[serde(default)]
    pub elicitation_mode: Vec<String>,
    /// Elicitation (URL mode): the URL's host globs.
    #[serde(default)]
    pub url_host: Vec<String>,
}

/// One rule.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Its name (audit records name the rule that decided).
    pub name: String,
    /// The conditions.
    #[serde(rename = "match", default)]
    pub when: Match,
    /// The effect.
    pub effect: Effect,
    /// Why (for deny): said to the client.
    pub reason: Option<String>,
    /// Who approves an `approve` rule's tool call: absent, the user (an elicitation round);
    /// `"operator"`, an operator through the admin API while the call is held
    /// (`approvals/`). `"group:NAME"` is reserved for operator groups and refused until they
    /// exist: name the operators in `approvers` instead.
    pub approver: Option<String>,
    /// With `approver = "operator"`: the operator names that may decide (any operator when
    /// empty).
    #[serde(default)]
    pub approvers: Vec<String>,
    /// With `approver = "operator"`: the argument names whose values the operator sees (every
    /// other argument is listed by name only).
    #[serde(default)]
    pub show_arguments: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    rule: Vec<Rule>,
}

/// What is being judged.
#[derive(Debug, Clone, Default)]
pub struct Subject<'a> {
    /// The principal id.
    pub principal: &'a str,
    /// Its groups.
    pub groups: &'a [String],
    /// The upstream.
    pub upstream: &'a str,
    /// `tools/call` or the ask's method.
    pub method: &'a str,
    /// The tool (upstream's own name) the call or ask belongs to.
    pub tool: Option<&'a str>,
    /// `annotations.destructiveHint` of that tool.
    pub destructive: bool,
    /// `annotations.readOnlyHint` of that tool.
    pub read_only: bool,
    /// The ask's deciding parts (sampling or elicitation), decoded, when judging an ask.
    pub ask: Option<&'a super::shape::AskShape>,
}

/// A decision and the rule that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The effect (`Allow` when no rule matched).
    pub effect: Effect,
    /// The deciding rule's name, if any.
    pub rule: Option<String>,
    /// The reason given by a deny rule.
    pub reason: Option<String>,
    /// For an `approve` rule with `approver = "operator"`: who decides, what they see.
    pub operator: Option<ByOperator>,
}

/// Ordered rules from one or more files.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub(super) rules: Vec<Rule>,
}

impl Rules {
    /// Loads files in order (their rules are concatenated).
    pub fn load(paths: &[impl AsRef<Path>]) -> Result<Rules, String> {
        let mut rules = Vec::new();
        for p in paths {
            let p = p.as_ref();
            let text = std::fs::read_to_string(p)
                .map_err(|e| format!("{}: cannot read policy file: {e}", p.display()))?;
            let file = Rules::parse(&text, &p.display().to_string())?;
            if file.is_empty() {
                return Err(format!(
                    "{}: holds no [[rule]]; a policy file must decide something (add rules or remove it from policies)",
                    p.display()
                ));
            }
            rules.extend(file.rules);
        }
        Ok(Rules { rules })
    }

    /// Parses one policy file's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Rules, String> {
        let file: File = toml::from_str(text)
            .map_err(|e| crate::config::describe_toml_error(text, origin, e))?;
        for r in &file.rule {
            check_conditions(r)
                .and_then(|()| super::operator::check(&keys(r)))
                .map_err(|why| format!("{origin}: rule {:?}: {why}", r.name))?;
        }
        Ok(Rules { rules: file.rule })
    }

    /// How many rules there are.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The upstream names the visibility rules match on that `known` does not hold (such a
    /// rule would hide nothing: the config refuses it).
    pub fn unknown_upstreams<'a>(
        &'a self,
        known: &'a [String],
    ) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.rules
            .iter()
            .filter(|r| r.effect.is_visibility())
            .flat_map(|r| {
                r.when
                    .upstream
                    .iter()
                    .map(move |u| (r.name.as_str(), u.as_str()))
            })
            .filter(move |(_, u)| !known.iter().any(|k| k == u))
    }

    /// The first matching rule's decision on a call or an ask (visibility rules decide
    /// neither); allow when none matches.
    pub fn judge(&self, s: &Subject<'_>) -> Decision {
        for r in self.rules.iter().filter(|r| !r.effect.is_visibility()) {
            // An operator's approval holds a tool call; it never matches an upstream's ask.
            let operator = r.approver.as_deref() == Some("operator");
            if !(operator && s.ask.is_some()) && matches(&r.when, s) {
                return Decision {
                    effect: r.effect,
                    rule: Some(r.name.clone()),
                    reason: r.reason.clone(),
                    operator: super::operator::by_operator(&keys(r)),
                };
            }
        }
        Decision {
            effect: Effect::Allow,
            rule: None,
            reason: None,
            operator: None,
        }
    }
}

fn keys(r: &Rule) -> super::operator::Keys<'_> {
    super::operator::Keys {
        approve: r.effect == Effect::Approve,
        approver: r.approver.as_deref(),
        approvers: &r.approvers,
        show_arguments: &r.show_arguments,
        methods: &r.when.method,
    }
}

/// A rule whose conditions can never all hold for what its effect judges is refused: it would
/// silently decide nothing.
fn check_conditions(r: &Rule) -> Result<(), String> {
    let m = &r.when;
    let asks = !m.method.is_empty()
        || !m.include_context.is_empty()
        || m.max_tokens_above.is_some()
        || m.tools_present.is_some()
        || m.system_prompt_present.is_some()
        || !m.model_hint.is_empty()
        || !m.elicitation_mode.is_empty()
        || !m.url_host.is_empty();
    if r.effect.is_visibility() && asks {
        return Err("a hide or show rule matches on who, the upstream, names and annotations; method and ask conditions never hold for a listed item".into());
    }
    if !r.effect.is_visibility() && (!m.prompt.is_empty() || !m.resource.is_empty()) {
        return Err("prompt and resource conditions are for hide and show rules; a call or ask rule with them never matches".into());
    }
    let families = [
        !m.tool.is_empty(),
        !m.prompt.is_empty(),
        !m.resource.is_empty(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    if families > 1 {
        return Err("tool, prompt and resource globs each match their own family; one rule with two never matches (write two rules)".into());
    }
    if (m.destructive.is_some() || m.read_only.is_some())
        && (!m.prompt.is_empty() || !m.resource.is_empty())
    {
        return Err("destructive and read_only are tool annotations; with prompt or resource globs the rule never matches".into());
    }
    let globs = [&m.tool, &m.prompt, &m.resource, &m.model_hint, &m.url_host];
    if globs.iter().any(|g| g.iter().any(String::is_empty)) {
        return Err("an empty glob matches nothing; use \"*\" for every name".into());
    }
    Ok(())
}

pub(super) fn any_eq(list: &[String], v: &str) -> bool {
    list.is_empty() || list.iter().any(|x| x == v)
}

pub(super) fn any_glob(list: &[String], v: Option<&str>) -> bool {
    list.is_empty() || v.is_some_and(|v| list.iter().any(|g| glob(g, v)))
}

/// `*` matches any run, `?` one character.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

fn matches(m: &Match, s: &Subject<'_>) -> bool {
    let bool_is = |want: Option<bool>, got: bool| want.is_none_or(|w| w == got);
    // Ask conditions hold only for an ask; a tool call never matches them.
    let ask = |f: &dyn Fn(&super::shape::AskShape) -> bool| s.ask.is_some_and(f);
    any_eq(&m.principal, s.principal)
        && (m.group.is_empty() || m.group.iter().any(|g| s.groups.contains(g)))
        && any_eq(&m.upstream, s.upstream)
        && any_eq(&m.method, s.method)
        && any_glob(&m.tool, s.tool)
        && bool_is(m.destructive, s.destructive)
        && bool_is(m.read_only, s.read_only)
        && (m.include_context.is_empty()
            || ask(&|a| any_eq(&m.include_context, a.include_context.as_str())))
        && m.max_tokens_above
            .is_none_or(|cap| ask(&|a| a.max_tokens > cap))
        && m.tools_present
            .is_none_or(|w| ask(&|a| a.tools_present == w))
        && m.system_prompt_present
            .is_none_or(|w| ask(&|a| a.system_prompt_present == w))
        && (m.model_hint.is_empty()
            || ask(&|a| {
                a.model_hints
                    .iter()
                    .any(|n| any_glob(&m.model_hint, Some(n)))
            }))
        && (m.elicitation_mode.is_empty() || ask(&|a| any_eq(&m.elicitation_mode, a.mode.as_str())))
        && (m.url_host.is_empty() || ask(&|a| any_glob(&m.url_host, a.url_host.as_deref())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::shape::AskShape;

    fn shape(params: &str) -> AskShape {
        AskShape::read(
            &crate::mcp::method::Method::SamplingCreateMessage,
            Some(params),
        )
        .unwrap()
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let r = Rules::parse(
            "[[rule]]\nname = \"ctx\"\nmatch = { method = [\"sampling/createMessage\"], include_context = [\"thisServer\", \"allServers\"] }\neffect = \"deny\"\nreason = \"no context\"\n\
             [[rule]]\nname = \"tools\"\nmatch = { method = [\"sampling/createMessage\"], tools_present = true }\neffect = \"approve\"\n",
            "p.toml",
        )
        .unwrap();
        let ask = shape(r#"{"maxTokens":1,"includeContext": "allServers", "tools": [{}]}"#);
        let s = Subject {
            method: "sampling/createMessage",
            ask: Some(&ask),
            ..Default::default()
        };
        assert_eq!(r.judge(&s).rule.as_deref(), Some("ctx"));
        let ask = shape(r#"{"tools": [{}], "maxTokens": 5}"#);
        let s = Subject {
            method: "sampling/createMessage",
            ask: Some(&ask),
            ..Default::default()
        };
        assert_eq!(r.judge(&s).effect, Effect::Approve);
        let ask = shape(r#"{"maxTokens": 5}"#);
        assert_eq!(
            r.judge(&Subject {
                method: "sampling/createMessage",
                ask: Some(&ask),
                ..Default::default()
            })
            .effect,
            Effect::Allow
        );
    }

    #[test]
    fn a_misspelled_key_or_unknown_effect_is_refused_with_its_line() {
        let e = Rules::parse(
            "[[rule]]\nname = \"x\"\nmatch = { methd = [\"tools/call\"] }\neffect = \"deny\"\n",
            "p.toml",
        )
        .unwrap_err();
        assert!(
            e.starts_with("p.toml:3:") && e.contains("did you mean `method`?"),
            "{e}"
        );
        let e = Rules::parse("[[rule]]\nname = \"x\"\neffect = \"maybe\"\n", "p.toml").unwrap_err();
        assert!(e.starts_with("p.toml:3:"), "{e}");
    }

    #[test]
    fn an_operator_rule_holds_tool_calls_only_and_its_keys_are_checked() {
        let r = Rules::parse(
            "[[rule]]\nname = \"ops\"\nmatch = { tool = [\"delete_*\"] }\neffect = \"approve\"\napprover = \"operator\"\napprovers = [\"alice\"]\nshow_arguments = [\"ticket_id\"]\n",
            "p.toml",
        )
        .unwrap();
        let call = Subject {
            method: "tools/call",
            tool: Some("delete_repo"),
            ..Default::default()
        };
        let d = r.judge(&call);
        assert_eq!(
            d.operator,
            Some(ByOperator {
                approvers: vec!["alice".into()],
                show_arguments: vec!["ticket_id".into()],
            })
        );
        let ask = shape(r#"{"maxTokens": 5}"#);
        let s = Subject {
            method: "sampling/createMessage",
            tool: Some("delete_repo"),
            ask: Some(&ask),
            ..Default::default()
        };
        assert_eq!(
            r.judge(&s).effect,
            Effect::Allow,
            "an ask never waits on an operator"
        );
        for (bad, why) in [
            (
                "effect = \"approve\"\napprover = \"group:ops\"",
                "operator groups",
            ),
            ("effect = \"approve\"\napprover = \"boss\"", "not known"),
            ("effect = \"deny\"\napprover = \"operator\"", "approve rule"),
            (
                "effect = \"approve\"\nshow_arguments = [\"x\"]",
                "need approver",
            ),
        ] {
            let e =
                Rules::parse(&format!("[[rule]]\nname = \"x\"\n{bad}\n"), "p.toml").unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn globs_match_names_and_hosts() {
        assert!(glob("delete_*", "delete_repo"));
        assert!(!glob("delete_*", "undelete"));
        assert!(glob("*.example.com", "login.example.com"));
        assert!(glob("a?c", "abc"));
    }
}
