//! Dashboard sign-ins on PostgreSQL (see `store/sign_ins.rs`): plain
//! statements on the read pool, since no lease rule is involved.

use leasehold_common::Timestamp;

use super::super::StoreError;
use super::super::sign_ins::{SignInOp, SignInRow};
use super::pool::PgPool;

impl PgPool {
    pub async fn sign_in(&self, id_sha256: &str) -> Result<Option<SignInRow>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT id_sha256, role, created_at, last_seen_at, expires_at, token_fp
                 FROM ui_sessions WHERE id_sha256 = $1",
                &[&id_sha256],
            )
            .await?;
        Ok(row.map(|r| SignInRow {
            id_sha256: r.get(0),
            role: r.get(1),
            created_at: Timestamp::from_millis(r.get(2)),
            last_seen_at: Timestamp::from_millis(r.get(3)),
            expires_at: Timestamp::from_millis(r.get(4)),
            token_fp: r.get(5),
        }))
    }

    pub async fn sign_in_write(&self, op: &SignInOp) -> Result<usize, StoreError> {
        let client = self.client().await?;
        let n = match op {
            SignInOp::Create(row) => {
                client
                    .execute(
                        "INSERT INTO ui_sessions
                             (id_sha256, role, created_at, last_seen_at, expires_at, token_fp)
                         VALUES ($1, $2, $3, $4, $5, $6)",
                        &[
                            &row.id_sha256,
                            &row.role,
                            &row.created_at.as_millis(),
                            &row.last_seen_at.as_millis(),
                            &row.expires_at.as_millis(),
                            &row.token_fp,
                        ],
                    )
                    .await?
            }
            SignInOp::Touch { id_sha256, at } => {
                client
                    .execute(
                        "UPDATE ui_sessions SET last_seen_at = $2
                         WHERE id_sha256 = $1 AND last_seen_at < $2",
                        &[id_sha256, &at.as_millis()],
                    )
                    .await?
            }
            SignInOp::Delete { id_sha256 } => {
                client
                    .execute("DELETE FROM ui_sessions WHERE id_sha256 = $1", &[id_sha256])
                    .await?
            }
            SignInOp::DeleteExpired { now, idle_cutoff } => {
                client
                    .execute(
                        "DELETE FROM ui_sessions WHERE expires_at < $1 OR last_seen_at < $2",
                        &[&now.as_millis(), &idle_cutoff.as_millis()],
                    )
                    .await?
            }
        };
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }
}
