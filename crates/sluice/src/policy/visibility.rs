//! Who sees what: `hide` and `show` rules over listed tools, prompts, resources and templates.
//!
//! Takes the rules, a principal (id and groups), an upstream and a listed item (its kind, the
//! upstream's own name or URI, its tool hints); gives whether the principal sees it and the
//! rule that decided (the first `hide` or `show` rule whose match holds; none: shown). Lists
//! are judged once per visibility class and table, not per request: a principal's class is
//! which rules' `principal`/`group` conditions hold for it, and what a class sees of a table
//! is kept in [`Views`] (bounded by [`MAX_VIEWS`], cleared whole when full) until the table or
//! the rules are replaced. Refuses nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::rules::{any_eq, any_glob, Effect, Rule, Rules};
use crate::route::table::{ListKind, ListTable, ToolHints};

/// Views kept at once (upstream × kind × class); past it the cache is cleared and rebuilt.
pub const MAX_VIEWS: usize = 4096;

/// Who is looking.
#[derive(Debug, Clone, Copy)]
pub struct Viewer<'a> {
    /// The principal's id.
    pub principal: &'a str,
    /// Its groups.
    pub groups: &'a [String],
}

/// One listed (or called) item.
#[derive(Debug, Clone, Copy)]
pub struct Listed<'a> {
    /// Its family.
    pub kind: ListKind,
    /// The upstream's own name (tools, prompts) or the URI / URI template (resources).
    pub key: &'a str,
    /// Its annotations (tools; default for the rest).
    pub hints: ToolHints,
}

impl<'a> Viewer<'a> {
    /// The authenticated principal as a viewer.
    pub fn of(p: &'a crate::auth::Principal) -> Viewer<'a> {
        Viewer {
            principal: p.id(),
            groups: &p.groups,
        }
    }
}

fn who_holds(r: &Rule, v: &Viewer<'_>) -> bool {
    any_eq(&r.when.principal, v.principal)
        && (r.when.group.is_empty() || r.when.group.iter().any(|g| v.groups.contains(g)))
}

fn item_holds(r: &Rule, upstream: &str, item: &Listed<'_>) -> bool {
    let m = &r.when;
    let named = |globs: &[String], kinds: &[ListKind]| {
        globs.is_empty() || (kinds.contains(&item.kind) && any_glob(globs, Some(item.key)))
    };
    let tool_hint = |want: Option<bool>, got: bool| {
        want.is_none_or(|w| item.kind == ListKind::Tools && w == got)
    };
    any_eq(&m.upstream, upstream)
        && named(&m.tool, &[ListKind::Tools])
        && named(&m.prompt, &[ListKind::Prompts])
        && named(&m.resource, &[ListKind::Resources, ListKind::Templates])
        && tool_hint(m.destructive, item.hints.destructive)
        && tool_hint(m.read_only, item.hints.read_only)
}

impl Rules {
    /// Whether any rule decides visibility (none: everyone sees everything, nothing is cached).
    pub fn has_visibility(&self) -> bool {
        self.rules.iter().any(|r| r.effect.is_visibility())
    }

    /// The visibility rule that decides whether `v` sees `item` of `upstream`, if any.
    pub fn visibility_rule(
        &self,
        v: &Viewer<'_>,
        upstream: &str,
        item: &Listed<'_>,
    ) -> Option<(Effect, &str)> {
        self.rules
            .iter()
            .filter(|r| r.effect.is_visibility())
            .find(|r| who_holds(r, v) && item_holds(r, upstream, item))
            .map(|r| (r.effect, r.name.as_str()))
    }

    /// Whether `v` sees `item` of `upstream`.
    pub fn shows(&self, v: &Viewer<'_>, upstream: &str, item: &Listed<'_>) -> bool {
        self.visibility_rule(v, upstream, item)
            .is_none_or(|(e, _)| e == Effect::Show)
    }

    /// The viewer's class: for each visibility rule in order, whether its who-conditions hold.
    fn class(&self, v: &Viewer<'_>) -> Vec<bool> {
        self.rules
            .iter()
            .filter(|r| r.effect.is_visibility())
            .map(|r| who_holds(r, v))
            .collect()
    }

