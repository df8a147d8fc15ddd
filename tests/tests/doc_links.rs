//! The documentation's links point somewhere: every relative Markdown link
//! in `README.md`, `ARCHITECTURE.md`, `RELIABILITY.md`, `BENCHMARKS.md` and
//! `docs/**/*.md` names a file or directory that exists, and every
//! `#anchor` (in the same file or in the linked `.md` file) names a heading
//! there, slugged as GitHub and mdBook do. `http(s)://` and `mailto:` links
//! are left alone, and so is anything inside a fenced code block or an
//! inline code span. Also: the README stays a front page (at most 300
//! lines), and the book's `SUMMARY.md` lists every chapter in `docs/src/`.
//!
//! Each check is also run on a small planted tree with bad links, so a
//! checker that finds nothing cannot pass for docs that are clean.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the repo")
        .to_path_buf()
}

/// The documents checked, relative to the repo root, `/`-separated.
fn documents(repo: &Path) -> Vec<String> {
    let mut docs: Vec<String> = [
        "README.md",
        "ARCHITECTURE.md",
        "RELIABILITY.md",
        "BENCHMARKS.md",
    ]
    .iter()
    .filter(|f| repo.join(f).is_file())
    .map(|f| f.to_string())
    .collect();
    fn walk(repo: &Path, rel: &str, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(repo.join(rel)) else {
            return;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().to_string();
            let path = format!("{rel}/{name}");
            // docs/book is mdBook's output, never committed.
            if name.starts_with('.') || path == "docs/book" {
                continue;
            }
            if e.path().is_dir() {
                walk(repo, &path, out);
            } else if name.ends_with(".md") {
                out.push(path);
            }
        }
    }
    walk(repo, "docs", &mut docs);
    docs
}

/// One Markdown link: where it is written and what it points at.
#[derive(Debug, PartialEq)]
struct Link {
    line: usize,
    target: String,
}

/// The lines of `text` outside fenced code blocks, numbered from 1.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |c| trimmed.chars().take_while(|x| *x == c).count());
        match (fence, marker) {
            (None, Some(c)) if run >= 3 && indent < 4 => fence = Some((c, run)),
            (Some((c, n)), Some(m))
                if m == c && run >= n && trimmed.trim_end().chars().all(|x| x == c) =>
            {
                fence = None
            }
            (None, _) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

/// `line` with each inline code span replaced by `code`, so that a link
/// whose text is code (`` [`a.md`](a.md) ``) is still one, and brackets
/// inside code are not taken for links.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|c| *c == '`').count();
        let after = &rest[start + ticks..];
        let closing = "`".repeat(ticks);
        match after.find(&closing) {
            Some(end) => {
                out.push_str("code");
                rest = &after[end + ticks..];
            }
            None => {
                out.push_str(&rest[start..start + ticks]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Every inline link `[text](target)` and image `![alt](target)`, and every
/// reference definition `[name]: target`, outside code.
fn links(text: &str) -> Vec<Link> {
    let mut out = Vec::new();
    for (number, line) in prose_lines(text) {
        let line = without_code_spans(line);
        let trimmed = line.trim_start();
        // `[name]: target`: the first `]` is followed by `:`.
        if trimmed.starts_with('[')
            && let Some(end) = trimmed.find(']')
            && trimmed[end..].starts_with("]:")
        {
            let target = trimmed[end + 2..].split_whitespace().next().unwrap_or("");
            out.push(Link {
                line: number,
                target: target.trim_matches(['<', '>']).to_string(),
            });
            continue;
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            // The target runs to the `)` that balances the `(`.
            let mut depth = 0usize;
            let end = after
                .char_indices()
                .find(|&(_, c)| match c {
                    '(' => {
                        depth += 1;
                        false
                    }
                    ')' if depth == 0 => true,
                    ')' => {
                        depth -= 1;
                        false
                    }
                    _ => false,
                })
                .map_or(after.len(), |(i, _)| i);
            let inside = after[..end].trim();
            // `(target "title")`: the title is not part of the target.
            let target = if let Some(t) = inside.strip_prefix('<') {
                t.split('>').next().unwrap_or("")
            } else {
                inside.split_whitespace().next().unwrap_or("")
            };
            out.push(Link {
                line: number,
                target: target.to_string(),
            });
            rest = &after[end..];
        }
    }
    out
}

/// A heading's anchor as GitHub (and mdBook) make it: the text as shown,
/// lowercased, with every character but letters, digits, `-`, `_` and
/// spaces dropped, and spaces turned into `-`.
fn slug(heading: &str) -> String {
    // What is shown: `[text](url)` reads as text; code and emphasis marks go.
    let mut shown = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](") else {
            break;
        };
        let Some(close) = rest[open + mid..].find(')') else {
            break;
        };
        shown.push_str(&rest[..open]);
        shown.push_str(&rest[open + 1..open + mid]);
        rest = &rest[open + mid + close + 1..];
    }
    shown.push_str(rest);
    shown
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .flat_map(char::to_lowercase)
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors a Markdown file defines: one per ATX heading (repeats get
/// `-1`, `-2`, … as on GitHub), and any HTML `id="…"` or `name="…"`.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let trimmed = line.trim_start();
        let level = trimmed.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&level)
            && line.len() - trimmed.len() < 4
            && (trimmed.len() == level || trimmed[level..].starts_with([' ', '\t']))
        {
            // A closing run of `#` (after a space) is not part of the heading.
            let mut text = trimmed[level..].trim();
            let open = text.trim_end_matches('#');
            if open.is_empty() || open.ends_with([' ', '\t']) {
                text = open.trim_end();
            }
            let base = slug(text);
            let mut anchor = base.clone();
            let mut n = 0;
            while out.contains(&anchor) {
                n += 1;
                anchor = format!("{base}-{n}");
            }
            out.insert(anchor);
        }
        let line = without_code_spans(line);
        for attr in ["id=\"", "name=\""] {
            let mut rest = line.as_str();
            while let Some(at) = rest.find(attr) {
                let value = &rest[at + attr.len()..];
                let Some(end) = value.find('"') else { break };
                out.insert(value[..end].to_string());
                rest = &value[end..];
            }
        }
    }
    out
}

/// `%20` and the like, decoded; anything malformed is left as it is.
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every link of the documents under `repo` that points nowhere, as
/// `file:line: target: why`.
fn broken_links(repo: &Path, docs: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for doc in docs {
        let path = repo.join(doc);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{doc}: {e}"));
        let dir = path.parent().expect("a file has a directory");
        for Link { line, target } in links(&text) {
            let lower = target.to_ascii_lowercase();
            if lower.starts_with("http://")
                || lower.starts_with("https://")
                || lower.starts_with("mailto:")
            {
                continue;
            }
            let mut why = |reason: String| found.push(format!("{doc}:{line}: {target}: {reason}"));
            if target.is_empty() {
                why("empty link target".into());
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let file = file.split('?').next().unwrap_or("");
            let linked = if file.is_empty() {
                path.clone()
            } else if let Some(from_root) = file.strip_prefix('/') {
                repo.join(percent_decoded(from_root))
            } else {
                dir.join(percent_decoded(file))
            };
            if !linked.exists() {
                why("no such file or directory".into());
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if !linked.is_file() || linked.extension().is_none_or(|e| e != "md") {
                // Line anchors of source files (`#L10`) are GitHub's, not ours.
                continue;
            }
            let text = std::fs::read_to_string(&linked).unwrap_or_default();
            let anchor = percent_decoded(anchor);
            if !anchors(&text).contains(&anchor) {
                why(format!("no heading with anchor #{anchor}"));
            }
        }
    }
    found
}

fn assert_none(what: &str, found: Vec<String>) {
    assert!(found.is_empty(), "{what}:\n{}", found.join("\n"));
}

#[test]
fn every_relative_link_and_anchor_in_the_docs_points_somewhere() {
    let repo = repo();
    let docs = documents(&repo);
    // The walk reached the book, not just the root files.
    for must in [
        "README.md",
        "docs/src/SUMMARY.md",
        "docs/src/right-sizing.md",
    ] {
        assert!(docs.iter().any(|d| d == must), "{must} not read: {docs:?}");
    }
    let count: usize = docs
        .iter()
        .map(|d| links(&std::fs::read_to_string(repo.join(d)).unwrap()).len())
        .sum();
    assert!(count >= 50, "only {count} links read in {docs:?}");
    assert_none("links that point nowhere", broken_links(&repo, &docs));
}

#[test]
fn the_readme_is_a_front_page() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines; move detail into docs/src/"
    );
}

#[test]
fn the_book_lists_every_chapter() {
    let src = repo().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().map(|l| l.target).collect();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.ends_with(".md") && name != "SUMMARY.md" && !listed.contains(&name) {
            missing.push(format!("docs/src/{name}"));
        }
    }
    missing.sort();
    assert_none("chapters missing from docs/src/SUMMARY.md", missing);
}

