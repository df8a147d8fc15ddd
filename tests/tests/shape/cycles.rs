//! Import cycles between the modules of one crate.
//!
//! Module A depends on module B when A's code names a path into B: a `use`
//! or an inline `crate::…`, `super::…`, `self::…` or child-module path,
//! also in an attribute's arguments (a clap default, say). A
//! name that B only re-exports (`pub use`, or any `use` a child reaches
//! through `super::`) is followed to the module that defines it, so a
//! cycle cannot hide behind a re-export. Edges are lifted to siblings: an
//! edge from `a::x::y` to `a::z` is one from `a::x` to `a::z`; a module
//! naming its parent or its own children is no edge. Any cycle among the
//! children of one module is a finding.

use std::collections::{BTreeMap, BTreeSet};

use syn::visit::Visit;

use crate::tree::{CrateTree, Module, is_cfg_test, item_attrs};

/// Where an edge was seen: file, line and the path as written.
type Evidence = String;

pub fn cycles(trees: &[CrateTree]) -> Vec<String> {
    let mut found = Vec::new();
    for tree in trees {
        let edges = sibling_edges(tree);
        for component in strongly_connected(&edges) {
            let mut lines = vec![format!(
                "{}: import cycle among {}",
                tree.name,
                component
                    .iter()
                    .map(|m| display(m))
                    .collect::<Vec<_>>()
                    .join(", ")
            )];
            for ((from, to), evidence) in &edges {
                if component.contains(from) && component.contains(to) {
                    lines.push(format!(
                        "    {} -> {}: {evidence}",
                        display(from),
                        display(to)
                    ));
                }
            }
            found.push(lines.join("\n"));
        }
    }
    found
}

fn display(path: &[String]) -> String {
    if path.is_empty() {
        "crate".to_string()
    } else {
        path.join("::")
    }
}

/// Edges between sibling modules, each with the first place it was seen.
pub fn sibling_edges(tree: &CrateTree) -> BTreeMap<(Vec<String>, Vec<String>), Evidence> {
    let mut edges = BTreeMap::new();
    for (id, m) in tree.modules.iter().enumerate() {
        if m.is_test {
            continue;
        }
        for (written, line) in references(m) {
            let Some(target) = absolute(tree, id, &written) else {
                continue;
            };
            let Some(to) = resolve(tree, &target, 0) else {
                continue;
            };
            let to = &tree.modules[to].path;
            let common = m.path.iter().zip(to).take_while(|(a, b)| a == b).count();
            if common == m.path.len() || common == to.len() {
                continue; // itself, its parent chain, or its own children
            }
            let key = (m.path[..=common].to_vec(), to[..=common].to_vec());
            edges
                .entry(key)
                .or_insert_with(|| format!("{}:{line} `{}`", m.file.display(), written.join("::")));
        }
    }
    edges
}

/// Every path the module's non-test code names, with its line: `use`
/// trees flattened, and inline paths.
fn references(m: &Module) -> Vec<(Vec<String>, usize)> {
    let mut v = Paths::default();
    for item in &m.items {
        if matches!(item, syn::Item::Mod(_)) || is_cfg_test(item_attrs(item)) {
            continue;
        }
        v.visit_item(item);
    }
    v.found
}

#[derive(Default)]
struct Paths {
    found: Vec<(Vec<String>, usize)>,
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        for (path, _) in flatten_use(&u.tree) {
            let line = u.use_token.span.start().line;
            self.found.push((path, line));
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() && !p.segments.is_empty() {
            let line = p.segments[0].ident.span().start().line;
            let segments = p.segments.iter().map(|s| s.ident.to_string()).collect();
            self.found.push((segments, line));
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}

    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        // Doc links and derives name no module of ours, but an attribute's
        // arguments may (`#[arg(default_value_t = crate::http::LIMIT)]`).
        if let syn::Meta::List(list) = &a.meta {
            token_paths(list.tokens.clone(), &mut self.found);
        }
    }
}

/// The paths in an attribute's tokens that start at `crate`, `super` or
/// `self` (`crate::a::B`), with their lines: the only ones that can name a
/// module of ours without a `use`.
fn token_paths(tokens: proc_macro2::TokenStream, found: &mut Vec<(Vec<String>, usize)>) {
    use proc_macro2::TokenTree;
    let mut path: Vec<String> = Vec::new();
    let mut line = 0;
    let mut colons = 0;
    for tt in tokens {
        match tt {
            TokenTree::Ident(i) if colons == 2 && !path.is_empty() => {
                path.push(i.to_string());
                colons = 0;
            }
            TokenTree::Punct(p) if p.as_char() == ':' && !path.is_empty() && colons < 2 => {
                colons += 1;
            }
            other => {
                flush(&mut path, line, found);
                colons = 0;
                match other {
                    TokenTree::Ident(i)
                        if matches!(i.to_string().as_str(), "crate" | "super" | "self") =>
                    {
                        line = i.span().start().line;
                        path.push(i.to_string());
                    }
                    TokenTree::Group(g) => token_paths(g.stream(), found),
                    _ => {}
                }
            }
        }
    }
    flush(&mut path, line, found);
}

/// A path of at least two names is one; a lone `self` is none.
fn flush(path: &mut Vec<String>, line: usize, found: &mut Vec<(Vec<String>, usize)>) {
    if path.len() > 1 {
        found.push((std::mem::take(path), line));
    }
    path.clear();
}

