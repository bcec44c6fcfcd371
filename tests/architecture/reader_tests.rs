//! The graph reader and the circles, on small crates written here (issue 30): each way of
//! naming a module is read as an arrow to the right module, with the right line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::circles;
use crate::graph::{self, Graph};

/// Reads a crate made of `files` (path, text); `src/lib.rs` is its root.
fn read(files: &[(&str, &str)]) -> Result<Graph, String> {
    let files: BTreeMap<&Path, String> = files
        .iter()
        .map(|(p, t)| (Path::new(*p), t.to_string()))
        .collect();
    graph::read(Path::new("src/lib.rs"), &|p| files.get(p).cloned())
}

/// The arrows from `from` as `to@line`, sorted.
fn arrows(g: &Graph, from: &str) -> Vec<String> {
    let m: Vec<String> = if from.is_empty() {
        Vec::new()
    } else {
        from.split("::").map(str::to_owned).collect()
    };
    let to = g
        .edges
        .get(&m)
        .unwrap_or_else(|| panic!("no module {from}: {:?}", g.modules));
    to.iter()
        .map(|(t, s)| format!("{}@{}", t.join("::"), s.line))
        .collect()
}

/// A crate with `a`, `b` (with `b::inner` and `b::inner::deep`), `c`, and `a`'s file as given.
fn with_a(a: &str) -> Graph {
    read(&[
        ("src/lib.rs", "pub mod a;\npub mod b;\npub mod c;\n"),
        ("src/a.rs", a),
        ("src/b/mod.rs", "pub mod inner;\npub struct B;\n"),
        (
            "src/b/inner.rs",
            "pub mod deep;\npub struct X;\npub struct Y;\n",
        ),
        ("src/b/inner/deep.rs", "pub fn f() {}\n"),
        ("src/c.rs", "pub fn go() {}\npub struct T;\n"),
    ])
    .expect("the crate reads")
}

#[test]
fn a_use_tree_with_nested_braces_names_every_module_inside() {
    let g = with_a("use crate::{b::{self, inner::{X, deep::{f as g}}}, c::T};\n");
    assert_eq!(
        arrows(&g, "a"),
        ["b@1", "b::inner@1", "b::inner::deep@1", "c@1"]
    );
}

#[test]
fn self_and_super_resolve_against_the_module_of_the_file() {
    let g = read(&[
        ("src/lib.rs", "mod a;\nmod c;\n"),
        ("src/a/mod.rs", "mod x;\nmod y;\n"),
        (
            "src/a/x.rs",
            "mod z;\nuse super::y::T;\nuse self::z::U;\nfn f() { super::super::c::go(); }\n",
        ),
        ("src/a/x/z.rs", "pub struct U;\n"),
        ("src/a/y.rs", "pub struct T;\n"),
        ("src/c.rs", "pub fn go() {}\n"),
    ])
    .expect("the crate reads");
    assert_eq!(arrows(&g, "a::x"), ["a::x::z@3", "a::y@2", "c@4"]);
}

#[test]
fn a_glob_names_its_module_and_brings_its_child_modules_into_scope() {
    let g = with_a("use crate::b::*;\n\nfn f() { inner::deep::f(); }\n");
    assert_eq!(arrows(&g, "a"), ["b@1", "b::inner::deep@3"]);
}

#[test]
fn a_rename_is_followed_where_the_new_name_is_used() {
    let g = with_a("use crate::b::inner as i;\nuse i::deep as d;\n\nfn f() { d::f(); }\n");
    assert_eq!(arrows(&g, "a"), ["b::inner@1", "b::inner::deep@2"]);
    let hidden = with_a("use crate::c::T as _;\n");
    assert_eq!(arrows(&hidden, "a"), ["c@1"]);
}

#[test]
fn a_module_named_by_use_and_then_entered_in_an_expression_is_the_inner_module() {
    // `use …::{self}` and then a longer path in the body: the arrow goes to the module the
    // body enters, on the body's line (the reader of issue 11 saw only `b::inner`).
    let g = with_a("use crate::b::inner::{self};\n\nfn f() {\n    inner::deep::f();\n}\n");
    assert_eq!(arrows(&g, "a"), ["b::inner@1", "b::inner::deep@4"]);
}

