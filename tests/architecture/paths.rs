//! The paths one module writes, as written, each with its site (issue 30): what `graph.rs`
//! resolves into arrows.
//!
//! Takes a module's items (`syn`); gives the names its `use`s bind (`Binds`), every path it
//! writes (`Paths`: use trees expanded, paths of two or more segments in expressions, types,
//! patterns, bounds and macro names, `a::b` runs in macro arguments and attribute lists, and
//! attribute strings that are a whole path), and which items are unit tests (`is_test`);
//! refuses nothing (a path it cannot read is not a path).

use std::collections::BTreeMap;

use proc_macro2::{Spacing, TokenStream, TokenTree};
use syn::visit::Visit;

use crate::graph::Site;

/// The names the `use` items of one module bind, and its glob imports.
#[derive(Default)]
pub(crate) struct Binds {
    pub(crate) uses: BTreeMap<String, Vec<String>>,
    pub(crate) globs: Vec<Vec<String>>,
}

impl<'ast> Visit<'ast> for Binds {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if u.leading_colon.is_none() && !is_test(&u.attrs) {
            for (bound, path) in expand(&u.tree) {
                match bound {
                    Bound::Name(n) => {
                        self.uses.insert(n, path);
                    }
                    Bound::Glob => self.globs.push(path),
                    Bound::Hidden => {}
                }
            }
        }
    }
    fn visit_item(&mut self, i: &'ast syn::Item) {
        if !is_test(attrs(i)) {
            syn::visit::visit_item(self, i);
        }
    }
}

pub(crate) enum Bound {
    Name(String),
    Glob,
    /// `as _`: imported for its traits, binds no name.
    Hidden,
}

/// A use tree as flat paths, each with what it binds: `a::{self, b::{C, D as E}, f::*}` gives
/// `a` (a), `a::b::C` (C), `a::b::D` (E), `a::f` (a glob).
pub(crate) fn expand(tree: &syn::UseTree) -> Vec<(Bound, Vec<String>)> {
    fn go(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Bound, Vec<String>)>) {
        let named = |prefix: &[String], ident: &syn::Ident| {
            let name = ident.to_string();
            if name == "self" {
                prefix.to_vec()
            } else {
                [prefix, &[name]].concat()
            }
        };
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                go(&p.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let path = named(prefix, &n.ident);
                out.push((Bound::Name(path.last().cloned().unwrap_or_default()), path));
            }
            syn::UseTree::Rename(r) => {
                let bound = if r.rename == "_" {
                    Bound::Hidden
                } else {
                    Bound::Name(r.rename.to_string())
                };
                out.push((bound, named(prefix, &r.ident)));
            }
            syn::UseTree::Glob(_) => out.push((Bound::Glob, prefix.clone())),
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| go(t, prefix, out)),
        }
    }
    let mut out = Vec::new();
    go(tree, &mut Vec::new(), &mut out);
    out
}

/// Every path one module writes, as written, with its site.
pub(crate) struct Paths<'a> {
    pub(crate) file: &'a str,
    pub(crate) found: Vec<(Vec<String>, Site)>,
}

