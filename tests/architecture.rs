//! The shape of the workspace (issues 11 and 30): dependencies point one way, files and functions
//! stay small.
//!
//! The module graph is read from the syntax tree (`architecture/graph.rs`, with `syn`): every
//! path a module names (`use` trees expanded: nested braces, `self`, globs, renames, re-exports;
//! paths in expressions, types, macro arguments and attribute strings; `super::` and `self::`
//! resolved against the module) is an arrow to the longest prefix that is a module. Unit tests
//! (`#[cfg(test)]`) are left out, and so is a module naming its own ancestor; the reasons are in
//! `architecture/graph.rs`'s head. Checked:
//!
//! - no import circle among modules, and none among top-level folders (`gateway`, `bridge`,
//!   `upstream`: the first segment under `crate::`). A failure prints each circle with one
//!   file:line per arrow: cut one of them (a type moved to the layer it belongs to, a narrow
//!   handle instead of the root, a typed event or trait instead of a call back up);
//! - the crates follow the arrows `sluice-mcp` (the protocol model) ← `sluice-testkit` (the mock
//!   upstreams) ← `sluice` (the product) ← `sluice-demo` ← `sluice-cli` (the `sluice` command,
//!   and the tests) ← `sluice-bench`: no manifest names a crate at or after its own place, so the
//!   compiler refuses a back edge (the product cannot name a mock, the mocks cannot name the
//!   product), and the protocol model names no crate of ours;
//! - no source file over 500 lines (every crate, at rustfmt's default width: the workspace has no
//!   `rustfmt.toml`), tests included (move tests to a sibling `tests.rs`);
//! - no function over 80 lines;
//! - an upstream's wire (the closed `upstream::Client` enum: Streamable HTTP 2026-07-28,
//!   2025-11-25 sessions, 2024-11-05 HTTP+SSE, stdio; and its era, `Wire`) is switched on only
//!   in `link/`, the upstream abstraction, each operation naming every arm;
//! - the modules below the front (bridge A, forwarding, policy, upstream clients, …) name no
//!   `gateway`: they take narrow handles;
//! - method names (`"tools/call"`…) spelled only in the `Method` enum's mapping
//!   (`crates/sluice-mcp/src/method.rs`), outside unit tests and the benchmark and demo peers,
//!   which write the wire as text.
//!
//! The module graph is the product's (`crates/sluice/src/`; the protocol model, `crate::mcp`, is
//! the `sluice-mcp` crate re-exported). All crates are held to the sizes.

#[path = "architecture/circles.rs"]
mod circles;
#[path = "architecture/graph.rs"]
mod graph;
#[path = "architecture/paths.rs"]
mod paths;
#[path = "architecture/reader_tests.rs"]
mod reader_tests;

use std::path::{Path, PathBuf};

use graph::Module;

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read a source folder") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The product crate's folder (`crates/sluice`).
fn product() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("crates/sluice")
}

/// The product's sources (`crates/sluice/src/`).
fn sources() -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(&product().join("src"), &mut out);
    out.sort();
    out
}

/// Every crate's sources: the command's (`src/`) and each `crates/*/src/`.
fn all_sources() -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut out,
    );
    for c in members() {
        walk(&c.join("src"), &mut out);
    }
    out.sort();
    out
}

/// The workspace's other crates (`crates/*`).
fn members() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read crates/")
        .map(|e| e.expect("dir entry").path())
        .collect();
    out.sort();
    out
}

fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("");
    let mut parts: Module = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The text without `#[cfg(test)] mod tests { … }` blocks and comments.
fn code(text: &str) -> String {
    let cut = text
        .find("#[cfg(test)]\nmod tests")
        .map_or(text, |i| &text[..i]);
    cut.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module graph of `src/`, read once.
fn graph() -> &'static graph::Graph {
    static GRAPH: std::sync::OnceLock<graph::Graph> = std::sync::OnceLock::new();
    GRAPH.get_or_init(|| {
        let dir = product();
        graph::read(Path::new("src/lib.rs"), &|p| {
            std::fs::read_to_string(dir.join(p)).ok()
        })
        .unwrap_or_else(|e| panic!("reading src/: {e}"))
    })
}

