//! The workspace's crates read as module trees: which file holds each
//! module, which modules are test-only, and the items each one has.

use std::path::{Path, PathBuf};

use quote::ToTokens;
use syn::spanned::Spanned;

/// One module of a crate: a file, or an inline `mod x { … }` in one.
pub struct Module {
    /// Names from the crate root (the root itself is empty).
    pub path: Vec<String>,
    /// The file it is written in, relative to the repo root.
    pub file: PathBuf,
    pub items: Vec<syn::Item>,
    /// Declared under `#[cfg(test)]`, itself or through a parent.
    pub is_test: bool,
}

/// One crate target (a library or a binary) as its modules, root first.
pub struct CrateTree {
    /// For messages: the crate directory and the root file.
    pub name: String,
    pub modules: Vec<Module>,
}

impl CrateTree {
    pub fn child(&self, parent: usize, name: &str) -> Option<usize> {
        let want = self.modules[parent].path.len() + 1;
        self.modules.iter().position(|m| {
            m.path.len() == want
                && m.path.starts_with(&self.modules[parent].path)
                && m.path.last().map(String::as_str) == Some(name)
        })
    }

    pub fn by_path(&self, path: &[String]) -> Option<usize> {
        self.modules.iter().position(|m| m.path == path)
    }
}

/// `#[cfg(test)]` (or a `cfg` that needs `test`, like `all(test, unix)`).
pub fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        if !a.path().is_ident("cfg") {
            return false;
        }
        let tokens = a.meta.to_token_stream().to_string();
        let words: Vec<&str> = tokens
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|w| !w.is_empty())
            .collect();
        words.contains(&"test") && !words.contains(&"not")
    })
}

/// The first line of an item, its attributes included, and its last line.
pub fn item_lines(item: &syn::Item, attrs: &[syn::Attribute]) -> (usize, usize) {
    let span = item.span();
    let first = attrs
        .iter()
        .map(|a| a.span().start().line)
        .chain([span.start().line])
        .min()
        .unwrap_or(0);
    (first, span.end().line)
}

pub fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

pub fn parse_file(repo: &Path, file: &Path) -> Result<syn::File, String> {
    let text =
        std::fs::read_to_string(repo.join(file)).map_err(|e| format!("{}: {e}", file.display()))?;
    syn::parse_file(&text).map_err(|e| {
        let at = e.span().start();
        format!("{}:{}: does not parse: {e}", file.display(), at.line)
    })
}

/// Every crate target of the workspace members named in `Cargo.toml`:
/// `src/lib.rs`, `src/main.rs`, `src/bin/*.rs` and `src/bin/*/main.rs`.
pub fn workspace_crates(repo: &Path) -> Result<Vec<CrateTree>, String> {
    let mut trees = Vec::new();
    for member in workspace_members(repo)? {
        let src = PathBuf::from(&member).join("src");
        let mut roots = vec![src.join("lib.rs"), src.join("main.rs")];
        if let Ok(entries) = std::fs::read_dir(repo.join(&src).join("bin")) {
            let mut bins: Vec<PathBuf> = entries
                .flatten()
                .map(|e| {
                    let p = src.join("bin").join(e.file_name());
                    if e.path().is_dir() {
                        p.join("main.rs")
                    } else {
                        p
                    }
                })
                .collect();
            bins.sort();
            roots.extend(bins);
        }
        for root in roots.into_iter().filter(|r| repo.join(r).is_file()) {
            trees.push(load_crate(repo, &root)?);
        }
    }
    Ok(trees)
}

/// The `members = [...]` of the workspace manifest.
pub fn workspace_members(repo: &Path) -> Result<Vec<String>, String> {
    let manifest = std::fs::read_to_string(repo.join("Cargo.toml")).map_err(|e| e.to_string())?;
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .ok_or("Cargo.toml: no workspace members")?;
    Ok(line
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect())
}

pub fn load_crate(repo: &Path, root: &Path) -> Result<CrateTree, String> {
    let file = parse_file(repo, root)?;
    let mut tree = CrateTree {
        name: root.display().to_string(),
        modules: Vec::new(),
    };
    let dir = root.parent().unwrap_or(Path::new("")).to_path_buf();
    add_module(repo, &mut tree, Vec::new(), root, file.items, false, &dir)?;
    Ok(tree)
}

/// Adds a module and, depth first, the modules it declares. `children_dir`
/// is where its `mod x;` files are: beside `lib.rs`/`main.rs`/`mod.rs`,
/// in `name/` beside any other file.
#[allow(clippy::too_many_arguments)]
fn add_module(
    repo: &Path,
    tree: &mut CrateTree,
    path: Vec<String>,
    file: &Path,
    items: Vec<syn::Item>,
    is_test: bool,
    children_dir: &Path,
) -> Result<(), String> {
    let declared: Vec<syn::ItemMod> = items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Mod(m) => Some(m.clone()),
            _ => None,
        })
        .collect();
    tree.modules.push(Module {
        path: path.clone(),
        file: file.to_path_buf(),
        items,
        is_test,
    });
    for m in declared {
        let name = m.ident.to_string();
        let child_test = is_test || is_cfg_test(&m.attrs);
        let mut child_path = path.clone();
        child_path.push(name.clone());
        match m.content {
            Some((_, items)) => {
                let dir = children_dir.join(&name);
                add_module(repo, tree, child_path, file, items, child_test, &dir)?;
            }
            None => {
                let child_file = module_file(repo, file, children_dir, &name, &m.attrs)?;
                let parsed = parse_file(repo, &child_file)?;
                let dir = if child_file.ends_with("mod.rs") {
                    child_file.parent().unwrap_or(Path::new("")).to_path_buf()
                } else {
                    child_file.with_extension("")
                };
                add_module(
                    repo,
                    tree,
                    child_path,
                    &child_file,
                    parsed.items,
                    child_test,
                    &dir,
                )?;
            }
        }
    }
    Ok(())
}

fn module_file(
    repo: &Path,
    parent_file: &Path,
    children_dir: &Path,
    name: &str,
    attrs: &[syn::Attribute],
) -> Result<PathBuf, String> {
    for a in attrs {
        if let syn::Meta::NameValue(nv) = &a.meta
            && nv.path.is_ident("path")
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
        {
            let base = parent_file.parent().unwrap_or(Path::new(""));
            return Ok(normalize(&base.join(s.value())));
        }
    }
    let flat = children_dir.join(format!("{name}.rs"));
    let nested = children_dir.join(name).join("mod.rs");
    if repo.join(&flat).is_file() {
        Ok(flat)
    } else if repo.join(&nested).is_file() {
        Ok(nested)
    } else {
        Err(format!(
            "{}: `mod {name};` has no file ({} or {})",
            parent_file.display(),
            flat.display(),
            nested.display()
        ))
    }
}

/// Folds `a/../b` into `b`, so files reached through `#[path]` are named once.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
