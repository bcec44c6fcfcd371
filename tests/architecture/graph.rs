//! The module graph of a crate, read from its syntax tree with `syn` (issue 30).
//!
//! Takes the crate's root file (`src/lib.rs`) and a way to read a file; gives the module tree
//! (from the `mod` declarations: `#[path]` honoured, inline `mod x { … }` included) and, for each
//! module, the modules it names, each with the first file:line that names it; refuses (an `Err`
//! naming the file) a file that does not parse or a declared module whose file is missing.
//!
//! A module names another when one of its paths lands there:
//! - `use` trees, expanded: nested braces, `self`, globs, renames, `pub use` re-exports;
//! - paths of two or more segments in expressions, types, patterns, bounds and macro names
//!   (`crate::a::b::f()`, `super::x::Y`, `legacy::session::Changed` after `use …::legacy`);
//! - paths in macro arguments, read from the tokens (`matches!(x, crate::a::B)`, `$crate::…`);
//! - whole-path strings in attributes (`#[serde(with = "super::limits::ms")]`).
//!
//! A path is resolved from its head: `crate`, `self`, `super` (repeated), a name a `use` of the
//! same module binds (resolved the same way, so `use legacy::session;` after `use
//! crate::upstream::legacy;` works), a child module, or a child module or `use` name of a
//! module the module glob-imports. Any other head is another crate or a local item and names
//! no module. A resolved path lands in its longest prefix that is a module.
//!
//! Not counted, by decision:
//! - `#[cfg(test)]` modules and items (and the files they declare, which are located but not
//!   read): unit tests sit beside what they test and may reach into any module to build it;
//!   they are not the product's dependency direction, and a test importing its parent is not
//!   a circle worth refusing. Integration tests (`tests/`) are another crate anyway.
//! - A module naming itself or one of its ancestors: a child sees its parent's items by the
//!   module tree (the parent declares it); only a path that leaves the subtree is an arrow.
//! - One-segment paths outside `use` (`Gateway`, `x`): they name what a `use` of the same
//!   module already named, and a local variable must not pass for a module.
//! - `src/main.rs` and `src/bin/`: other crates (they name the library as `sluice::`).
//! - Doc comments (`[`crate::a::B`]` links): they are not code.
//!
//! A `use` or path inside a function body counts for the whole module (Rust scopes it to the
//! block; a module-wide scope can only add arrows, never hide one).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

use crate::paths::{attrs, is_test, Binds, Paths};

pub(crate) type Module = Vec<String>;

/// Where a path was written: a file (as the reader was given it) and a 1-based line.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Site {
    pub(crate) file: String,
    pub(crate) line: usize,
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

pub(crate) struct Graph {
    pub(crate) modules: BTreeSet<Module>,
    /// Each module's arrows: the modules it names, each with the first site that names it.
    pub(crate) edges: BTreeMap<Module, BTreeMap<Module, Site>>,
    /// Every file the module tree declares, `#[cfg(test)]` ones included (located, not read).
    pub(crate) files: BTreeSet<PathBuf>,
}

/// One module's own items (its inline and file children removed) and what its `use`s bind.
struct Scope {
    module: Module,
    file: String,
    items: Vec<syn::Item>,
    children: BTreeSet<String>,
    /// The names `use` binds here, each to its path as written.
    uses: BTreeMap<String, Vec<String>>,
    /// The paths glob-imported here, as written.
    globs: Vec<Vec<String>>,
}

/// Reads the crate whose root file is `root`; `read` gives a file's text (None: no such file).
pub(crate) fn read(root: &Path, read: &dyn Fn(&Path) -> Option<String>) -> Result<Graph, String> {
    let mut tree = Tree {
        read,
        scopes: Vec::new(),
        files: BTreeSet::new(),
    };
    let dir = root.parent().unwrap_or(Path::new("")).to_path_buf();
    tree.file(Vec::new(), root, dir)?;
    let scopes: BTreeMap<Module, Scope> = tree
        .scopes
        .into_iter()
        .map(|s| (s.module.clone(), s))
        .collect();
    let modules: BTreeSet<Module> = scopes.keys().cloned().collect();
    let mut edges = BTreeMap::new();
    for scope in scopes.values() {
        let mut paths = Paths {
            file: &scope.file,
            found: Vec::new(),
        };
        for item in &scope.items {
            paths.visit_item(item);
        }
        let mut to: BTreeMap<Module, Site> = BTreeMap::new();
        for (path, site) in paths.found {
            let Some(abs) = resolve(&scopes, &scope.module, &path, 0) else {
                continue;
            };
            let Some(target) = (1..=abs.len())
                .rev()
                .map(|n| abs[..n].to_vec())
                .find(|p| modules.contains(p))
            else {
                continue;
            };
            if scope.module.starts_with(&target) {
                continue;
            }
            let first = to.entry(target).or_insert_with(|| site.clone());
            if site < *first {
                *first = site;
            }
        }
        edges.insert(scope.module.clone(), to);
    }
    Ok(Graph {
        modules,
        edges,
        files: tree.files,
    })
}