#[test]
fn paths_in_expressions_types_macros_and_attributes_are_arrows() {
    let g = read(&[
        ("src/lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\nmod e;\n"),
        ("src/a.rs", "fn f(t: crate::b::T) -> bool {\n    matches!(t, crate::c::K)\n}\n"),
        ("src/b.rs", "#[derive(serde::Deserialize)]\nstruct S {\n    #[serde(with = \"crate::d::ms\")]\n    x: u64,\n}\n"),
        ("src/c.rs", "fn g() {\n    let _ = crate::e::go();\n}\n"),
        ("src/d.rs", "pub mod ms {}\n"),
        ("src/e.rs", "pub fn go() {}\n"),
    ])
    .expect("the crate reads");
    assert_eq!(arrows(&g, "a"), ["b@1", "c@2"]);
    assert_eq!(arrows(&g, "b"), ["d::ms@3"]);
    assert_eq!(arrows(&g, "c"), ["e@2"]);
}

#[test]
fn a_pub_use_reexport_is_an_arrow_and_a_path_through_it_lands_in_the_reexporter() {
    let g = read(&[
        ("src/lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("src/a.rs", "pub use crate::b::B;\n"),
        ("src/b.rs", "pub struct B;\n"),
        ("src/c.rs", "fn f(_: crate::a::B) {}\n"),
    ])
    .expect("the crate reads");
    assert_eq!(arrows(&g, "a"), ["b@1"]);
    assert_eq!(arrows(&g, "c"), ["a@1"]);
}

#[test]
fn cfg_test_modules_and_items_are_not_read_and_their_files_are_only_located() {
    let g = with_a(concat!(
        "#[cfg(test)]\nmod tests {\n    use crate::c::T;\n}\n",
        "#[cfg(test)]\n#[path = \"a_tests.rs\"]\nmod more;\n",
        "#[cfg(test)]\nfn helper() { crate::b::inner::deep::f(); }\n",
        "pub fn kept() { crate::b::inner::deep::f(); }\n",
    ));
    assert_eq!(arrows(&g, "a"), ["b::inner::deep@10"]);
    assert!(
        !g.modules
            .iter()
            .any(|m| m.last().is_some_and(|l| l == "tests" || l == "more")),
        "{:?}",
        g.modules
    );
    assert!(
        g.files.contains(Path::new("src/a_tests.rs")),
        "the test file is located: {:?}",
        g.files
    );
}

#[test]
fn a_module_naming_its_ancestor_or_an_outside_crate_makes_no_arrow() {
    let g = read(&[
        ("src/lib.rs", "mod a;\n"),
        ("src/a/mod.rs", "mod x;\npub struct A;\nuse x::X;\n"),
        ("src/a/x.rs", "use std::sync::Arc;\nuse crate::a::A;\nuse super::A as B;\npub struct X(Arc<A>, B, serde_json::Value);\n"),
    ])
    .expect("the crate reads");
    assert_eq!(arrows(&g, "a::x"), Vec::<String>::new());
    assert_eq!(arrows(&g, "a"), ["a::x@3"]);
}

#[test]
fn a_file_that_does_not_parse_or_is_missing_is_refused_by_name() {
    let broken = read(&[("src/lib.rs", "mod a;\n"), ("src/a.rs", "fn f( {\n")])
        .err()
        .expect("refused");
    assert!(broken.starts_with("src/a.rs:"), "{broken}");
    let missing = read(&[("src/lib.rs", "mod gone;\n")])
        .err()
        .expect("refused");
    assert!(
        missing.starts_with("src/gone.rs: no such file"),
        "{missing}"
    );
}

fn set(s: &str) -> BTreeSet<String> {
    s.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn a_circle_among_modules_and_a_cycle_among_folders_are_found_with_their_arrows() {
    // a::x -> b -> a::y: no circle among modules, a cycle between the folders a and b.
    let g = read(&[
        ("src/lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("src/a/mod.rs", "mod x;\nmod y;\n"),
        ("src/a/x.rs", "use crate::b::B;\n"),
        ("src/a/y.rs", "pub struct Y;\n"),
        (
            "src/b.rs",
            "pub struct B(crate::a::y::Y);\nfn f() { crate::c::go(); }\n",
        ),
        ("src/c.rs", "pub fn go() { let _ = crate::b::B; }\n"),
    ])
    .expect("the crate reads");
    let modules = circles::modules(&g);
    assert_eq!(circles::components(&modules), [set("b c")]);
    let folders = circles::folders(&g);
    assert_eq!(circles::components(&folders), [set("a b c")]);
    let drawn = circles::describe("folders", &folders, &circles::components(&folders));
    assert!(
        drawn.contains("a -> b (a::x -> b) at src/a/x.rs:1"),
        "{drawn}"
    );
    assert!(
        drawn.contains("b -> a (b -> a::y) at src/b.rs:1"),
        "{drawn}"
    );
}
