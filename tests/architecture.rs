//! The shape of `src/` (issue 11): dependencies point one way, files and functions stay small.
//!
//! Reads the source files, not the compiled crate: every `crate::a::b` and `super::…` path a
//! module names is an edge to the module file it resolves to (the longest prefix that is a
//! module). Checked:
//!
//! - no import circle among the modules outside `mcp/` (the protocol model, which is a leaf:
//!   it may not name any other module);
//! - no source file over 400 lines, tests included (move tests to a sibling `tests.rs`);
//! - no function over 80 lines;
//! - an upstream's era (`Wire`) is switched on only in `link.rs`, the upstream abstraction;
//! - the modules below the front (bridge A, forwarding, policy, upstream clients, …) name no
//!   `gateway`: they take narrow handles;
//! - method names (`"tools/call"`…) spelled only in the `Method` enum's mapping (`mcp/method.rs`),
//!   outside unit tests and the benchmark and demo peers, which write the wire as text.
//!
//! `src/bin/` (the benchmark) and `src/demo/` (the demo's upstreams and walkthrough) are
//! programs built on the library, outside the pipeline; their files are held to the sizes too.

#[path = "architecture/circles.rs"]
mod circles;
#[path = "architecture/graph.rs"]
mod graph;
#[path = "architecture/paths.rs"]
mod paths;
#[path = "architecture/reader_tests.rs"]
mod reader_tests;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("read src") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    out.sort();
    out
}

fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).expect("under src").with_extension("");
    let mut parts: Module = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The text without `#[cfg(test)] mod tests { … }` blocks and comments.
fn code(text: &str) -> String {
    let cut = text.find("#[cfg(test)]\nmod tests").map_or(text, |i| &text[..i]);
    cut.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

fn paths_named(text: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().last();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let path: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
        out.push(path.split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect());
    }
    out
}

fn graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let files: Vec<(Module, PathBuf)> = sources()
        .into_iter()
        .map(|f| (module_of(&src, &f), f))
        .filter(|(m, _)| !matches!(m.first().map(String::as_str), Some("bin" | "main" | "demo")) && !m.is_empty())
        .collect();
    let modules: BTreeSet<Module> = files.iter().map(|(m, _)| m.clone()).collect();
    let resolve = |path: &[String]| (1..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| modules.contains(p));
    let mut edges = BTreeMap::new();
    for (m, f) in &files {
        let text = code(&std::fs::read_to_string(f).expect("read a source file"));
        // `super` is the parent of the module the file is (for `a/b.rs` and `a/b/mod.rs` alike: `a`).
        let parent: Module = m[..m.len() - 1].to_vec();
        let mut to = BTreeSet::new();
        for p in paths_named(&text, "crate::") {
            to.extend(resolve(&p));
        }
        for p in paths_named(&text, "super::") {
            to.extend(resolve(&[parent.clone(), p].concat()));
        }
        to.retain(|t| t != m && !m.starts_with(t));
        edges.insert(m.clone(), to);
    }
    edges
}

/// Strongly connected components with more than one module (Tarjan, iterative enough here).
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct T<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on: BTreeSet<Module>,
        out: Vec<Vec<Module>>,
    }
    impl T<'_> {
        fn visit(&mut self, v: &Module) {
            let n = self.index.len();
            self.index.insert(v.clone(), n);
            self.low.insert(v.clone(), n);
            self.stack.push(v.clone());
            self.on.insert(v.clone());
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let l = self.low[w].min(self.low[v]);
                    self.low.insert(v.clone(), l);
                } else if self.on.contains(w) {
                    let l = self.index[w].min(self.low[v]);
                    self.low.insert(v.clone(), l);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(&w);
                    let done = &w == v;
                    comp.push(w);
                    if done {
                        break;
                    }
                }
                if comp.len() > 1 {
                    self.out.push(comp);
                }
            }
        }
    }
    let mut t = T { edges, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), on: BTreeSet::new(), out: Vec::new() };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

