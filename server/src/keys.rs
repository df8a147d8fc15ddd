//! Secrets in the data dir: the Ed25519 signing key, the admin token and the
//! (read-only) viewer token. Each is created on first start with mode 0600
//! and never logged. One that other users may read or write is refused
//! (unless `--allow-insecure-files`), and so is a token shorter than
//! [`MIN_TOKEN_LEN`] characters, wherever it came from.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use leasehold_common::token::TokenSigner;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub const SIGNING_KEY_FILE: &str = "signing.key";
pub const ADMIN_TOKEN_FILE: &str = "admin.token";
pub const VIEWER_TOKEN_FILE: &str = "viewer.token";
/// The shortest admin or viewer token accepted: a short one could be
/// guessed even through the limiter. Generated tokens are 64 characters.
pub const MIN_TOKEN_LEN: usize = 16;

/// Why a secret file could not be used. The I/O cause is the `source`, so
/// the one-line error at start-up reads "cannot read <path>: <cause>".
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("cannot read {}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create {}", path.display())]
    Uncreatable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}", path.display())]
    Unwritable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} does not hold a 32-byte hex Ed25519 seed", path.display())]
    BadSeed { path: PathBuf },
    #[error("{} is empty", path.display())]
    EmptyToken { path: PathBuf },
    #[error(
        "the {what} is {len} characters long; use at least {MIN_TOKEN_LEN} \
         (e.g. the output of `openssl rand -hex 32`)"
    )]
    ShortToken { what: String, len: usize },
    #[error(
        "{} may be read or changed by other users (mode {mode:o}): run `chmod 600 {}` \
         (or start with --allow-insecure-files)",
        path.display(),
        path.display()
    )]
    InsecureFile { path: PathBuf, mode: u32 },
}

/// How secret files are checked.
#[derive(Debug, Clone, Copy)]
pub struct SecretFiles<'a> {
    pub data_dir: &'a Path,
    /// Accept files that other users may read or write (`--allow-insecure-files`).
    pub allow_insecure: bool,
}

/// Load `<data_dir>/signing.key` (a hex Ed25519 seed), creating it if absent.
pub fn load_or_create_signer(files: SecretFiles<'_>) -> Result<TokenSigner, KeyFileError> {
    let path = files.data_dir.join(SIGNING_KEY_FILE);
    let text = load_or_create_secret(&path, files.allow_insecure)?;
    let seed: [u8; 32] = hex::decode(text.trim())
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or(KeyFileError::BadSeed { path })?;
    Ok(TokenSigner::from_seed(&seed))
}

/// The admin token: `from_env` if set, else `<data_dir>/admin.token`,
/// created on first start.
pub fn load_or_create_admin_token(
    files: SecretFiles<'_>,
    from_env: Option<String>,
) -> Result<AdminToken, KeyFileError> {
    load_or_create_token(files, ADMIN_TOKEN_FILE, "LEASEHOLD_ADMIN_TOKEN", from_env)
}

/// The viewer token (read-only role): `from_env` (`LEASEHOLD_VIEWER_TOKEN`)
/// if set, else `<data_dir>/viewer.token`, created on first start.
pub fn load_or_create_viewer_token(
    files: SecretFiles<'_>,
    from_env: Option<String>,
) -> Result<AdminToken, KeyFileError> {
    load_or_create_token(files, VIEWER_TOKEN_FILE, "LEASEHOLD_VIEWER_TOKEN", from_env)
}

fn load_or_create_token(
    files: SecretFiles<'_>,
    file: &str,
    env_name: &str,
    from_env: Option<String>,
) -> Result<AdminToken, KeyFileError> {
    if let Some(t) = from_env
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
    {
        check_length(&t, || format!("token given by {env_name}"))?;
        return Ok(AdminToken::new(&t));
    }
    let path = files.data_dir.join(file);
    let text = load_or_create_secret(&path, files.allow_insecure)?;
    let token = text.trim();
    if token.is_empty() {
        return Err(KeyFileError::EmptyToken { path });
    }
    check_length(token, || format!("token in {}", path.display()))?;
    Ok(AdminToken::new(token))
}

fn check_length(token: &str, what: impl FnOnce() -> String) -> Result<(), KeyFileError> {
    let len = token.chars().count();
    if len < MIN_TOKEN_LEN {
        return Err(KeyFileError::ShortToken { what: what(), len });
    }
    Ok(())
}