/// A planted tree with one link of every kind, good and bad.
#[test]
fn a_planted_bad_link_or_anchor_is_found() {
    let dir = tempfile::tempdir().expect("temp dir");
    let files = [
        (
            "README.md",
            "# Planted\n\
             \n\
             ## Two words, `code` and (more)\n\
             \n\
             Good: [a](docs/src/a.md), [anchor](docs/src/a.md#a-heading),\n\
             [same file](#two-words-code-and-more), [dir](docs/),\n\
             [web](https://example.com/nowhere), [mail](mailto:x@example.com),\n\
             ![img](docs/src/a.md \"title\"), [`code text`](docs/src/a.md#a-heading-1).\n\
             Bad: [gone](docs/src/gone.md) and [bad anchor](docs/src/a.md#no-such).\n\
             `[in code](nowhere.md)` is not a link.\n\
             \n\
             ```sh\n\
             echo '[in a fence](nowhere.md)'\n\
             ```\n\
             \n\
             [ref]: missing/ref.md\n",
        ),
        (
            "docs/src/a.md",
            "# Chapter\n\n## A heading\n\n## A heading\n\n[back](../../README.md#planted) [self](#nope)\n",
        ),
    ];
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let docs = documents(dir.path());
    assert_eq!(docs, ["README.md", "docs/src/a.md"]);
    assert_eq!(
        broken_links(dir.path(), &docs),
        [
            "README.md:9: docs/src/gone.md: no such file or directory",
            "README.md:9: docs/src/a.md#no-such: no heading with anchor #no-such",
            "README.md:16: missing/ref.md: no such file or directory",
            "docs/src/a.md:7: #nope: no heading with anchor #nope",
        ]
    );
}

#[test]
fn slugs_are_githubs() {
    assert_eq!(
        slug("Did we buy enough seats? `leasehold report`"),
        "did-we-buy-enough-seats-leasehold-report"
    );
    assert_eq!(slug("Borrowing (offline seats)"), "borrowing-offline-seats");
    assert_eq!(
        slug("The refusals, listed: `GET /v1/admin/denials`"),
        "the-refusals-listed-get-v1admindenials"
    );
    assert_eq!(slug("Rust: `LeaseKeeper`"), "rust-leasekeeper");
    assert_eq!(slug("a — b"), "a--b");
    assert_eq!(slug("see [Clients](clients.md)"), "see-clients");
    assert_eq!(slug("snake_case and-dash"), "snake_case-and-dash");
}
