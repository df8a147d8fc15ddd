//! The entitlements directory (`--entitlements`, default
//! `<data-dir>/entitlements`): every `*.lic` file in it holds one
//! entitlement the vendor signed (`leasehold_common::entitlement`).
//!
//! [`read_dir`] reads the files; [`judge::judge_all`] says which load and
//! which are rejected, and why; [`loader`] scans the directory when it
//! changes and puts what is in force into the policy the rules decide by.

pub mod judge;
#[cfg(test)]
mod judge_tests;
pub mod loader;
pub mod metrics;
pub mod watch;

use std::collections::BTreeMap;
use std::path::Path;

/// A file larger than this is not an entitlement (one is a few KiB).
const MAX_FILE_BYTES: u64 = 1 << 20;

/// The `*.lic` files of `dir` by name: each one's text, or why it could
/// not be read. Other names, and anything that is not a file, are ignored.
pub fn read_dir(dir: &Path) -> std::io::Result<BTreeMap<String, Result<String, String>>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
        if !name.ends_with(".lic") || name.starts_with('.') || !is_file {
            continue;
        }
        files.insert(name, read_file(&entry.path()));
    }
    Ok(files)
}

fn read_file(path: &Path) -> Result<String, String> {
    let size = std::fs::metadata(path)
        .map_err(|e| format!("cannot read: {e}"))?
        .len();
    if size > MAX_FILE_BYTES {
        return Err(format!(
            "{size} bytes: not an entitlement (at most {MAX_FILE_BYTES})"
        ));
    }
    std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))
}
