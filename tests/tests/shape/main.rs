//! The codebase's shape, held by CI instead of by memory: no non-test
//! source file over 600 lines, no `.rs` file at all over 1,200 lines (tests
//! included: integration tests, benches, test-only module files and a
//! file's `#[cfg(test)]` part), no function outside tests over 100 lines,
//! no import cycle between the modules of a crate, and no name in
//! `ARCHITECTURE.md` that the tree no longer has. No allowlist: a finding
//! is fixed, not excused.
//!
//! Each rule is also run on a small planted tree with one violation, so a
//! checker that finds nothing cannot pass for a tree that is clean.

mod cycles;
mod docs;
mod limits;
mod tree;

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the repo")
        .to_path_buf()
}

fn crates(repo: &Path) -> Vec<tree::CrateTree> {
    let trees = tree::workspace_crates(repo).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        trees.len() >= 5,
        "expected every crate of the workspace, read {}",
        trees.len()
    );
    trees
}

fn assert_none(what: &str, found: Vec<String>) {
    assert!(found.is_empty(), "{what}:\n{}", found.join("\n"));
}

#[test]
fn no_source_file_is_over_600_non_test_lines() {
    let repo = repo();
    let trees = crates(&repo);
    let counted = limits::non_test_lines(&repo, &trees);
    // The walk reached the big modules, not just the roots.
    assert!(
        counted
            .keys()
            .any(|f| f.ends_with("store/rules/checkout.rs")),
        "{counted:?}"
    );
    assert_none("files over the limit", limits::long_files(&repo, &trees));
}

#[test]
fn no_rust_file_is_over_1200_lines_tests_included() {
    assert_none(
        "files over the limit",
        limits::long_files_with_tests(&repo()),
    );
}

#[test]
fn no_function_outside_tests_is_over_100_lines() {
    assert_none(
        "functions over the limit",
        limits::long_functions(&crates(&repo())),
    );
}

#[test]
fn no_two_modules_of_a_crate_import_each_other() {
    assert_none("import cycles", cycles::cycles(&crates(&repo())));
}

#[test]
fn architecture_names_only_what_exists() {
    let found = docs::stale_names(&repo(), "ARCHITECTURE.md").unwrap_or_else(|e| panic!("{e}"));
    assert_none("ARCHITECTURE.md names what does not exist", found);
}

