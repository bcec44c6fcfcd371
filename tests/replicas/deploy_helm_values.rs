//! deploy/helm/sluice/values.yaml read as a file: every value the templates use is defined
//! there, and every value has a comment line above it (the chart's documentation).

use std::collections::{BTreeMap, BTreeSet};

use serde_yaml_ng::Value;

use super::deploy::{s, yaml};
use super::deploy_kit::{read, repo};

const CHART: &str = "deploy/helm/sluice";

fn templates() -> Vec<(String, String)> {
    let dir =
        std::fs::read_dir(repo().join(CHART).join("templates")).expect("the chart's templates/");
    let mut names: Vec<String> = dir
        .map(|e| {
            e.expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            (
                format!("templates/{n}"),
                read(&format!("{CHART}/templates/{n}")),
            )
        })
        .collect()
}

fn values() -> Value {
    yaml("values.yaml", &read(&format!("{CHART}/values.yaml")))
}

/// The `.Values.a.b` paths a text uses.
fn value_paths(text: &str) -> impl Iterator<Item = String> + '_ {
    let path = |t: &str| {
        t.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'))
            .collect::<String>()
    };
    text.match_indices(".Values.").map(move |(i, _)| {
        path(&text[i + ".Values.".len()..])
            .trim_end_matches('.')
            .to_owned()
    })
}

#[test]
fn helm_templates_use_only_values_values_yaml_defines() {
    let values = values();
    let mut used = 0;
    for (file, text) in templates() {
        for path in value_paths(&text) {
            let missing = || panic!("{file} uses .Values.{path}: not in values.yaml");
            path.split('.').fold(&values, |at, seg| {
                at.as_mapping()
                    .and_then(|m| m.get(seg))
                    .unwrap_or_else(missing)
            });
            used += 1;
        }
    }
    assert!(used > 10, "the templates use values ({used} found)");
}

/// Every leaf of values.yaml as a scanner of its lines sees it: (dotted path, documented by a
/// comment line just above). A sequence or an empty mapping is a leaf; a block scalar's lines
/// are its own.
fn scanned_leaves(text: &str) -> BTreeMap<String, bool> {
    let lines: Vec<&str> = text.lines().collect();
    let content = |l: &str| !l.trim().is_empty() && !l.trim_start().starts_with('#');
    let indent = |l: &str| l.len() - l.trim_start().len();
    let (mut out, mut stack, mut block) = (
        BTreeMap::new(),
        Vec::<(usize, String)>::new(),
        None::<usize>,
    );
    for (i, line) in lines.iter().enumerate() {
        let ind = indent(line);
        if block.is_some_and(|b| ind > b || line.trim().is_empty())
            || !content(line)
            || line.trim_start().starts_with('-')
        {
            continue;
        }
        block = None;
        let (key, rest) = line
            .trim()
            .split_once(':')
            .map(|(k, r)| (k, r.trim()))
            .expect("values.yaml: a `key: value` line");
        stack.retain(|(d, _)| *d < ind);
        let path = stack
            .iter()
            .map(|(_, k)| k.as_str())
            .chain([key])
            .collect::<Vec<_>>()
            .join(".");
        let next = lines[i + 1..].iter().find(|l| content(l));
        let container = rest.is_empty()
            && next.is_some_and(|n| indent(n) > ind && !n.trim_start().starts_with('-'));
        if container {
            stack.push((ind, key.to_owned()));
            continue;
        }
        block = rest.starts_with(['|', '>']).then_some(ind);
        out.insert(path, i > 0 && lines[i - 1].trim_start().starts_with('#'));
    }
    out
}

fn parsed_leaves(prefix: &str, v: &Value, out: &mut BTreeSet<String>) {
    match v.as_mapping().filter(|m| !m.is_empty()) {
        Some(m) => m.iter().for_each(|(k, v)| {
            parsed_leaves(&format!("{prefix}{}.", s(k, "a values.yaml key")), v, out)
        }),
        None => drop(out.insert(prefix.trim_end_matches('.').to_owned())),
    }
}

#[test]
fn helm_values_are_each_documented_by_a_comment_line() {
    let scanned = scanned_leaves(&read(&format!("{CHART}/values.yaml")));
    let mut parsed = BTreeSet::new();
    parsed_leaves("", &values(), &mut parsed);
    assert_eq!(
        scanned.keys().cloned().collect::<BTreeSet<_>>(),
        parsed,
        "values.yaml read line by line and parsed disagree"
    );
    let undocumented: Vec<&String> = scanned
        .iter()
        .filter(|(_, doc)| !**doc)
        .map(|(k, _)| k)
        .collect();
    assert!(
        undocumented.is_empty(),
        "values.yaml: no comment line above {undocumented:?}"
    );
}
