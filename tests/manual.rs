//! The README and the manual (`docs/`, an mdBook; issue 30): the README stays a front page
//! (within 200 lines), every chapter `docs/SUMMARY.md` names exists and every Markdown file of
//! `docs/` is a chapter, and every relative link of the README and the manual lands on a file
//! that exists and, when it names a heading (`#anchor`), on a heading of that file. The
//! configuration reference is generated from the config types (every key documented where it
//! is declared), and every example config of the manual loads. The book itself is built by
//! `scripts/test.sh` (`mdbook build docs`).

#[path = "manual/reference.rs"]
mod reference;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

/// The lines outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// A heading's anchor as GitHub and mdBook make it: lower case, spaces to `-`, and nothing but
/// letters, digits, `-` and `_` kept.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .iter()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|h| slug(h.trim_start_matches('#')))
        .collect()
}

/// The targets of the Markdown links `[text](target)` outside code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    out
}

fn chapters() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("read docs/")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    out.sort();
    out
}

#[test]
fn the_readme_is_a_front_page_within_200_lines() {
    let n = read(&root().join("README.md")).lines().count();
    assert!(
        n <= 200,
        "README.md has {n} lines: move the detail into a chapter of docs/"
    );
}

#[test]
fn every_chapter_the_summary_names_exists_and_every_page_of_docs_is_a_chapter() {
    let summary = read(&root().join("docs/SUMMARY.md"));
    let named: BTreeSet<String> = links(&summary).into_iter().collect();
    for n in &named {
        assert!(
            root().join("docs").join(n).is_file(),
            "SUMMARY.md names {n}, which is not in docs/"
        );
    }
    for c in chapters() {
        let name = c
            .file_name()
            .expect("a file name")
            .to_string_lossy()
            .into_owned();
        assert!(
            name == "SUMMARY.md" || named.contains(&name),
            "docs/{name} is in no chapter of SUMMARY.md"
        );
    }
    assert!(named.len() >= 10, "the summary was read: {named:?}");
}

#[test]
fn every_relative_link_of_the_readme_and_the_manual_lands_on_a_file_and_heading() {
    let mut pages = chapters();
    pages.push(root().join("README.md"));
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let text = read(page);
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let dest = if file.is_empty() {
                page.clone()
            } else {
                page.parent().expect("a folder").join(file)
            };
            checked += 1;
            if !dest.exists() {
                broken.push(format!("{}: {target} (no such file)", page.display()));
            } else if !anchor.is_empty()
                && dest.extension().is_some_and(|x| x == "md")
                && !anchors(&read(&dest)).contains(anchor)
            {
                broken.push(format!("{}: {target} (no such heading)", page.display()));
            }
        }
    }
    assert!(checked > 50, "the links were read: {checked}");
    assert!(
        broken.is_empty(),
        "links that land nowhere:\n{}",
        broken.join("\n")
    );
}

#[test]
fn a_heading_anchor_is_made_as_github_and_mdbook_make_it() {
    assert_eq!(
        slug("Checking a config: `sluice check`"),
        "checking-a-config-sluice-check"
    );
    assert_eq!(
        slug("Bridge B: 2025-11-25 clients on the same endpoint"),
        "bridge-b-2025-11-25-clients-on-the-same-endpoint"
    );
    assert_eq!(slug("HTTP/2 to upstreams"), "http2-to-upstreams");
    assert_eq!(
        links("see [a](b.md#c), [x](y)\n```toml\n[d](e)\n```\n[f](g)"),
        ["b.md#c", "y", "g"]
    );
}

#[test]
fn every_config_key_is_documented_where_it_is_declared() {
    let missing = reference::undocumented(&sluice::config::schema());
    assert!(
        missing.is_empty(),
        "config keys without a doc comment in crates/sluice/src/config/raw*.rs: {missing:?}"
    );
}

#[test]
fn a_key_or_a_choice_without_documentation_is_found() {
    let mut inner = serde_json::Map::new();
    inner.insert(
        "told".into(),
        serde_json::json!({"type": "integer", "description": "a count"}),
    );
    inner.insert("untold".into(), serde_json::json!({"type": "string"}));
    let mut top = serde_json::Map::new();
    top.insert("section".into(), {
        let mut s = reference::object(inner);
        s["description"] = "a table".into();
        s
    });
    top.insert(
        "mode".into(),
        serde_json::json!({"description": "a choice", "oneOf": [
        {"const": "a", "description": "the first"}, {"const": "b"}]}),
    );
    let schema = reference::object(top);
    assert_eq!(
        reference::undocumented(&schema),
        ["section.untold", "mode = \"b\""]
    );
    let page = reference::render(&schema);
    assert!(page.contains("## `[section]`\n\na table\n"), "{page}");
    assert!(page.contains("| `told` | integer | a count |"), "{page}");
    assert!(
        page.contains("| `mode` | `\"a\"`: the first; `\"b\"` | a choice |"),
        "{page}"
    );
}

#[test]
fn the_configuration_reference_is_what_the_config_types_say() {
    let page = reference::render(&sluice::config::schema());
    let path = root().join("docs/configuration-reference.md");
    if std::env::var_os("SLUICE_BLESS").is_some() {
        std::fs::write(&path, &page).expect("write docs/configuration-reference.md");
    }
    let written = read(&path);
    assert!(
        written == page,
        "docs/configuration-reference.md is not what the config types say: run `SLUICE_BLESS=1 cargo test --test manual` and commit it"
    );
    for key in [
        "max_in_flight_per_principal",
        "spare_processes",
        "sampling_per_window",
        "redis_url",
        "otlp_endpoint",
    ] {
        assert!(
            page.contains(&format!("| `{key}` |")),
            "{key} is in the reference"
        );
    }
}

/// The fenced `toml` blocks of a page, with the line each starts on.
fn toml_blocks(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        match open.as_mut() {
            Some(_) if line.trim_start().starts_with("```") => out.extend(open.take()),
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
            None if line.trim_start() == "```toml" => open = Some((i + 1, String::new())),
            None => {}
        }
    }
    out
}

#[test]
fn every_example_config_of_the_manual_loads() {
    // The secret variable an example names (upstream-auth.md), set as an operator would.
    std::env::set_var("CRM_CLIENT_SECRET", "example-secret");
    std::env::set_var("TICKETS_EXCHANGE_SECRET", "example-secret");
    std::env::set_var("SLUICE_APPROVALS_WEBHOOK_SECRET", "example-secret"); // governance.md
    let mut loaded = 0;
    let mut refused = Vec::new();
    for page in chapters() {
        for (line, text) in toml_blocks(&read(&page)) {
            let origin = format!("{}:{line}", page.display());
            // A policy file (approval and visibility rules) is not a config: its own parser reads it.
            let result = if text.lines().any(|l| l.trim() == "[[rule]]") {
                sluice::policy::rules::Rules::parse(&text, &origin).map(drop)
            } else {
                let text = text
                    .replace("${SLUICE_ID}", "replica-1")
                    .replace("${SLUICE_ADVERTISE_URL}", "http://10.0.0.1:9100");
                sluice::config::Config::from_toml(&text, &origin, &Default::default())
                    .map(drop)
                    .map_err(|e| e.to_string())
            };
            loaded += 1;
            if let Err(e) = result {
                refused.push(format!("{origin}: {e}"));
            }
        }
    }
    assert!(loaded >= 7, "the examples were read: {loaded}");
    assert!(
        refused.is_empty(),
        "examples of the manual that do not load:\n{}",
        refused.join("\n")
    );
}