/// Read a secret file, or write 32 fresh random bytes (hex) to it, 0600.
fn load_or_create_secret(path: &Path, allow_insecure: bool) -> Result<String, KeyFileError> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            if let Ok(meta) = std::fs::metadata(path) {
                let mode = meta.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    if !allow_insecure {
                        return Err(KeyFileError::InsecureFile {
                            path: path.to_path_buf(),
                            mode,
                        });
                    }
                    tracing::warn!(
                        "{} may be read or changed by other users (mode {mode:o}); \
                         allowed by --allow-insecure-files",
                        path.display()
                    );
                }
            }
            Ok(text)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let secret = hex::encode(rand::random::<[u8; 32]>());
            let mut f = match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
            {
                Ok(f) => f,
                // Another replica sharing this data dir created it first:
                // never overwrite, use theirs.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    return read_written_by_another(path);
                }
                Err(source) => {
                    return Err(KeyFileError::Uncreatable {
                        path: path.to_path_buf(),
                        source,
                    });
                }
            };
            f.write_all(format!("{secret}\n").as_bytes())
                .and_then(|()| f.sync_all())
                .map_err(|source| KeyFileError::Unwritable {
                    path: path.to_path_buf(),
                    source,
                })?;
            Ok(secret)
        }
        Err(source) => Err(KeyFileError::Unreadable {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// A secret file another process has just created: wait (briefly) until
/// its contents are written.
fn read_written_by_another(path: &Path) -> Result<String, KeyFileError> {
    for _ in 0..50 {
        match std::fs::read_to_string(path) {
            Ok(text) if !text.trim().is_empty() => return Ok(text),
            Ok(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            Err(source) => {
                return Err(KeyFileError::Unreadable {
                    path: path.to_path_buf(),
                    source,
                });
            }
        }
    }
    Ok(String::new())
}

/// A bearer token (the admin or the viewer token), compared in constant
/// time. Hashing both sides first makes the comparison independent of the
/// lengths too.
#[derive(Clone)]
pub struct AdminToken(Secret);

impl AdminToken {
    pub fn new(token: &str) -> Self {
        AdminToken(Secret::new(token))
    }

    pub fn matches(&self, presented: &str) -> bool {
        self.0.matches(presented)
    }

    /// The token's SHA-256, hex: what replicas compare to agree on a token
    /// without storing it.
    pub fn sha256_hex(&self) -> String {
        hex::encode(self.0.0)
    }

    /// What a dashboard sign-in records of the token that signed it in:
    /// derived from the token's SHA-256 under a label of its own, so the
    /// sign-ins table (`ui_sessions`) is no copy of the cluster's token
    /// hash. A sign-in whose fingerprint is not the current token's has been signed out by
    /// rotating the token. (The label keeps the older word: stored
    /// fingerprints depend on it.)
    pub fn sign_in_fingerprint(&self) -> String {
        let mut h = Sha256::new();
        h.update(b"leasehold-ui-session-token\0");
        h.update(self.0.0);
        hex::encode(h.finalize())
    }
}

/// A secret held only as its SHA-256, compared in constant time.
#[derive(Clone)]
pub struct Secret([u8; 32]);

impl Secret {
    pub fn new(secret: &str) -> Self {
        Secret(Sha256::digest(secret.as_bytes()).into())
    }

    pub fn matches(&self, presented: &str) -> bool {
        let presented: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        self.0.ct_eq(&presented).into()
    }
}

/// Constant-time check of a presented license key against the configured one.
pub fn key_matches(expected: &str, presented: &str) -> bool {
    Secret::new(expected).matches(presented)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(data_dir: &Path) -> SecretFiles<'_> {
        SecretFiles {
            data_dir,
            allow_insecure: false,
        }
    }

    #[test]
    fn short_tokens_and_loose_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let Err(err) = load_or_create_admin_token(files(dir.path()), Some("x".into())) else {
            panic!("a one-character token accepted");
        };
        assert!(err.to_string().contains("LEASEHOLD_ADMIN_TOKEN"), "{err}");
        assert!(err.to_string().contains("at least 16"), "{err}");
        let path = dir.path().join(VIEWER_TOKEN_FILE);
        std::fs::write(&path, "0123456789abcdef0123\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let Err(err) = load_or_create_viewer_token(files(dir.path()), None) else {
            panic!("a 0644 token file accepted");
        };
        assert!(err.to_string().contains("chmod 600"), "{err}");
        let lax = SecretFiles {
            data_dir: dir.path(),
            allow_insecure: true,
        };
        assert!(load_or_create_viewer_token(lax, None).is_ok());
    }

    #[test]
    fn files_are_created_0600_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let a = load_or_create_signer(files(dir.path())).unwrap();
        let b = load_or_create_signer(files(dir.path())).unwrap();
        assert_eq!(a.kid(), b.kid(), "the key survives a restart");
        let mode = std::fs::metadata(dir.path().join(SIGNING_KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);

        let t = load_or_create_admin_token(files(dir.path()), None).unwrap();
        let text = std::fs::read_to_string(dir.path().join(ADMIN_TOKEN_FILE)).unwrap();
        assert!(t.matches(text.trim()));
        assert!(!t.matches("wrong"));
        let mode = std::fs::metadata(dir.path().join(ADMIN_TOKEN_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn viewer_token_is_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let admin = load_or_create_admin_token(files(dir.path()), None).unwrap();
        let viewer = load_or_create_viewer_token(files(dir.path()), None).unwrap();
        let text = std::fs::read_to_string(dir.path().join(VIEWER_TOKEN_FILE)).unwrap();
        assert!(viewer.matches(text.trim()));
        assert!(!admin.matches(text.trim()));
        let mode = std::fs::metadata(dir.path().join(VIEWER_TOKEN_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = load_or_create_viewer_token(files(dir.path()), None).unwrap();
        assert!(again.matches(text.trim()));
        let env = load_or_create_viewer_token(files(dir.path()), Some("v".repeat(MIN_TOKEN_LEN)))
            .unwrap();
        assert!(env.matches(&"v".repeat(MIN_TOKEN_LEN)));
    }

    #[test]
    fn env_token_wins() {
        let dir = tempfile::tempdir().unwrap();
        let t = load_or_create_admin_token(files(dir.path()), Some("from-env-0123456789".into()))
            .unwrap();
        assert!(t.matches("from-env-0123456789"));
        assert!(!dir.path().join(ADMIN_TOKEN_FILE).exists());
    }

    #[test]
    fn corrupt_key_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SIGNING_KEY_FILE), "not hex").unwrap();
        std::fs::set_permissions(
            dir.path().join(SIGNING_KEY_FILE),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        let err = load_or_create_signer(files(dir.path())).unwrap_err();
        assert!(matches!(err, KeyFileError::BadSeed { .. }), "{err:?}");
        assert!(err.to_string().contains("32-byte hex"), "{err}");
    }
}