#[test]
fn the_module_tree_holds_every_source_file() {
    let src = product().join("src");
    let declared = &graph().files;
    let stray: Vec<String> = sources()
        .into_iter()
        .map(|f| Path::new("src").join(f.strip_prefix(&src).expect("under src")))
        .filter(|f| f != Path::new("src/main.rs") && !declared.contains(f))
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        declared.len() > 100,
        "the module tree was read from src/lib.rs: {} files",
        declared.len()
    );
    assert!(
        stray.is_empty(),
        "source files no `mod` declares (the graph would miss them): {stray:?}"
    );
}

/// No circle at one level; every circle found printed, with its arrows.
fn no_circle_at(level: &str, arrows: &circles::Arrows) {
    let found = circles::components(arrows);
    let drawn = circles::describe(level, arrows, &found);
    assert!(
        found.is_empty(),
        "import circles among {level}: cut one arrow of each\n{drawn}"
    );
}

#[test]
fn no_import_circle_joins_modules() {
    no_circle_at("modules", &circles::modules(graph()));
}

#[test]
fn no_import_circle_joins_top_level_folders() {
    no_circle_at("folders", &circles::folders(graph()));
}

/// The crates in the order their arrows go: each names only crates before it.
const CRATES: [&str; 6] = [
    "sluice-mcp",
    "sluice-testkit",
    "sluice",
    "sluice-demo",
    "sluice-cli",
    "sluice-bench",
];

/// The workspace crates a crate's manifest names (dependencies of every kind), by package name.
fn crate_arrows(manifest: &Path) -> (String, Vec<String>) {
    let text = std::fs::read_to_string(manifest).expect("read a Cargo.toml");
    let doc: toml::Table = toml::from_str(&text).expect("a Cargo.toml parses");
    let name = doc["package"]["name"]
        .as_str()
        .expect("a package name")
        .to_owned();
    let mut named = Vec::new();
    for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
        for (dep, _) in doc
            .get(section)
            .and_then(|s| s.as_table())
            .into_iter()
            .flatten()
        {
            if CRATES.contains(&dep.as_str()) {
                named.push(dep.clone());
            }
        }
    }
    (name, named)
}

#[test]
fn the_crate_graph_has_no_back_edge() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut manifests = vec![root.join("Cargo.toml")];
    manifests.extend(members().into_iter().map(|c| c.join("Cargo.toml")));
    let mut seen = Vec::new();
    let mut back = Vec::new();
    for m in &manifests {
        let (name, named) = crate_arrows(m);
        let at = CRATES
            .iter()
            .position(|c| *c == name)
            .unwrap_or_else(|| panic!("{name} is not in CRATES: give it its place"));
        for dep in named {
            if CRATES.iter().position(|c| *c == dep) >= Some(at) {
                back.push(format!("{name} -> {dep}"));
            }
        }
        seen.push(name);
    }
    seen.sort();
    let mut all: Vec<String> = CRATES.iter().map(|c| (*c).to_owned()).collect();
    all.sort();
    assert_eq!(seen, all, "every crate of CRATES is a workspace member");
    assert!(
        back.is_empty(),
        "arrows against the crates' order {CRATES:?}: {back:?}"
    );
    assert_eq!(
        crate_arrows(&root.join("crates/sluice-mcp/Cargo.toml")).1,
        Vec::<String>::new(),
        "the protocol model names no crate of ours"
    );
}

