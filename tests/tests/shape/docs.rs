//! `ARCHITECTURE.md` names only what exists: every backticked repo path
//! (`store/rules/checkout.rs`, `assets/`) and every backticked Rust item
//! (`Scope`, `Rules::checkout`, `write_pending()`) is looked up in the tree.
//!
//! What counts as a Rust item: a path with `::`, a name of two or more
//! capitalized words (`LeaseRow`), or a name followed by `(`. Plain lower-case words are left alone: they are
//! as often SQL columns, config keys or JSON fields.

use std::collections::BTreeSet;
use std::path::Path;

use syn::visit::Visit;

use crate::limits::type_name;

/// What the workspace's Rust source defines, read from every `.rs` file.
#[derive(Default)]
pub struct Names {
    /// Every item, method, field, variant and module name.
    pub names: BTreeSet<String>,
    /// `(owner, member)`: a module and its items, a type or trait and its
    /// methods, fields, variants and associated items.
    pub members: BTreeSet<(String, String)>,
}

/// The repo's files and directories, relative to its root, `/`-separated;
/// `target` and dot-directories left out.
pub fn repo_paths(repo: &Path) -> BTreeSet<String> {
    fn walk(repo: &Path, rel: &str, out: &mut BTreeSet<String>) {
        let Ok(entries) = std::fs::read_dir(repo.join(rel)) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with('.') || (rel.is_empty() && name == "target") {
                continue;
            }
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if e.path().is_dir() {
                out.insert(format!("{path}/"));
                walk(repo, &path, out);
            } else {
                out.insert(path);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(repo, "", &mut out);
    out
}

pub fn rust_names(repo: &Path, paths: &BTreeSet<String>) -> Result<Names, String> {
    let mut names = Names::default();
    for member in crate::tree::workspace_members(repo)? {
        names
            .names
            .insert(format!("leasehold_{}", member.replace('-', "_")));
    }
    for p in paths.iter().filter(|p| p.ends_with(".rs")) {
        let file = crate::tree::parse_file(repo, Path::new(p))?;
        let module = module_name(p);
        names.names.insert(module.clone());
        let mut v = Collect {
            names: &mut names,
            module,
        };
        v.visit_file(&file);
    }
    Ok(names)
}

/// `store/pg/tx.rs` → `tx`, `store/pg/mod.rs` → `pg`, `common/src/lib.rs`
/// → `leasehold_common`.
fn module_name(path: &str) -> String {
    let parts: Vec<&str> = path.trim_end_matches(".rs").split('/').collect();
    match parts.as_slice() {
        [krate, "src", "lib" | "main"] => format!("leasehold_{}", krate.replace('-', "_")),
        [.., dir, "mod"] => dir.to_string(),
        [.., name] => name.to_string(),
        [] => String::new(),
    }
}

struct Collect<'n> {
    names: &'n mut Names,
    module: String,
}

impl Collect<'_> {
    fn member(&mut self, owner: &str, name: &syn::Ident) {
        let name = name.to_string();
        self.names.names.insert(name.clone());
        self.names.members.insert((owner.to_string(), name));
    }
}

impl<'ast> Visit<'ast> for Collect<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let module = self.module.clone();
        match item {
            syn::Item::Const(i) => self.member(&module, &i.ident),
            syn::Item::Enum(i) => {
                self.member(&module, &i.ident);
                for v in &i.variants {
                    self.member(&i.ident.to_string(), &v.ident);
                }
            }
            syn::Item::Fn(i) => self.member(&module, &i.sig.ident),
            syn::Item::Static(i) => self.member(&module, &i.ident),
            syn::Item::Struct(i) => {
                self.member(&module, &i.ident);
                for f in i.fields.iter().filter_map(|f| f.ident.as_ref()) {
                    self.member(&i.ident.to_string(), f);
                }
            }
            syn::Item::Trait(i) => self.member(&module, &i.ident),
            syn::Item::Type(i) => self.member(&module, &i.ident),
            syn::Item::Union(i) => self.member(&module, &i.ident),
            syn::Item::Macro(i) => {
                if let Some(id) = &i.ident {
                    self.member(&module, id);
                }
            }
            syn::Item::Use(u) => {
                for (_, bound) in crate::cycles::flatten_use(&u.tree) {
                    self.names.members.insert((module.clone(), bound));
                }
            }
            syn::Item::Mod(m) => {
                self.member(&module, &m.ident);
                if m.content.is_some() {
                    let outer = std::mem::replace(&mut self.module, m.ident.to_string());
                    syn::visit::visit_item_mod(self, m);
                    self.module = outer;
                    return;
                }
            }
            _ => {}
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let mut owners = vec![type_name(&i.self_ty)];
        if let Some((_, path, _)) = &i.trait_ {
            owners.extend(path.segments.last().map(|s| s.ident.to_string()));
        }
        for item in &i.items {
            let ident = match item {
                syn::ImplItem::Fn(f) => Some(&f.sig.ident),
                syn::ImplItem::Const(c) => Some(&c.ident),
                syn::ImplItem::Type(t) => Some(&t.ident),
                _ => None,
            };
            for owner in &owners {
                if let Some(ident) = ident {
                    self.member(owner, ident);
                }
            }
        }
        syn::visit::visit_item_impl(self, i);
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        let owner = t.ident.to_string();
        for item in &t.items {
            let ident = match item {
                syn::TraitItem::Fn(f) => Some(&f.sig.ident),
                syn::TraitItem::Const(c) => Some(&c.ident),
                syn::TraitItem::Type(t) => Some(&t.ident),
                _ => None,
            };
            if let Some(ident) = ident {
                self.member(&owner, ident);
            }
        }
        syn::visit::visit_item_trait(self, t);
    }
}