    fn shown_for_class(
        &self,
        class: &[bool],
        upstream: &str,
        kind: ListKind,
        table: &ListTable,
    ) -> Arc<[bool]> {
        let rules: Vec<&Rule> = self
            .rules
            .iter()
            .filter(|r| r.effect.is_visibility())
            .collect();
        table
            .items
            .iter()
            .map(|i| {
                let item = Listed {
                    kind,
                    key: &i.key,
                    hints: i.hints,
                };
                let decided = rules
                    .iter()
                    .zip(class)
                    .find(|(r, holds)| **holds && item_holds(r, upstream, &item));
                decided.is_none_or(|(r, _)| r.effect == Effect::Show)
            })
            .collect()
    }
}

struct View {
    rules: Arc<Rules>,
    table: Arc<ListTable>,
    shown: Arc<[bool]>,
}

/// What each visibility class sees of each table, computed once per table and rules.
#[derive(Default)]
pub struct Views {
    kept: Mutex<HashMap<(String, ListKind, Vec<bool>), View>>,
}

impl Views {
    /// Which items of `table` (`upstream`'s `kind` list) `v` sees, by position; `None` when no
    /// rule decides visibility (all are shown).
    pub fn shown(
        &self,
        rules: &Arc<Rules>,
        v: &Viewer<'_>,
        upstream: &str,
        kind: ListKind,
        table: &Arc<ListTable>,
    ) -> Option<Arc<[bool]>> {
        if !rules.has_visibility() {
            return None;
        }
        let key = (upstream.to_owned(), kind, rules.class(v));
        let mut kept = self
            .kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(view) = kept
            .get(&key)
            .filter(|w| Arc::ptr_eq(&w.rules, rules) && Arc::ptr_eq(&w.table, table))
        {
            return Some(view.shown.clone());
        }
        let shown = rules.shown_for_class(&key.2, upstream, kind, table);
        if kept.len() >= MAX_VIEWS {
            kept.clear();
        }
        kept.insert(
            key,
            View {
                rules: rules.clone(),
                table: table.clone(),
                shown: shown.clone(),
            },
        );
        Some(shown)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::value::RawValue;

    use super::*;
    use crate::route::table::Item;

    const RULES: &str = "[[rule]]\nname = \"eng-sees-admin\"\nmatch = { group = [\"eng\"], upstream = [\"admin\"] }\neffect = \"show\"\n\
        [[rule]]\nname = \"admin-hidden\"\nmatch = { upstream = [\"admin\"] }\neffect = \"hide\"\n\
        [[rule]]\nname = \"no-destructive-for-interns\"\nmatch = { group = [\"interns\"], destructive = true }\neffect = \"hide\"\n\
        [[rule]]\nname = \"secret-prompts\"\nmatch = { prompt = [\"secret*\"] }\neffect = \"hide\"\n\
        [[rule]]\nname = \"deny-wipe\"\nmatch = { tool = [\"wipe\"] }\neffect = \"deny\"\n";

    fn table(keys: &[(&str, bool)]) -> Arc<ListTable> {
        let items = keys
            .iter()
            .map(|(k, destructive)| Item {
                key: (*k).to_owned(),
                public: (*k).to_owned(),
                raw: RawValue::from_string("{}".into()).unwrap(),
                headers: Vec::new(),
                hints: ToolHints {
                    destructive: *destructive,
                    read_only: false,
                },
            })
            .collect();
        Arc::new(ListTable::new(items, 0, false, Instant::now()))
    }

    #[test]
    fn the_first_visibility_rule_decides_and_call_rules_decide_nothing_here() {
        let rules = Rules::parse(RULES, "v.toml").unwrap();
        let (eng, interns, none) = (
            vec!["eng".to_owned()],
            vec!["interns".to_owned()],
            Vec::new(),
        );
        let tool = |key, destructive| Listed {
            kind: ListKind::Tools,
            key,
            hints: ToolHints {
                destructive,
                read_only: false,
            },
        };
        let v = |groups| Viewer {
            principal: "p",
            groups,
        };
        assert!(rules.shows(&v(&eng), "admin", &tool("reset", false)));
        assert_eq!(
            rules.visibility_rule(&v(&none), "admin", &tool("reset", false)),
            Some((Effect::Hide, "admin-hidden"))
        );
        assert!(!rules.shows(&v(&interns), "files", &tool("rm", true)));
        assert!(rules.shows(&v(&interns), "files", &tool("ls", false)));
        assert!(rules.shows(&v(&none), "files", &tool("rm", true)));
        // A `deny` rule is about calls: the tool is still listed.
        assert!(rules.shows(&v(&none), "files", &tool("wipe", false)));
        // Name conditions hold for their own family only.
        let prompt = Listed {
            kind: ListKind::Prompts,
            key: "secret-plan",
            hints: ToolHints::default(),
        };
        assert!(!rules.shows(&v(&none), "files", &prompt));
        assert!(rules.shows(&v(&none), "files", &tool("secret-plan", false)));
    }

    #[test]
    fn a_view_is_computed_once_per_class_and_table_and_again_when_either_changes() {
        let rules = Arc::new(Rules::parse(RULES, "v.toml").unwrap());
        let views = Views::default();
        let t = table(&[("reset", false), ("rm", true)]);
        let (eng, other) = (vec!["eng".to_owned()], vec!["sales".to_owned()]);
        let a = views
            .shown(
                &rules,
                &Viewer {
                    principal: "a",
                    groups: &eng,
                },
                "admin",
                ListKind::Tools,
                &t,
            )
            .unwrap();
        assert_eq!(&a[..], [true, true]);
        let b = views
            .shown(
                &rules,
                &Viewer {
                    principal: "b",
                    groups: &other,
                },
                "admin",
                ListKind::Tools,
                &t,
            )
            .unwrap();
        assert_eq!(&b[..], [false, false]);
        // Another principal of the same class gets the same view, not a recomputed one.
        let c = views
            .shown(
                &rules,
                &Viewer {
                    principal: "c",
                    groups: &eng,
                },
                "admin",
                ListKind::Tools,
                &t,
            )
            .unwrap();
        assert!(Arc::ptr_eq(&a, &c));
        let t2 = table(&[("reset", false)]);
        let d = views
            .shown(
                &rules,
                &Viewer {
                    principal: "c",
                    groups: &eng,
                },
                "admin",
                ListKind::Tools,
                &t2,
            )
            .unwrap();
        assert_eq!(&d[..], [true]);
        assert!(Views::default()
            .shown(
                &Arc::new(Rules::default()),
                &Viewer {
                    principal: "a",
                    groups: &eng
                },
                "admin",
                ListKind::Tools,
                &t
            )
            .is_none());
    }

    #[test]
    fn a_hide_rule_with_ask_conditions_or_a_call_rule_with_item_conditions_is_refused() {
        let e = Rules::parse(
            "[[rule]]\nname = \"x\"\nmatch = { method = [\"tools/call\"] }\neffect = \"hide\"\n",
            "p.toml",
        )
        .unwrap_err();
        assert!(e.contains("rule \"x\"") && e.contains("never hold"), "{e}");
        let e = Rules::parse(
            "[[rule]]\nname = \"y\"\nmatch = { prompt = [\"a\"] }\neffect = \"deny\"\n",
            "p.toml",
        )
        .unwrap_err();
        assert!(
            e.contains("rule \"y\"") && e.contains("hide and show"),
            "{e}"
        );
        for (m, says) in [
            ("tool = [\"a\"], prompt = [\"a\"]", "their own family"),
            ("prompt = [\"a\"], destructive = true", "tool annotations"),
            ("tool = [\"\"]", "empty glob"),
        ] {
            let e = Rules::parse(
                &format!("[[rule]]\nname = \"z\"\nmatch = {{ {m} }}\neffect = \"hide\"\n"),
                "p.toml",
            )
            .unwrap_err();
            assert!(e.contains(says), "{m}: {e}");
        }
        let r = Rules::parse(
            "[[rule]]\nname = \"w\"\nmatch = { upstream = [\"ghost\"] }\neffect = \"hide\"\n",
            "p.toml",
        )
        .unwrap();
        assert_eq!(
            r.unknown_upstreams(&["alpha".to_owned()])
                .collect::<Vec<_>>(),
            [("w", "ghost")]
        );
    }
}