/// A planted crate `planted/` with the given files, as a workspace.
fn planted(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut all = vec![("Cargo.toml", "[workspace]\nmembers = [\"planted\"]\n")];
    all.extend_from_slice(files);
    for (path, text) in all {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn lines_of(n: usize, line: &str) -> String {
    (0..n).map(|_| format!("{line}\n")).collect()
}

#[test]
fn a_planted_long_file_is_found_and_its_tests_do_not_count() {
    let long = "mod big;\nmod tested;\n".to_string();
    let big = lines_of(601, "const _: u8 = 0;");
    let tested = format!(
        "{}#[cfg(test)]\nmod tests {{\n{}}}\n",
        lines_of(590, "const _: u8 = 0;"),
        lines_of(100, "const _: u8 = 0;")
    );
    let dir = planted(&[
        ("planted/src/lib.rs", &long),
        ("planted/src/big.rs", &big),
        ("planted/src/tested.rs", &tested),
    ]);
    let found = limits::long_files(dir.path(), &crates_of(dir.path()));
    assert_eq!(
        found,
        vec!["planted/src/big.rs: 601 non-test lines (at most 600)"]
    );
}

#[test]
fn a_planted_long_test_file_is_found_wherever_the_tests_are() {
    let lib = "#[cfg(test)]\nmod tests;\nmod inline;\n";
    // 500 non-test lines (within the 600) and 1,202 lines in all.
    let inline = format!(
        "{}#[cfg(test)]\nmod tests {{\n{}}}\n",
        lines_of(500, "const _: u8 = 0;"),
        lines_of(699, "const _: u8 = 0;")
    );
    let over = lines_of(1201, "const _: u8 = 0;");
    let at_limit = lines_of(1200, "const _: u8 = 0;");
    let dir = planted(&[
        ("planted/src/lib.rs", lib),
        ("planted/src/inline.rs", &inline),
        ("planted/src/tests.rs", &over),
        ("planted/tests/fits.rs", &at_limit),
        ("planted/tests/big/main.rs", &over),
        ("planted/benches/bench.rs", &over),
        ("target/debug/build/out.rs", &over),
        (".hidden/out.rs", &over),
    ]);
    let found = limits::long_files_with_tests(dir.path());
    assert_eq!(
        found,
        vec![
            "planted/benches/bench.rs: 1201 lines (at most 1200, tests included)",
            "planted/src/inline.rs: 1202 lines (at most 1200, tests included)",
            "planted/src/tests.rs: 1201 lines (at most 1200, tests included)",
            "planted/tests/big/main.rs: 1201 lines (at most 1200, tests included)",
        ]
    );
    // The 600-line rule, which leaves tests out, finds none of them.
    let trees = crates_of(dir.path());
    assert_eq!(limits::long_files(dir.path(), &trees), Vec::<String>::new());
}

#[test]
fn a_planted_long_function_is_found_but_not_in_tests() {
    let body = lines_of(99, "    let _ = 1;");
    let lib = format!(
        "pub struct S;\nimpl S {{\n    pub fn long(&self) {{\n{body}    }}\n}}\n\
         pub fn fits() {{\n{}}}\n#[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{body}{body}    }}\n}}\n",
        lines_of(98, "    let _ = 1;")
    );
    let dir = planted(&[("planted/src/lib.rs", &lib)]);
    let found = limits::long_functions(&crates_of(dir.path()));
    assert_eq!(
        found,
        vec!["planted/src/lib.rs:3: fn S::long is 101 lines (at most 100)"]
    );
}

#[test]
fn a_planted_cycle_is_found_also_through_a_re_export() {
    let dir = planted(&[
        (
            "planted/src/lib.rs",
            "mod a;\nmod b;\nmod c;\nmod d;\npub use c::Gamma;\n",
        ),
        (
            "planted/src/a.rs",
            "use crate::b::Beta;\npub struct Alpha(Beta);\n",
        ),
        (
            "planted/src/b.rs",
            "pub struct Beta;\npub fn f() -> crate::Gamma { todo!() }\n",
        ),
        (
            "planted/src/c.rs",
            "pub struct Gamma(pub super::a::Alpha);\n",
        ),
        // d reaches c through the root's re-export and names a child of its
        // own: an edge to c and none to its child, and no cycle.
        (
            "planted/src/d.rs",
            "mod inner { pub struct I; }\nuse inner::I;\nuse super::Gamma as _G;\n",
        ),
    ]);
    let found = cycles::cycles(&crates_of(dir.path()));
    assert_eq!(found.len(), 1, "{found:?}");
    let first = found[0].lines().next().unwrap();
    assert_eq!(first, "planted/src/lib.rs: import cycle among a, b, c");
    assert!(
        found[0].contains("b -> c: planted/src/b.rs:2 `crate::Gamma`"),
        "{}",
        found[0]
    );
}

#[test]
fn a_planted_cycle_through_an_attribute_argument_is_found() {
    // As `config.rs` once took a flag's default from `http`, which takes
    // its settings from `config`.
    let dir = planted(&[
        ("planted/src/lib.rs", "mod config;\nmod http;\n"),
        (
            "planted/src/config.rs",
            "pub const X: usize = 1;\npub struct C {\n    #[arg(long, default_value_t = crate::http::LIMIT)]\n    pub n: usize,\n}\n",
        ),
        (
            "planted/src/http.rs",
            "pub const LIMIT: usize = super::config::X;\n",
        ),
    ]);
    let found = cycles::cycles(&crates_of(dir.path()));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("config -> http: planted/src/config.rs:3 `crate::http::LIMIT`"),
        "{}",
        found[0]
    );
}

#[test]
fn a_planted_stale_name_in_the_architecture_is_found() {
    let doc = "# Map\n\n- `planted/src/lib.rs`, `src/gone.rs`, `store/`: files.\n\
               - `HereNow`, `HereNow::run()`, `GoneAway`, `Allow`, `HereNow::missing`, `std::sync::Mutex`, \
               `lease_rows`, `helper()`, `/v1/licenses/{id}`.\n\
               ```\nGone in a fence\n```\n";
    let dir = planted(&[
        (
            "planted/src/lib.rs",
            "pub struct HereNow;\nimpl HereNow { pub fn run(&self) {} }\nfn helper() {}\n",
        ),
        ("planted/src/store/x.rs", ""),
        ("ARCHITECTURE.md", doc),
    ]);
    let found = docs::stale_names(dir.path(), "ARCHITECTURE.md").unwrap();
    assert_eq!(
        found,
        vec![
            "ARCHITECTURE.md:3: `src/gone.rs`: no such file or directory",
            "ARCHITECTURE.md:4: `GoneAway`: no Rust item `GoneAway`",
            "ARCHITECTURE.md:4: `HereNow::missing`: no Rust item `HereNow::missing`",
        ]
    );
}

fn crates_of(dir: &Path) -> Vec<tree::CrateTree> {
    tree::workspace_crates(dir).unwrap_or_else(|e| panic!("{e}"))
}
