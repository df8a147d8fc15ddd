//! The licenses file: the policy in force, and reading the file.
//!
//! The policy in force is an `Arc<Licenses>` behind [`LicensesHandle`]; a
//! reload swaps the whole `Arc`, so every request sees one consistent policy.
//! Who reloads it is not this module's concern: the file watcher, or on
//! PostgreSQL the writer taking the cluster's published policy.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use leasehold_common::Licenses;
use leasehold_common::policy::Entitled;
use leasehold_common::policy::PolicyError;

/// Why a licenses file (at start-up) or an edit of it (while running) was
/// not taken.
#[derive(Debug, thiserror::Error)]
pub enum LicensesError {
    #[error("cannot read licenses file {}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid licenses file {}", path.display())]
    InvalidFile {
        path: PathBuf,
        #[source]
        source: PolicyError,
    },
    #[error("licenses file is not UTF-8")]
    NotUtf8,
    /// An edit that does not parse or validate (the watcher names the file).
    #[error(transparent)]
    InvalidEdit(#[from] PolicyError),
}

/// The policy in force, shared by the HTTP layer, the writer and the reaper:
/// the licenses file, with the entitlements the last scan of the
/// entitlements directory found in force.
#[derive(Clone, Default)]
pub struct LicensesHandle {
    current: Arc<RwLock<Arc<Licenses>>>,
    /// A new licenses file: the entitlements must be judged again (a new
    /// `[[vendor]]` key may make a rejected file verify).
    file_changed: Arc<tokio::sync::Notify>,
}

impl LicensesHandle {
    pub fn new(licenses: Licenses) -> Self {
        LicensesHandle {
            current: Arc::new(RwLock::new(Arc::new(licenses))),
            file_changed: Arc::default(),
        }
    }

    pub fn current(&self) -> Arc<Licenses> {
        match self.current.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// A new licenses file; the entitlements in force stay until judged
    /// again.
    pub fn replace(&self, licenses: Licenses) {
        self.update(|old| licenses.with_entitled(old.entitled().clone()));
        self.file_changed.notify_one();
    }

    /// The entitlements a scan found in force, with the same file.
    pub fn set_entitled(&self, entitled: Entitled) {
        self.update(|old| Licenses::clone(old).with_entitled(entitled));
    }

    /// Wait for the next [`replace`](Self::replace).
    pub async fn file_changed(&self) {
        self.file_changed.notified().await
    }

    fn update(&self, new: impl FnOnce(&Arc<Licenses>) -> Licenses) {
        let mut guard = match self.current.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let next = Arc::new(new(&guard));
        *guard = next;
    }
}

/// The licenses file's text (replicas on PostgreSQL publish it as is).
pub fn read_file(path: &Path) -> Result<String, LicensesError> {
    std::fs::read_to_string(path).map_err(|source| LicensesError::Unreadable {
        path: path.to_path_buf(),
        source,
    })
}

/// Parse and validate the text read from `path`.
pub fn parse_file(path: &Path, text: &str) -> Result<Licenses, LicensesError> {
    Licenses::parse(text).map_err(|source| LicensesError::InvalidFile {
        path: path.to_path_buf(),
        source,
    })
}

/// Parse the bytes of an edited licenses file as a whole.
pub fn parse_edit(bytes: &[u8]) -> Result<Licenses, LicensesError> {
    let text = std::str::from_utf8(bytes).map_err(|_| LicensesError::NotUtf8)?;
    Ok(Licenses::parse(text)?)
}