/// The stages (routing, policy, dispatch, lists, discovery, listen) and everything below them
/// take narrow handles (the `Reach`: catalog, scopes and visibility rules; the `Policy`:
/// governor, keys, a round's timings; the `Dispatcher`; bridge A's `Bridge`; the `Forwarder`;
/// the `Catalog` and `Link`; the keys; the client), never the whole generation: none names the
/// composition root. Only the fronts (`pipeline`, `bridge_b`, `service`, `server`, `internal`),
/// the stage runner (`stages`) and the process's own tasks (`background`, `reload`, `inspect`)
/// do, and they build the handles.
#[test]
fn the_stages_and_what_is_below_them_name_no_gateway() {
    const BELOW: [&str; 27] = [
        "audit",
        "auth",
        "bridge",
        "catalog",
        "client_sessions",
        "cluster",
        "config",
        "connections",
        "ctx",
        "dispatch",
        "edge",
        "error",
        "forward",
        "handoff",
        "link",
        "listen",
        "login",
        "metrics",
        "policy",
        "respond",
        "route",
        "shares",
        "state",
        "streams",
        "telemetry",
        "upstream",
        "validate",
    ];
    let edges = &graph().edges;
    let gateway: Module = vec!["gateway".to_owned()];
    let mut named = Vec::new();
    for (m, to) in edges {
        let path = m.join("::");
        let below = BELOW
            .iter()
            .any(|b| path == *b || path.starts_with(&format!("{b}::")));
        if below && to.contains_key(&gateway) {
            named.push(path);
        }
    }
    assert!(
        !edges.is_empty()
            && edges
                .keys()
                .any(|m| m.first().map(String::as_str) == Some("bridge")),
        "the graph reads src/"
    );
    assert!(
        named.is_empty(),
        "these take the whole gateway instead of a narrow handle: {named:?}"
    );
}

/// The upstream client (`upstream/`, and `link/` that chooses among its wires) is below every
/// stage: it names the protocol model, the config, the routing data its tables are made of and
/// a few leaves (text escaping, shares, trace context, the audit note, the internal principal's
/// name, the replicas' Redis store where the token vault is shared), never a stage, the catalog, a bridge or the root. A stage calls down into it; what
/// goes up (a session's list changes) goes as typed events on a channel.
#[test]
fn the_upstream_client_names_no_stage() {
    const MAY_NAME: [&str; 12] = [
        "upstream",
        // The operator plane's event bus (a leaf): health changes are published there.
        "events",
        "link",
        "cluster",
        "config",
        "route",
        "escape",
        "shares",
        "telemetry",
        "audit",
        "auth",
        "state",
    ];
    let mut named = Vec::new();
    for (m, to) in &graph().edges {
        if !matches!(m.first().map(String::as_str), Some("upstream" | "link")) {
            continue;
        }
        for (target, site) in to {
            let top = target.first().map(String::as_str).unwrap_or("");
            if !MAY_NAME.contains(&top) {
                named.push(format!(
                    "{} -> {} at {site}",
                    m.join("::"),
                    target.join("::")
                ));
            }
        }
    }
    assert!(
        graph()
            .edges
            .keys()
            .any(|m| m.first().map(String::as_str) == Some("link")),
        "the graph reads link/"
    );
    assert!(
        named.is_empty(),
        "the upstream client names a stage: {named:?}"
    );
}

/// An upstream's wire is read in one place, `link/` (the upstream abstraction); the stages
/// ask it. `upstream/wire.rs` defines `Wire` and the closed `Client` enum (one arm per wire)
/// and `upstream/mod.rs` computes an upstream's arm; everything else only builds a probed
/// status with one.
#[test]
fn the_upstream_era_is_switched_on_only_in_link() {
    const READS: [&str; 12] = [
        "Wire::Modern =>",
        "Wire::Legacy =>",
        ".wire ==",
        "== Wire::",
        "Wire::Modern)",
        "Wire::Legacy)",
        ".wire {",
        "Client::Streamable",
        "Client::Sessions",
        "Client::Sse",
        "Client::Stdio",
        ".client(&",
    ];
    let src = product().join("src");
    let mut found = Vec::new();
    for f in sources() {
        let m = module_of(&src, &f).join("::");
        if matches!(m.as_str(), "link" | "upstream" | "upstream::wire")
            || m.starts_with("link::")
            || m.starts_with("bin")
            || m.starts_with("demo")
        {
            continue;
        }
        let text = code(&std::fs::read_to_string(&f).expect("read a source file"));
        for r in READS.iter().filter(|r| text.contains(**r)) {
            found.push(format!("{m}: {r}"));
        }
    }
    let link = code(&std::fs::read_to_string(src.join("link/mod.rs")).expect("read link/mod.rs"));
    // Every operation matches each of the four arms by name (no catch-all hides a new one).
    for arm in [
        "Client::Streamable",
        "Client::Sessions",
        "Client::Sse",
        "Client::Stdio(",
    ] {
        assert!(
            link.matches(arm).count() >= 4,
            "link/mod.rs names {arm} in each operation"
        );
    }
    assert!(
        !link.contains("_ =>"),
        "link/mod.rs matches with no catch-all arm"
    );
    assert!(found.is_empty(), "era switches outside link/: {found:?}");
}

