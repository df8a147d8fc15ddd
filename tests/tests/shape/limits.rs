//! Size limits: a source file's non-test lines, any Rust file's lines
//! (tests included), a function's lines.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::visit::Visit;

use crate::tree::{CrateTree, is_cfg_test, item_attrs, item_lines};

pub const MAX_FILE_LINES: usize = 600;
/// For every `.rs` file, tests and all: integration tests, benches, files of
/// `#[cfg(test)] mod x;` and the `#[cfg(test)]` part of any other file.
pub const MAX_ANY_FILE_LINES: usize = 1200;
pub const MAX_FN_LINES: usize = 100;

/// Each non-test file's lines less those of the `#[cfg(test)]` items in it.
/// A file of a test-only module (`#[cfg(test)] mod x;`) is not counted.
pub fn non_test_lines(repo: &Path, trees: &[CrateTree]) -> BTreeMap<PathBuf, usize> {
    let mut test_lines: BTreeMap<PathBuf, usize> = BTreeMap::new();
    for tree in trees {
        for m in tree.modules.iter().filter(|m| !m.is_test) {
            let in_tests = test_lines.entry(m.file.clone()).or_default();
            for item in &m.items {
                let attrs = item_attrs(item);
                if is_cfg_test(attrs) {
                    let (first, last) = item_lines(item, attrs);
                    *in_tests += last + 1 - first;
                }
            }
        }
    }
    test_lines
        .into_iter()
        .map(|(file, tests)| {
            let total = std::fs::read_to_string(repo.join(&file))
                .map(|t| t.lines().count())
                .unwrap_or(0);
            (file, total.saturating_sub(tests))
        })
        .collect()
}

pub fn long_files(repo: &Path, trees: &[CrateTree]) -> Vec<String> {
    non_test_lines(repo, trees)
        .into_iter()
        .filter(|(_, n)| *n > MAX_FILE_LINES)
        .map(|(file, n)| {
            format!(
                "{}: {n} non-test lines (at most {MAX_FILE_LINES})",
                file.display()
            )
        })
        .collect()
}

/// Every `.rs` file under `repo` (build output in `target/` and hidden
/// directories left out) over [`MAX_ANY_FILE_LINES`] lines in all. Read as
/// files, not as crate trees: test targets and benches are no module of a
/// library or binary, and a test is code to read too.
pub fn long_files_with_tests(repo: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(repo, Path::new(""), &mut files);
    files.sort();
    files
        .into_iter()
        .filter_map(|file| {
            let n = std::fs::read_to_string(repo.join(&file))
                .map(|t| t.lines().count())
                .unwrap_or(0);
            (n > MAX_ANY_FILE_LINES).then(|| {
                format!(
                    "{}: {n} lines (at most {MAX_ANY_FILE_LINES}, tests included)",
                    file.display()
                )
            })
        })
        .collect()
}

/// The `.rs` files under `repo/dir`, relative to `repo`.
fn rust_files(repo: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(repo.join(dir)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = dir.join(&*name);
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(repo, &path, out);
            }
        } else if kind.is_file() && name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// Functions (free, inherent, trait methods with a body) outside tests
/// longer than the limit, counted from the `fn` line to the closing brace.
pub fn long_functions(trees: &[CrateTree]) -> Vec<String> {
    let mut found = std::collections::BTreeSet::new();
    for tree in trees {
        for m in tree.modules.iter().filter(|m| !m.is_test) {
            let mut v = FnLengths {
                file: &m.file,
                owner: None,
                found: Vec::new(),
            };
            for item in &m.items {
                // Inline modules are modules of their own in the tree.
                if !matches!(item, syn::Item::Mod(_)) && !is_cfg_test(item_attrs(item)) {
                    v.visit_item(item);
                }
            }
            found.extend(v.found);
        }
    }
    found.into_iter().collect()
}

struct FnLengths<'a> {
    file: &'a Path,
    owner: Option<String>,
    found: Vec<String>,
}

impl FnLengths<'_> {
    fn check(&mut self, name: &syn::Ident, fn_token: proc_macro2::Span, body: &syn::Block) {
        let first = fn_token.start().line;
        let last = body.span().end().line;
        let lines = last + 1 - first;
        if lines > MAX_FN_LINES {
            let name = match &self.owner {
                Some(owner) => format!("{owner}::{name}"),
                None => name.to_string(),
            };
            self.found.push(format!(
                "{}:{first}: fn {name} is {lines} lines (at most {MAX_FN_LINES})",
                self.file.display()
            ));
        }
    }
}

impl<'ast> Visit<'ast> for FnLengths<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if is_cfg_test(&f.attrs) {
            return;
        }
        self.check(&f.sig.ident, f.sig.fn_token.span, &f.block);
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if is_cfg_test(&i.attrs) {
            return;
        }
        let outer = self.owner.take();
        self.owner = Some(type_name(&i.self_ty));
        syn::visit::visit_item_impl(self, i);
        self.owner = outer;
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_cfg_test(&f.attrs) {
            return;
        }
        self.check(&f.sig.ident, f.sig.fn_token.span, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        let outer = self.owner.replace(t.ident.to_string());
        syn::visit::visit_item_trait(self, t);
        self.owner = outer;
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.check(&f.sig.ident, f.sig.fn_token.span, body);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }

    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {
        // A module inside a function body is rare; its own tree entry (if
        // any) is what counts.
    }
}

/// `Foo` of `impl Foo`, `impl<T> Foo<T>`, `impl Trait for &Foo`.
pub fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        syn::Type::Reference(r) => type_name(&r.elem),
        _ => "_".to_string(),
    }
}
