//! Import circles in the module graph (issues 11 and 30).
//!
//! Takes the graph `graph.rs` reads; gives its circles (strongly connected components of more
//! than one node) among modules and among top-level folders (`gateway`, `bridge`, `upstream`:
//! the first segment under `crate::`), each drawn with one example arrow per pair (the
//! file:line that makes it). Refuses nothing itself: the test refuses any circle.

use std::collections::{BTreeMap, BTreeSet};

use super::graph::{Graph, Module, Site};

/// One arrow between two nodes, with the module-level arrow and site that make it.
#[derive(Clone, Debug)]
pub(crate) struct Example {
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) site: Site,
}

/// Nodes (`a::b` or `a`) to the nodes they name, each with one example.
pub(crate) type Arrows = BTreeMap<String, BTreeMap<String, Example>>;

fn name(m: &Module) -> String {
    if m.is_empty() {
        "crate".to_owned()
    } else {
        m.join("::")
    }
}

/// The module graph as arrows between module names.
pub(crate) fn modules(g: &Graph) -> Arrows {
    let mut out = Arrows::new();
    for (from, to) in &g.edges {
        let row = out.entry(name(from)).or_default();
        for (t, site) in to {
            row.insert(
                name(t),
                Example {
                    from: name(from),
                    to: name(t),
                    site: site.clone(),
                },
            );
        }
    }
    out
}

/// The graph collapsed to top-level folders; an arrow inside one folder is dropped, and each
/// folder pair keeps its first example (by file and line).
pub(crate) fn folders(g: &Graph) -> Arrows {
    let mut out = Arrows::new();
    for (from, to) in &g.edges {
        let Some(f) = from.first() else { continue };
        let row = out.entry(f.clone()).or_default();
        for (t, site) in to {
            let top = &t[0];
            if top == f {
                continue;
            }
            let e = Example {
                from: name(from),
                to: name(t),
                site: site.clone(),
            };
            match row.get(top) {
                Some(old) if old.site <= e.site => {}
                _ => {
                    row.insert(top.clone(), e);
                }
            }
        }
    }
    out
}

/// The strongly connected components with more than one node (Tarjan), each sorted.
pub(crate) fn components(a: &Arrows) -> Vec<BTreeSet<String>> {
    struct T<'a> {
        a: &'a Arrows,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    impl<'a> T<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on.insert(v);
            for w in self.a.get(v).into_iter().flat_map(|r| r.keys()) {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let l = self.low[w.as_str()].min(self.low[v]);
                    self.low.insert(v, l);
                } else if self.on.contains(w.as_str()) {
                    let l = self.index[w.as_str()].min(self.low[v]);
                    self.low.insert(v, l);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = BTreeSet::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    comp.insert(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    self.out.push(comp);
                }
            }
        }
    }
    let mut t = T {
        a,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in a.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out.sort();
    t.out
}

/// Each component with its members and one example per arrow inside it.
pub(crate) fn describe(level: &str, a: &Arrows, comps: &[BTreeSet<String>]) -> String {
    let mut s = String::new();
    for c in comps {
        s += &format!(
            "{level} circle of {}: {}\n",
            c.len(),
            c.iter().cloned().collect::<Vec<_>>().join(" ")
        );
        for from in c {
            for (to, e) in a
                .get(from)
                .into_iter()
                .flatten()
                .filter(|(to, _)| c.contains(*to))
            {
                let via = if (&e.from, &e.to) == (from, to) {
                    String::new()
                } else {
                    format!(" ({} -> {})", e.from, e.to)
                };
                s += &format!("  {from} -> {to}{via} at {}\n", e.site);
            }
        }
    }
    s
}