impl Paths<'_> {
    fn site(&self, span: proc_macro2::Span) -> Site {
        Site {
            file: self.file.to_owned(),
            line: span.start().line,
        }
    }

    /// `a :: b :: c` runs in a token stream (macro arguments, attributes).
    fn tokens(&mut self, tokens: TokenStream) {
        let mut run: Vec<String> = Vec::new();
        let (mut line, mut colons) = (0, 0);
        let file = self.file;
        let flush = |run: &mut Vec<String>, line: usize, found: &mut Vec<(Vec<String>, Site)>| {
            if run.len() >= 2 {
                found.push((
                    std::mem::take(run),
                    Site {
                        file: file.to_owned(),
                        line,
                    },
                ));
            }
            run.clear();
        };
        for tt in tokens {
            match tt {
                TokenTree::Ident(i) if run.is_empty() || colons == 2 => {
                    if run.is_empty() {
                        line = i.span().start().line;
                    }
                    run.push(i.to_string());
                    colons = 0;
                }
                TokenTree::Ident(i) => {
                    flush(&mut run, line, &mut self.found);
                    line = i.span().start().line;
                    run.push(i.to_string());
                    colons = 0;
                }
                TokenTree::Punct(p)
                    if p.as_char() == ':'
                        && !run.is_empty()
                        && (colons == 1 || p.spacing() == Spacing::Joint) =>
                {
                    colons += 1
                }
                TokenTree::Group(g) => {
                    flush(&mut run, line, &mut self.found);
                    colons = 0;
                    self.tokens(g.stream());
                }
                TokenTree::Literal(l) => {
                    flush(&mut run, line, &mut self.found);
                    colons = 0;
                    let whole = syn::parse2::<syn::LitStr>(TokenTree::Literal(l.clone()).into())
                        .ok()
                        .and_then(|s| s.parse::<syn::Path>().ok());
                    if let Some(p) =
                        whole.filter(|p| p.leading_colon.is_none() && p.segments.len() >= 2)
                    {
                        let site = self.site(l.span());
                        self.found.push((
                            p.segments.iter().map(|s| s.ident.to_string()).collect(),
                            site,
                        ));
                    }
                }
                TokenTree::Punct(_) => {
                    flush(&mut run, line, &mut self.found);
                    colons = 0;
                }
            }
        }
        flush(&mut run, line, &mut self.found);
    }
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        if !is_test(attrs(i)) {
            syn::visit::visit_item(self, i);
        }
    }
    fn visit_impl_item(&mut self, i: &'ast syn::ImplItem) {
        let a = match i {
            syn::ImplItem::Const(c) => &c.attrs,
            syn::ImplItem::Fn(f) => &f.attrs,
            syn::ImplItem::Type(t) => &t.attrs,
            syn::ImplItem::Macro(m) => &m.attrs,
            _ => return syn::visit::visit_impl_item(self, i),
        };
        if !is_test(a) {
            syn::visit::visit_impl_item(self, i);
        }
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if u.leading_colon.is_some() {
            return;
        }
        let site = self.site(u.use_token.span);
        for (_, path) in expand(&u.tree) {
            self.found.push((path, site.clone()));
        }
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() && p.segments.len() >= 2 {
            let site = self.site(p.segments[0].ident.span());
            self.found.push((
                p.segments.iter().map(|s| s.ident.to_string()).collect(),
                site,
            ));
        }
        syn::visit::visit_path(self, p);
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        syn::visit::visit_macro(self, m);
        self.tokens(m.tokens.clone());
    }
    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        if a.path().is_ident("doc") {
            return;
        }
        syn::visit::visit_attribute(self, a);
        match &a.meta {
            syn::Meta::List(l) => self.tokens(l.tokens.clone()),
            syn::Meta::NameValue(_) | syn::Meta::Path(_) => {}
        }
    }
}

/// `#[cfg(test)]` or `#[cfg(all(…, test, …))]`: compiled only for unit tests.
pub(crate) fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let syn::Meta::List(l) = &a.meta else {
            return false;
        };
        if !l.path.is_ident("cfg") {
            return false;
        }
        let mut toks = l.tokens.clone().into_iter();
        match (toks.next(), toks.next()) {
            (Some(TokenTree::Ident(i)), None) => i == "test",
            (Some(TokenTree::Ident(i)), Some(TokenTree::Group(g))) if i == "all" => g
                .stream()
                .into_iter()
                .any(|t| matches!(t, TokenTree::Ident(i) if i == "test")),
            _ => false,
        }
    })
}

pub(crate) fn attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item as I;
    match item {
        I::Const(i) => &i.attrs,
        I::Enum(i) => &i.attrs,
        I::ExternCrate(i) => &i.attrs,
        I::Fn(i) => &i.attrs,
        I::ForeignMod(i) => &i.attrs,
        I::Impl(i) => &i.attrs,
        I::Macro(i) => &i.attrs,
        I::Mod(i) => &i.attrs,
        I::Static(i) => &i.attrs,
        I::Struct(i) => &i.attrs,
        I::Trait(i) => &i.attrs,
        I::TraitAlias(i) => &i.attrs,
        I::Type(i) => &i.attrs,
        I::Union(i) => &i.attrs,
        I::Use(i) => &i.attrs,
        _ => &[],
    }
}