#[test]
fn no_import_circle_joins_modules_and_the_protocol_model_names_none() {
    let edges = graph();
    let show = |m: &Module| m.join("::");
    for (m, to) in &edges {
        if m.first().map(String::as_str) == Some("mcp") {
            let outside: Vec<String> = to.iter().filter(|t| t.first().map(String::as_str) != Some("mcp")).map(show).collect();
            assert!(outside.is_empty(), "{} (the protocol model) names {outside:?}", show(m));
        }
    }
    let found: Vec<String> = circles(&edges).iter().map(|c| c.iter().map(show).collect::<Vec<_>>().join(" <-> ")).collect();
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

/// The modules below the front take narrow handles (bridge A's `Bridge`, dispatch's
/// `Forwarder`, the budget store, the keys, the client), never the whole gateway: none names
/// the composition root.
#[test]
fn the_stages_below_the_front_name_no_gateway() {
    const BELOW: [&str; 19] = [
        "audit",
        "auth",
        "bridge",
        "config",
        "ctx",
        "dispatch::forward",
        "dispatch::rounds",
        "dispatch::target",
        "edge",
        "error",
        "mcp",
        "metrics",
        "policy",
        "respond",
        "route",
        "state",
        "streams",
        "upstream",
        "validate",
    ];
    let edges = graph();
    let gateway: Module = vec!["gateway".to_owned()];
    let mut named = Vec::new();
    for (m, to) in &edges {
        let path = m.join("::");
        let below = BELOW.iter().any(|b| path == *b || path.starts_with(&format!("{b}::")));
        if below && to.contains(&gateway) {
            named.push(path);
        }
    }
    assert!(!edges.is_empty() && edges.keys().any(|m| m.first().map(String::as_str) == Some("bridge")), "the graph reads src/");
    assert!(named.is_empty(), "these take the whole gateway instead of a narrow handle: {named:?}");
}

/// An upstream's era is read in one place, `link.rs` (the upstream abstraction); the stages
/// ask it. `upstream/mod.rs` defines `Wire` (and its names); everything else only builds a
/// probed status with one.
#[test]
fn the_upstream_era_is_switched_on_only_in_link() {
    const READS: [&str; 7] = ["Wire::Modern =>", "Wire::Legacy =>", ".wire ==", "== Wire::", "Wire::Modern)", "Wire::Legacy)", ".wire {"];
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for f in sources() {
        let m = module_of(&src, &f).join("::");
        if matches!(m.as_str(), "link" | "upstream") || m.starts_with("bin") || m.starts_with("demo") {
            continue;
        }
        let text = code(&std::fs::read_to_string(&f).expect("read a source file"));
        for r in READS.iter().filter(|r| text.contains(**r)) {
            found.push(format!("{m}: {r}"));
        }
    }
    let link = code(&std::fs::read_to_string(src.join("link.rs")).expect("read link.rs"));
    assert!(link.contains("Wire::Legacy =>"), "link.rs switches on the wire");
    assert!(found.is_empty(), "era switches outside link.rs: {found:?}");
}

#[test]
fn no_source_file_is_over_400_lines() {
    let long: Vec<String> = sources()
        .into_iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(&f).ok()?.lines().count();
            (n > 400).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "files over 400 lines:\n{}", long.join("\n"));
}

#[test]
fn no_function_is_over_80_lines() {
    let mut long = Vec::new();
    for f in sources() {
        let text = std::fs::read_to_string(&f).expect("read a source file");
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let l = lines[i].trim_start();
            let is_fn = ["fn ", "pub fn ", "pub(crate) fn ", "pub(super) fn ", "async fn ", "pub async fn ", "pub(crate) async fn "]
                .iter()
                .any(|p| l.starts_with(p));
            if !is_fn {
                i += 1;
                continue;
            }
            // Count braces outside string literals (a rough lexer, enough for this code base).
            let (start, mut depth, mut opened) = (i, 0i64, false);
            while i < lines.len() {
                let mut in_str = false;
                let mut prev = ' ';
                for c in without_char_literals(lines[i]).chars() {
                    match c {
                        '"' if prev != '\\' => in_str = !in_str,
                        '{' if !in_str => {
                            depth += 1;
                            opened = true;
                        }
                        '}' if !in_str => depth -= 1,
                        _ => {}
                    }
                    prev = if prev == '\\' && c == '\\' { ' ' } else { c };
                }
                if (opened && depth <= 0) || (!opened && lines[i].trim_end().ends_with(';')) {
                    break;
                }
                i += 1;
            }
            let n = i - start + 1;
            if n > 80 {
                long.push(format!("{}:{} {} ({n} lines)", f.display(), start + 1, l.chars().take(60).collect::<String>()));
            }
            i += 1;
        }
    }
    assert!(long.is_empty(), "functions over 80 lines:\n{}", long.join("\n"));
}

/// A line with its char literals (`'"'`, `b'{'`, `'\\''`) blanked, so their quotes and braces
/// do not count.
fn without_char_literals(line: &str) -> String {
    let b: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == '\'' {
            let len = if b.get(i + 1) == Some(&'\\') { 4 } else { 3 };
            if b.get(i + len - 1) == Some(&'\'') {
                i += len;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// The method names, read from the `Method` enum's mapping (`(Method::X, "name"),` lines).
fn method_names(table: &str) -> Vec<String> {
    table
        .lines()
        .filter_map(|l| l.trim().strip_prefix("(Method::")?.split_once(", \"")?.1.strip_suffix("\"),").map(str::to_owned))
        .collect()
}

#[test]
fn method_names_are_spelled_once_in_the_method_enum() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let table = src.join("mcp/method.rs");
    let names = method_names(&std::fs::read_to_string(&table).expect("read mcp/method.rs"));
    assert!(names.len() >= 20, "the mapping was not found in mcp/method.rs: {names:?}");
    let mut found = Vec::new();
    for f in sources() {
        let m = module_of(&src, &f);
        // The benchmark and the demo are peers that write the wire as a client or server would;
        // unit tests write requests as text.
        let outside = matches!(m.first().map(String::as_str), Some("bin" | "demo")) || m.last().is_some_and(|l| l == "tests");
        if f == table || outside {
            continue;
        }
        let text = code(&std::fs::read_to_string(&f).expect("read a source file"));
        for n in &names {
            if text.contains(&format!("\"{n}\"")) {
                found.push(format!("{}: \"{n}\"", f.display()));
            }
        }
    }
    assert!(found.is_empty(), "method names spelled outside the Method enum:\n{}", found.join("\n"));
}