struct Tree<'a> {
    read: &'a dyn Fn(&Path) -> Option<String>,
    scopes: Vec<Scope>,
    files: BTreeSet<PathBuf>,
}

impl Tree<'_> {
    /// Reads one file as `module`; `dir` is where its child modules' files are.
    fn file(&mut self, module: Module, path: &Path, dir: PathBuf) -> Result<(), String> {
        let label = path.display().to_string();
        let text = (self.read)(path)
            .ok_or_else(|| format!("{label}: no such file (declared by a `mod`)"))?;
        let parsed = syn::parse_file(&text)
            .map_err(|e| format!("{label}:{}: {e}", e.span().start().line))?;
        self.files.insert(path.to_path_buf());
        let here = path.parent().unwrap_or(Path::new("")).to_path_buf();
        self.module(module, &label, parsed.items, &dir, &here)
    }

    /// One module's items: children are read as modules of their own, test items dropped.
    fn module(
        &mut self,
        module: Module,
        label: &str,
        items: Vec<syn::Item>,
        dir: &Path,
        here: &Path,
    ) -> Result<(), String> {
        let mut scope = Scope {
            module,
            file: label.to_owned(),
            items: Vec::new(),
            children: BTreeSet::new(),
            uses: BTreeMap::new(),
            globs: Vec::new(),
        };
        for item in items {
            let syn::Item::Mod(m) = item else {
                if !is_test(attrs(&item)) {
                    scope.items.push(item);
                }
                continue;
            };
            let name = m.ident.to_string();
            let child: Module = [scope.module.clone(), vec![name.clone()]].concat();
            let file = match path_attr(&m.attrs) {
                Some(p) => here.join(p),
                None if m.content.is_none() => {
                    let flat = dir.join(format!("{name}.rs"));
                    let nested = dir.join(&name).join("mod.rs");
                    if (self.read)(&flat).is_none() && (self.read)(&nested).is_some() {
                        nested
                    } else {
                        flat
                    }
                }
                None => PathBuf::new(),
            };
            if is_test(&m.attrs) {
                if m.content.is_none() {
                    self.files.insert(file);
                }
                continue;
            }
            scope.children.insert(name.clone());
            match m.content {
                Some((_, inner)) => self.module(child, label, inner, &dir.join(&name), here)?,
                None => {
                    let child_dir = if path_attr(&m.attrs).is_some() {
                        file.parent().unwrap_or(Path::new("")).to_path_buf()
                    } else {
                        dir.join(&name)
                    };
                    self.file(child, &file, child_dir)?
                }
            }
        }
        let mut binds = Binds::default();
        for item in &scope.items {
            binds.visit_item(item);
        }
        (scope.uses, scope.globs) = (binds.uses, binds.globs);
        self.scopes.push(scope);
        Ok(())
    }
}

/// The absolute path `path` (as written in `module`) stands for, if it starts in this crate.
fn resolve(
    scopes: &BTreeMap<Module, Scope>,
    module: &Module,
    path: &[String],
    depth: usize,
) -> Option<Module> {
    let (head, rest) = path.split_first()?;
    if depth > 16 {
        return None;
    }
    let scope = scopes.get(module)?;
    let base: Module = match head.as_str() {
        "crate" => Vec::new(),
        "self" => module.clone(),
        "super" => {
            let ups = 1 + rest.iter().take_while(|s| *s == "super").count();
            let keep = module.len().checked_sub(ups)?;
            return Some([&module[..keep], &rest[ups - 1..]].concat());
        }
        _ if scope.uses.contains_key(head) => {
            return Some(
                [
                    resolve(scopes, module, &scope.uses[head], depth + 1)?,
                    rest.to_vec(),
                ]
                .concat(),
            )
        }
        _ if scope.children.contains(head) => {
            return Some([module.clone(), path.to_vec()].concat())
        }
        _ => {
            // A name a glob brought in: a child module of the globbed module, or a name its `use`s bind.
            let glob = scope
                .globs
                .iter()
                .filter_map(|g| resolve(scopes, module, g, depth + 1))
                .find_map(|g| {
                    let s = scopes.get(&g)?;
                    if s.children.contains(head) {
                        Some([g.clone(), path.to_vec()].concat())
                    } else {
                        Some(
                            [
                                resolve(scopes, &g, &s.uses.get(head)?.clone(), depth + 1)?,
                                rest.to_vec(),
                            ]
                            .concat(),
                        )
                    }
                });
            return glob;
        }
    };
    Some([base, rest.to_vec()].concat())
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}