#[test]
fn no_source_file_is_over_500_lines() {
    let long: Vec<String> = all_sources()
        .into_iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(&f).ok()?.lines().count();
            (n > 500).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "files over 500 lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn no_function_is_over_80_lines() {
    let mut long = Vec::new();
    for f in all_sources() {
        let text = std::fs::read_to_string(&f).expect("read a source file");
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let l = lines[i].trim_start();
            let is_fn = declares_fn(l);
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
                long.push(format!(
                    "{}:{} {} ({n} lines)",
                    f.display(),
                    start + 1,
                    l.chars().take(60).collect::<String>()
                ));
            }
            i += 1;
        }
    }
    assert!(
        long.is_empty(),
        "functions over 80 lines:\n{}",
        long.join("\n")
    );
}

/// Whether a line (its indent trimmed) starts a function: `fn`, after any visibility
/// (`pub`, `pub(crate)`, `pub(super)`, `pub(in …)`) and qualifiers (`const`, `async`, `unsafe`).
fn declares_fn(line: &str) -> bool {
    let mut rest = line;
    if let Some(r) = rest.strip_prefix("pub") {
        rest = match r.strip_prefix('(') {
            Some(inner) => match inner.find(')') {
                Some(end) => &inner[end + 1..],
                None => return false,
            },
            None => r,
        };
        rest = match rest.strip_prefix(' ') {
            Some(r) => r,
            None => return false,
        };
    }
    for q in ["const ", "async ", "unsafe "] {
        rest = rest.strip_prefix(q).unwrap_or(rest);
    }
    rest.starts_with("fn ")
}

#[test]
fn a_function_is_found_whatever_its_visibility_and_qualifiers() {
    for yes in [
        "fn a()",
        "pub fn a()",
        "pub(super) async fn a()",
        "pub(in crate::x) fn a()",
        "pub(crate) const fn a()",
        "async fn a()",
    ] {
        assert!(declares_fn(yes), "{yes}");
    }
    for no in [
        "// fn a()",
        "let fnx = 1;",
        "publish(fn_a)",
        "pub struct Fn;",
        "fnord()",
    ] {
        assert!(!declares_fn(no), "{no}");
    }
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
        .filter_map(|l| {
            l.trim()
                .strip_prefix("(Method::")?
                .split_once(", \"")?
                .1
                .strip_suffix("\"),")
                .map(str::to_owned)
        })
        .collect()
}

#[test]
fn method_names_are_spelled_once_in_the_method_enum() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let table = root.join("crates/sluice-mcp/src/method.rs");
    let names =
        method_names(&std::fs::read_to_string(&table).expect("read sluice-mcp's method.rs"));
    assert!(
        names.len() >= 20,
        "the mapping was not found in sluice-mcp's method.rs: {names:?}"
    );
    let mut found = Vec::new();
    for f in all_sources() {
        let rel = f.strip_prefix(&root).expect("under the workspace");
        // The benchmark and the demo are peers that write the wire as a client or server would;
        // unit tests write requests as text.
        let peer = [
            "crates/sluice-bench",
            "crates/sluice-demo",
            "crates/sluice-testkit",
        ]
        .iter()
        .any(|p| rel.starts_with(p));
        let tests = rel.file_stem().is_some_and(|s| s == "tests")
            || rel.parent().is_some_and(|p| p.ends_with("tests"));
        if f == table || peer || tests {
            continue;
        }
        let text = code(&std::fs::read_to_string(&f).expect("read a source file"));
        for n in &names {
            if text.contains(&format!("\"{n}\"")) {
                found.push(format!("{}: \"{n}\"", rel.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "method names spelled outside the Method enum:\n{}",
        found.join("\n")
    );
}