/// Backticked spans outside fenced code blocks, with their line numbers.
pub fn backticked(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let (Some(inside), Some(_)) = (parts.next(), parts.next().or(Some(""))) {
            out.push((n + 1, inside.to_string()));
        }
    }
    out
}

const FILE_ENDINGS: &[&str] = &[
    ".rs", ".toml", ".md", ".yaml", ".yml", ".py", ".sh", ".sql", ".html", ".js", ".css", ".json",
    ".service", ".txt", ".lock", ".snap",
];

/// Looks like a repo path: no spaces or wildcards, a file ending, or a
/// directory's trailing `/`; not a URL path (`/v1/…`).
pub fn as_repo_path(span: &str) -> Option<&str> {
    let plain = !span.is_empty()
        && !span.starts_with('/')
        && !span.starts_with('.')
        && !span.contains(['*', '{', ' ', ':', '$', '<', '?', '='])
        && span.chars().any(|c| c.is_ascii_alphabetic());
    let looks = (span.contains('/')
        && (span.ends_with('/') || FILE_ENDINGS.iter().any(|e| span.ends_with(e))))
        || (!span.contains('/') && span.ends_with(".rs"));
    (plain && looks).then_some(span)
}

/// The path exists from the repo root, or ends some repo path at a
/// component boundary (`store/rules/` for `server/src/store/rules/`).
pub fn path_exists(paths: &BTreeSet<String>, span: &str) -> bool {
    paths.contains(span) || paths.iter().any(|p| p.ends_with(&format!("/{span}")))
}

/// The Rust paths a span claims, or none when it is no Rust item:
/// `a::{b, c}` → `a::b`, `a::c`; `f(x)` → `f`; `Foo<T>` → `Foo`.
pub fn as_rust_items(span: &str) -> Vec<Vec<String>> {
    let head = span.split(['(', '<', ' ']).next().unwrap_or("");
    let called = span[head.len()..].starts_with('(');
    let expanded: Vec<String> = match (head.find("::{"), span.find("::{")) {
        (_, Some(at)) if span.ends_with('}') && !span.contains('(') => {
            let prefix = &span[..at];
            span[at + 3..span.len() - 1]
                .split(',')
                .map(|s| format!("{prefix}::{}", s.trim()))
                .collect()
        }
        _ => vec![head.to_string()],
    };
    expanded
        .into_iter()
        .filter_map(|p| {
            let segments: Vec<String> = p.split("::").map(str::to_string).collect();
            let idents = segments.iter().all(|s| is_ident(s));
            // `LocalClock`, not `Allow` or `Debug`: one capitalized word is
            // as often a header, a cookie attribute or a std derive.
            let upper_camel = segments.len() == 1
                && segments[0].starts_with(|c: char| c.is_ascii_uppercase())
                && segments[0]
                    .chars()
                    .filter(|c| c.is_ascii_uppercase())
                    .count()
                    >= 2
                && segments[0].chars().any(|c| c.is_ascii_lowercase())
                && !segments[0].contains('_');
            (idents && (segments.len() > 1 || upper_camel || called)).then_some(segments)
        })
        .collect()
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A path's names exist and each belongs to the one before it. A path
/// that starts outside the workspace (`std::…`, `tokio::…`) is not ours to
/// check; one that starts with an unknown UpperCamelCase name is missing.
pub fn item_exists(names: &Names, path: &[String]) -> bool {
    let first = &path[0];
    let known = |s: &String| names.names.contains(s) || s == "crate" || s == "self" || s == "super";
    if !known(first) {
        return first.starts_with(|c: char| c.is_ascii_lowercase()) && path.len() > 1;
    }
    path.iter().all(known)
        && path.windows(2).all(|w| {
            matches!(w[0].as_str(), "crate" | "self" | "super")
                || names.members.contains(&(w[0].clone(), w[1].clone()))
        })
}

pub fn stale_names(repo: &Path, doc: &str) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(repo.join(doc)).map_err(|e| format!("{doc}: {e}"))?;
    let paths = repo_paths(repo);
    let names = rust_names(repo, &paths)?;
    let mut found = Vec::new();
    for (line, span) in backticked(&text) {
        if let Some(p) = as_repo_path(&span) {
            if !path_exists(&paths, p) {
                found.push(format!("{doc}:{line}: `{span}`: no such file or directory"));
            }
            continue;
        }
        for item in as_rust_items(&span) {
            if !item_exists(&names, &item) {
                found.push(format!(
                    "{doc}:{line}: `{span}`: no Rust item `{}`",
                    item.join("::")
                ));
            }
        }
    }
    Ok(found)
}