/// `use a::{b, c::d as e, f::*}` as `(a::b, b)`, `(a::c::d, e)`, `(a::f::*, *)`.
pub fn flatten_use(tree: &syn::UseTree) -> Vec<(Vec<String>, String)> {
    fn walk(t: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
        match t {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                walk(&p.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                let mut path = prefix.clone();
                if name != "self" {
                    path.push(name.clone());
                }
                let bound = if name == "self" {
                    prefix.last().cloned().unwrap_or_default()
                } else {
                    name
                };
                out.push((path, bound));
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                out.push((path, r.rename.to_string()));
            }
            syn::UseTree::Glob(_) => {
                let mut path = prefix.clone();
                path.push("*".to_string());
                out.push((path, "*".to_string()));
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    walk(t, prefix, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(tree, &mut Vec::new(), &mut out);
    out
}

/// A path as written in module `id`, from the crate root; `None` for a
/// path into another crate (or a local name that is no module of ours).
fn absolute(tree: &CrateTree, id: usize, written: &[String]) -> Option<Vec<String>> {
    let here = &tree.modules[id].path;
    let first = written.first()?;
    let mut base: Vec<String> = match first.as_str() {
        "crate" => return Some(written[1..].to_vec()),
        "self" => here.clone(),
        "super" => {
            let ups = written.iter().take_while(|s| *s == "super").count();
            let base = here[..here.len().checked_sub(ups)?].to_vec();
            return Some([base, written[ups..].to_vec()].concat());
        }
        _ if tree.child(id, first).is_some() => {
            return Some([here.clone(), written.to_vec()].concat());
        }
        _ => return None,
    };
    base.extend(written[1..].iter().cloned());
    Some(base)
}

/// The module that defines what `path` (from the crate root) names,
/// following re-exports; the nearest module on the path when the last
/// name is not found (a macro's output, say).
fn resolve(tree: &CrateTree, path: &[String], depth: usize) -> Option<usize> {
    let mut m = tree.by_path(&[])?;
    let mut i = 0;
    while i < path.len() {
        match tree.child(m, &path[i]) {
            Some(c) => {
                m = c;
                i += 1;
            }
            None => break,
        }
    }
    if i == path.len() || depth > 16 || defines(&tree.modules[m], &path[i]) {
        return Some(m);
    }
    let module = &tree.modules[m];
    for item in &module.items {
        let syn::Item::Use(u) = item else { continue };
        if is_cfg_test(&u.attrs) {
            continue;
        }
        for (target, bound) in flatten_use(&u.tree) {
            let next = if bound == path[i] {
                absolute(tree, m, &target)
            } else if bound == "*" {
                let glob = absolute(tree, m, &target[..target.len() - 1]);
                glob.filter(|g| {
                    tree.by_path(g)
                        .is_some_and(|gm| defines(&tree.modules[gm], &path[i]))
                })
                .map(|mut g| {
                    g.push(path[i].clone());
                    g
                })
            } else {
                None
            };
            if let Some(mut next) = next {
                next.extend(path[i + 1..].iter().cloned());
                return resolve(tree, &next, depth + 1);
            }
        }
    }
    Some(m)
}

/// The module itself declares an item of that name.
fn defines(m: &Module, name: &str) -> bool {
    m.items.iter().any(|item| {
        let ident = match item {
            syn::Item::Const(i) => Some(&i.ident),
            syn::Item::Enum(i) => Some(&i.ident),
            syn::Item::Fn(i) => Some(&i.sig.ident),
            syn::Item::Static(i) => Some(&i.ident),
            syn::Item::Struct(i) => Some(&i.ident),
            syn::Item::Trait(i) => Some(&i.ident),
            syn::Item::Type(i) => Some(&i.ident),
            syn::Item::Union(i) => Some(&i.ident),
            syn::Item::Macro(i) => i.ident.as_ref(),
            _ => None,
        };
        ident.is_some_and(|i| i == name)
    })
}

/// Tarjan's strongly connected components with more than one module.
fn strongly_connected(
    edges: &BTreeMap<(Vec<String>, Vec<String>), Evidence>,
) -> Vec<BTreeSet<Vec<String>>> {
    let mut next: BTreeMap<&Vec<String>, Vec<&Vec<String>>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from).or_default().push(to);
        next.entry(to).or_default();
    }
    let nodes: Vec<&Vec<String>> = next.keys().copied().collect();
    let mut state = Tarjan {
        next: &next,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        counter: 0,
        found: Vec::new(),
    };
    for n in nodes {
        if !state.index.contains_key(n) {
            state.visit(n);
        }
    }
    state.found
}

struct Tarjan<'e> {
    next: &'e BTreeMap<&'e Vec<String>, Vec<&'e Vec<String>>>,
    index: BTreeMap<&'e Vec<String>, usize>,
    low: BTreeMap<&'e Vec<String>, usize>,
    stack: Vec<&'e Vec<String>>,
    on_stack: BTreeSet<&'e Vec<String>>,
    counter: usize,
    found: Vec<BTreeSet<Vec<String>>>,
}

impl<'e> Tarjan<'e> {
    fn visit(&mut self, v: &'e Vec<String>) {
        self.index.insert(v, self.counter);
        self.low.insert(v, self.counter);
        self.counter += 1;
        self.stack.push(v);
        self.on_stack.insert(v);
        for &w in &self.next[v] {
            if !self.index.contains_key(w) {
                self.visit(w);
                let low = self.low[v].min(self.low[w]);
                self.low.insert(v, low);
            } else if self.on_stack.contains(w) {
                let low = self.low[v].min(self.index[w]);
                self.low.insert(v, low);
            }
        }
        if self.low[v] == self.index[v] {
            let mut component = BTreeSet::new();
            while let Some(w) = self.stack.pop() {
                self.on_stack.remove(w);
                component.insert(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                self.found.push(component);
            }
        }
    }
}
