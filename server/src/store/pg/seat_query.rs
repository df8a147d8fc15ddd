//! `GET /v1/admin/seats` pages on PostgreSQL (see `store/seat_query.rs`):
//! count and rows from one read-only snapshot.

use tokio_postgres::types::ToSql;

use super::super::StoreError;
use super::super::seat_query::{Dialect, LICENSES_WITH_LEASES, Param, SeatQuery, SeatsPage};
use super::pool::PgPool;
use super::rows::lease_from_row;

fn refs(v: &[Box<dyn ToSql + Sync + Send>]) -> Vec<&(dyn ToSql + Sync)> {
    v.iter()
        .map(|b| b.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

fn pg_params(params: &[Param]) -> Vec<Box<dyn ToSql + Sync + Send>> {
    params
        .iter()
        .map(|p| -> Box<dyn ToSql + Sync + Send> {
            match p {
                Param::Text(s) => Box::new(s.clone()),
                Param::Int(n) => Box::new(*n),
            }
        })
        .collect()
}

impl PgPool {
    pub async fn seats_page(&self, query: &SeatQuery) -> Result<SeatsPage, StoreError> {
        let mut client = self.client().await?;
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let licenses: Vec<String> = if query.merges_licenses() {
            tx.query(LICENSES_WITH_LEASES, &[])
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect()
        } else {
            Vec::new()
        };
        let sql = query.sql(Dialect::Postgres, &licenses);
        let count_params = pg_params(&sql.count_params);
        let page_params = pg_params(&sql.page_params);
        let total: i64 = tx.query_one(&sql.count, &refs(&count_params)).await?.get(0);
        let rows = tx.query(&sql.page, &refs(&page_params)).await?;
        tx.commit().await?;
        let rows = rows.iter().map(lease_from_row).collect();
        Ok(query.finish(rows, total.max(0) as u64))
    }
}
